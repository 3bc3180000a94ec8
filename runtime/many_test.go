package runtime_test

import (
	"fmt"
	"strings"
	"testing"
)

// Many tracepoint probes on one event, each with its own hash map made
// on demand (BPF_F_NO_PREALLOC): each counts every call the workload
// makes, exactly, and the destroy leaves nothing.
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
