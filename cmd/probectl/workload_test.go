package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The tests' workloads (testdata/*/*.c) share one protocol: started, a
// workload prints "ready PID" and waits on its stdin; told "go", it makes
// its known calls, prints "done" and waits again (or exits, by mode);
// stdin closed, it exits. buildWorkload and startWorkload are the one
// place that builds and drives them.

// buildWorkload runs gcc with args (the flags and the source, libraries
// after it) to build name in a directory of the test's own; name is the
// process's comm, so tests filter on it.
func buildWorkload(t *testing.T, name string, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Fatal("gcc (the tests build their workloads with it; .ci/run installs it)")
	}
	path := filepath.Join(t.TempDir(), name)
	if out, err := exec.Command("gcc", append(args, "-o", path)...).CombinedOutput(); err != nil {
		t.Fatalf("gcc %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return path
}

// workload is one started workload process, past its ready line.
type workload struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	pid   int
}

// startWorkload starts cmd (on one CPU when cpu >= 0: pinned from its
// first instruction) and reads its ready line; the process is killed when
// the test ends if it has not been reaped.
func startWorkload(t *testing.T, cpu int, cmd *exec.Cmd) *workload {
	t.Helper()
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if cpu < 0 {
		err = cmd.Start()
	} else {
		err = startOn(t, cpu, cmd)
	}
	if err != nil {
		t.Fatal(err)
	}
	w := &workload{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
	t.Cleanup(w.kill)
	line, err := w.out.ReadString('\n')
	if !strings.HasPrefix(line, "ready ") {
		t.Fatalf("workload %s %v: no ready line (%q, %v)", filepath.Base(cmd.Path), cmd.Args[1:], line, err)
	}
	fmt.Sscanf(line, "ready %d", &w.pid)
	return w
}

// startOn starts cmd pinned to cpu: the child inherits the CPUs of the
// thread that forks it.
func startOn(t *testing.T, cpu int, cmd *exec.Cmd) error {
	t.Helper()
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	var old, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		t.Fatal(err)
	}
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	err := cmd.Start()
	if err := unix.SchedSetaffinity(0, &old); err != nil {
		t.Fatal(err)
	}
	return err
}

// work tells the workload to work and waits for its done line; it
// returns the lines the workload printed before it.
func (w *workload) work(t *testing.T) (said []string) {
	t.Helper()
	io.WriteString(w.stdin, "go\n")
	for {
		l, err := w.out.ReadString('\n')
		if l == "done\n" {
			return said
		}
		if err != nil {
			t.Fatalf("workload %v: %v after %q, not done", w.cmd.Args[1:], err, said)
		}
		said = append(said, strings.TrimSuffix(l, "\n"))
	}
}

// workExit tells a workload that exits after its work to work, and reaps
// it.
func (w *workload) workExit(t *testing.T) {
	t.Helper()
	io.WriteString(w.stdin, "go\n")
	if err := w.cmd.Wait(); err != nil {
		t.Fatalf("workload %v: %v", w.cmd.Args[1:], err)
	}
}

// end closes the workload's stdin and waits for its exit, which must be
// clean.
func (w *workload) end(t *testing.T) {
	t.Helper()
	w.stdin.Close()
	if err := w.cmd.Wait(); err != nil {
		t.Fatalf("workload %v: %v", w.cmd.Args[1:], err)
	}
}

// kill ends the workload however it is, unless it has been reaped.
func (w *workload) kill() {
	w.stdin.Close()
	if w.cmd.ProcessState == nil {
		w.cmd.Process.Kill()
		w.cmd.Wait()
	}
}
