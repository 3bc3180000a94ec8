package runtime_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/runtime"
	"golang.org/x/sys/unix"
)

// The workload makes, for n iterations: n calls of target(i) returning
// 2i-5; n/2 calls of other(i, 1); n calls of fails(i) returning -(i%7)-1;
// n failed openat("/nonexistent/...", O_RDONLY|O_CLOEXEC) calls (ENOENT).
const n = 37

// uprobe.session with entry data in its cookie: the entry's when decides
// whether the exit runs, and the exit reads the entry's argument.
func TestUprobeSessionCookie(t *testing.T) {
	requireRoot(t)
	if !liveFacts(t).Links.UprobeSession {
		t.Skipf("the host kernel (%s) has no uprobe.session (6.13)", liveFacts(t).Kernel)
	}
	w := workspace(t)
	s, _ := apply(t, w, `probe "user" "sess" {
  binary    = "WORK"
  functions = ["target", "other"]
  on_entry {
    when = arg0 % 2 == 0
    save = { x = arg0 }
  }
  on_exit {
    count "calls" { by = [func] }
    sum "x" { value = entry.x }
    sum "ret" {
      when  = func == "target"
      value = ret
    }
  }
}`)
	p := s.Probes[0]
	if compiler.JoinFamilies(p.Attach) != "uprobe.session" || p.EntryData.Storage != compiler.StorageCookie {
		t.Fatalf("attach %v, entry data in %s; want uprobe.session, cookie (auto on a 6.13+ kernel)", p.Attach, p.EntryData.Storage)
	}
	runWork(t, n)
	// Even arguments only: target's 0, 2, ..., 36 (19 calls); other's
	// 0, 2, ..., 16 (9 calls).
	if got := values(aggregation(t, w, s, "user.sess", "calls")); got["target"] != 19 || got["other"] != 9 || len(got) != 2 {
		t.Errorf("calls = %v, want target 19, other 9", got)
	}
	var wantX, wantRet int64
	for i := int64(0); i < n; i += 2 {
		wantX += i
		wantRet += 2*i - 5
	}
	for i := int64(0); i < n/2; i += 2 {
		wantX += i
	}
	if v := values(aggregation(t, w, s, "user.sess", "x"))[""]; v != wantX {
		t.Errorf("sum of entry.x = %d, want %d", v, wantX)
	}
	if v := values(aggregation(t, w, s, "user.sess", "ret"))[""]; v != wantRet {
		t.Errorf("sum of ret = %d, want %d", v, wantRet)
	}
	st := w.Status(s)
	if st[0].EntryHits != uint64(n+n/2) || st[0].ExitHits != 28 || len(st[0].Drift) != 0 {
		t.Errorf("status: hits %d entry (want %d), %d exit (want 28), drift %v", st[0].EntryHits, n+n/2, st[0].ExitHits, st[0].Drift)
	}
	if _, _, err := w.Destroy(s, nil); err != nil {
		t.Fatal(err)
	}
	leakFree(t, w, nil)
}

func TestUprobeCountsExactly(t *testing.T) {
	requireRoot(t)
	for _, attach := range []string{"uprobe", "uprobe.multi"} {
		t.Run(attach, func(t *testing.T) {
			w := workspace(t)
			s, _ := apply(t, w, `probe "user" "calls" {
  binary    = "WORK"
  functions = ["target", "other"]
  attach    = "`+attach+`"
  on_entry {
    count "by_func" { by = [func] }
    count "every_third" {
      when = func == "target" && arg0 % 3 == 0
    }
    sum "args" { value = arg0 }
  }
}`)
			p := s.Probes[0]
			wantFamily := attach
			if compiler.JoinFamilies(p.Attach) != wantFamily {
				t.Fatalf("attach %v, want %s", p.Attach, wantFamily)
			}
			runWork(t, n)
			got := values(aggregation(t, w, s, "user.calls", "by_func"))
			if got["target"] != n || got["other"] != n/2 || len(got) != 2 {
				t.Errorf("by_func = %v, want target %d, other %d", got, n, n/2)
			}
			if v := values(aggregation(t, w, s, "user.calls", "every_third"))[""]; v != (n+2)/3 {
				t.Errorf("every_third = %d, want %d", v, (n+2)/3)
			}
			// target's args 0..n-1 and other's 0..n/2-1.
			wantSum := int64(n*(n-1)/2 + (n/2)*(n/2-1)/2)
			if v := values(aggregation(t, w, s, "user.calls", "args"))[""]; v != wantSum {
				t.Errorf("sum of args = %d, want %d", v, wantSum)
			}
			st := w.Status(s)
			if st[0].EntryHits != uint64(n+n/2) || len(st[0].Drift) != 0 {
				t.Errorf("status: hits %d (want %d), drift %v", st[0].EntryHits, n+n/2, st[0].Drift)
			}
			if _, _, err := w.Destroy(s, nil); err != nil {
				t.Fatal(err)
			}
			leakFree(t, w, nil)
		})
	}
}

