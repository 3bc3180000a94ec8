package runtime_test

import (
	"fmt"
	"testing"

	"github.com/probectl/probectl/compiler"
	"golang.org/x/sys/unix"
)

// A tracepoint probe whose args fields are the event's TP_PROTO
// parameters of the same name and type takes tp_btf, and reads them as the
// perf-event route reads the format's fields: n signals the worker sends
// itself (signal:signal_generate; SIGWINCH, ignored by default) count n
// under the same sig and result on both routes.
func TestTPBtfReadsTheFormatsFields(t *testing.T) {
	rawtpFacts(t)
	if !liveFacts(t).Links.TPBtf {
		t.Fatalf("%s has no tp_btf, which every kernel since 5.5 with BTF has", liveFacts(t).Label())
	}
	const n = 29
	wk := newWorker(t)
	probe := func(name, attach string) string {
		return fmt.Sprintf(`probe "tracepoint" %q {
  event  = "signal:signal_generate"
  attach = %q
  on_entry {
    count "n" {
      when = tid == %d
      by   = [args.sig, args.result]
    }
  }
}
`, name, attach, wk.tid)
	}
	out := compile(t, probe("typed", "auto")+"\n"+probe("record", "tracepoint"))
	wantRoute(t, out, "tracepoint.typed", compiler.RouteTPBtf, compiler.FamilyTPBtf)
	wantRoute(t, out, "tracepoint.record", compiler.RouteTracepoint, compiler.FamilyTracepoint)
	w := namedWorkspace(t, "rawtp")
	s, err := kapply(t, w, out)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	wk.jobs <- func() {
		for i := 0; i < n; i++ {
			if err := unix.Tgkill(unix.Getpid(), unix.Gettid(), unix.SIGWINCH); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	typed := values(aggregation(t, w, s, "tracepoint.typed", "n"))
	record := values(aggregation(t, w, s, "tracepoint.record", "n"))
	want := fmt.Sprintf("%d,", unix.SIGWINCH)
	total := int64(0)
	for k, v := range record {
		if len(k) < len(want) || k[:len(want)] != want {
			t.Errorf("perf-event route: key %q, want sig %d", k, unix.SIGWINCH)
		}
		total += v
	}
	if total != n || fmt.Sprint(typed) != fmt.Sprint(record) {
		t.Errorf("tp_btf counts %v, the perf-event route %v; want the same, %d in all", typed, record, n)
	}
	t.Logf("tp_btf %v, perf-event %v", typed, record)
	if _, _, err := w.Destroy(s, nil); err != nil {
		t.Fatal(err)
	}
	leakFree(t, w, nil)
}
