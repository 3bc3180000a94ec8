package compiler_test

import (
	"strings"
	"testing"
)

// A profile probe on a software event samples it every period events; a
// hardware event is planned, the reason saying it needs a PMU, and that
// the target has none when its cycles do not sample.
func TestProfilePerfEvents(t *testing.T) {
	src := func(event string) string {
		return `probe "profile" "p" {
  event  = "` + event + `"
  period = 100
  on_entry {
    count "n" { by = [comm] }
  }
}`
	}
	f := mustProfile(t, "linux-7.2-amd64")
	out := compileText(t, f, src("faults"))
	p := out.Probes[0]
	if s := p.Sampler; s == nil || s.Event != "faults" || s.Period != 100 || s.Frequency != 0 || s.PeriodNS != 0 {
		t.Fatalf("sampler %+v, want faults every 100", p.Sampler)
	}
	if want := "perf_event: faults every 100 events on every CPU (as written)"; p.Reason != want {
		t.Errorf("reason %q, want %q", p.Reason, want)
	}
	out = compileText(t, f, src("instructions"))
	if r := out.Probes[0].Reason; !strings.Contains(r, "a hardware event: needs the machine's PMU") || strings.Contains(r, "will refuse") {
		t.Errorf("reason on a profile %q", r)
	}
	live := *f
	live.Source, live.Perf.Cycles, live.Perf.CyclesWhy = "live", false, "perf_event_open of PERF_COUNT_HW_CPU_CYCLES fails: no such file or directory"
	out = compileText(t, &live, src("instructions"))
	if r := out.Probes[0].Reason; !strings.Contains(r, "has no hardware counter that samples (perf_event_open of PERF_COUNT_HW_CPU_CYCLES fails: no such file or directory): the kernel will refuse it") {
		t.Errorf("reason without a PMU %q", r)
	}
}
