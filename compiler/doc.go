// Package compiler turns checked specs into what the kernel should have: for
// each probe, its route and the reason for it, the link families, the BPF
// programs (built with cilium/ebpf's asm, license GPL), the maps, and the
// layouts that decode what the maps hold.
//
// Each built-in value of spec's table ([spec.Builtins]) has its code here
// (builtinCodes), or a path of kernel data read through BTF; a test holds
// the two tables to each other.
//
// Compilation is deterministic: the same spec and the same [bpf.Facts] give
// the same output. Nothing here loads into or reads from the running kernel;
// what depends on it (kfunc ids, function addresses, cookies) is resolved by
// the runtime at load time. Errors are hcl.Diagnostics with spec ranges,
// among them everything the kernel would refuse for its own limits (program
// size, maps, stack, jumps, functions per link, instructions uprobes cannot
// single-step), reported at the construct that crosses the limit.
//
// It also lists what a target can probe (probectl list, [List]):
// bpftrace -l's patterns matched against the facts and the symbols of user
// binaries, as the compiler reads them for probes.
//
// A compile reads each file of the planning host once (files.go): a user
// binary's symbols by its path and its identity, a library's ld.so.cache
// lookup; what it read is closed at the compile's end. It generates the
// code of each distinct probe body once (codecache.go): probes whose
// bodies read alike get copies of the first one's programs, moved to their
// own names and spec ranges.
//
// Its output is defined in package compiled (which the compiler's names
// alias), free of spec and HCL. Its instruction emitter is
// compiler/internal/emit. Package compiler imports spec, compiled, emit,
// bpf and bpf/symbols (a process slot's layout, ld.so.cache), never
// runtime.
package compiler
