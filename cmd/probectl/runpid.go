package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// tracedProcess is the process run -p traces: its pid, and a pidfd, which
// names that process and no later one with its pid, and becomes
// readable when it exits.
type tracedProcess struct {
	pid int
	fd  int
}

// openProcess opens the process pid; a pid that names no process is an
// error that says so.
func openProcess(pid int) (*tracedProcess, error) {
	if pid <= 0 || pid > 1<<22 {
		return nil, fmt.Errorf("-p %d: a process ID is between 1 and %d", pid, 1<<22)
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil, fmt.Errorf("-p %d: no such process (ps -e lists the running ones)", pid)
	}
	if err != nil {
		return nil, fmt.Errorf("-p %d: %w", pid, err)
	}
	return &tracedProcess{pid: pid, fd: fd}, nil
}

// watch is ctx ending also when the process exits, which it then says
// on say. The returned stop ends the watch.
func (t *tracedProcess) watch(ctx context.Context, say io.Writer) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		fds := []unix.PollFd{{Fd: int32(t.fd), Events: unix.POLLIN}}
		for ctx.Err() == nil {
			n, err := unix.Poll(fds, 200)
			if errors.Is(err, unix.EINTR) || (err == nil && n == 0) {
				continue
			}
			if err == nil {
				fmt.Fprintf(say, "Process %d exited.\n", t.pid)
			}
			cancel()
			return
		}
	}()
	return ctx, func() {
		cancel()
		<-done
	}
}

// close closes the pidfd.
func (t *tracedProcess) close() { unix.Close(t.fd) }

// heldChild is the command run -c starts: a process that waits, before
// it executes the command, until the probes are attached (as bpftrace
// holds its child on a pipe), so that nothing it does escapes them. Its
// pid is the command's: the wait is a shell's read, and the shell
// executes the command in its place.
type heldChild struct {
	cmd  *exec.Cmd
	gate *os.File // the pipe's write end: a line releases the child, closing it unwritten ends it
}

// childScript waits for a line on fd 3, then executes its arguments
// (found on PATH, as bpftrace -c does); without one it exits 125.
const childScript = `read _ <&3 || exit 125; exec 3<&-; exec "$@"`

// startChild starts command (words, split on blanks as bpftrace does)
// held before it executes.
func startChild(command string, stdout, stderr io.Writer) (*heldChild, error) {
	words := strings.Fields(command)
	if len(words) == 0 {
		return nil, fmt.Errorf("-c: no command given")
	}
	if _, err := exec.LookPath(words[0]); err != nil {
		return nil, fmt.Errorf("-c %s: %w", words[0], err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	c := exec.Command("/bin/sh", append([]string{"-c", childScript, "sh"}, words...)...)
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, stdout, stderr
	c.ExtraFiles = []*os.File{r}
	if err := c.Start(); err != nil {
		w.Close()
		return nil, fmt.Errorf("-c %s: %w", words[0], err)
	}
	return &heldChild{cmd: c, gate: w}, nil
}

// release lets the child execute the command.
func (h *heldChild) release() {
	if h.gate != nil {
		h.gate.Write([]byte("\n"))
		h.gate.Close()
		h.gate = nil
	}
}

// end reaps the child: never released, it exits without executing the
// command; still running (the run ended first), it gets SIGTERM, as
// bpftrace's child does.
func (h *heldChild) end() {
	if h.gate != nil {
		h.gate.Close()
		h.gate = nil
	} else if h.cmd.ProcessState == nil {
		h.cmd.Process.Signal(syscall.SIGTERM)
	}
	h.cmd.Wait()
}
