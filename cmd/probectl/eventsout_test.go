package main

import (
	"context"
	"fmt"
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

// TestRotatingFile: lines are never split across files, whatever chunks
// the writer is given; no file passes the size unless one line does; keep
// bounds the rotated files; a file that ended inside a line is finished
// first.
func TestRotatingFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ev.ndjson")
	if err := os.WriteFile(path, []byte(`{"cut":`), 0o640); err != nil {
		t.Fatal(err)
	}
	r, err := openRotating(path, 100, 3)
	if err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	for i := range 40 {
		fmt.Fprintf(&all, `{"n":%d}`+"\n", i)
	}
	long := strings.Repeat("x", 150) + "\n"
	all.WriteString(long)
	all.WriteString(`{"n":"last"}` + "\n")
	// In chunks of 7 bytes: lines arrive cut.
	text := all.String()
	for i := 0; i < len(text); i += 7 {
		if _, err := r.Write([]byte(text[i:min(i+7, len(text))])); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	for _, name := range []string{"ev.ndjson.3", "ev.ndjson.2", "ev.ndjson.1", "ev.ndjson"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > 100 && string(b) != long {
			t.Errorf("%s: %d bytes, more than 100", name, len(b))
		}
		if len(b) == 0 || b[len(b)-1] != '\n' {
			t.Errorf("%s does not end a line: %q", name, b)
		}
		got.Write(b)
	}
	if _, err := os.Stat(filepath.Join(dir, "ev.ndjson.4")); !os.IsNotExist(err) {
		t.Errorf("ev.ndjson.4: %v, want it removed (keep 3)", err)
	}
	if !strings.HasSuffix(text, got.String()) || !strings.HasSuffix(got.String(), long+`{"n":"last"}`+"\n") {
		t.Errorf("the files hold %q, not the end of what was written", got.String())
	}

	// keep 0: the file starts over.
	path = filepath.Join(t.TempDir(), "ev.ndjson")
	r, err = openRotating(path, 4096, 0)
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		fmt.Fprintf(r, "%s\n", strings.Repeat("y", 99))
	}
	r.Close()
	if b, _ := os.ReadFile(path); len(b) != 2000 {
		t.Errorf("keep 0: %d bytes, want 2000 (the last 20 lines of 100 bytes: files of 40)", len(b))
	}
	if _, err := os.Stat(path + ".1"); !os.IsNotExist(err) {
		t.Errorf("keep 0 made %s.1", path)
	}
}

// TestRotatingFileCutsPartialLine: a file left inside a line (a crash, a
// write that failed) is cut back to its last whole line, never ended with
// a newline into a line of invalid JSON; the last whole line is kept for
// the sink (a record written twice across a kill -9 is written once).
func TestRotatingFileCutsPartialLine(t *testing.T) {
	for _, c := range []struct{ in, last, want string }{
		{"{\"a\":1}\n{\"cut", `{"a":1}`, "{\"a\":1}\n{\"b\":2}\n"},
		{"{\"cut", "", "{\"b\":2}\n"},
		{"{\"a\":1}\n{\"c\":3}\n", `{"c":3}`, "{\"a\":1}\n{\"c\":3}\n{\"b\":2}\n"},
		{"\n\x00\x00\x00", "", "\n{\"b\":2}\n"}, // a power loss's zeros
	} {
		path := filepath.Join(t.TempDir(), "ev")
		os.WriteFile(path, []byte(c.in), 0o640)
		r, err := openRotating(path, 1<<20, 1)
		if err != nil {
			t.Fatal(err)
		}
		if string(r.last) != c.last {
			t.Errorf("%q: last line %q, want %q", c.in, r.last, c.last)
		}
		if want := int64(len(c.in) - strings.LastIndexByte(c.in, '\n') - 1); r.cut != want {
			t.Errorf("%q: cut %d bytes, want %d", c.in, r.cut, want)
		}
		r.Write([]byte("{\"b\":2}\n"))
		if err := r.Close(); err != nil {
			t.Error(err)
		}
		if b, _ := os.ReadFile(path); string(b) != c.want {
			t.Errorf("%q: got %q, want %q", c.in, b, c.want)
		}
	}
}

// TestRotatingFileDiskFull replays a full disk (a 64KiB tmpfs): the write
// that fails removes what it wrote of its line, so the file holds whole
// lines only, exactly the lines whose writes returned; the next line
// written once there is room again follows them.
func TestRotatingFileDiskFull(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount a tmpfs: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	path := filepath.Join(dir, "ev.ndjson")
	r, err := openRotating(path, 1<<20, 1)
	if err != nil {
		t.Fatal(err)
	}
	line := func(i int) string { return fmt.Sprintf(`{"n":%d,"pad":"%s"}`+"\n", i, strings.Repeat("p", 300)) }
	ok := 0
	for ; ok < 10000; ok++ {
		if _, err := r.Write([]byte(line(ok))); err != nil {
			if !strings.Contains(err.Error(), "no space left on device") {
				t.Fatalf("line %d: %v, want ENOSPC", ok, err)
			}
			break
		}
	}
	if ok == 10000 {
		t.Fatal("a 64KiB tmpfs took 3MiB")
	}
	b, _ := os.ReadFile(path)
	var want strings.Builder
	for i := range ok {
		want.WriteString(line(i))
	}
	if string(b) != want.String() {
		t.Fatalf("after the failed write the file holds %d bytes (%q at its end), want the %d lines written (%d bytes)", len(b), b[max(len(b)-40, 0):], ok, want.Len())
	}
	// Room again: the next line follows the last whole one.
	exec.Command("mount", "-o", "remount,size=1m", dir).Run()
	if _, err := r.Write([]byte(line(ok))); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	want.WriteString(line(ok))
	if b, _ := os.ReadFile(path); string(b) != want.String() {
		t.Errorf("after room was made: %d bytes, want %d", len(b), want.Len())
	}
}

