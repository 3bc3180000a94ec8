package main

import (
	"bytes"
	"github.com/probectl/probectl/internal/testenv"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal: the controller, whose reads are what
// the terminal shows, and the terminal (the /dev/pts file) to write to.
func openPTY(t *testing.T) (ctl, tty *os.File) {
	t.Helper()
	ctl, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		testenv.Absent(t, "no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { ctl.Close() })
	if err := unix.IoctlSetPointerInt(int(ctl.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(int(ctl.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	tty, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tty.Close() })
	return ctl, tty
}

// onTerminal runs probectl with stdout and stderr on a pseudo-terminal
// and returns what the terminal showed.
func onTerminal(t *testing.T, args ...string) string {
	t.Helper()
	ctl, tty := openPTY(t)
	shown := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(ctl) // EIO once the terminal side is closed
		shown <- b
	}()
	run(args, tty, tty)
	tty.Close()
	return string(<-shown)
}

const sgr = "\x1b["

// Plans and diagnostics are coloured as terraform's on a terminal: +
// green, errors red; not with -no-color, NO_COLOR (any value, even
// empty) or -json, and never when the output is not a terminal.
func TestColorsOnTerminal(t *testing.T) {
	quickstart := filepath.Join("..", "..", "examples", "quickstart.hcl")
	plan := []string{"plan", "-target", "linux-7.2-amd64", quickstart}
	got := onTerminal(t, plan...)
	if !strings.Contains(got, "\x1b[32m+\x1b[0m probe \"kernel\" \"vfs_latency\" {") {
		t.Errorf("no green + on a terminal:\n%q", got)
	}
	bad := filepath.Join(t.TempDir(), "bad.hcl")
	if err := os.WriteFile(bad, []byte("probe \"kernel\" \"p\" {\n  functions = 1\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := onTerminal(t, "validate", bad); !strings.Contains(got, ": \x1b[31merror\x1b[0m: ") {
		t.Errorf("no red error on a terminal:\n%q", got)
	}
	warn := filepath.Join(t.TempDir(), "warn.hcl")
	if err := os.WriteFile(warn, []byte("probe \"kernel\" \"p\" {\n  functions = [\"vfs_read\"]\n  entry_data_size = 16\n  on_entry {\n    count \"c\" {}\n  }\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := onTerminal(t, "validate", warn); !strings.Contains(got, ": \x1b[33mwarning\x1b[0m: Entry data without an exit handler") {
		t.Errorf("no yellow warning on a terminal:\n%q", got)
	}
	if got := onTerminal(t, "plan", "-target", "linux-9.9-amd64", quickstart); !strings.Contains(got, "\x1b[31mError:\x1b[0m ") {
		t.Errorf("no red Error: on a terminal:\n%q", got)
	}

	for name, args := range map[string][]string{
		"-no-color": append([]string{"-no-color"}, plan...),
		"-json":     append(append([]string{}, plan...), "-json"),
	} {
		if got := onTerminal(t, args...); strings.Contains(got, sgr) || !strings.Contains(got, "vfs_latency") {
			t.Errorf("%s: colours on a terminal, or no plan:\n%q", name, got)
		}
	}
	t.Setenv("NO_COLOR", "")
	if got := onTerminal(t, plan...); strings.Contains(got, sgr) || !strings.Contains(got, "vfs_latency") {
		t.Errorf("NO_COLOR: colours on a terminal:\n%q", got)
	}
	os.Unsetenv("NO_COLOR")

	var out, errw bytes.Buffer
	run(plan, &out, &errw)
	run([]string{"validate", bad}, &out, &errw)
	if strings.Contains(out.String()+errw.String(), sgr) || !strings.Contains(errw.String(), ": error: ") {
		t.Errorf("colours in a pipe:\n%q\n%q", out.String(), errw.String())
	}
}
