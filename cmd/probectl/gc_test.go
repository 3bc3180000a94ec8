package main

import (
	"io"
	"os"
	"runtime/debug"
	"testing"
)

// TestOneShotGC runs commands in this process and reads back the GC
// percent each left: a one-shot command raises it to oneShotGCPercent, a
// long-running one keeps Go's default, and a GOGC the user set wins.
func TestOneShotGC(t *testing.T) {
	if v, set := os.LookupEnv("GOGC"); set {
		os.Unsetenv("GOGC")
		t.Cleanup(func() { os.Setenv("GOGC", v) })
	}
	orig := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(orig) })

	dir := t.TempDir()
	cases := []struct {
		args []string
		gogc string
		want int
	}{
		{[]string{"version"}, "", oneShotGCPercent},
		{[]string{"-state-dir", dir, "-workspace", "start3-gc", "state", "list"}, "", oneShotGCPercent},
		// Fails at once (no workspace) but after the command started:
		// long-running (events -follow), untouched.
		{[]string{"-state-dir", dir, "-workspace", "start3-gc", "events"}, "", 100},
		{[]string{"version"}, "150", 100},
	}
	for _, c := range cases {
		debug.SetGCPercent(100)
		if c.gogc != "" {
			os.Setenv("GOGC", c.gogc)
		}
		run(c.args, io.Discard, io.Discard)
		os.Unsetenv("GOGC")
		if got := debug.SetGCPercent(100); got != c.want {
			t.Errorf("probectl %v (GOGC=%q) left the GC percent at %d, want %d", c.args, c.gogc, got, c.want)
		}
	}
}
