// Package bpf is the kit that the compiler and the runtime both lean on.
//
// It owns:
//   - probe addresses ([Address]), the key used everywhere: plans, state, pin
//     paths, metric labels and program names;
//   - kernel facts ([Facts]): one serialisable value describing a target kernel
//     (architecture, version, link types, fprobe backend, helpers, BTF), detected
//     on the live kernel ([Detect]), read from a file, or taken from a built-in
//     profile ([Profile]), with the display name of each link type
//     ([LinkFacts]) that probectl target and the plan's header loop over;
//   - context layouts per program type and architecture ([Regs]);
//   - instruction emission ([Emitter]): labels, stack slots, source comments
//     and origins on top of cilium/ebpf's asm package, every jump checked,
//     and made a gotol (BPF ISA v4) where it is too long;
//   - kfunc calls that are resolved against kernel BTF at load time ([KfuncCall],
//     [ResolveKfuncs]);
//   - the system calls cilium/ebpf has no API for: uprobe.session links
//     ([UprobeSessionLink]), fsession programs and links ([LoadFsession],
//     [FsessionLink]);
//   - tracepoint names and format files ([CheckEvent], [TracepointFormat]),
//     every field classified ([FieldClass]), and a kernel's capture of them
//     all ([CaptureTracepoints]): profiles embed their kernels';
//   - symbols ([KernelSymbols], [UserSymbols]): which process a user
//     address is of ([Process]: its pid and start time), and which file
//     names its frames (a build id is believed by the file's owner).
//   - stack frames to names ([KernelSymbols], [UserSymbols]): other users'
//     ELF files read within bounds and budgets, their symbols shared by a
//     process's readers in a bounded cache (elfsyms.go).
//
// Package bpf knows nothing of HCL, specs or plans, and it must not import
// any other probectl package.
package bpf
