package runtime_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/probectl/probectl/runtime"
	"golang.org/x/sys/unix"
)

// timerListJiffies reads the kernel's jiffies_64 as /proc/timer_list
// prints it (its first "jiffies:" line; root only).
func timerListJiffies(t *testing.T) int64 {
	t.Helper()
	f, err := os.Open("/proc/timer_list")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "jiffies: "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				t.Fatalf("/proc/timer_list: %v", err)
			}
			return n
		}
	}
	t.Fatalf("/proc/timer_list has no jiffies line (%v)", sc.Err())
	return 0
}

// jiffies, read in the kernel: each getppid call of this thread records
// jiffies in an event, and /proc/timer_list's jiffies read just before and
// just after the call bound it. The calls are apart by more than two ticks
// at any HZ (10 ms at most), so the values also rise.
func TestJiffiesBetweenTimerListReads(t *testing.T) {
	requireRoot(t)
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	tid := unix.Gettid()
	w := workspace(t)
	s, _ := apply(t, w, fmt.Sprintf(`probe "tracepoint" "getppid" {
  event = "syscalls:sys_enter_getppid"
  on_entry {
    event "tick" {
      when   = tid == %d
      fields = { j = jiffies }
    }
    count "calls" { when = tid == %d }
  }
}`, tid, tid))
	st, err := w.OpenEvents(s)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const n = 5
	var before, after [n]int64
	for i := range n {
		before[i] = timerListJiffies(t)
		unix.Getppid()
		after[i] = timerListJiffies(t)
		time.Sleep(30 * time.Millisecond)
	}
	var got []int64
	err = st.ReadBuffered(func(ev *runtime.EventRecord) error {
		if ev.Name != "tick" || len(ev.Fields) != 1 || ev.Fields[0].Name != "j" {
			return fmt.Errorf("event %d: %+v", len(got), ev)
		}
		j, ok := ev.Fields[0].Value.(int64)
		if !ok {
			return fmt.Errorf("event %d: jiffies is a %T", len(got), ev.Fields[0].Value)
		}
		got = append(got, j)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls := values(aggregation(t, w, s, "tracepoint.getppid", "calls")); calls[""] != n || len(got) != n {
		t.Fatalf("%d events and calls %v, want %d of each", len(got), calls, n)
	}
	for i, j := range got {
		if j < before[i] || j > after[i] {
			t.Errorf("call %d: jiffies %d, want within /proc/timer_list's %d..%d", i, j, before[i], after[i])
		}
		if i > 0 && j <= got[i-1] {
			t.Errorf("call %d: jiffies %d, not after call %d's %d, 30 ms earlier", i, j, i-1, got[i-1])
		}
	}
	t.Logf("jiffies %v, between %v and %v", got, before, after)
}

// cpuNode is the NUMA node sysfs puts cpu under (cpuN/nodeM).
func cpuNode(t *testing.T, cpu int) int64 {
	t.Helper()
	nodes, err := filepath.Glob(fmt.Sprintf("/sys/devices/system/cpu/cpu%d/node[0-9]*", cpu))
	if err != nil || len(nodes) != 1 {
		t.Fatalf("cpu%d: NUMA nodes %v (%v), want one", cpu, nodes, err)
	}
	n, err := strconv.ParseInt(strings.TrimPrefix(filepath.Base(nodes[0]), "node"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// numaid and cpu, read in the kernel: this thread, pinned to each CPU it
// may run on in turn, calls getppid there; each call's event holds the
// CPU it ran on, which must be the one pinned, and its NUMA node, which
// must be the one sysfs puts that CPU under.
func TestNumaidIsTheCPUsNode(t *testing.T) {
	requireRoot(t)
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		t.Fatal(err)
	}
	defer unix.SchedSetaffinity(0, &all)
	tid := unix.Gettid()
	w := workspace(t)
	s, _ := apply(t, w, fmt.Sprintf(`probe "tracepoint" "getppid" {
  event = "syscalls:sys_enter_getppid"
  on_entry {
    event "where" {
      when   = tid == %d
      fields = { cpu = cpu, node = numaid }
    }
  }
}`, tid))
	st, err := w.OpenEvents(s)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var cpus []int
	for cpu := range 1024 {
		if !all.IsSet(cpu) {
			continue
		}
		var one unix.CPUSet
		one.Set(cpu)
		if err := unix.SchedSetaffinity(0, &one); err != nil {
			t.Fatalf("pin to cpu%d: %v", cpu, err)
		}
		unix.Getppid()
		cpus = append(cpus, cpu)
	}
	i := 0
	err = st.ReadBuffered(func(ev *runtime.EventRecord) error {
		if i >= len(cpus) || len(ev.Fields) != 2 {
			return fmt.Errorf("event %d of %d: %+v", i, len(cpus), ev)
		}
		cpu, node := ev.Fields[0].Value, ev.Fields[1].Value
		if cpu != int64(cpus[i]) || node != cpuNode(t, cpus[i]) {
			t.Errorf("call on cpu%d: cpu %v, numaid %v, want %d and node %d", cpus[i], cpu, node, cpus[i], cpuNode(t, cpus[i]))
		}
		i++
		return nil
	})
	if err != nil || i != len(cpus) {
		t.Fatalf("%d events for %d CPUs: %v", i, len(cpus), err)
	}
	t.Logf("cpus %v", cpus)
}
