package main

import (
	"context"
	"fmt"
	"github.com/probectl/probectl/internal/testenv"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/probectl/probectl/runtime"
)

// TestSlogLines: each notice line is one log record.
func TestSlogLines(t *testing.T) {
	var b strings.Builder
	w := slogLines{slog.New(slog.NewJSONHandler(&b, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))}
	fmt.Fprintln(w, "The event buffer was removed: waiting for the next one.")
	fmt.Fprint(w, "a\nb\n")
	want := `{"level":"INFO","msg":"The event buffer was removed: waiting for the next one.","component":"events-out"}
{"level":"INFO","msg":"a","component":"events-out"}
{"level":"INFO","msg":"b","component":"events-out"}
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

const prioWork = `#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
/* getpriority(99, FROM + i) for i < N: which = 99 is no PRIO_*. */
int main(int argc, char **argv) {
	long from = atol(argv[1]), n = atol(argv[2]);
	for (long i = 0; i < n; i++)
		syscall(SYS_getpriority, 99, from + i);
	return 0;
}
`

// TestAgentEventsOut: probectl agent -events-out writes the events of the
// specs it applies, exactly: 37 calls, 37 event lines in order, then the
// summary when it stops; its notices are log records.
func TestAgentEventsOut(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("applying probes needs root")
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("the workload is built with gcc")
	}
	dir := t.TempDir()
	comm := fmt.Sprintf("agev%d", os.Getpid()%1000000)
	work := buildC(t, dir, comm, prioWork)
	specs := filepath.Join(dir, "specs")
	os.Mkdir(specs, 0o700)
	spec := fmt.Sprintf(`probe "tracepoint" "prio" {
  event = "syscalls:sys_enter_getpriority"
  on_entry {
    event "p" {
      when   = comm == %q
      fields = { who = args.who }
    }
  }
}
`, comm)
	if err := os.WriteFile(filepath.Join(specs, "prio.hcl"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	ws := fmt.Sprintf("agent-ev-%d", os.Getpid())
	t.Cleanup(func() {
		run([]string{"-state-dir", state, "-workspace", ws, "destroy", "-auto-approve"}, io.Discard, io.Discard)
	})
	events := filepath.Join(dir, "events.ndjson")
	a := startAgent(t, state, ws, specs, "-events-out", events, "-events-max-size", "4KiB", "-events-keep", "20")
	a.waitStatus("the spec applied", func(s agentStatus) bool { return probesOf(s) == "tracepoint.prio" })
	// The sink opens the buffer the apply made (it polls for it).
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(a.log.String(), "Reading the events of workspace") {
		if time.Now().After(deadline) {
			t.Fatalf("the sink did not open the buffer:\n%s", a.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if out, err := exec.Command(work, "0", "37").CombinedOutput(); err != nil {
		t.Fatalf("workload: %v\n%s", err, out)
	}
	read := func() []string {
		var lines []string
		for k := 20; k >= 0; k-- {
			name := events
			if k > 0 {
				name = fmt.Sprintf("%s.%d", events, k)
			}
			b, err := os.ReadFile(name)
			if err != nil {
				continue
			}
			lines = append(lines, strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")...)
		}
		return lines
	}
	for {
		if n := strings.Count(strings.Join(read(), "\n"), `"type":"event"`); n >= 37 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := a.signal(syscall.SIGTERM); err != nil {
		t.Errorf("agent on SIGTERM: %v\n%s", err, a.log)
	}
	lines := read()
	for i, l := range lines {
		var want string
		if i < 37 {
			want = fmt.Sprintf(`"fields":{"who":%d}}`, i)
		} else {
			want = `{"type":"summary","events":37,"undecodable":0,"skipped":0,"dropped":{"tracepoint.prio":0},"dropped_before":{"tracepoint.prio":0}}`
		}
		if !strings.HasSuffix(l, want) || i < 37 && !strings.HasPrefix(l, `{"type":"event","probe":"tracepoint.prio","event":"p",`) {
			t.Errorf("line %d: %s, want ...%s", i+1, l, want)
		}
	}
	if len(lines) != 38 {
		t.Errorf("%d lines, want 37 events and the summary", len(lines))
	}
	if _, err := os.Stat(events + ".1"); err != nil {
		t.Errorf("no rotation at 4KiB: %v", err)
	}
	if !strings.Contains(a.log.String(), `"component":"events-out"`) {
		t.Errorf("the sink's notices are not log records:\n%s", a.log)
	}
}

// TestEventSinkSkipsRepeated replays a sink killed between writing lines
// and consuming their records: the records are still in the buffer, and
// the file ends with their lines. The next sink consumes them without
// writing them again, and writes the rest: each event once, in order.
func TestEventSinkSkipsRepeated(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("applying probes needs root")
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		testenv.Absent(t, "gcc is missing: the workload is built with gcc")
	}
	dir := t.TempDir()
	comm := fmt.Sprintf("evrep%d", os.Getpid()%1000000)
	work := buildC(t, dir, comm, prioWork)
	spec := filepath.Join(dir, "prio.hcl")
	os.WriteFile(spec, []byte(fmt.Sprintf(`probe "tracepoint" "prio" {
  event = "syscalls:sys_enter_getpriority"
  on_entry {
    event "p" {
      when   = comm == %q
      fields = { who = args.who }
    }
  }
}
`, comm)), 0o644)
	g := &globals{stateDir: filepath.Join(dir, "state"), workspace: fmt.Sprintf("ev-rep-%d", os.Getpid())}
	ws := []string{"-state-dir", g.stateDir, "-workspace", g.workspace}
	var out strings.Builder
	if code := run(append(ws, "apply", "-auto-approve", spec), &out, &out); code != 0 {
		t.Fatalf("apply: %d\n%s", code, &out)
	}
	t.Cleanup(func() { run(append(ws, "destroy", "-auto-approve"), io.Discard, io.Discard) })
	if out, err := exec.Command(work, "0", "10").CombinedOutput(); err != nil {
		t.Fatalf("workload: %v\n%s", err, out)
	}
	// The sink killed: it wrote 4 lines, and consumed nothing.
	w, err := runtime.Open(g.stateDir, g.workspace)
	if err != nil {
		t.Fatal(err)
	}
	s, err := w.Inspect()
	if err != nil {
		t.Fatal(err)
	}
	st, err := w.OpenEvents(s)
	if err != nil {
		t.Fatal(err)
	}
	st.HoldRecords()
	var written strings.Builder
	for range 4 {
		rec, err := st.Next(time.Now().Add(10 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := rec.MarshalJSON()
		written.Write(append(b, '\n'))
	}
	st.Close()
	w.Close()
	path := filepath.Join(dir, "events.ndjson")
	os.WriteFile(path, []byte(written.String()), 0o640)

	var errs strings.Builder
	sink, err := startEventSink(context.Background(), g, &eventsOutFlags{out: path, maxSize: "1MiB", keep: 1}, io.Discard, &errs)
	if err != nil {
		t.Fatal(err)
	}
	if err := sink.Stop(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errs.String(), "The first 4 records in the buffer were written before") {
		t.Errorf("no notice of the records skipped:\n%s", &errs)
	}
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	for i, l := range lines {
		want := fmt.Sprintf(`"fields":{"who":%d}}`, i)
		if i == 10 {
			want = `{"type":"summary","events":6,"undecodable":0,"skipped":0,"dropped":{"tracepoint.prio":0},"dropped_before":{"tracepoint.prio":0}}`
		}
		if !strings.HasSuffix(l, want) {
			t.Errorf("line %d: %s, want ...%s", i+1, l, want)
		}
	}
	if len(lines) != 11 {
		t.Errorf("%d lines, want the 10 events once each and the summary:\n%s", len(lines), b)
	}
}
