package bpf

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/features"
	"github.com/probectl/probectl/bpf/sys"
	"golang.org/x/sys/unix"
)

// DetectOptions says what [Detect] also collects.
type DetectOptions struct {
	// Functions collects the list of probe-able kernel functions.
	Functions bool
	// BTF carries the kernel's vmlinux BTF in the facts (gzipped), for
	// planning elsewhere against its types.
	BTF bool
	// Tracepoints carries the format of every tracepoint in the facts
	// (gzipped), for planning elsewhere.
	Tracepoints bool
	// Fresh detects everything anew, ignoring the per-boot cache (which it
	// then rewrites).
	Fresh bool
}

// Detect reads the facts of the running kernel. It loads small probe
// programs (never attaches them) and reads /sys and /proc; it needs root.
//
// What the kernel's build decides (links, helpers, ISA, BTF, ftrace) is
// detected once per boot and kept in the facts cache ([FactsCachePath]);
// what may change while the kernel runs (the CPUs, perf_event_max_stack,
// whether a cycle counter can be opened) is read at each call.
func Detect(opts DetectOptions) (*Facts, error) {
	f, err := detectKernel(opts.Fresh)
	if err != nil {
		return nil, err
	}
	if n, err := ebpf.PossibleCPU(); err == nil {
		f.CPUs = n
	}
	f.Perf = detectPerf(f.Perf.Link)
	f.Derive()

	if opts.BTF && f.BTF {
		if f.KernelBTF, err = ReadKernelBTF(); err != nil {
			return nil, err
		}
	}
	if opts.Functions {
		fns, err := KernelFunctions()
		if err != nil {
			return nil, err
		}
		f.Functions = fns
		if dir, err := Tracefs(); err == nil {
			f.Events = listEvents(dir)
		}
	}
	if opts.Tracepoints {
		dir, err := Tracefs()
		if err != nil {
			return nil, err
		}
		capture, err := CaptureTracepoints(dir)
		if err != nil {
			return nil, err
		}
		f.TracepointFormats = Gzip(capture)
	}
	return f, nil
}

// detectKernel returns the facts the kernel's build decides: from the
// per-boot cache, or detected and then cached.
func detectKernel(fresh bool) (*Facts, error) {
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		return nil, fmt.Errorf("uname: %w", err)
	}
	release := unix.ByteSliceToString(uts.Release[:])
	if !fresh {
		if f := readCachedFacts(release); f != nil {
			return f, nil
		}
	}
	f := (&Facts{Source: "live", Name: release, Release: release}).shareTypes()
	arch, err := machineArch(unix.ByteSliceToString(uts.Machine[:]))
	if err != nil {
		return nil, err
	}
	f.Arch = arch
	v, err := ParseVersion(release)
	if err != nil {
		return nil, err
	}
	f.Kernel = v

	var kernelBTF *btf.Spec
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err == nil {
		f.BTF = true
		if spec, err := KernelBTF(); err == nil {
			kernelBTF = spec
			f.seedTypes(spec)
		}
	}

	f.ISAv4 = supported(features.HaveV4ISA())
	f.detectLinks(kernelBTF)
	f.detectFtrace(release)
	f.detectHelpers(v, kernelBTF)
	f.Perf.Link = v.AtLeast(5, 15) && features.HaveProgramType(ebpf.PerfEvent) == nil
	writeCachedFacts(f)
	return f, nil
}

// machineArch returns the architecture uname's machine names.
func machineArch(machine string) (Arch, error) {
	switch machine {
	case "x86_64":
		return ArchX86_64, nil
	case "aarch64", "arm64":
		return ArchArm64, nil
	}
	return "", fmt.Errorf("unsupported architecture %q", machine)
}

// detectLinks sets the link types the running kernel offers.
func (f *Facts) detectLinks(kernelBTF *btf.Spec) {
	f.Links.Kprobe = exists("/sys/bus/event_source/devices/kprobe/type")
	f.Links.Uprobe = exists("/sys/bus/event_source/devices/uprobe/type")
	f.Links.Tracepoint = exists("/sys/bus/event_source/devices/tracepoint/type")
	f.Links.RawTracepoint = supported(features.HaveProgramType(ebpf.RawTracepoint))
	f.Links.KprobeMulti = supported(features.HaveBPFLinkKprobeMulti())
	f.Links.KprobeSession = supported(features.HaveBPFLinkKprobeSession())
	f.Links.UprobeMulti = supported(features.HaveBPFLinkUprobeMulti())
	// arm64 builds BPF trampolines from 6.0 ("bpf, arm64: Add bpf
	// trampoline for arm64"); before, an fentry program loads and only
	// its attach fails (arch_prepare_bpf_trampoline: -ENOTSUPP), so
	// loading one cannot tell (Debian 11's 5.10 arm64 loads it).
	f.Links.Fentry = haveFentry(kernelBTF) && (f.Arch != ArchArm64 || f.Kernel.AtLeast(6, 0))
	f.Links.Fsession = f.Links.Fentry && haveFsession(kernelBTF)
	f.Links.TPBtf = haveTPBtf(kernelBTF)
}

