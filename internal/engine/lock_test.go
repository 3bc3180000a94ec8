package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Every caller of the apply path waits for the workspace's lock the same
// way and says so where its user looks. The node agent's applier once
// had a path of its own for Destroy, which printed its wait on stderr (a
// command's place) instead of the agent's log; the directory agent's
// logged it. This holds the lock of a workspace and has each engine
// caller wait for it: the wait is one log line naming the workspace,
// nothing goes to stderr, and the timeout is the workspace's.
func TestLockWaitIsLogged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("locking a workspace needs root: the state directory must be root's")
	}
	for _, c := range []struct {
		name string
		wait func(ws Workspace, log *slog.Logger) error
	}{
		{"kube destroy", func(ws Workspace, log *slog.Logger) error {
			return NewKubeApplier(ws, log, 10).Destroy(context.Background(), ws.Name)
		}},
		{"kube apply", func(ws Workspace, log *slog.Logger) error {
			_, err := NewKubeApplier(ws, log, 10).Apply(context.Background(), ws.Name, types.NamespacedName{Namespace: "probectl-system", Name: "p"},
				map[string][]byte{"a.hcl": []byte("probe \"tracepoint\" \"lockwait\" {\n  event = \"syscalls:sys_enter_getppid\"\n  on_entry {\n    count \"calls\" {}\n  }\n}\n")})
			return err
		}},
		{"directory agent destroy", func(ws Workspace, log *slog.Logger) error {
			return NewDir(DirOptions{Workspace: ws, Log: log}).Destroy()
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			state := t.TempDir()
			ws := Workspace{StateDir: state, Name: fmt.Sprintf("lockwait-%d", os.Getpid()), LockTimeout: 300 * time.Millisecond}
			dir := filepath.Join(state, ws.Name)
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			d, err := os.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			if err := syscall.Flock(int(d.Fd()), syscall.LOCK_EX); err != nil {
				t.Fatal(err)
			}
			var logged strings.Builder
			log := slog.New(slog.NewJSONHandler(&logged, nil))
			stderr := captureStderr(t)
			err = c.wait(ws, log)
			said := stderr()
			if err == nil || !strings.Contains(err.Error(), "lockwait") {
				t.Errorf("error %v, want the lock's timeout naming the workspace", err)
			}
			if said != "" {
				t.Errorf("stderr got %q; an agent's place is its log", said)
			}
			waits := 0
			for _, line := range strings.Split(strings.TrimSpace(logged.String()), "\n") {
				if line == "" {
					continue
				}
				var rec map[string]any
				if err := json.Unmarshal([]byte(line), &rec); err != nil {
					t.Fatalf("log line %q: %v", line, err)
				}
				if rec["msg"] == "waiting for the workspace" {
					waits++
					if rec["timeout"] != "300ms" {
						t.Errorf("the wait's timeout %v, want 300ms", rec["timeout"])
					}
				}
			}
			if waits != 1 {
				t.Errorf("%d log lines of the wait, want 1:\n%s", waits, logged.String())
			}
		})
	}
}

// captureStderr points os.Stderr at a pipe until the returned function
// is called, which gives what was written.
func captureStderr(t *testing.T) func() string {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stderr
	os.Stderr = w
	got := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		got <- string(b)
	}()
	return func() string {
		os.Stderr = old
		w.Close()
		s := <-got
		r.Close()
		return s
	}
}
