package runtime_test

import (
	"errors"
	"fmt"
	"os"
	"path"
	goruntime "runtime"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/runtime"
	"github.com/probectl/probectl/spec"
	"golang.org/x/sys/unix"
)

// The TestKernel* tests probe kernel functions. They run in the VM matrix
// (make vmtest), where PROBECTL_VM_PROFILE names the kernel and a skip is a
// failure; elsewhere they run when the kernel can attach to kernel
// functions, which the development host's cannot.

func inVM() bool { return os.Getenv("PROBECTL_VM") != "" }

var (
	kfactsOnce sync.Once
	kfacts     *bpf.Facts
	kfactsErr  error
)

// kernelFacts returns the live facts with the function list, or skips
// when the kernel cannot attach to kernel functions at all.
func kernelFacts(t *testing.T) *bpf.Facts {
	t.Helper()
	requireRoot(t)
	kfactsOnce.Do(func() { kfacts, kfactsErr = bpf.Detect(bpf.DetectOptions{Functions: true}) })
	if kfactsErr != nil {
		t.Fatal(kfactsErr)
	}
	f := *kfacts
	if !f.Links.KprobeMulti && !f.Links.Fentry && !f.Links.Kprobe {
		if inVM() {
			t.Fatal("the VM's kernel cannot attach to kernel functions")
		}
		t.Skip("this kernel cannot attach to kernel functions (no fprobe, fentry or kprobes); the VM matrix runs these tests (make vmtest)")
	}
	return &f
}

// pick returns the first candidate the kernel can probe.
func pick(t *testing.T, f *bpf.Facts, candidates ...string) string {
	t.Helper()
	for _, c := range candidates {
		if f.HasFunction(c) {
			return c
		}
	}
	t.Fatalf("none of %v can be probed on this kernel", candidates)
	return ""
}

func writeFunction(t *testing.T, f *bpf.Facts) string {
	return pick(t, f, "ksys_write", "__x64_sys_write", "__arm64_sys_write")
}

func readFunction(t *testing.T, f *bpf.Facts) string {
	return pick(t, f, "ksys_read", "__x64_sys_read", "__arm64_sys_read")
}

// kcompile compiles src for f; TID, PID and COMM are this thread's.
func kcompile(t *testing.T, f *bpf.Facts, src string, tid int) *compiler.Output {
	t.Helper()
	comm, _ := os.ReadFile("/proc/self/comm")
	src = strings.NewReplacer("TID", fmt.Sprint(tid), "PID", fmt.Sprint(os.Getpid()),
		"COMM", strings.TrimSpace(string(comm))).Replace(src)
	cfg, diags := spec.Parse(map[string][]byte{"kernel.hcl": []byte(src)})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	out, diags := compiler.Compile(cfg, f)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return out
}

func kapply(t *testing.T, w *runtime.Workspace, out *compiler.Output) (*runtime.State, error) {
	t.Helper()
	s, err := w.State()
	if err != nil {
		t.Fatal(err)
	}
	next, _, err := w.Apply(s, out, runtime.Diff(s, out, nil))
	return next, err
}

// worker is a goroutine locked to its own OS thread: the workload runs
// there, so that nothing else the test does (apply writes the state file)
// is counted by a tid filter.
type worker struct {
	tid  int
	jobs chan func()
}

func newWorker(t *testing.T) *worker {
	w := &worker{jobs: make(chan func())}
	ready := make(chan int)
	go func() {
		goruntime.LockOSThread() // never unlocked: the thread exits with the goroutine
		ready <- unix.Gettid()
		for job := range w.jobs {
			job()
		}
	}()
	w.tid = <-ready
	t.Cleanup(func() { close(w.jobs) })
	return w
}

