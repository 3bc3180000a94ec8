package routes

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	goruntime "runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/bpf/sys"
	"github.com/probectl/probectl/compiler"
	"golang.org/x/sys/unix"
)

// The tests here measure; they run in the VM matrix (make routes-table),
// where PROBECTL_VM is set and a kernel that cannot attach to kernel
// functions is a failure. Elsewhere they run only when asked
// (PROBECTL_TEST_ROUTES=1) on a kernel that can.

func inVM() bool { return os.Getenv("PROBECTL_VM") != "" }

func kernelFacts(t *testing.T) *bpf.Facts {
	t.Helper()
	if !inVM() && os.Getenv("PROBECTL_TEST_ROUTES") == "" {
		t.Skip("a measurement for the VM matrix: make routes-table (or PROBECTL_TEST_ROUTES=1 as root on a kernel that attaches kprobes)")
	}
	if os.Geteuid() != 0 {
		t.Fatal("needs root")
	}
	f, err := bpf.Detect(bpf.DetectOptions{Functions: true, Fresh: true})
	if err != nil {
		t.Fatal(err)
	}
	if !f.Links.Fentry && !f.Links.KprobeMulti && !f.Links.Kprobe {
		t.Fatalf("%s cannot attach to kernel functions", f.Label())
	}
	return f
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// The families measured, in the order each round takes them (rotated):
// every kernel-function family of the compiler's table
// (TestMeasuresEveryKernelFamily). fsession (7.0 on x86_64, later on
// arm64) is one trampoline program per function, run at entry and exit.
var allFamilies = []family{
	{compiler.FamilyFentry}, {compiler.FamilyFexit}, {compiler.FamilyKprobeMulti}, {compiler.FamilyKretprobeMulti},
	{compiler.FamilyKprobeSession}, {compiler.FamilyKprobe}, {compiler.FamilyKretprobe}, {compiler.FamilyFsession},
}

type family struct{ name compiler.Family }

// has reports whether the kernel has the family, by the family table.
func (fam family) has(f *bpf.Facts) bool {
	fi, _ := fam.name.Info()
	return fi.Available(f)
}

// TestMeasuresEveryKernelFamily holds the measured families to the
// kernel-function and tracepoint families of the compiler's table, which
// prices every one of them by the table this test writes.
func TestMeasuresEveryKernelFamily(t *testing.T) {
	var want []compiler.Family
	for _, fi := range compiler.Families() {
		if fi.Kind == bpf.KindKernel || fi.Kind == bpf.KindTracepoint {
			want = append(want, fi.Family)
		}
	}
	got := append([]compiler.Family(nil), tracepointFamilies...)
	for _, fam := range allFamilies {
		got = append(got, fam.name)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("measured %v, the family table's kernel families are %v", got, want)
	}
}

var trivial = asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}

// sessionHalf is the least an fsession program of an entry+exit probe
// does: ask which half it is (the trampoline runs it at both), then return
// 0. Its kfunc call is resolved against the kernel's BTF by newLoader.
var sessionHalf = asm.Instructions{
	bpf.KfuncCall("bpf_session_is_return"), // R1 = ctx on entry
	asm.And.Imm(asm.R0, 0xff),
	asm.Mov.Imm(asm.R0, 0), asm.Return(),
}

// loader loads the trivial programs, one per family (one per function for
// the trampolines, which are loaded against their function's BTF).
type loader struct {
	kspec  *btf.Spec
	multi  *ebpf.Program
	sess   *ebpf.Program
	kprobe *ebpf.Program
	// fsess is sessionHalf with its kfunc resolved.
	fsess asm.Instructions
}

