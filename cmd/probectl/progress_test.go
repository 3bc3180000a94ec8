package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// A step that outlasts progressAfter says what it does, then how long it
// took; a quick one says nothing. The slow step ends only once the first
// line is out: no race with the clock.
func TestProgress(t *testing.T) {
	old := progressAfter
	defer func() { progressAfter = old }()

	progressAfter = time.Hour
	var quiet syncWriter
	quiet.w = &strings.Builder{}
	progress(&quiet, "Quick", func() {})
	if s := quiet.String(); s != "" {
		t.Errorf("a quick step printed %q", s)
	}

	progressAfter = time.Millisecond
	var slow syncWriter
	slow.w = &strings.Builder{}
	progress(&slow, "Symbolizing", func() {
		for !strings.Contains(slow.String(), "Symbolizing...\n") {
			time.Sleep(5 * time.Millisecond)
		}
	})
	if s := slow.String(); !regexp.MustCompile(`^Symbolizing\.\.\.\nSymbolizing: done in [0-9]+\.[0-9]s\.\n$`).MatchString(s) {
		t.Errorf("a slow step printed %q", s)
	}
}

// target -o says what it detects on stderr, never on stdout (with every
// step reported: progressAfter 0).
func TestProgressTarget(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("target detects the live kernel's facts: needs root")
	}
	old := progressAfter
	defer func() { progressAfter = old }()
	progressAfter = 0
	var stdout, stderr strings.Builder
	file := filepath.Join(t.TempDir(), "facts.json")
	if code := run([]string{"target", "-o", file}, &stdout, &stderr); code != 0 {
		t.Fatalf("target -o: exit %d\n%s%s", code, &stdout, &stderr)
	}
	want := regexp.MustCompile(`^Detecting the kernel's facts, functions, tracepoint formats and BTF\.\.\.\nDetecting the kernel's facts, functions, tracepoint formats and BTF: done in [0-9.]+s\.\n$`)
	if !want.MatchString(stderr.String()) || strings.Contains(stdout.String(), "Detecting") {
		t.Errorf("target -o: stderr %q, stdout %q", &stderr, &stdout)
	}
}