// uretprobes with entry data: ret, entry.NAME, histograms and min/max; as
// uprobe.session, the entry data (more than its cookie's 8 bytes) in a map.
func TestUretprobeEntryDataAndRet(t *testing.T) {
	requireRoot(t)
	for _, attach := range []string{"uprobe", "uprobe.multi", "uprobe.session"} {
		t.Run(attach, func(t *testing.T) {
			w := workspace(t)
			s, _ := apply(t, w, `probe "user" "ret" {
  binary    = "WORK"
  functions = ["target", "fails"]
  attach    = "`+attach+`"
  on_entry {
    when = comm == "pcruntime"
    save = { x = arg0, who = comm }
  }
  on_exit {
    sum "ret_sum" {
      when  = func == "target"
      value = ret
    }
    count "negative" {
      when = func == "target" && ret < 0
    }
    count "errors" {
      when = func != "target"
      by   = [ret]
    }
    hist "x" {
      when  = func == "target"
      value = entry.x
    }
    lhist "x_linear" {
      when  = func == "target"
      value = entry.x
      min   = 0
      max   = 20
      step  = 5
    }
    min "least" { value = ret }
    max "most" {
      value = ret
      by    = [entry.who]
    }
  }
}`)
			if s.Probes[0].EntryData.Storage != compiler.StorageMap {
				t.Errorf("entry data in %s, want map", s.Probes[0].EntryData.Storage)
			}
			runWork(t, n)
			var wantSum int64
			neg := int64(0)
			for i := int64(0); i < n; i++ {
				wantSum += 2*i - 5
				if 2*i-5 < 0 {
					neg++
				}
			}
			if v := values(aggregation(t, w, s, "user.ret", "ret_sum"))[""]; v != wantSum {
				t.Errorf("sum of ret = %d, want %d", v, wantSum)
			}
			if v := values(aggregation(t, w, s, "user.ret", "negative"))[""]; v != neg {
				t.Errorf("negative = %d, want %d", v, neg)
			}
			wantErr := map[string]int64{}
			for i := int64(0); i < n; i++ {
				wantErr[fmt.Sprint(-(i%7)-1)]++
			}
			if got := values(aggregation(t, w, s, "user.ret", "errors")); fmt.Sprint(got) != fmt.Sprint(wantErr) {
				t.Errorf("errors = %v, want %v", got, wantErr)
			}
			// least: fails returns down to -7, target down to -5.
			if v := values(aggregation(t, w, s, "user.ret", "least"))[""]; v != -7 {
				t.Errorf("min ret = %d, want -7", v)
			}
			if v := values(aggregation(t, w, s, "user.ret", "most"))[workComm]; v != 2*(n-1)-5 {
				t.Errorf("max ret = %d, want %d", v, 2*(n-1)-5)
			}
			// hist of x = 0..n-1: [0] 1, [1] 1, [2,4) 2, [4,8) 4, [8,16) 8, [16,32) 16, [32,64) n-32.
			h := aggregation(t, w, s, "user.ret", "x")
			wantBuckets := map[int64]uint64{0: 1, 1: 1, 2: 2, 4: 4, 8: 8, 16: 16, 32: n - 32}
			checkBuckets(t, "hist x", h, wantBuckets)
			// lhist 0..20 step 5: four buckets of 5, and n-20 at or above 20.
			l := aggregation(t, w, s, "user.ret", "x_linear")
			checkBuckets(t, "lhist x", l, map[int64]uint64{0: 5, 5: 5, 10: 5, 15: 5, 20: n - 20})
			if _, _, err := w.Destroy(s, nil); err != nil {
				t.Fatal(err)
			}
			leakFree(t, w, nil)
		})
	}
}

