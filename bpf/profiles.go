package bpf

import (
	"fmt"
	"sort"
)

// ProfileNames lists the built-in profiles: the kernels of the VM matrix.
func ProfileNames() []string {
	names := make([]string, 0, len(profiles))
	for name := range profiles {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// Profile returns a copy of the built-in profile name. Its tracepoints are
// its kernel's, unpacked when first asked for ([Facts.Tracepoint]).
func Profile(name string) (*Facts, error) {
	mk, ok := profiles[name]
	if !ok {
		return nil, fmt.Errorf("no profile %q (known: %v)", name, ProfileNames())
	}
	f := mk()
	f.Source, f.Name = "profile", name
	// Every kernel of the matrix keeps Debian's perf_event_max_stack, and
	// from 5.15 links BPF to perf events (BPF_LINK_CREATE on a perf event:
	// a pinnable link). A profile describes a kernel, not a machine:
	// whether it has a hardware cycle counter is the machine's.
	f.Perf = Perf{Link: f.Kernel.AtLeast(5, 15), MaxStack: 127, CyclesWhy: "a profile describes a kernel, not the machine's PMU"}
	f.formats = profileSets[name]
	f.Derive()
	return f.shareTypes(), nil
}

// The profiles describe Debian's kernels as the kernel lab found them
// (shared/docs/kernel-lab.md); the VM matrix checks each against reality.
var profiles = map[string]func() Facts{
	// Debian 11 (bullseye): BTF, the ring buffer, raw tracepoints and
	// tp_btf; no kprobe.multi (5.18), attach cookies (5.15) or
	// bpf_get_func_arg/ret (5.17), and no BPF links on perf events (5.15):
	// kprobes, uprobes, tracepoints and samples attach through
	// perf_event_open and an ioctl, which nothing can pin.
	"linux-5.10-amd64": func() Facts {
		return Facts{
			Arch: ArchX86_64, Kernel: Version{5, 10, 0}, BTF: true,
			Links:          Links{Kprobe: true, Fentry: true, Uprobe: true, Tracepoint: true, RawTracepoint: true, TPBtf: true},
			FtraceWithRegs: true, FtraceWithArgs: true,
			Helpers: Helpers{Ringbuf: true},
		}
	},
	// arm64 has BPF trampolines only from 6.0 ("bpf, arm64: Add bpf
	// trampoline for arm64"): no fentry/fexit on 5.10.
	"linux-5.10-arm64": func() Facts {
		return Facts{
			Arch: ArchArm64, Kernel: Version{5, 10, 0}, BTF: true,
			Links:          Links{Kprobe: true, Uprobe: true, Tracepoint: true, RawTracepoint: true, TPBtf: true},
			FtraceWithArgs: true,
			Helpers:        Helpers{Ringbuf: true},
		}
	},
	"linux-6.1-amd64": func() Facts {
		return Facts{
			// gotol is ISA v4 (6.6), but Debian's 6.1 (6.1.176) has it: the
			// VM matrix found it, and runs long jumps there correctly.
			Arch: ArchX86_64, Kernel: Version{6, 1, 0}, BTF: true, ISAv4: true,
			// CONFIG_FPROBE is off in Debian's 6.1: no kprobe.multi.
			Links:          Links{Kprobe: true, Fentry: true, Uprobe: true, Tracepoint: true, RawTracepoint: true, TPBtf: true},
			FtraceWithRegs: true, FtraceWithArgs: true,
			Helpers: Helpers{AttachCookie: true, TracingAttachCookie: true, FuncArg: true, Ringbuf: true},
		}
	},
	"linux-6.12-amd64": func() Facts {
		return Facts{
			Arch: ArchX86_64, Kernel: Version{6, 12, 0}, BTF: true, ISAv4: true,
			Links: Links{Kprobe: true, KprobeMulti: true, KprobeSession: true, Fentry: true,
				Uprobe: true, UprobeMulti: true, Tracepoint: true, RawTracepoint: true, TPBtf: true},
			FtraceWithRegs: true, FtraceWithArgs: true,
			Helpers: Helpers{AttachCookie: true, TracingAttachCookie: true, FuncArg: true, Ringbuf: true,
				SessionKfuncs: true},
		}
	},
	"linux-7.2-amd64": func() Facts {
		return Facts{
			Arch: ArchX86_64, Kernel: Version{7, 2, 0}, BTF: true, ISAv4: true,
			Links: Links{Kprobe: true, KprobeMulti: true, KprobeSession: true, Fentry: true, Fsession: true,
				Uprobe: true, UprobeMulti: true, Tracepoint: true, RawTracepoint: true, TPBtf: true},
			FtraceWithRegs: true, FtraceWithArgs: true,
			Helpers: Helpers{AttachCookie: true, TracingAttachCookie: true, FuncArg: true, Ringbuf: true,
				SessionKfuncs: true, SessionKfuncsCtxArg: true},
		}
	},
	"linux-6.12-arm64": func() Facts {
		return Facts{
			Arch: ArchArm64, Kernel: Version{6, 12, 0}, BTF: true, ISAv4: true,
			// fprobe on arm64 needs the 6.14 fgraph rewrite: FPROBE is off,
			// though the session kfuncs are in its BTF (checked in the VM).
			Links:          Links{Kprobe: true, Fentry: true, Uprobe: true, UprobeMulti: true, Tracepoint: true, RawTracepoint: true, TPBtf: true},
			FtraceWithArgs: true,
			Helpers: Helpers{AttachCookie: true, TracingAttachCookie: true, FuncArg: true, Ringbuf: true,
				SessionKfuncs: true},
		}
	},
	"linux-7.2-arm64": func() Facts {
		return Facts{
			Arch: ArchArm64, Kernel: Version{7, 2, 0}, BTF: true, ISAv4: true,
			// fsession: "bpf, arm64: Add fsession support" came after
			// x86_64's 7.0; the VM matrix found it in Debian's 7.2.
			Links: Links{Kprobe: true, KprobeMulti: true, KprobeSession: true, Fentry: true, Fsession: true,
				Uprobe: true, UprobeMulti: true, Tracepoint: true, RawTracepoint: true, TPBtf: true},
			FtraceWithArgs: true,
			Helpers: Helpers{AttachCookie: true, TracingAttachCookie: true, FuncArg: true, Ringbuf: true,
				SessionKfuncs: true, SessionKfuncsCtxArg: true},
		}
	},
}