func newLoader(t *testing.T, f *bpf.Facts) *loader {
	l := &loader{}
	var err error
	if f.Links.Fentry {
		if l.kspec, err = btf.LoadKernelSpec(); err != nil {
			t.Fatal(err)
		}
	}
	load := func(at ebpf.AttachType) *ebpf.Program {
		p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.Kprobe, AttachType: at, Instructions: trivial, License: "GPL"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		return p
	}
	if f.Links.Fsession {
		if l.fsess, err = bpf.ResolveKfuncs(sessionHalf, l.kspec); err != nil {
			t.Fatal(err)
		}
	}
	if f.Links.KprobeMulti {
		l.multi = load(ebpf.AttachTraceKprobeMulti)
	}
	if f.Links.KprobeSession {
		l.sess = load(ebpf.AttachTraceKprobeSession)
	}
	if f.Links.Kprobe {
		l.kprobe = load(ebpf.AttachNone)
	}
	return l
}

func (l *loader) tracing(fam compiler.Family, fn string) (*ebpf.Program, error) {
	if fam == compiler.FamilyFsession {
		// cilium/ebpf cannot load attach type 58: the raw system call.
		return sys.LoadFsession(&ebpf.ProgramSpec{Name: "route_fsession", Instructions: l.fsess, License: "GPL"},
			fn, func(string) *ebpf.Map { return nil }, l.kspec)
	}
	at := ebpf.AttachTraceFEntry
	if fam == compiler.FamilyFexit {
		at = ebpf.AttachTraceFExit
	}
	return ebpf.NewProgramWithOptions(&ebpf.ProgramSpec{Type: ebpf.Tracing, AttachType: at, AttachTo: fn,
		Instructions: trivial, License: "GPL"}, ebpf.ProgramOptions{KernelTypes: l.kspec})
}

// attached is what one family attached: its links and, for trampolines,
// the per-function programs.
type attached struct {
	links []link.Link
	progs []*ebpf.Program
}

func (a *attached) close() {
	for _, lk := range a.links {
		lk.Close()
	}
	for _, p := range a.progs {
		p.Close()
	}
}

// prepare loads what attaching fam to fns needs (untimed).
func (l *loader) prepare(fam compiler.Family, fns []string) (*attached, error) {
	a := &attached{}
	if fam == compiler.FamilyFentry || fam == compiler.FamilyFexit || fam == compiler.FamilyFsession {
		for _, fn := range fns {
			p, err := l.tracing(fam, fn)
			if err != nil {
				a.close()
				return nil, fmt.Errorf("load %s for %s: %w", fam, fn, err)
			}
			a.progs = append(a.progs, p)
		}
	}
	return a, nil
}

