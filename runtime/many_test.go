package runtime_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/probectl/probectl/internal/testenv"
	"github.com/probectl/probectl/runtime"
)

// Many tracepoint probes on one event, each with its own hash map: each
// counts every call the workload makes, exactly, and the destroy leaves
// nothing.
func TestManyTracepointsCountExactly(t *testing.T) {
	requireRoot(t)
	const probes = 50
	var src strings.Builder
	for i := range probes {
		fmt.Fprintf(&src, `probe "tracepoint" "many%d" {
  event = "syscalls:sys_enter_openat"
  on_entry {
    count "opens" {
      when = comm == "pcruntime"
      by   = [comm]
    }
  }
}
`, i)
	}
	w := workspace(t)
	s, _ := apply(t, w, src.String())
	if len(s.Probes) != probes {
		t.Fatalf("%d probes applied, want %d", len(s.Probes), probes)
	}
	runWork(t, n)
	for i := range probes {
		got := values(aggregation(t, w, s, fmt.Sprintf("tracepoint.many%d", i), "opens"))
		if got[workComm] != n || len(got) != 1 {
			t.Errorf("many%d: opens = %v, want %s: %d", i, got, workComm, n)
		}
	}
	// All at once, as show and status read a workspace (in parallel, each
	// probe's pin directory opened once): the same counts, no drift.
	for i, res := range w.Read(s.Probes) {
		if res.Error != "" || len(res.Aggregations) != 1 {
			t.Fatalf("%s: %q, %d aggregations", res.Address, res.Error, len(res.Aggregations))
		}
		if got := values(res.Aggregations[0]); got[workComm] != n || len(got) != 1 {
			t.Errorf("%s (read of all): opens = %v, want %s: %d", s.Probes[i].Address, got, workComm, n)
		}
	}
	for _, st := range w.Status(s) {
		if len(st.Drift) != 0 || len(st.Links) != 1 || st.EntryHits < n {
			t.Errorf("%s: status drift %v, %d links, %d entry hits (want >= %d)", st.Address, st.Drift, len(st.Links), st.EntryHits, n)
		}
	}
	if _, _, err := w.Destroy(s, nil); err != nil {
		t.Fatal(err)
	}
	leakFree(t, w, nil)
}

// A probe whose programs never ran is read from its counters alone: its
// aggregations are empty and its maps are not opened (a hash map's batch
// lookup walks all its buckets, however few keys it holds; most probes of
// a large workspace are idle). The proof that they are not opened: with
// its aggregation's pin removed, an idle probe still reads (status is what
// reports the pin gone), and once it has run, its read fails on that pin.
func TestReadIdleProbeFromCounters(t *testing.T) {
	requireRoot(t)
	w := workspace(t)
	s, _ := apply(t, w, `probe "user" "idle" {
  binary    = "WORK"
  functions = ["target"]
  on_entry {
    count "calls" { by = [func] }
  }
}`)
	read := func() runtime.ProbeResult {
		t.Helper()
		res := w.Read(s.Probes)
		if len(res) != 1 {
			t.Fatalf("%d results, want 1", len(res))
		}
		return res[0]
	}
	if res := read(); res.Error != "" || len(res.Aggregations) != 1 || len(res.Aggregations[0].Entries) != 0 {
		t.Fatalf("idle probe: error %q, aggregations %+v; want one, empty", res.Error, res.Aggregations)
	}
	st := w.Status(s)[0]
	if st.EntryHits != 0 || len(st.Drift) != 0 {
		t.Fatalf("idle probe: %d entry hits, drift %v; want none", st.EntryHits, st.Drift)
	}
	if err := os.Remove(filepath.Join(st.PinDir, "map_agg_0")); err != nil {
		t.Fatal(err)
	}
	if res := read(); res.Error != "" || len(res.Aggregations) != 1 || len(res.Aggregations[0].Entries) != 0 {
		t.Fatalf("idle probe without its map pin: error %q, aggregations %+v; want one, empty", res.Error, res.Aggregations)
	}
	if st := w.Status(s)[0]; !strings.Contains(strings.Join(st.Drift, "; "), "map calls: pin gone") {
		t.Errorf("status of the probe without its map pin: drift %v, want map calls: pin gone", st.Drift)
	}
	runWork(t, n)
	if res := read(); !strings.Contains(res.Error, "open map calls") {
		t.Errorf("probe that ran, without its map pin: error %q, want open map calls", res.Error)
	}
	if _, _, err := w.Destroy(s, nil); err != nil {
		t.Fatal(err)
	}
	leakFree(t, w, nil)
}

