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
//   - context layouts per program type and architecture ([Regs]), and the
//     USDT argument specifiers read against them ([ParseUSDTArgs]);
//   - kfunc calls that are resolved against kernel BTF at load time ([KfuncCall],
//     [ResolveKfuncs]);
//   - tracepoint names and format files ([CheckEvent], [TracepointFormat]),
//     every field classified ([FieldClass]), and a kernel's capture of them
//     all ([CaptureTracepoints]): profiles embed their kernels'.
//
// Three kits have packages of their own: the instruction emitter
// (compiler/internal/emit, the compiler's alone), the system calls
// cilium/ebpf has no API for (bpf/sys; [Detect] uses it to see whether
// the kernel has fsession), and stack frames to names, processes and
// ld.so.cache (bpf/symbols).
//
// Package bpf knows nothing of HCL, specs or plans; of probectl it
// imports only bpf/sys.
package bpf
