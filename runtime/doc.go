// Package runtime owns what the kernel has: it applies compiled probes to
// the live kernel atomically (load everything, attach everything, pin,
// commit state; undo on any error), keeps state in bpffs pins and a state
// file with lineage and serial, diffs it against new plans, and reads what
// the probes measured: results, and the event buffer, read once or
// followed through applies and destroys (Follower).
//
// Package runtime imports compiler/compiled, bpf, bpf/sys (the system
// calls cilium/ebpf lacks) and bpf/symbols (stack frames, usym). It never
// reaches spec or HCL, directly or through another package: a saved plan
// is self-contained.
package runtime
