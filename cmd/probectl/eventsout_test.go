package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
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

// TestRotatingFileFirstLineEnds: a file left inside a line gets the end
// of that line before the next.
func TestRotatingFileFirstLineEnds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ev")
	os.WriteFile(path, []byte("{\"a\":1}\n{\"cut"), 0o640)
	r, err := openRotating(path, 1<<20, 1)
	if err != nil {
		t.Fatal(err)
	}
	r.Write([]byte("{\"b\":2}\n"))
	r.Close()
	if b, _ := os.ReadFile(path); string(b) != "{\"a\":1}\n{\"cut\n{\"b\":2}\n" {
		t.Errorf("got %q", b)
	}
}

// TestRotatingFileRefuses: what -events-out refuses, and that it wrote
// nothing through what it refused.
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
	for name, want := range map[string]string{
		"link":      "is a symbolic link: refused",
		"dangling":  "is a symbolic link: refused",
		"sub":       "is a directory",
		"hard":      "has 2 hard links: refused",
		"fifo":      "is not a regular file: refused",
		"target/x":  "its parent " + target + "/ is not a directory",
		"missing/x": "its directory: no such file or directory",
		"sub/..":    "not a file name",
	} {
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
	if b, _ := os.ReadFile(target); string(b) != "x\n" {
		t.Errorf("the symlink's target was written: %q", b)
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
