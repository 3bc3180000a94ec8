package runtime

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/probectl/probectl/bpf"
	"golang.org/x/sys/unix"
)

// Defaults for where state and pins live.
const (
	DefaultStateDir  = "/var/lib/probectl"
	DefaultWorkspace = "default"
	BPFFS            = "/sys/fs/bpf"
)

// ErrLocked is returned when another probectl holds the workspace.
var ErrLocked = errors.New("workspace is locked")

// ErrPermission is returned when probectl lacks the privileges it needs.
var ErrPermission = errors.New("probectl needs root (CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN)")

// Workspace is one independent set of applied probes: a state file under
// StateDir/NAME/ and pins under PinRoot/NAME/.
type Workspace struct {
	Name     string
	StateDir string
	PinRoot  string
	// LockTimeout is how long to wait for another writer; 0 fails at once.
	LockTimeout time.Duration

	// fault, when set (tests), is called before every step that changes the
	// kernel or the state; an error makes that step fail.
	fault func(step string) error

	lock *os.File
}

// Open returns a workspace; it creates its directories but locks nothing.
func Open(stateDir, name string) (*Workspace, error) {
	if !bpf.ValidName(strings.ReplaceAll(name, "-", "_")) {
		return nil, fmt.Errorf("workspace %q: use letters, digits, - and _", name)
	}
	if stateDir == "" {
		stateDir = DefaultStateDir
	}
	w := &Workspace{Name: name, StateDir: stateDir, PinRoot: filepath.Join(BPFFS, "probectl")}
	if err := os.MkdirAll(w.dir(), 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	return w, nil
}

func (w *Workspace) dir() string       { return filepath.Join(w.StateDir, w.Name) }
func (w *Workspace) statePath() string { return filepath.Join(w.dir(), "state.json") }
func (w *Workspace) lockPath() string  { return filepath.Join(w.dir(), "lock") }

// PinDir is where the workspace's objects are pinned.
func (w *Workspace) PinDir() string { return filepath.Join(w.PinRoot, w.Name) }

// State reads the workspace's state without locking.
func (w *Workspace) State() (*State, error) { return readState(w.statePath(), w.Name) }

// Lock takes the workspace's writer lock, waiting up to LockTimeout. The
// lock file names the holder's PID, which the error quotes.
func (w *Workspace) Lock() error {
	f, err := os.OpenFile(w.lockPath(), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	deadline := time.Now().Add(w.LockTimeout)
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return fmt.Errorf("lock: %w", err)
		}
		if time.Now().After(deadline) {
			holder, _ := os.ReadFile(w.lockPath())
			f.Close()
			pid := strings.TrimSpace(string(holder))
			if pid == "" {
				pid = "unknown"
			}
			return fmt.Errorf("%w: workspace %q is held by probectl PID %s; wait for it, or retry with -lock-timeout", ErrLocked, w.Name, pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	w.lock = f
	return nil
}

// Unlock releases the writer lock.
func (w *Workspace) Unlock() {
	if w.lock != nil {
		_ = w.lock.Truncate(0)
		_ = w.lock.Close() // closing drops the flock
		w.lock = nil
	}
}

// step runs the fault hook.
func (w *Workspace) step(format string, args ...any) error {
	if w.fault == nil {
		return nil
	}
	return w.fault(fmt.Sprintf(format, args...))
}

// mountBPFFS mounts bpffs at /sys/fs/bpf when it is not mounted.
func mountBPFFS() error {
	var st unix.Statfs_t
	if err := unix.Statfs(BPFFS, &st); err == nil && st.Type == unix.BPF_FS_MAGIC {
		return nil
	}
	if err := unix.Mount("bpf", BPFFS, "bpf", 0, ""); err != nil && !errors.Is(err, unix.EBUSY) {
		if errors.Is(err, unix.EPERM) {
			return fmt.Errorf("mount bpffs on %s: %w", BPFFS, ErrPermission)
		}
		return fmt.Errorf("mount bpffs on %s: %w", BPFFS, err)
	}
	return nil
}

// Repair removes what an interrupted apply or destroy left behind: pin
// directories the state does not record (their links detach and their maps
// are freed once unpinned) and stray temporary state files. It must run
// under the lock. It returns what it removed.
func (w *Workspace) Repair(s *State) ([]string, error) {
	if err := mountBPFFS(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(w.PinDir(), 0o700); err != nil {
		return nil, fmt.Errorf("pin directory: %w", err)
	}
	known := map[string]bool{}
	for _, p := range s.Probes {
		known[p.PinDir] = true
	}
	entries, err := os.ReadDir(w.PinDir())
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, e := range entries {
		if known[e.Name()] {
			continue
		}
		if err := os.RemoveAll(filepath.Join(w.PinDir(), e.Name())); err != nil {
			return removed, fmt.Errorf("remove orphaned pins %s: %w", e.Name(), err)
		}
		removed = append(removed, e.Name())
	}
	tmps, _ := filepath.Glob(filepath.Join(w.dir(), ".state-*.tmp"))
	for _, t := range tmps {
		_ = os.Remove(t)
	}
	return removed, nil
}
