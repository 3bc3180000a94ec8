package main

import (
	"io"
	"math"
	"os"
	"runtime/debug"
	"testing"
)

// TestOneShotGC runs commands in this process and reads back the GC
// percent and memory limit each left: a one-shot command raises them to
// oneShotGCPercent and oneShotMemoryLimit, a long-running one keeps Go's
// defaults, and a GOGC or GOMEMLIMIT the user set wins.
func TestOneShotGC(t *testing.T) {
	for _, env := range []string{"GOGC", "GOMEMLIMIT"} {
		if v, set := os.LookupEnv(env); set {
			os.Unsetenv(env)
			t.Cleanup(func() { os.Setenv(env, v) })
		}
	}
	origPercent, origLimit := debug.SetGCPercent(100), debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetGCPercent(origPercent); debug.SetMemoryLimit(origLimit) })

	dir := t.TempDir()
	cases := []struct {
		args       []string
		env, value string
		percent    int
		limit      int64
	}{
		{[]string{"version"}, "", "", oneShotGCPercent, oneShotMemoryLimit},
		{[]string{"-state-dir", dir, "-workspace", "start3-gc", "state", "list"}, "", "", oneShotGCPercent, oneShotMemoryLimit},
		// Fails at once (no workspace) but after the command started:
		// long-running (events -follow), untouched.
		{[]string{"-state-dir", dir, "-workspace", "start3-gc", "events"}, "", "", 100, math.MaxInt64},
		{[]string{"version"}, "GOGC", "150", 100, math.MaxInt64},
		{[]string{"version"}, "GOMEMLIMIT", "1GiB", 100, math.MaxInt64},
	}
	for _, c := range cases {
		debug.SetGCPercent(100)
		debug.SetMemoryLimit(math.MaxInt64)
		if c.env != "" {
			os.Setenv(c.env, c.value)
		}
		run(c.args, io.Discard, io.Discard)
		if c.env != "" {
			os.Unsetenv(c.env)
		}
		percent, limit := debug.SetGCPercent(100), debug.SetMemoryLimit(math.MaxInt64)
		if percent != c.percent || limit != c.limit {
			t.Errorf("probectl %v (%s=%q) left the GC at %d%% within %d, want %d%% within %d", c.args, c.env, c.value, percent, limit, c.percent, c.limit)
		}
	}
}