// An apply of many probes that fails at probe 700 leaves everything as it
// was: the probes are loaded side by side (as many loads as CPUs), and the
// rollback closes every one of them. Once at probe 700's load step (before
// any load), once at its attach (all 800 loaded, 699 attached).
func TestManyApplyRollsBackAtProbe700(t *testing.T) {
	requireRoot(t)
	const probes = 800
	// Two probes an event at most: the kernel attaches at most 64
	// programs to one tracepoint.
	dirs, _ := filepath.Glob("/sys/kernel/tracing/events/syscalls/sys_*")
	if len(dirs) < probes/2 {
		testenv.Absent(t, "%d system call tracepoints in /sys/kernel/tracing, want %d", len(dirs), probes/2)
	}
	var src strings.Builder
	for i := range probes {
		fmt.Fprintf(&src, `probe "tracepoint" "rb%d" {
  event = "syscalls:%s"
  on_entry {
    count "calls" { by = [comm] }
  }
}
`, i, filepath.Base(dirs[i/2]))
	}
	w := workspace(t)
	out := compile(t, src.String())
	for _, at := range []string{"load tracepoint.rb700", "attach tracepoint.rb700 "} {
		s, err := w.State()
		if err != nil {
			t.Fatal(err)
		}
		pins := listPins(t, w)
		w.SetFault(func(step string) error {
			if strings.HasPrefix(step, at) {
				return errInjected
			}
			return nil
		})
		_, _, err = w.Apply(s, out, runtime.Diff(s, out, nil))
		w.SetFault(nil)
		if !errors.Is(err, errInjected) {
			t.Fatalf("fault at %q: apply returned %v", at, err)
		}
		if after, err := w.State(); err != nil || len(after.Probes) != 0 || after.Serial != s.Serial {
			t.Errorf("fault at %q: state has %d probes, serial %d (was %d), %v", at, len(after.Probes), after.Serial, s.Serial, err)
		}
		if got := listPins(t, w); got != pins {
			t.Errorf("fault at %q: pins changed:\n%s\nwas\n%s", at, got, pins)
		}
		leakFree(t, w, nil)
	}
}

