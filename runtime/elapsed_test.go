package runtime_test

import (
	"fmt"
	goruntime "runtime"
	"testing"

	"github.com/probectl/probectl/runtime"
	"golang.org/x/sys/unix"
)

// monotonic is CLOCK_MONOTONIC in nanoseconds, bpf_ktime_get_ns's clock.
func monotonic(t *testing.T) int64 {
	t.Helper()
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	return ts.Nano()
}

// elapsed, read in the kernel: the nanoseconds since the probe's load.
// The load lies between the clock read just before apply and just after
// it, and each getppid call between the reads around it; so each call's
// elapsed lies between (before call - after apply) and (after call -
// before apply), and the values rise.
func TestElapsedSinceTheLoad(t *testing.T) {
	requireRoot(t)
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	tid := unix.Gettid()
	w := workspace(t)
	applyFrom := monotonic(t)
	s, _ := apply(t, w, fmt.Sprintf(`probe "tracepoint" "getppid" {
  event = "syscalls:sys_enter_getppid"
  on_entry {
    event "tick" {
      when   = tid == %d
      fields = { e = elapsed }
    }
    count "calls" { when = tid == %d }
  }
}`, tid, tid))
	applyTo := monotonic(t)
	st, err := w.OpenEvents(s)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const n = 5
	var before, after [n]int64
	for i := range n {
		before[i] = monotonic(t)
		unix.Getppid()
		after[i] = monotonic(t)
	}
	var got []int64
	err = st.ReadBuffered(func(ev *runtime.EventRecord) error {
		if ev.Name != "tick" || len(ev.Fields) != 1 || ev.Fields[0].Name != "e" {
			return fmt.Errorf("event %d: %+v", len(got), ev)
		}
		e, ok := ev.Fields[0].Value.(int64)
		if !ok {
			return fmt.Errorf("event %d: elapsed is a %T", len(got), ev.Fields[0].Value)
		}
		got = append(got, e)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls := values(aggregation(t, w, s, "tracepoint.getppid", "calls")); calls[""] != n || len(got) != n {
		t.Fatalf("%d events and calls %v, want %d of each", len(got), calls, n)
	}
	for i, e := range got {
		if lo, hi := before[i]-applyTo, after[i]-applyFrom; e < lo || e > hi {
			t.Errorf("call %d: elapsed %d, want within %d..%d", i, e, lo, hi)
		}
		if i > 0 && e <= got[i-1] {
			t.Errorf("call %d: elapsed %d, not after call %d's %d", i, e, i-1, got[i-1])
		}
	}
	t.Logf("elapsed %v; apply took %d ns", got, applyTo-applyFrom)
}