// TestRotatingFileRefuses: what -events-out refuses, and that it wrote
// nothing through what it refused. The planted cases replay issue 18: a
// 0666 file another user made, a file another user owns, a directory
// others may write (/tmp itself), and a directory symlink another user
// planted pointing into a root-only directory.
func TestRotatingFileRefuses(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	os.WriteFile(target, []byte("x\n"), 0o600)
	os.Symlink(target, filepath.Join(dir, "link"))
	os.Symlink(filepath.Join(dir, "nothing"), filepath.Join(dir, "dangling"))
	os.Mkdir(filepath.Join(dir, "sub"), 0o700)
	os.Link(target, filepath.Join(dir, "hard"))
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		"link":      "is a symbolic link: refused",
		"dangling":  "is a symbolic link: refused",
		"sub":       "is a directory",
		"hard":      "has 2 hard links: refused",
		"fifo":      "is not a regular file: refused",
		"target/x":  target + " is a symlink or not a directory",
		"missing/x": "its directory: " + dir + "/missing: file does not exist",
		"sub/..":    "not a file name",
	}
	// Mode 0666, root's: anyone may write lines into it.
	os.WriteFile(filepath.Join(dir, "loose"), []byte("x\n"), 0o600)
	os.Chmod(filepath.Join(dir, "loose"), 0o666)
	cases["loose"] = "is writable by other users (mode 0666): refused"
	// A directory others may write: they could plant PATH.1 or PATH.
	os.Mkdir(filepath.Join(dir, "open"), 0o700)
	syscall.Chmod(filepath.Join(dir, "open"), 0o1777)
	cases["open/ev"] = dir + "/open is writable by other users (mode 1777)"
	if os.Geteuid() == 0 {
		// Another user's file, and another user's link to a root-only
		// directory.
		other := filepath.Join(dir, "other")
		os.WriteFile(other, []byte("x\n"), 0o644)
		os.Chown(other, 65534, 65534)
		cases["other"] = "is owned by uid 65534, not by root or by this user: refused"
		private := filepath.Join(dir, "private")
		os.Mkdir(private, 0o700)
		os.Symlink(private, filepath.Join(dir, "planted"))
		os.Lchown(filepath.Join(dir, "planted"), 65534, 65534)
		cases["planted/ev"] = dir + "/planted is a symlink owned by uid 65534"
		defer func() {
			if _, err := os.Lstat(filepath.Join(private, "ev")); !os.IsNotExist(err) {
				t.Errorf("a file was made through another user's link: %v", err)
			}
		}()
	}
	for name, want := range cases {
		r, err := openRotating(dir+"/"+name, 4096, 1)
		if err == nil {
			r.Close()
			t.Errorf("%s: opened", name)
			continue
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", name, err, want)
		}
	}
	for _, name := range []string{"target", "loose", "other"} {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err == nil && string(b) != "x\n" {
			t.Errorf("%s was written: %q", name, b)
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "nothing")); !os.IsNotExist(err) {
		t.Errorf("a dangling symlink's target was made: %v", err)
	}
}

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

// TestSameRecordLine: a record read again after a kill -9 is known by its
// line but for the wall time (another reader's clock sample); a field
// named wall is a field, not the time.
func TestSameRecordLine(t *testing.T) {
	a := `{"type":"event","probe":"tracepoint.p","event":"e","mono_ns":12,"wall":"2026-12-01T00:00:00.000000001Z","fields":{"wall":"x","n":1}}`
	for b, want := range map[string]bool{
		`{"type":"event","probe":"tracepoint.p","event":"e","mono_ns":12,"wall":"2026-12-01T00:00:00.000000009Z","fields":{"wall":"x","n":1}}`: true,
		`{"type":"event","probe":"tracepoint.p","event":"e","mono_ns":13,"wall":"2026-12-01T00:00:00.000000001Z","fields":{"wall":"x","n":1}}`: false,
		`{"type":"event","probe":"tracepoint.p","event":"e","mono_ns":12,"wall":"2026-12-01T00:00:00.000000001Z","fields":{"wall":"y","n":1}}`: false,
		`{"type":"summary","events":1}`: false,
	} {
		if got := sameRecordLine([]byte(a), []byte(b)); got != want {
			t.Errorf("%s: %v, want %v", b, got, want)
		}
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
		missingTool(t, "gcc is missing: the workload is built with gcc")
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
