package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/probectl/probectl/internal/testenv"
)

// bpftraceLines runs prog with the installed bpftrace, runs the workload
// once bpftrace has attached; an interval probe ends bpftrace 4s after it
// attached (it ignores a SIGINT that comes as it attaches). Returns its
// stdout lines after "Attaching", blank lines left out.
func bpftraceLines(t *testing.T, prog, path string, work ...string) []string {
	t.Helper()
	bt, err := exec.LookPath("bpftrace")
	if err != nil {
		testenv.Absent(t, "bpftrace is not installed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// BEGIN runs once every probe is attached ("Attaching N probes..."
	// comes before): the workload starts after its line.
	cmd := exec.CommandContext(ctx, bt, "-e", `BEGIN { printf("probectl-test-ready\n"); } `+prog+" interval:s:6 { exit(); }")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	ready := false
	for !ready && lines.Scan() {
		ready = lines.Text() == "probectl-test-ready"
	}
	if !ready {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("bpftrace did not attach: %q", lines.Text())
	}
	runWork(t, path, work...)
	var got []string
	for lines.Scan() {
		if lines.Text() != "" {
			got = append(got, lines.Text())
		}
	}
	cmd.Wait()
	return got
}

// The printf lines probectl run prints for an imported one-liner are
// bpftrace's, byte for byte, on the same workload: 50 getppid calls of
// our own process, filtered by its comm. No normalisation: the line
// holds nothing that differs between the runs.
func TestRunPrintfAsBpftrace(t *testing.T) {
	path, comm := buildStackWork(t, "bo")
	prog := `tracepoint:syscalls:sys_exit_getppid /comm == "` + comm + `"/ { printf("comm=%s ok=%d |%-10s|%5x|%05d|%c|\n", comm, args->ret > 0, comm, 255, 42, 65); }`
	want := bpftraceLines(t, prog, path, "getppid", "50")
	if len(want) != 50 {
		t.Fatalf("bpftrace printed %d lines, want 50:\n%s", len(want), strings.Join(want, "\n"))
	}
	out := runWhileWorking(t, prog, path, []string{"getppid", "50"}, "-duration", "6s", "-interval", "0", "-e")
	var got []string
	for _, l := range out {
		if strings.HasPrefix(l, "comm=") {
			got = append(got, l)
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("run printed %d printf lines, bpftrace %d; run:\n%s\nbpftrace:\n%s", len(got), len(want), strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
