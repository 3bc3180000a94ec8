package runtime_test

import (
	"bufio"
	"fmt"
	"os"
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
