package main

import (
	"math"
	"runtime/debug"
	"testing"
)

// gcSettings reads the collector's percent and limit, leaving them.
func gcSettings() (int, int64) {
	percent := debug.SetGCPercent(100)
	debug.SetGCPercent(percent)
	return percent, debug.SetMemoryLimit(-1)
}

// Plan collects at 400% within 256 MiB, unless GOGC or GOMEMLIMIT is
// set: then the user's setting stands.
func TestPlanGC(t *testing.T) {
	percent, limit := gcSettings()
	t.Cleanup(func() { debug.SetGCPercent(percent); debug.SetMemoryLimit(limit) })
	for _, c := range []struct {
		gogc, memlimit string
		percent        int
		limit          int64
	}{
		{"", "", planGCPercent, planMemoryLimit},
		{"50", "", 100, math.MaxInt64},
		{"", "1GiB", 100, math.MaxInt64},
	} {
		debug.SetGCPercent(100)
		debug.SetMemoryLimit(math.MaxInt64)
		t.Setenv("GOGC", c.gogc)
		t.Setenv("GOMEMLIMIT", c.memlimit)
		planGC()
		if p, l := gcSettings(); p != c.percent || l != c.limit {
			t.Errorf("GOGC=%q GOMEMLIMIT=%q: percent %d limit %d, want %d and %d", c.gogc, c.memlimit, p, l, c.percent, c.limit)
		}
	}
}