// Keyed counts, sums and histograms keep one value per key that every CPU
// adds to atomically (compiled.Aggregation.SharedValue); max and those
// without by keep one per CPU: 300 processes started at once and exiting
// on every CPU, each a key of its own inserted as it exits, are all
// counted, exactly, in either layout, none dropped (on-demand maps once
// refused such inserts: counts came out short).
func TestSharedCountsExactUnder300Processes(t *testing.T) {
	requireRoot(t)
	const procs = 300
	comm := fmt.Sprintf("pcx%d", os.Getpid())
	truePath, err := exec.LookPath("true")
	if err != nil {
		testenv.Absent(t, "no true(1) to run: %v", err)
	}
	bin, err := os.ReadFile(truePath)
	if err != nil {
		t.Fatal(err)
	}
	kid := filepath.Join(t.TempDir(), comm)
	if err := os.WriteFile(kid, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	w := workspace(t)
	s, _ := apply(t, w, fmt.Sprintf(`probe "tracepoint" "exits" {
  event = "sched:sched_process_exit"
  on_entry {
    count "by_pid" {
      when = comm == %[1]q
      by   = [args.pid]
    }
    count "all" { when = comm == %[1]q }
    sum "pids" {
      when  = comm == %[1]q
      by    = [comm]
      value = args.pid
    }
    sum "pids_all" {
      when  = comm == %[1]q
      value = args.pid
    }
    hist "pid_hist" {
      when  = comm == %[1]q
      by    = [comm]
      value = args.pid
    }
    hist "pid_hist_all" {
      when  = comm == %[1]q
      value = args.pid
    }
    max "pid_max" {
      when  = comm == %[1]q
      value = args.pid
    }
  }
}`, comm))
	cmds := make([]*exec.Cmd, procs)
	for i := range cmds {
		cmds[i] = exec.Command(kid)
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	var pidSum, pidMax int64
	pids := map[string]bool{}
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatal(err)
		}
		pid := int64(c.Process.Pid)
		pidSum += pid
		pidMax = max(pidMax, pid)
		pids[fmt.Sprint(pid)] = true
	}
	read := func(name string) runtime.AggregationResult {
		ar := aggregation(t, w, s, "tracepoint.exits", name)
		if ar.Dropped != 0 {
			t.Errorf("%s: %d keys dropped, want 0", name, ar.Dropped)
		}
		return ar
	}
	byPid := values(read("by_pid"))
	for pid := range pids {
		if byPid[pid] != 1 {
			t.Errorf("by_pid[%s] = %d, want 1", pid, byPid[pid])
		}
	}
	if len(byPid) != procs {
		t.Errorf("by_pid has %d keys, want %d", len(byPid), procs)
	}
	if got := values(read("all")); got[""] != procs || len(got) != 1 {
		t.Errorf("all = %v, want %d", got, procs)
	}
	if got := values(read("pids")); got[comm] != pidSum || len(got) != 1 {
		t.Errorf("pids = %v, want %s: %d", got, comm, pidSum)
	}
	if got := values(read("pids_all")); got[""] != pidSum || len(got) != 1 {
		t.Errorf("pids_all = %v, want %d", got, pidSum)
	}
	if got := values(read("pid_max")); got[""] != pidMax || len(got) != 1 {
		t.Errorf("pid_max = %v, want %d", got, pidMax)
	}
	for _, name := range []string{"pid_hist", "pid_hist_all"} {
		hist := read(name)
		var count uint64
		for _, e := range hist.Entries {
			for _, b := range e.Buckets {
				count += b.Count
			}
			if e.Sum == nil || *e.Sum != pidSum {
				t.Errorf("%s sum = %v, want %d", name, e.Sum, pidSum)
			}
		}
		if len(hist.Entries) != 1 || count != procs {
			t.Errorf("%s: %d entries, %d observations; want 1, %d", name, len(hist.Entries), count, procs)
		}
	}
	if _, _, err := w.Destroy(s, nil); err != nil {
		t.Fatal(err)
	}
	leakFree(t, w, nil)
}

// Aggregation maps that states written before keep are per-CPU hashes of
// counts; the readers go by the map's type: a count in a per-CPU map (the
// layout of those states; the program still adds atomically, which a
// per-CPU value takes too) reads exactly as in a plain one.
func TestReadPerCPUCountOfEarlierStates(t *testing.T) {
	requireRoot(t)
	src := `probe "tracepoint" "old" {
  event = "syscalls:sys_enter_openat"
  on_entry {
    count "opens" {
      when = comm == "pcruntime"
      by   = [comm]
    }
  }
}`
	for _, typ := range []ebpf.MapType{ebpf.Hash, ebpf.PerCPUHash} {
		t.Run(typ.String(), func(t *testing.T) {
			w := workspace(t)
			out := compile(t, src)
			m := out.Probes[0].Maps[0]
			if m.Ref != out.Probes[0].Aggregations[0].MapRef || m.Type != ebpf.Hash {
				t.Fatalf("map %s %s, want the aggregation's, a plain hash", m.Ref, m.Type)
			}
			m.Type = typ
			s, err := w.State()
			if err != nil {
				t.Fatal(err)
			}
			s, _, err = w.Apply(s, out, runtime.Diff(s, out, nil))
			if err != nil {
				t.Fatal(err)
			}
			runWork(t, n)
			if got := values(aggregation(t, w, s, "tracepoint.old", "opens")); got[workComm] != n || len(got) != 1 {
				t.Errorf("opens = %v, want %s: %d", got, workComm, n)
			}
			if _, _, err := w.Destroy(s, nil); err != nil {
				t.Fatal(err)
			}
			leakFree(t, w, nil)
		})
	}
}