// attach creates fam's links to fns: the timed part.
func (l *loader) attach(a *attached, fam compiler.Family, fns []string) error {
	var lk link.Link
	var err error
	switch fam {
	case compiler.FamilyKprobeMulti:
		lk, err = link.KprobeMulti(l.multi, link.KprobeMultiOptions{Symbols: fns})
	case compiler.FamilyKretprobeMulti:
		lk, err = link.KretprobeMulti(l.multi, link.KprobeMultiOptions{Symbols: fns})
	case compiler.FamilyKprobeSession:
		lk, err = link.KprobeMulti(l.sess, link.KprobeMultiOptions{Symbols: fns, Session: true})
	case compiler.FamilyFentry, compiler.FamilyFexit:
		at := ebpf.AttachTraceFEntry
		if fam == compiler.FamilyFexit {
			at = ebpf.AttachTraceFExit
		}
		for i, fn := range fns {
			lk, err := link.AttachTracing(link.TracingOptions{Program: a.progs[i], AttachType: at})
			if err != nil {
				return fmt.Errorf("%s %s: %w", fam, fn, err)
			}
			a.links = append(a.links, lk)
		}
		return nil
	case compiler.FamilyFsession:
		// As runtime attaches it: BPF_LINK_CREATE by hand, one a function.
		for i, fn := range fns {
			fd, err := sys.FsessionLink(a.progs[i].FD(), 0)
			if err != nil {
				return fmt.Errorf("%s %s: %w", fam, fn, err)
			}
			lk, err := link.NewFromFD(fd)
			if err != nil {
				unix.Close(fd)
				return fmt.Errorf("%s %s: %w", fam, fn, err)
			}
			a.links = append(a.links, lk)
		}
		return nil
	case compiler.FamilyKprobe, compiler.FamilyKretprobe:
		for _, fn := range fns {
			mk := link.Kprobe
			if fam == compiler.FamilyKretprobe {
				mk = link.Kretprobe
			}
			lk, err := mk(fn, l.kprobe, nil)
			if err != nil {
				return fmt.Errorf("%s %s: %w", fam, fn, err)
			}
			a.links = append(a.links, lk)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s over %d functions: %w", fam, len(fns), err)
	}
	a.links = append(a.links, lk)
	return nil
}

// detach closes the links (timed), then the programs (not).
func (a *attached) detach() {
	for _, lk := range a.links {
		lk.Close()
	}
	a.links = nil
}

// hot are prefixes of functions the measurement leaves alone: the
// machinery that attaching and running BPF programs goes through, and the
// hottest paths, which would slow the VM down while attached.
var hot = []string{
	"bpf", "__bpf", "btf", "ftrace", "__ftrace", "fprobe", "rethook", "kprobe", "__kprobe", "trace", "__trace",
	"perf", "__perf", "rcu", "__rcu", "lock", "__lock", "_raw", "raw_", "preempt", "irq", "__irq", "arch_", "text_poke",
	"mutex", "__mutex", "down", "up", "sched", "__sched", "schedule", "do_idle", "cpu", "__cpu", "default_idle",
	"native_", "x86", "__x86", "paravirt", "pv_", "ring_buffer", "rb_", "kmem", "kmalloc", "__kmalloc", "kfree",
	"slab", "__slab", "mem", "__mem", "page", "__page", "alloc", "__alloc", "free", "__free", "stack", "__stack",
	"synchronize", "smp", "__smp", "ktime", "tick", "hrtimer", "__hrtimer", "timer", "__timer", "clock", "set_memory",
	"vmalloc", "__vmalloc", "vfree", "is_", "in_", "get_", "put_", "__get", "__put", "syscall", "do_syscall",
	"entry", "__entry", "exit", "__exit", "task", "__task", "wake", "__wake", "try_to", "update", "__update",
	"enqueue", "dequeue", "pick", "set_", "__set", "check", "__check", "copy", "__copy", "might", "__might",
	"kthread", "worker", "queue", "__queue", "hash", "idle", "cond_", "_cond", "console", "vprintk", "printk",
	"serial", "uart", "tty", "fault", "handle", "__handle", "exc_", "asm_", "error_", "memcg", "__memcg",
	"folio", "__folio", "mm_", "__mm", "vm_", "__vm", "pte", "pmd", "pud", "flush", "__flush", "tlb", "native",
}

// candidates lists functions every family can attach: probe-able (in
// available_filter_functions), with BTF, no compiler copy, not hot, each
// name once; spread evenly over the sorted list.
func candidates(t *testing.T, f *bpf.Facts, l *loader, want int) []string {
	withBTF := map[string]bool{}
	if l.kspec != nil {
		for typ, err := range l.kspec.All() {
			if err != nil {
				t.Fatal(err)
			}
			if fn, ok := typ.(*btf.Func); ok {
				withBTF[fn.Name] = true
			}
		}
	}
	seen := map[string]int{}
	for _, fn := range f.Functions {
		seen[fn]++
	}
	var all []string
	for _, fn := range f.Functions {
		if seen[fn] != 1 || strings.Contains(fn, ".") || (l.kspec != nil && !withBTF[fn]) {
			continue
		}
		skip := false
		for _, h := range hot {
			if strings.HasPrefix(fn, h) {
				skip = true
				break
			}
		}
		if !skip {
			all = append(all, fn)
		}
	}
	if len(all) < want {
		t.Fatalf("only %d candidate functions, want %d", len(all), want)
	}
	step := len(all) / want
	out := make([]string, 0, want)
	for i := 0; i < len(all) && len(out) < want; i += step {
		out = append(out, all[i])
	}
	// The rest, in case some refuse an attach.
	for i := range all {
		if i%step != 0 {
			out = append(out, all[i])
		}
		if len(out) >= 2*want {
			break
		}
	}
	return out
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func minMax(xs []float64) (float64, float64) {
	lo, hi := xs[0], xs[0]
	for _, x := range xs {
		lo, hi = min(lo, x), max(hi, x)
	}
	return lo, hi
}

// calls makes n getppid system calls on a locked thread, in bursts of
// 1,000, and returns the time per call of the fastest burst: the VM's
// vCPUs share a loaded host, and a burst that was preempted says nothing
// about the probe.
func calls(n int) float64 {
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	const burst = 1000
	best := math.Inf(1)
	for done := 0; done < n; done += burst {
		start := time.Now()
		for range burst {
			unix.RawSyscall(unix.SYS_GETPPID, 0, 0, 0)
		}
		best = min(best, float64(time.Since(start).Nanoseconds())/burst)
	}
	return best
}

// newKernelCost starts the kernel's entry of the table: its name in the
// matrix, release, arch, version, and the calls and rounds per figure.
func newKernelCost(f *bpf.Facts) compiler.KernelCost {
	var uts unix.Utsname
	_ = unix.Uname(&uts)
	kc := compiler.KernelCost{
		Kernel: os.Getenv("PROBECTL_VM_PROFILE"), Release: unix.ByteSliceToString(uts.Release[:]),
		Arch: f.Arch, Version: bpf.Version{Major: f.Kernel.Major, Minor: f.Kernel.Minor},
		Calls: envInt("PROBECTL_TEST_ROUTES_CALLS", 20000), Rounds: envInt("PROBECTL_TEST_ROUTES_ROUNDS", 11),
		Families: map[compiler.Family]compiler.FamilyCost{},
	}
	if kc.Kernel == "" {
		kc.Kernel = "linux-" + f.Kernel.String() + "-" + map[bpf.Arch]string{bpf.ArchX86_64: "amd64", bpf.ArchArm64: "arm64"}[f.Arch]
	}
	return kc
}

// TestRouteCost measures every family the kernel has and prints the
// kernel's entry of the table.
func TestRouteCost(t *testing.T) {
	f := kernelFacts(t)
	l := newLoader(t, f)
	var fams []family
	for _, fam := range allFamilies {
		if fam.has(f) {
			fams = append(fams, fam)
		}
	}
	kc := newKernelCost(f)

	// Per hit: the getppid system call's function, probed by each family
	// in turn and unprobed, in rounds whose order rotates.
	hitFn := ""
	// The system call's own function where it is not inlined into the
	// dispatcher (x86_64 from 6.9 inlines it into x64_sys_call), else
	// the pid lookup it makes.
	for _, c := range []string{"__x64_sys_getppid", "__arm64_sys_getppid", "__do_sys_getppid", "__task_pid_nr_ns"} {
		if f.HasFunction(c) {
			hitFn = c
			break
		}
	}
	if hitFn == "" {
		t.Fatal("no getppid system call function to probe")
	}
	kc.HitFunction = hitFn
	calls(kc.Calls) // warm up
	deltas := map[compiler.Family][]float64{}
	var baselines []float64
	configs := append([]family{{name: ""}}, fams...)
	for r := range kc.Rounds {
		base := map[int]float64{}
		probed := map[compiler.Family]float64{}
		for i := range configs {
			c := configs[(i+r)%len(configs)]
			if c.name == "" {
				base[r] = calls(kc.Calls)
				continue
			}
			a, err := l.prepare(c.name, []string{hitFn})
			if err != nil {
				t.Fatal(err)
			}
			if err := l.attach(a, c.name, []string{hitFn}); err != nil {
				t.Fatal(err)
			}
			probed[c.name] = calls(kc.Calls)
			a.close()
		}
		baselines = append(baselines, base[r])
		for fam, ns := range probed {
			deltas[fam] = append(deltas[fam], ns-base[r])
		}
	}
	kc.BaselineNS = median(baselines)
	for _, fam := range fams {
		lo, hi := minMax(deltas[fam.name])
		kc.Families[fam.name] = compiler.FamilyCost{HitNS: median(deltas[fam.name]), HitMinNS: lo, HitMaxNS: hi}
	}

	// Attach + detach for 1, 10, 100, 1000 functions. A per-function
	// family whose measurement took longer than the budget has its larger
	// sizes extrapolated linearly (the kernel attaches them one by one).
	budget := time.Duration(envInt("PROBECTL_TEST_ROUTES_BUDGET", 20)) * time.Second
	cands := candidates(t, f, l, 1000)
	bad := map[string]bool{}
	list := func(n int) []string {
		var out []string
		for _, fn := range cands {
			if !bad[fn] {
				out = append(out, fn)
			}
			if len(out) == n {
				break
			}
		}
		return out
	}
	last := map[compiler.Family]compiler.AttachCost{}
	slow := map[compiler.Family]bool{}
	for _, n := range []int{1, 10, 100, 1000} {
		times := map[compiler.Family][]float64{}
		rounds := 3
		if n >= 100 {
			rounds = 1
		}
		for r := range rounds {
			for i := range fams {
				fam := fams[(i+r)%len(fams)].name
				if slow[fam] {
					continue
				}
				var fns []string
				var a *attached
				var elapsed time.Duration
				for try := 0; ; try++ {
					fns = list(n)
					var err error
					if a, err = l.prepare(fam, fns); err == nil {
						start := time.Now()
						err = l.attach(a, fam, fns)
						if err == nil {
							a.detach()
							elapsed = time.Since(start)
						}
						a.close()
					}
					if err == nil {
						break
					}
					// A function this family refuses: leave it out for all.
					name := refused(err, fns)
					if name == "" || try > 20 {
						t.Fatalf("%s: %v", fam, err)
					}
					t.Logf("%s refuses %s (%v): left out", fam, name, err)
					bad[name] = true
				}
				times[fam] = append(times[fam], float64(elapsed.Microseconds())/1000)
			}
		}
		for _, fam := range fams {
			fc := kc.Families[fam.name]
			var ac compiler.AttachCost
			if slow[fam.name] {
				prev := last[fam.name]
				ac = compiler.AttachCost{Functions: n, MS: prev.MS * float64(n) / float64(prev.Functions), Extrapolated: true}
			} else {
				ac = compiler.AttachCost{Functions: n, MS: median(times[fam.name]), Rounds: len(times[fam.name])}
				last[fam.name] = ac
				perFunction := fam.name != compiler.FamilyKprobeMulti && fam.name != compiler.FamilyKretprobeMulti && fam.name != compiler.FamilyKprobeSession
				if perFunction && time.Duration(ac.MS*float64(time.Millisecond))*10 > budget {
					slow[fam.name] = true
				}
			}
			fc.Attach = append(fc.Attach, ac)
			kc.Families[fam.name] = fc
			t.Logf("%-16s %4d functions: %9.1f ms%s", fam.name, n, ac.MS, map[bool]string{true: " (extrapolated)"}[ac.Extrapolated])
		}
	}
	for _, fam := range fams {
		fc := kc.Families[fam.name]
		t.Logf("%-16s per hit %6.0f ns (%.0f..%.0f) over a %.0f ns call", fam.name, fc.HitNS, fc.HitMinNS, fc.HitMaxNS, kc.BaselineNS)
	}
	measureTracepoints(t, f, &kc)
	b, err := json.Marshal(kc)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("\nPROBECTL-ROUTECOST %s\n", b)
}

// refused finds which function of fns an attach error names.
func refused(err error, fns []string) string {
	msg := err.Error()
	for _, fn := range fns {
		if strings.Contains(msg, " "+fn+":") || strings.Contains(msg, "for "+fn+":") {
			return fn
		}
	}
	if errors.Is(err, os.ErrNotExist) && len(fns) == 1 {
		return fns[0]
	}
	return ""
}
