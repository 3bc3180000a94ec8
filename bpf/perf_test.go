package bpf

import (
	"testing"

	"golang.org/x/sys/unix"
)

// Each event's name and alias open its perf type and config, sampled
// every period, at a frequency or every period_ns.
func TestSamplerAttr(t *testing.T) {
	for _, tc := range []struct {
		s            Sampler
		typ          uint32
		config, samp uint64
		freq         bool
	}{
		{Sampler{Event: "faults", Period: 1}, unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_PAGE_FAULTS, 1, false},
		{Sampler{Event: "cs", Period: 1000}, unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_CONTEXT_SWITCHES, 1000, false},
		{Sampler{Event: "cpu-clock", PeriodNS: 1e7}, unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_CPU_CLOCK, 1e7, false},
		{Sampler{Event: "cycles", Frequency: 99}, unix.PERF_TYPE_HARDWARE, unix.PERF_COUNT_HW_CPU_CYCLES, 99, true},
		{Sampler{Event: "cache-misses", Period: 1e6}, unix.PERF_TYPE_HARDWARE, unix.PERF_COUNT_HW_CACHE_MISSES, 1e6, false},
		{Sampler{Event: "branches", Period: 5}, unix.PERF_TYPE_HARDWARE, unix.PERF_COUNT_HW_BRANCH_INSTRUCTIONS, 5, false},
	} {
		a := tc.s.attr()
		if a.Type != tc.typ || a.Config != tc.config || a.Sample != tc.samp || (a.Bits&unix.PerfBitFreq != 0) != tc.freq {
			t.Errorf("%+v: type %d config %d sample %d bits %#x", tc.s, a.Type, a.Config, a.Sample, a.Bits)
		}
	}
	seen := map[string]bool{}
	for _, e := range PerfEvents {
		for _, n := range []string{e.Name, e.Alias} {
			if n == "" {
				continue
			}
			if seen[n] {
				t.Errorf("%q named twice", n)
			}
			seen[n] = true
			if got, ok := LookupPerfEvent(n); !ok || got.Name != e.Name {
				t.Errorf("LookupPerfEvent(%q) = %v, %v", n, got, ok)
			}
		}
	}
	if _, ok := LookupPerfEvent(""); ok {
		t.Error(`LookupPerfEvent("") found an event`)
	}
}