// run runs the workload on the worker's thread and waits for it.
func (w *worker) syscalls(t *testing.T, fails, oks, reads int) {
	t.Helper()
	done := make(chan error)
	w.jobs <- func() { done <- doSyscalls(fails, oks, reads) }
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// doSyscalls makes, on the calling thread, fails writes to fd -1
// (EBADF), oks 5-byte writes to /dev/null and reads reads of /dev/zero.
func doSyscalls(fails, oks, reads int) error {
	null, err := unix.Open("/dev/null", unix.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer unix.Close(null)
	zero, err := unix.Open("/dev/zero", unix.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer unix.Close(zero)
	buf := []byte("hello")
	for i := 0; i < fails; i++ {
		if _, err := unix.Write(-1, buf); !errors.Is(err, unix.EBADF) {
			return fmt.Errorf("write(-1) = %v, want EBADF", err)
		}
	}
	for i := 0; i < oks; i++ {
		if _, err := unix.Write(null, buf); err != nil {
			return err
		}
	}
	for i := 0; i < reads; i++ {
		if _, err := unix.Read(zero, buf); err != nil {
			return err
		}
	}
	return nil
}

func TestKernelTargetMatchesProfile(t *testing.T) {
	name := os.Getenv("PROBECTL_VM_PROFILE")
	if name == "" {
		t.Skip("not in the VM matrix: this kernel is not one of the built-in profiles")
	}
	requireRoot(t)
	live, err := bpf.Detect(bpf.DetectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	profile, err := bpf.Profile(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("live: %s, fprobe %s, fast path %v, links %+v, helpers %+v", live.Label(), live.Fprobe, live.FprobeEntryFastPath, live.Links, live.Helpers)
	if d := live.Differences(profile); len(d) > 0 {
		t.Errorf("probectl target differs from the profile %s:\n  %s", name, strings.Join(d, "\n  "))
	}

	// The profile's tracepoints are this kernel's, exactly: every event
	// of its tracefs, with the same fields, and no other.
	dir, err := bpf.Tracefs()
	if err != nil {
		t.Fatal(err)
	}
	got, err := bpf.CaptureTracepoints(dir)
	if err != nil {
		t.Fatal(err)
	}
	want, err := bpf.ProfileTracepoints(name)
	if err != nil {
		t.Fatal(err)
	}
	diffs, err := bpf.DiffTracepoints(want, got, "the profile", "this kernel", 20)
	if err != nil {
		t.Fatal(err)
	}
	captured, _, _ := strings.Cut(string(want), "\n")
	var uts unix.Utsname
	_ = unix.Uname(&uts)
	t.Logf("tracepoints: %d of the profile's (captured from %s), this kernel %s", strings.Count(string(want), "\n\n")+1,
		strings.TrimPrefix(captured, "# "), unix.ByteSliceToString(uts.Version[:]))
	if len(diffs) > 0 {
		t.Errorf("the tracepoints of the profile %s are not this kernel's: capture them again (make tracepoints KERNELS=%s):\n  %s",
			name, name, strings.Join(diffs, "\n  "))
	}
}

// family is one way of running a probe that the tests force.
type family struct {
	attach  string // the attach value
	entry   bool   // on_entry present (with when and save)
	save    string // the save object
	want    string // the link families the plan must pick
	storage compiler.Storage
	needs   func(*bpf.Facts) bool
}

func families(f *bpf.Facts) []family {
	multi := func(f *bpf.Facts) bool { return f.Links.KprobeMulti }
	session := func(f *bpf.Facts) bool { return f.Links.KprobeSession && f.Helpers.SessionKfuncs }
	// The trampoline programs read arguments and return values with
	// bpf_get_func_arg/ret (5.17): 5.10's fentry is not offered.
	fentry := func(f *bpf.Facts) bool { return f.Links.Fentry && f.BTF && f.Helpers.FuncArg }
	fsession := func(f *bpf.Facts) bool { return f.Links.Fsession }
	kprobe := func(f *bpf.Facts) bool { return f.Links.Kprobe }
	return []family{
		{"kprobe.session", true, "{ start = ktime }", "kprobe.session", compiler.StorageCookie, session},
		{"kprobe.session", true, "{ start = ktime, fd = arg0 }", "kprobe.session", compiler.StorageMap, session},
		{"kprobe.multi", true, "{ start = ktime }", "kprobe.multi + kretprobe.multi", compiler.StorageMap, multi},
		{"fentry", true, "{ start = ktime }", "fentry + fexit", compiler.StorageMap, fentry},
		{"fentry", false, "", "fexit", compiler.StorageNone, fentry},
		{"fsession", true, "{ start = ktime }", "fsession", compiler.StorageMap, fsession}, // when and data: the slot
		{"kprobe", true, "{ start = ktime }", "kprobe + kretprobe", compiler.StorageMap, kprobe},
	}
}

// Every family the kernel offers, forced, with exact results: n failed
// writes give ret -9 (EBADF) n times, m writes to /dev/null give 5, and
// the latency histogram holds n+m calls.
func TestKernelFamiliesExact(t *testing.T) {
	f := kernelFacts(t)
	wfn := writeFunction(t, f)
	const fails, oks = 23, 11
	ran := 0
	for i, fam := range families(f) {
		if !fam.needs(f) {
			// Not a skip: the kernel does not offer the family, as its
			// profile says (TestKernelTargetMatchesProfile checks that).
			t.Logf("%s is not offered by %s", fam.want, f.Label())
			continue
		}
		t.Run(fmt.Sprintf("%d-%s", i, strings.ReplaceAll(fam.want, " + ", "+")), func(t *testing.T) {
			ran++
			wk := newWorker(t)
			tid := wk.tid
			entry := ""
			exitWhen := ""
			if fam.entry {
				entry = "\n  on_entry {\n    when = tid == TID\n    save = " + fam.save + "\n  }"
			} else {
				exitWhen = "\n      when = tid == TID"
			}
			hist := ""
			if fam.entry {
				hist = "\n    hist \"latency\" { value = ktime - entry.start }"
			}
			src := `probe "kernel" "w" {
  functions = ["` + wfn + `"]
  attach    = "` + fam.attach + `"` + entry + `
  on_exit {
    count "rets" {
      by = [ret]` + exitWhen + `
    }` + hist + `
  }
}`
			w := workspace(t)
			out := kcompile(t, f, src, tid)
			p := out.Probes[0]
			if got := compiler.JoinFamilies(p.Attach); got != fam.want || p.EntryData.Storage != fam.storage {
				t.Fatalf("plan: %s with entry data in %s, want %s in %s", got, p.EntryData.Storage, fam.want, fam.storage)
			}
			k := khold(t, w, out)
			wk.syscalls(t, fails, oks, 0)
			got := values(k.agg(t, "kernel.w", "rets"))
			if got["-9"] != fails || got["5"] != oks || len(got) != 2 {
				t.Errorf("%s via %s: rets = %v, want -9: %d, 5: %d", wfn, fam.want, got, fails, oks)
			}
			if fam.entry {
				h := k.agg(t, "kernel.w", "latency")
				var total uint64
				for _, e := range h.Entries {
					for _, b := range e.Buckets {
						total += b.Count
					}
				}
				if total != fails+oks {
					t.Errorf("latency histogram holds %d calls, want %d", total, fails+oks)
				}
			}
			if k.s != nil {
				st := w.Status(k.s)
				t.Logf("%s on %s: route %s, %d links, hits %d/%d, missed %d", wfn, f.Label(), p.Route, len(st[0].Links), st[0].EntryHits, st[0].ExitHits, st[0].Missed)
			}
			k.done(t)
		})
	}
	if inVM() && ran == 0 {
		t.Fatal("no family ran in the VM")
	}
}

// attach = "auto" takes the route the profile's plan promised, and counts.
func TestKernelAutoRouteAsPlanned(t *testing.T) {
	f := kernelFacts(t)
	wk := newWorker(t)
	tid := wk.tid
	wfn := writeFunction(t, f)
	src := `probe "kernel" "entry_only" {
  functions = ["` + wfn + `"]
  on_entry {
    count "n" { when = tid == TID }
  }
}

probe "kernel" "args" {
  functions = ["` + wfn + `"]
  on_entry {
    count "fds" {
      when = tid == TID
      by   = [band(arg0, 4294967295)]
    }
    sum "sizes" {
      when  = tid == TID
      value = arg2
    }
  }
}

probe "kernel" "entry_exit" {
  functions = ["` + writeFunction(t, f) + `"]
  on_entry {
    when = tid == TID
    save = { t = ktime }
  }
  on_exit {
    count "n" { by = [ret] }
  }
}`
	out := kcompile(t, f, src, tid)
	if name := os.Getenv("PROBECTL_VM_PROFILE"); name != "" {
		profile, err := bpf.Profile(name)
		if err != nil {
			t.Fatal(err)
		}
		if !profile.Helpers.AttachCookie {
			// Without attach cookies (5.10) a probe's entry data needs
			// its one function known at plan time: plan with the list.
			profile.Functions = f.Functions
		}
		planned := kcompile(t, profile, src, tid)
		for i, p := range out.Probes {
			q := planned.Probes[i]
			if p.Route != q.Route || compiler.JoinFamilies(p.Attach) != compiler.JoinFamilies(q.Attach) {
				t.Errorf("%s: live route %s via %v, the %s plan promised %s via %v", p.Address, p.Route, p.Attach, name, q.Route, q.Attach)
			}
		}
	}
	w := workspace(t)
	k := khold(t, w, out)
	wk.syscalls(t, 7, 5, 0)
	if v := values(k.agg(t, "kernel.entry_only", "n"))[""]; v != 12 {
		t.Errorf("entry_only = %d, want 12", v)
	}
	if got := values(k.agg(t, "kernel.entry_exit", "n")); got["-9"] != 7 || got["5"] != 5 {
		t.Errorf("entry_exit = %v, want -9: 7, 5: 5", got)
	}
	// The argument registers of this arch: write(fd, buf, count), fd an
	// unsigned int (-1 is 4294967295), count 5.
	if wfn == "ksys_write" {
		fds := values(k.agg(t, "kernel.args", "fds"))
		if fds["4294967295"] != 7 || len(fds) != 2 {
			t.Errorf("fds = %v, want 4294967295 (fd -1): 7 and /dev/null's fd: 5", fds)
		}
		if v := values(k.agg(t, "kernel.args", "sizes"))[""]; v != 60 {
			t.Errorf("sum of arg2 = %d, want 60", v)
		}
	} else {
		t.Logf("%s takes a pt_regs pointer: the argument check needs ksys_write", wfn)
	}
	for _, p := range out.Probes {
		t.Logf("%s: %s via %v (%s)", p.Address, p.Route, p.Attach, p.Reason)
	}
	k.done(t)
}

// when filters by comm and pid exactly.
func TestKernelWhenCommAndPID(t *testing.T) {
	f := kernelFacts(t)
	wk := newWorker(t)
	src := `probe "kernel" "filters" {
  functions = ["` + writeFunction(t, f) + `"]
  on_entry {
    count "mine" { when = pid == PID && comm == "COMM" && tid == TID }
    count "other_comm" { when = comm == "no-such-comm" }
    count "other_pid" { when = pid == 1 }
  }
}`
	w := workspace(t)
	k := khold(t, w, kcompile(t, f, src, wk.tid))
	wk.syscalls(t, 9, 0, 0)
	if v := values(k.agg(t, "kernel.filters", "mine"))[""]; v != 9 {
		t.Errorf("mine = %d, want 9", v)
	}
	for _, name := range []string{"other_comm", "other_pid"} {
		if e := k.agg(t, "kernel.filters", name).Entries; len(e) != 0 {
			t.Errorf("%s counted %v, want nothing", name, e)
		}
	}
	k.done(t)
}

// A glob over several functions, keyed per function.
func TestKernelGlobPerFunction(t *testing.T) {
	f := kernelFacts(t)
	needCookies(t, f)
	wfn, rfn := writeFunction(t, f), readFunction(t, f)
	// The common prefix of the read and write functions, then [rw]*.
	prefix := strings.TrimSuffix(wfn, "write")
	glob := prefix + "[rw][er][ai][dt]*" // read* and writ*
	var matched []string
	for _, fn := range f.Functions {
		if ok, _ := path.Match(glob, fn); ok {
			matched = append(matched, fn)
		}
	}
	sort.Strings(matched)
	if len(matched) < 2 {
		t.Fatalf("glob %s matches %v", glob, matched)
	}
	wk := newWorker(t)
	src := `probe "kernel" "rw" {
  functions = ["` + glob + `"]
  on_entry {
    count "calls" {
      when = tid == TID
      by   = [func]
    }
  }
}`
	out := kcompile(t, f, src, wk.tid)
	if fmt.Sprint(out.Probes[0].Functions) != fmt.Sprint(matched) {
		t.Fatalf("resolved %v, want %v", out.Probes[0].Functions, matched)
	}
	w := workspace(t)
	s, err := kapply(t, w, out)
	if err != nil {
		t.Fatal(err)
	}
	wk.syscalls(t, 0, 6, 4)
	got := values(aggregation(t, w, s, "kernel.rw", "calls"))
	if got[wfn] != 6 || got[rfn] != 4 {
		t.Errorf("glob %s (%v) via %v: calls = %v, want %s: 6, %s: 4", glob, matched, out.Probes[0].Attach, got, wfn, rfn)
	}
}

// A spec whose last function cannot be attached: the apply fails, nothing
// is attached, the previous state stays live and counting.
func TestKernelAtomicApply(t *testing.T) {
	f := kernelFacts(t)
	needPerfLinks(t, f)
	wk := newWorker(t)
	tid := wk.tid
	wfn := writeFunction(t, f)
	base := `probe "kernel" "live" {
  functions = ["` + wfn + `"]
  on_entry {
    count "n" { when = tid == TID }
  }
}`
	w := workspace(t)
	s, err := kapply(t, w, kcompile(t, f, base, tid))
	if err != nil {
		t.Fatal(err)
	}
	// The compiler believes in a function the kernel does not have: it
	// sorts last, so the first function attaches before the second fails.
	bad := "zz_probectl_no_such_function"
	f.Functions = append(f.Functions, bad)
	attaches := []string{"auto"}
	if f.Links.Kprobe {
		attaches = append(attaches, "kprobe")
	}
	if f.Links.Fsession { // loaded per function: the second load fails
		attaches = append(attaches, "fsession")
	}
	for _, attach := range attaches {
		pins := listPins(t, w)
		exit := ""
		if attach == "fsession" {
			exit = "\n  on_exit {\n    count \"r\" {}\n  }"
		}
		next := base + `

probe "kernel" "broken" {
  functions = ["` + wfn + `", "` + bad + `"]
  attach    = "` + attach + `"
  on_entry {
    count "n" {}
  }` + exit + `
}`
		_, err := kapply(t, w, kcompile(t, f, next, tid))
		if err == nil {
			t.Fatalf("attach = %s: apply of a missing function succeeded", attach)
		}
		t.Logf("attach = %s: %v", attach, err)
		var ae *runtime.AttachError
		var le *runtime.LoadError
		if !errors.As(err, &ae) && !errors.As(err, &le) {
			t.Errorf("error %T does not name the probe and function", err)
		}
		leakFree(t, w, s)
		if got := listPins(t, w); got != pins {
			t.Errorf("pins changed:\n%s\nwas\n%s", got, pins)
		}
		after, _ := w.State()
		if after.Serial != s.Serial {
			t.Errorf("state serial %d, want %d", after.Serial, s.Serial)
		}
		c0 := values(aggregation(t, w, s, "kernel.live", "n"))[""]
		wk.syscalls(t, 3, 0, 0)
		if c1 := values(aggregation(t, w, s, "kernel.live", "n"))[""]; c1 != c0+3 {
			t.Errorf("the applied probe counted %d, want %d", c1, c0+3)
		}
	}
}

// Every prefer the spec language has, on this kernel: the route the cost
// table chooses is the one the profile's plan promised, and it counts
// exactly (n calls, count n), an entry-only probe and one with an exit.
func TestKernelPrefer(t *testing.T) {
	f := kernelFacts(t)
	wfn := writeFunction(t, f)
	for _, prefer := range []string{spec.PreferHits, spec.PreferAttach} {
		t.Run(prefer, func(t *testing.T) {
			wk := newWorker(t)
			src := `probe "kernel" "entry" {
  functions = ["` + wfn + `"]
  prefer    = "` + prefer + `"
  on_entry {
    count "n" { when = tid == TID }
  }
}

probe "kernel" "both" {
  functions = ["` + wfn + `"]
  prefer    = "` + prefer + `"
  on_entry {
    when = tid == TID
    save = { t = ktime }
  }
  on_exit {
    count "rets" { by = [ret] }
    hist "ns" { value = ktime - entry.t }
  }
}`
			out := kcompile(t, f, src, wk.tid)
			if name := os.Getenv("PROBECTL_VM_PROFILE"); name != "" {
				profile, err := bpf.Profile(name)
				if err != nil {
					t.Fatal(err)
				}
				if !profile.Helpers.AttachCookie {
					profile.Functions = f.Functions // as in TestKernelAutoRouteAsPlanned
				}
				planned := kcompile(t, profile, src, wk.tid)
				for i, p := range out.Probes {
					q := planned.Probes[i]
					if p.Route != q.Route || compiler.JoinFamilies(p.Attach) != compiler.JoinFamilies(q.Attach) {
						t.Errorf("%s: live route %s via %v, the %s plan promised %s via %v", p.Address, p.Route, p.Attach, name, q.Route, q.Attach)
					}
				}
			}
			for _, p := range out.Probes {
				if !strings.HasPrefix(p.Reason, `prefer = "`+prefer+`"`) {
					t.Errorf("%s: reason %q does not say prefer chose", p.Address, p.Reason)
				}
				t.Logf("%s: %s via %s (%s; %s)", p.Address, p.Route, compiler.JoinFamilies(p.Attach), p.Reason, p.Cost)
			}
			w := workspace(t)
			k := khold(t, w, out)
			const fails, oks = 13, 8
			wk.syscalls(t, fails, oks, 0)
			if v := values(k.agg(t, "kernel.entry", "n"))[""]; v != fails+oks {
				t.Errorf("entry via %s: n = %d, want %d", compiler.JoinFamilies(out.Probes[1].Attach), v, fails+oks)
			}
			if got := values(k.agg(t, "kernel.both", "rets")); got["-9"] != fails || got["5"] != oks || len(got) != 2 {
				t.Errorf("both via %s: rets = %v, want -9: %d, 5: %d", compiler.JoinFamilies(out.Probes[0].Attach), got, fails, oks)
			}
			var total uint64
			for _, e := range k.agg(t, "kernel.both", "ns").Entries {
				for _, b := range e.Buckets {
					total += b.Count
				}
			}
			if total != fails+oks {
				t.Errorf("both: the latency histogram holds %d calls, want %d", total, fails+oks)
			}
			k.done(t)
		})
	}
}
