// Package sys makes the bpf(2) system calls that cilium/ebpf v0.22 has no
// API for:
//   - uprobe.session links ([UprobeSessionLink]), at the file offsets of
//     an ELF file's functions ([UprobeOffsets]);
//   - fsession programs and links ([AttachTraceFsession], [LoadFsession],
//     [FsessionLink]);
//   - what a pin names, read with two system calls ([ReadPinnedObject],
//     [ReadPinnedProgram]), and a pinned per-CPU counter map summed
//     ([SumPinnedCounters]).
//
// The runtime calls it to load, attach and read pins, and bpf to detect
// whether the kernel has fsession; the compiler names only the attach
// type. Package sys imports nothing of probectl.
package sys