func checkBuckets(t *testing.T, what string, ar runtime.AggregationResult, want map[int64]uint64) {
	t.Helper()
	if len(ar.Entries) != 1 {
		t.Fatalf("%s: %d entries", what, len(ar.Entries))
	}
	got := map[int64]uint64{}
	var total, wantTotal uint64
	for _, b := range ar.Entries[0].Buckets {
		got[b.Low] = b.Count
		total += b.Count
	}
	for _, c := range want {
		wantTotal += c
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || total != wantTotal {
		t.Errorf("%s buckets = %v, want %v", what, got, want)
	}
}

func TestTracepointArgsAndEvents(t *testing.T) {
	requireRoot(t)
	w := workspace(t)
	s, _ := apply(t, w, `probe "tracepoint" "enter" {
  event = "syscalls:sys_enter_openat"
  on_entry {
    count "flags" {
      when = comm == "pcruntime"
      by   = [args.flags]
    }
  }
}

probe "tracepoint" "exit" {
  event = "syscalls:sys_exit_openat"
  on_entry {
    count "results" {
      when = comm == "pcruntime"
      by   = [args.ret]
    }
    event "failed" {
      when   = comm == "pcruntime" && args.ret < 0
      fields = { errno = -args.ret, comm = comm }
    }
  }
}`)
	st, err := w.OpenEvents(s)
	if err != nil {
		t.Fatal(err)
	}
	runWork(t, n)
	// O_RDONLY|O_CLOEXEC = 0x80000 on x86_64 and arm64.
	if got := values(aggregation(t, w, s, "tracepoint.enter", "flags")); got["524288"] != n || len(got) != 1 {
		t.Errorf("flags = %v, want 524288: %d", got, n)
	}
	if got := values(aggregation(t, w, s, "tracepoint.exit", "results")); got["-2"] != n {
		t.Errorf("results = %v, want -2 (ENOENT): %d", got, n)
	}
	var got int
	var last uint64
	err = st.ReadBuffered(func(ev *runtime.EventRecord) error {
		if ev.Probe != "tracepoint.exit" || ev.Name != "failed" || fmt.Sprint(ev.Fields) != expectComm("[{errno 2} {comm pcruntime}]") {
			return fmt.Errorf("event %d: %+v", got, ev)
		}
		if ev.MonoNS < last {
			return fmt.Errorf("event %d: time %d before the previous one's %d", got, ev.MonoNS, last)
		}
		last = ev.MonoNS
		got++
		return nil
	})
	if err != nil || got != n {
		t.Fatalf("%d events, want %d: %v", got, n, err)
	}
	st.Close()
	if _, _, err := w.Destroy(s, nil); err != nil {
		t.Fatal(err)
	}
	leakFree(t, w, nil)
}

const twoProbes = `probe "user" "calls" {
  binary    = "WORK"
  functions = ["target"]
  on_entry {
    count "n" {}
  }
}

probe "tracepoint" "opens" {
  event = "syscalls:sys_enter_openat"
  on_entry {
    count "n" { when = comm == "pcruntime" }
  }
}`

// An apply of an unchanged spec changes nothing: same links, counts grow.
func TestApplyUnchangedKeepsLinks(t *testing.T) {
	requireRoot(t)
	w := workspace(t)
	s1, _ := apply(t, w, twoProbes)
	runWork(t, n)
	s2, plan := apply(t, w, twoProbes)
	if plan.Summary.NoOp != 2 || plan.Summary.Create+plan.Summary.Replace+plan.Summary.Delete != 0 {
		t.Fatalf("second plan: %+v", plan.Summary)
	}
	for i := range s1.Probes {
		if fmt.Sprint(s1.Probes[i].Links) != fmt.Sprint(s2.Probes[i].Links) {
			t.Errorf("%s: links changed: %v → %v", s1.Probes[i].Address, s1.Probes[i].Links, s2.Probes[i].Links)
		}
	}
	runWork(t, n)
	if v := values(aggregation(t, w, s2, "user.calls", "n"))[""]; v != 2*n {
		t.Errorf("count after two runs = %d, want %d", v, 2*n)
	}
	if v := values(aggregation(t, w, s2, "tracepoint.opens", "n"))[""]; v != 2*n {
		t.Errorf("tracepoint count after two runs = %d, want %d", v, 2*n)
	}
}

// A changed probe is replaced create-before-destroy; the others stay.
func TestReplaceCreatesBeforeDestroying(t *testing.T) {
	requireRoot(t)
	w := workspace(t)
	s1, _ := apply(t, w, twoProbes)
	var steps []string
	w.SetFault(func(step string) error { steps = append(steps, step); return nil })
	changed := strings.Replace(twoProbes, `functions = ["target"]`, `functions = ["target", "other"]`, 1)
	s2, plan := apply(t, w, changed)
	w.SetFault(nil)
	var c *compiler.Change
	for _, x := range plan.Changes {
		if x.Address.String() == "user.calls" {
			c = x
		}
	}
	if c.Action != compiler.ActionReplace || !strings.Contains(c.Why, "functions added: other") {
		t.Fatalf("plan for user.calls: %s (%s)", c.Action, c.Why)
	}
	attach, remove := -1, -1
	for i, st := range steps {
		if strings.HasPrefix(st, "attach user.calls") && attach < 0 {
			attach = i
		}
		if strings.HasPrefix(st, "remove user-calls") {
			remove = i
		}
	}
	if attach < 0 || remove < 0 || attach > remove {
		t.Errorf("steps %v: the new probe must attach before the old one goes", steps)
	}
	if s1.Probes[1].Links[0].ID != s2.Probes[1].Links[0].ID {
		t.Error("the unchanged tracepoint probe was touched")
	}
	runWork(t, n)
	if got := values(aggregation(t, w, s2, "user.calls", "n"))[""]; got != n+n/2 {
		t.Errorf("count = %d, want %d", got, n+n/2)
	}
	leakFree(t, w, s2)
}

func TestLockNamesHolder(t *testing.T) {
	requireRoot(t)
	w1 := workspace(t)
	w2, _ := runtime.Open(w1.StateDir, w1.Name)
	err := w2.Lock()
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("PID %d", pid())) {
		t.Fatalf("second lock: %v", err)
	}
	w2.LockTimeout = 2e9
	done := make(chan error)
	go func() { done <- w2.Lock() }()
	w1.Unlock()
	if err := <-done; err != nil {
		t.Fatalf("waiting lock: %v", err)
	}
	w2.Unlock()
}

