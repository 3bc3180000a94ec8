package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/probectl/probectl/internal/testenv"
)

// TestRunKaddrInterval runs an interval probe reading a kernel variable
// through kaddr and *: it runs in the kernel, a timer on one CPU, and
// prints the kernel's notes' first two u64, exactly /sys/kernel/notes's
// first 16 bytes (%ld: %d prints 32 bits, as bpftrace 0.17 does), once:
// exit() stops the run after its first event; bpftrace 0.17 prints the
// same line.
func TestRunKaddrInterval(t *testing.T) {
	notes, err := os.ReadFile("/sys/kernel/notes")
	if err != nil || len(notes) < 16 {
		t.Fatalf("/sys/kernel/notes: %v (%d bytes)", err, len(notes))
	}
	w := buildOLWork(t)
	want := fmt.Sprintf("notes %d %d", binary.NativeEndian.Uint64(notes[0:8]), binary.NativeEndian.Uint64(notes[8:16]))
	ol := oneLiner{
		prog:  `interval:ms:100 { $n = kaddr("__start_notes"); printf("notes %ld %ld\n", *$n, *($n + 8)); exit(); }`,
		args:  []string{"-duration", "60s"},
		check: countLines("^"+want+"$", 1),
	}
	out, stderr, code := runOneLiner(t, w, ol)
	if code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, strings.Join(out, "\n"), stderr)
	}
	ol.check(t, out)
	t.Logf("run printed:\n%s", strings.Join(out, "\n"))

	// Side by side: bpftrace 0.17 runs the same program and prints the
	// same line.
	bt, err := exec.LookPath("bpftrace")
	if err != nil {
		testenv.Absent(t, "no bpftrace to compare with: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bt, "-e", ol.prog)
	var stderrBT strings.Builder
	cmd.Stderr = &stderrBT
	got, err := cmd.Output()
	if err != nil {
		t.Fatalf("bpftrace: %v\n%s%s", err, got, stderrBT.String())
	}
	countLines("^"+want+"$", 1)(t, strings.Split(string(got), "\n"))
	t.Logf("bpftrace printed:\n%s", got)
}

// TestRunLoadsTool runs bpftrace's loads.bt: its interval probe reads
// avenrun in the kernel. Where kallsyms lists no avenrun (a kernel
// without CONFIG_KALLSYMS_ALL, as this host's), run stops before
// anything attaches, naming the probe and the symbol, as bpftrace 0.17
// stops there ("Failed to resolve kernel symbol: avenrun"); elsewhere it
// prints load averages each second.
func TestRunLoadsTool(t *testing.T) {
	src, err := os.ReadFile("../../spec/bpftrace/testdata/tools/loads.bt")
	if err != nil {
		t.Fatal(err)
	}
	w := buildOLWork(t)
	ol := oneLiner{prog: string(src), args: []string{"-duration", "3s"}}
	out, stderr, code := runOneLiner(t, w, ol)
	if !inKallsyms(t, "avenrun") {
		if code != 1 || !strings.Contains(stderr, "profile.interval") || !strings.Contains(stderr, `kernel symbol "avenrun" is not in /proc/kallsyms`) {
			t.Fatalf("run of loads.bt without avenrun: exit %d\n%s\n%s", code, strings.Join(out, "\n"), stderr)
		}
		t.Logf("refused: %s", strings.TrimSpace(stderr))
		return
	}
	if code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, strings.Join(out, "\n"), stderr)
	}
	countLines(`^Reading load averages\.\.\. Hit Ctrl-C to end\.$`, 1)(t, out)
	n := 0
	for _, l := range out {
		if strings.Contains(l, "load averages: ") {
			var a, b, c, d, e, f int
			if _, err := fmt.Sscanf(l[strings.Index(l, "load averages: "):], "load averages: %d.%d %d.%d %d.%d", &a, &b, &c, &d, &e, &f); err != nil {
				t.Errorf("line %q: %v", l, err)
			}
			n++
		}
	}
	if n == 0 {
		t.Fatalf("no load averages in 3 s:\n%s", strings.Join(out, "\n"))
	}
}
