package eventfile

import (
	"fmt"
	"os"
	"os/exec"
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
	r, err := Open(path, 100, 3)
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
	r, err = Open(path, 4096, 0)
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
		r, err := Open(path, 1<<20, 1)
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
	r, err := Open(path, 1<<20, 1)
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
		r, err := Open(dir+"/"+name, 4096, 1)
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
