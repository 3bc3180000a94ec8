package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runWhileWorking runs probectl run with args on spec, runs the workload
// (path, work) once run says it is running, and returns run's stdout
// lines.
func runWhileWorking(t *testing.T, spec, path string, work []string, args ...string) []string {
	t.Helper()
	pr, pw := io.Pipe()
	done := make(chan int)
	var errOut bytes.Buffer
	go func() {
		code := run(append(append([]string{"-state-dir", t.TempDir(), "run"}, args...), spec), pw, &errOut)
		pw.Close()
		done <- code
	}()
	lines := bufio.NewScanner(pr)
	var out []string
	for lines.Scan() {
		out = append(out, lines.Text())
		if strings.HasPrefix(lines.Text(), "Running for") {
			break
		}
	}
	runWork(t, path, work...)
	for lines.Scan() {
		out = append(out, lines.Text())
	}
	if code := <-done; code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, strings.Join(out, "\n"), errOut.String())
	}
	return out
}

// run without -v does not flood: 200 events of a probe print as their
// count and the last 5; -v prints all 200, as they arrive.
func TestRunQuietEvents(t *testing.T) {
	path, comm := buildStackWork(t, "rq")
	spec := filepath.Join(t.TempDir(), "quiet.hcl")
	if err := os.WriteFile(spec, []byte(fmt.Sprintf(`
probe "tracepoint" "rq" {
  event = "syscalls:sys_enter_getppid"
  on_entry {
    event "call" {
      when   = comm == %q
      fields = { pid = pid }
    }
  }
}
`, comm)), 0o644); err != nil {
		t.Fatal(err)
	}
	count := func(out []string) int {
		n := 0
		for _, l := range out {
			if strings.Contains(l, " tracepoint.rq call: pid=") {
				n++
			}
		}
		return n
	}
	quiet := runWhileWorking(t, spec, path, []string{"getppid", "200"}, "-duration", "3s", "-interval", "0")
	text := strings.Join(quiet, "\n")
	if n := count(quiet); n != 5 || !strings.Contains(text, "--- 200 events (tracepoint.rq 200); the last 5:") ||
		!strings.Contains(text, "Events: 200 read (") {
		t.Errorf("run without -v: %d event lines, want 5 and the digest of 200:\n%s", n, text)
	}
	loud := runWhileWorking(t, spec, path, []string{"getppid", "200"}, "-v", "-duration", "3s", "-interval", "0")
	if n := count(loud); n != 200 || !strings.Contains(strings.Join(loud, "\n"), "Events: 200 printed, none dropped.") {
		t.Errorf("run -v: %d event lines, want 200:\n%s", n, strings.Join(loud, "\n"))
	}
	t.Logf("run: %d lines without -v, %d with -v", len(quiet), len(loud))
}
