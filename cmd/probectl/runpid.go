package main

import (
	"context"
	"errors"
	"fmt"
	"io"

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