// When the kernel refuses one function of a uprobe.multi link anyway (the
// plan checks first instructions, but the kernel has the last word: it
// looks at the instruction when it puts the breakpoint into a process that
// has the binary mapped), the error names that function, and nothing is
// left attached.
func TestUprobeMultiRefusalNamesTheFunction(t *testing.T) {
	requireRoot(t)
	if goruntime.GOARCH != "amd64" {
		t.Skip("the refused function is x86-64 code")
	}
	dir := t.TempDir()
	src := `#include <unistd.h>
__attribute__((naked)) void bad(void) { __asm__("hlt\n\tret"); }
__attribute__((noinline)) long good(long x) { return x + 1; }
int main(void) { good(1); pause(); return 0; }
`
	if err := os.WriteFile(dir+"/two.c", []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := dir + "/two"
	if out, err := exec.Command("gcc", "-O0", "-static", "-o", bin, dir+"/two.c").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	running := exec.Command(bin)
	if err := running.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { running.Process.Kill(); running.Wait() }()
	w := workspace(t)
	out := compile(t, `probe "user" "two" {
  binary    = "`+bin+`"
  functions = ["good"]
  attach    = "uprobe.multi"
  on_entry {
    count "n" {}
  }
}`)
	// What the plan would refuse, put past it: the apply's own check.
	out.Probes[0].Functions = []string{"bad", "good"}
	s, err := w.State()
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = w.Apply(s, out, runtime.Diff(s, out, nil))
	var ae *runtime.AttachError
	if !errors.As(err, &ae) || ae.Function != "bad" {
		t.Fatalf("apply: %v, want an attach error naming bad", err)
	}
	t.Log(err)
	if after, _ := w.State(); len(after.Probes) != 0 {
		t.Errorf("the state records %d probes", len(after.Probes))
	}
	leakFree(t, w, nil)
}

// A user probe's binary swapped for a FIFO between the plan and the apply
// (by its owner, in a race) is refused; the apply never blocks holding the
// lock (the red team hung it with this).
func TestBinaryBecomesFIFO(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	bin := dir + "/bin"
	data, err := os.ReadFile(workload(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	w := workspace(t)
	out := compile(t, `probe "user" "fifo" {
  binary    = "`+bin+`"
  functions = ["target"]
  on_entry {
    count "n" {}
  }
}`)
	if err := os.Remove(bin); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(bin, 0o644); err != nil {
		t.Fatal(err)
	}
	s, _ := w.State()
	done := make(chan error, 1)
	go func() {
		_, _, err := w.Apply(s, out, runtime.Diff(s, out, nil))
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("apply: %v, want a refusal of the FIFO", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("apply blocked on a FIFO")
	}
	leakFree(t, w, nil)
}

// A table lives as long as the spec set: an apply that keeps its layout
// keeps its contents (a reader probe replaced meanwhile), a new layout
// makes a new, empty table, and the probes that use it come with it.
func TestTableKeptAcrossApply(t *testing.T) {
	requireRoot(t)
	w := workspace(t)
	spec := func(value, readerBy string) string {
		return `table "opens" {
  max_keys = 64
}

probe "tracepoint" "writer" {
  event = "syscalls:sys_enter_openat"
  on_entry {
    store "opens" {
      when  = comm == "pcruntime"
      key   = [comm]
      value = ` + value + `
    }
  }
}

probe "tracepoint" "reader" {
  event = "syscalls:sys_exit_openat"
  on_entry {
    count "seen" {
      when = has(opens, [comm])
      by   = [` + readerBy + `]
    }
  }
}`
	}
	held := func(s *runtime.State) string {
		res := w.ReadTables(s.Tables)
		if len(res) != 1 || res[0].Error != "" {
			t.Fatalf("tables: %+v", res)
		}
		b, _ := json.Marshal(res[0].Entries)
		return string(b)
	}
	s, plan := apply(t, w, spec("opens[comm] + 1", "comm"))
	if len(plan.Tables) != 1 || plan.Tables[0].Action != compiler.ActionCreate {
		t.Fatalf("plan tables: %+v", plan.Tables)
	}
	runWork(t, 5)
	if got := held(s); got != expectComm(`[{"key":{"key0":"pcruntime"},"value":{"value":5}}]`) {
		t.Errorf("after 5 opens: %s", got)
	}
	// The reader changes; the table stays, with what it holds.
	s, plan = apply(t, w, spec("opens[comm] + 1", "comm, args.ret"))
	if plan.Tables[0].Action != compiler.ActionNoOp {
		t.Errorf("an unchanged table is %s", plan.Tables[0].Action)
	}
	runWork(t, 3)
	if got := held(s); got != expectComm(`[{"key":{"key0":"pcruntime"},"value":{"value":8}}]`) {
		t.Errorf("kept across the apply, after 3 more: %s", got)
	}
	// A new layout: a new, empty table, and both probes replaced with it.
	s, plan = apply(t, w, spec(`{ n = opens[comm].n + 1, last = args.flags }`, "comm, args.ret"))
	if plan.Tables[0].Action != compiler.ActionReplace {
		t.Errorf("a table laid out anew is %s", plan.Tables[0].Action)
	}
	for _, c := range plan.Changes {
		if c.Action != compiler.ActionReplace {
			t.Errorf("%s uses the new table but is %s", c.Address, c.Action)
		}
	}
	runWork(t, 2)
	if got := held(s); got != expectComm(`[{"key":{"key0":"pcruntime"},"value":{"n":2,"last":524288}}]`) {
		t.Errorf("a new table, after 2 opens: %s", got)
	}
	leakFree(t, w, s)
}