// detectFtrace sets the ftrace features of the kernel's build config, or
// the arches' defaults when there is no config to read.
func (f *Facts) detectFtrace(release string) {
	cfg := kernelConfig(release)
	f.FtraceWithRegs, f.FtraceWithArgs = cfg["CONFIG_DYNAMIC_FTRACE_WITH_REGS"], cfg["CONFIG_DYNAMIC_FTRACE_WITH_ARGS"]
	if cfg == nil { // no config to read: the arches' defaults
		f.FtraceWithRegs = f.Arch == ArchX86_64
		f.FtraceWithArgs = true
	}
}

// detectHelpers sets the helpers and kfuncs of kernel v (kernelBTF: its
// BTF, or nil).
func (f *Facts) detectHelpers(v Version, kernelBTF *btf.Spec) {
	f.Helpers = Helpers{
		AttachCookie:        v.AtLeast(5, 15),
		TracingAttachCookie: v.AtLeast(5, 19),
		FuncArg:             v.AtLeast(5, 17),
		Ringbuf:             supported(features.HaveMapType(ebpf.RingBuf)),
	}
	if kernelBTF == nil {
		return
	}
	var fn *btf.Func
	if kernelBTF.TypeByName("bpf_session_cookie", &fn) == nil {
		f.Helpers.SessionKfuncs = true
		if proto, ok := fn.Type.(*btf.FuncProto); ok && len(proto.Params) == 1 {
			f.Helpers.SessionKfuncsCtxArg = true
		}
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func supported(err error) bool { return err == nil }

// haveTPBtf loads (without attaching) a tp_btf program on sched_switch,
// which every kernel has. A kernel policy that forbids tracing programs
// counts as absent.
func haveTPBtf(kernel *btf.Spec) bool {
	return kernel != nil && loadsTracing(kernel, ebpf.AttachTraceRawTp, "sched_switch")
}

// loadsTracing loads (without attaching) an empty tracing program of the
// attach type on target. A collection, to share the process's parsed BTF:
// a lone program would parse the kernel's again to find its target.
func loadsTracing(kernel *btf.Spec, at ebpf.AttachType, target string) bool {
	coll, err := ebpf.NewCollectionWithOptions(&ebpf.CollectionSpec{Programs: map[string]*ebpf.ProgramSpec{"probe": {
		Type: ebpf.Tracing, AttachType: at, AttachTo: target, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
	}}}, ebpf.CollectionOptions{Programs: ebpf.ProgramOptions{KernelTypes: kernel}, Cache: KernelBTFCache()})
	if err != nil {
		return false
	}
	coll.Close()
	return true
}

// haveFentry loads (without attaching) an fentry program on a function every
// kernel has. A kernel policy that forbids tracing programs counts as absent.
func haveFentry(kernel *btf.Spec) bool {
	if kernel == nil {
		return false
	}
	for _, fn := range []string{"vfs_read", "ksys_read", "do_sys_openat2"} {
		var target *btf.Func
		if kernel.TypeByName(fn, &target) != nil {
			continue
		}
		return loadsTracing(kernel, ebpf.AttachTraceFEntry, fn)
	}
	return false
}

// haveFsession loads (without attaching) an fsession program that calls
// bpf_session_is_return(ctx) on a function every kernel has: kernels
// before 7.0 refuse the kfunc in a tracing program, and arches whose JIT
// lacks fsession refuse the attach type.
func haveFsession(kernel *btf.Spec) bool {
	if kernel == nil {
		return false
	}
	insns, err := ResolveKfuncs(asm.Instructions{
		KfuncCall("bpf_session_is_return"), // R1 = ctx on entry
		asm.Mov.Imm(asm.R0, 0), asm.Return(),
	}, kernel)
	if err != nil {
		return false
	}
	for _, fn := range []string{"vfs_read", "ksys_read", "do_sys_openat2"} {
		var target *btf.Func
		if kernel.TypeByName(fn, &target) != nil {
			continue
		}
		prog, err := sys.LoadFsession(&ebpf.ProgramSpec{Name: "fsession_probe", Instructions: insns, License: "GPL"},
			fn, func(string) *ebpf.Map { return nil }, kernel)
		if err != nil {
			return false
		}
		prog.Close()
		return true
	}
	return false
}

// kernelConfig reads the kernel's build configuration, or returns nil.
func kernelConfig(release string) map[string]bool {
	var r io.Reader
	if b, err := os.ReadFile("/proc/config.gz"); err == nil {
		if zr, err := gzip.NewReader(bytes.NewReader(b)); err == nil {
			r = zr
		}
	}
	if r == nil {
		b, err := os.ReadFile("/boot/config-" + release)
		if err != nil {
			return nil
		}
		r = bytes.NewReader(b)
	}
	cfg := map[string]bool{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok && (v == "y" || v == "m") {
			cfg[k] = true
		}
	}
	return cfg
}

// KernelFunctions lists the kernel functions that can be probed: from
// tracefs's available_filter_functions where it is readable, else the text
// symbols of /proc/kallsyms.
func KernelFunctions() ([]string, error) {
	var names []string
	for _, dir := range TracefsDirs {
		b, err := os.ReadFile(filepath.Join(dir, "available_filter_functions"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if name, _, _ := strings.Cut(line, " "); name != "" {
				names = append(names, name)
			}
		}
		break
	}
	if names == nil {
		b, err := os.ReadFile("/proc/kallsyms")
		if err != nil {
			return nil, fmt.Errorf("list kernel functions: %w", err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			fields := strings.Fields(line)
			if len(fields) < 3 || (fields[1] != "t" && fields[1] != "T") {
				continue
			}
			names = append(names, fields[2])
		}
	}
	sort.Strings(names)
	return dedup(names), nil
}

func dedup(sorted []string) []string {
	out := sorted[:0]
	for i, s := range sorted {
		if i == 0 || s != sorted[i-1] {
			out = append(out, s)
		}
	}
	return out
}

// TracefsDirs are where tracefs is looked for, in order.
var TracefsDirs = []string{"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}

// Tracefs returns the tracefs mount point, mounting it at
// /sys/kernel/tracing when it is not mounted.
func Tracefs() (string, error) {
	for _, dir := range TracefsDirs {
		if exists(filepath.Join(dir, "events")) {
			return dir, nil
		}
	}
	dir := TracefsDirs[0]
	if err := unix.Mount("nodev", dir, "tracefs", 0, ""); err != nil && !errors.Is(err, unix.EBUSY) {
		return "", fmt.Errorf("mount tracefs on %s: %w", dir, err)
	}
	return dir, nil
}

// LoadTracepoints reads the formats of events from tracefs into f. It
// fails only when tracefs cannot be found; an event whose format cannot be
// read is left out, and [Facts.Tracepoint] says why, for the compiler to
// report at the event's range.
func (f *Facts) LoadTracepoints(patterns []string) error {
	if len(patterns) == 0 {
		return nil
	}
	dir, err := Tracefs()
	if err != nil {
		return err
	}
	f.LoadTracepointsFrom(dir, patterns)
	return nil
}

// LoadTracepointsFrom reads the formats of events (names or globs) from the
// tracefs mounted at tracefs, as [Facts.LoadTracepoints] does. A glob needs
// the list of events, which it reads too.
func (f *Facts) LoadTracepointsFrom(tracefs string, patterns []string) {
	var events []string
	for _, p := range patterns {
		if !IsEventGlob(p) {
			events = append(events, p)
			continue
		}
		if f.Events == nil {
			f.Events = listEvents(tracefs)
		}
		matched, _ := f.MatchEvents(p)
		events = append(events, matched...)
	}
	for _, ev := range events {
		if f.Tracepoints[ev] != nil {
			continue
		}
		tp, err := ReadTracepointFormat(tracefs, ev)
		switch {
		case errors.Is(err, os.ErrNotExist):
			continue // the compiler reports unknown events with their range
		case err != nil:
			if f.tracepointErrs == nil {
				f.tracepointErrs = map[string]error{}
			}
			f.tracepointErrs[ev] = err
			continue
		}
		if f.Tracepoints == nil {
			f.Tracepoints = map[string]*TracepointFormat{}
		}
		f.Tracepoints[ev] = tp
	}
}

// listEvents lists the tracepoints of the tracefs at dir, "group:event",
// sorted.
func listEvents(dir string) []string {
	b, err := os.ReadFile(filepath.Join(dir, "available_events"))
	if err != nil {
		return []string{}
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); CheckEvent(line) == nil {
			out = append(out, line)
		}
	}
	sort.Strings(out)
	return dedup(out)
}
