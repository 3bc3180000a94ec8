// Package symbols turns stack frames into names ([Frame]): kernel
// addresses through /proc/kallsyms ([KernelSymbols]), user addresses
// through the ELF symbol tables of the files a process maps, or of the
// file with a frame's build id ([UserSymbols]: other users' files read
// within bounds and budgets, their symbols shared by a process's readers
// in a bounded cache, a build id believed by the file's owner).
//
// It also owns which process a user address is of ([Process]: its pid
// and start time, as a program records them, [ProcessStarted]), and the
// libraries ld.so.cache names ([LDCache], [ResolveLibrary]), and how a
// binary is opened under a host root, chroot-like ([OpenIn],
// [ResolveLibraryIn], [ProcessRoot]): the one place the compiler, the
// runtime and the node agent resolve user binaries. It reads a binary's
// USDT probes, its .note.stapsdt notes ([Notes], [ReadNotes]).
//
// The runtime reads it to show stacks and usym; the compiler for the
// process slot's layout and a library's path; probectl for displays.
// Package symbols imports bpf, and knows nothing of HCL, specs or plans.
package symbols
