// Package kperhit measures, in the VM matrix, the per-hit overhead of
// probectl's entry+exit latency histogram of a kernel function on each
// route the kernel offers (kprobe.multi + kretprobe.multi, kprobe.session,
// fentry + fexit, kprobe + kretprobe, fsession) against the same histogram
// written by hand in C (bench/reference/klat_*.bpf.c) and loaded with
// cilium/ebpf (fsession with bpf/sys.LoadFsession, as probectl loads its own),
// as ratios within one VM run (issue 12, "Per hit"). bench/kperhit.sh
// compiles the references into obj/, which the test embeds, and runs the
// test in each kernel through cmd/vmexec.
//
// Its test imports compiler, runtime, spec and bpf; nothing imports it.
package kperhit
