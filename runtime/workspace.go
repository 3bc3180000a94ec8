package runtime

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Defaults for where state and pins live.
const (
	DefaultStateDir  = "/var/lib/probectl"
	DefaultWorkspace = "default"
	BPFFS            = "/sys/fs/bpf"
	// PinRoot is probectl's directory in bpffs: root-owned, mode 0700.
	PinRoot = BPFFS + "/probectl"
)

// ErrLocked is returned when another probectl holds the workspace.
var ErrLocked = errors.New("workspace is locked")

// Workspace is one independent set of applied probes: a state file under
// StateDir/NAME/ and pins under PinRoot/NAME/.
//
// The pins are machine-wide, so the workspace's identity lives with them:
// a frozen "identity" map holding the lineage of the state that owns them.
// A state of another lineage never changes them. Writers lock both the
// state's directory and the pins' directory (flock on the directories
// themselves: no lock file).
type Workspace struct {
	Name     string
	StateDir string
	// LockTimeout is how long to wait for another writer; 0 fails at once.
	LockTimeout time.Duration
	// Waiting, when set, is told once that Lock waits for holder (a PID).
	Waiting func(holder string)
	// Symbols say where show finds the files of user stacks.
	Symbols SymbolOptions

	// fault, when set (tests), is called before every step that changes the
	// kernel or the state; an error makes that step fail.
	fault func(step string) error
	// observe, when set (tests), is told of every kernel object created.
	observe func(kind string, id uint32)

	state  *dir // StateDir/NAME, while locked
	pins   *dir // PinRoot/NAME: while locked, or opened read-only
	locked bool
}

// Open returns a workspace. It checks the name and changes nothing.
func Open(stateDir, name string) (*Workspace, error) {
	if !isWorkspaceName(name) {
		return nil, fmt.Errorf("workspace %q: a workspace name is 1 to 64 letters, digits, '-' and '_', starting with a letter or digit", name)
	}
	if stateDir == "" {
		stateDir = DefaultStateDir
	}
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		return nil, err
	}
	return &Workspace{Name: name, StateDir: abs}, nil
}

func (w *Workspace) dir() string { return filepath.Join(w.StateDir, w.Name) }

// PinDir is where the workspace's objects are pinned.
func (w *Workspace) PinDir() string { return filepath.Join(PinRoot, w.Name) }

// Lock takes the workspace for writing: it opens (creating, mode 0700) the
// state directory and the pin directory, refusing any that a symlink, another
// user or loose permissions could redirect, and locks both, waiting up to
// LockTimeout. The error for a held lock names the holder's PID.
func (w *Workspace) Lock() error {
	if w.locked {
		return errors.New("workspace already locked")
	}
	root, err := openPath(w.StateDir, true)
	if err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	st, err := root.sub(w.Name, true, trustPrivate)
	root.close()
	if err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	if err := w.flock(st); err != nil {
		st.close()
		return err
	}
	pins, err := w.lockPins()
	if err != nil {
		st.close()
		return err
	}
	w.state, w.pins, w.locked = st, pins, true
	return nil
}

// lockPins opens the pin directory and locks it. The holder it waited for
// may have released the workspace and removed the directory it locked:
// then it locks the new one.
func (w *Workspace) lockPins() (*dir, error) {
	for {
		pins, err := openPins(w.Name, true)
		if err != nil {
			return nil, err
		}
		if err := w.flock(pins); err != nil {
			pins.close()
			return nil, err
		}
		var fst unix.Stat_t
		if err := unix.Fstat(pins.fd, &fst); err == nil && fst.Nlink == 0 {
			pins.close()
			continue
		}
		return pins, nil
	}
}

// private makes a workspace directory reachable by its owner alone: anyone
// who can open it could flock it, and hold the workspace for ever.
func private(d *dir) error {
	var st unix.Stat_t
	if err := unix.Fstat(d.fd, &st); err != nil {
		return err
	}
	if st.Mode&0o077 == 0 {
		return nil
	}
	if st.Uid == uint32(os.Geteuid()) {
		return unix.Fchmod(d.fd, 0o700)
	}
	return fmt.Errorf("%s can be opened by other users (mode %04o), who could hold its lock: run chmod 0700 %s", d.path, st.Mode&0o7777, d.path)
}

func (w *Workspace) flock(d *dir) error {
	if err := private(d); err != nil {
		return err
	}
	err := d.flock(w.LockTimeout, func() {
		if w.Waiting != nil {
			w.Waiting(d.lockHolder())
		}
	})
	if errors.Is(err, errWouldBlock) {
		return fmt.Errorf("%w: workspace %q is held by %s; wait for it, or retry with -lock-timeout", ErrLocked, w.Name, d.lockHolder())
	}
	return err
}

// Unlock releases the workspace. A workspace whose pins hold no probe
// (after destroy, a failed first apply, a command that did nothing) gives
// up its pin directory and identity: bpffs lists only workspaces in use.
func (w *Workspace) Unlock() {
	if w.locked {
		w.release()
	}
	w.state.close()
	w.pins.close()
	w.state, w.pins, w.locked = nil, nil, false
}

// openPins opens PinRoot/name. With create (writers) bpffs is mounted when
// missing and the directories are created; without it (readers) nothing
// changes and a missing directory is nil, no error.
func openPins(name string, create bool) (*dir, error) {
	root, err := openPinRoot(create)
	if root == nil || err != nil {
		return nil, err
	}
	defer root.close()
	d, err := root.sub(name, create, trustPrivate)
	if readerFindsNone(err, create) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pin directory: %w", err)
	}
	return d, nil
}

// openPinRoot opens PinRoot as openPins does: for a reader (not create),
// nil when bpffs or the root is missing.
func openPinRoot(create bool) (*dir, error) {
	if create {
		if err := mountBPFFS(); err != nil {
			return nil, err
		}
	}
	// /sys/fs/bpf is often mode 1777: like /tmp, fine above ours.
	fs, err := openPathTrust(BPFFS, false, trustAncestor)
	if readerFindsNone(err, create) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("bpffs: %w", err)
	}
	defer fs.close()
	if !isBPFFS(fs) {
		if !create {
			return nil, nil
		}
		return nil, fmt.Errorf("%s is not a bpffs mount", BPFFS)
	}
	root, err := fs.sub("probectl", create, trustPrivate)
	if readerFindsNone(err, create) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pin root: %w", err)
	}
	return root, nil
}

// readerFindsNone says err is a missing directory met by a reader (not
// create): no pins, no error.
func readerFindsNone(err error, create bool) bool {
	return !create && errors.Is(err, os.ErrNotExist)
}

// isBPFFS says d is on a bpffs mount.
func isBPFFS(d *dir) bool {
	var sfs unix.Statfs_t
	return unix.Fstatfs(d.fd, &sfs) == nil && sfs.Type == unix.BPF_FS_MAGIC
}

// mountBPFFS mounts bpffs at /sys/fs/bpf when it is not mounted.
func mountBPFFS() error {
	var st unix.Statfs_t
	if err := unix.Statfs(BPFFS, &st); err == nil && st.Type == unix.BPF_FS_MAGIC {
		return nil
	}
	if err := unix.Mount("bpf", BPFFS, "bpf", 0, "mode=0700"); err != nil && !errors.Is(err, unix.EBUSY) {
		return fmt.Errorf("mount bpffs on %s: %w", BPFFS, err)
	}
	return nil
}

// step runs the fault hook.
func (w *Workspace) step(format string, args ...any) error {
	if w.fault == nil {
		return nil
	}
	return w.fault(fmt.Sprintf(format, args...))
}

func (w *Workspace) created(kind string, id uint32) {
	if w.observe != nil {
		w.observe(kind, id)
	}
}

// identity is what the workspace's pin directory says about its owner.
type identity struct {
	Lineage   string    `json:"lineage"`
	StateDir  string    `json:"state_dir"`
	Workspace string    `json:"workspace"`
	CreatedAt time.Time `json:"created_at"`
}

const identityPin = "identity"

func readIdentity(d *dir) (*identity, error) {
	if d == nil || !d.exists(identityPin) {
		return nil, nil
	}
	b, err := readBlob(d, identityPin)
	if err != nil {
		return nil, err
	}
	var id identity
	if err := json.Unmarshal(b, &id); err != nil {
		return nil, fmt.Errorf("%s/%s is damaged: %w", d.path, identityPin, err)
	}
	return &id, nil
}

// probeDirs lists the probe directories under d.
func probeDirs(d *dir) ([]string, error) {
	if d == nil {
		return nil, nil
	}
	names, err := d.list()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range names {
		if isProbeDir(n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// OwnerError says that a workspace's pins belong to another state.
type OwnerError struct {
	Workspace string
	PinDir    string
	Owner     *identity // nil: pins of an unknown owner
	StateDir  string
	Lineage   string
}

func (e *OwnerError) Error() string {
	mine := "none"
	if e.Lineage != "" {
		mine = short(e.Lineage)
	}
	if e.Owner == nil {
		return fmt.Sprintf("workspace %q has probes pinned under %s that the state in %s (lineage %s) does not record, and no identity says whose they are; nothing was changed. If their state file was lost, rebuild it with: probectl state recover -workspace %s",
			e.Workspace, e.PinDir, e.StateDir, mine, e.Workspace)
	}
	return fmt.Sprintf("workspace %q belongs to another state: its probes under %s were applied by the state of lineage %s in %s, not by this one (%s, lineage %s); nothing was changed. Use -state-dir %s, pick another -workspace, or, if that state file was lost, rebuild it with: probectl state recover -workspace %s",
		e.Workspace, e.PinDir, short(e.Owner.Lineage), e.Owner.StateDir, e.StateDir, mine, e.Owner.StateDir, e.Workspace)
}

// PinsMissingError says that the probes a state applied in this boot are
// not in the bpffs this process sees.
type PinsMissingError struct {
	Workspace string
	PinDir    string
	Missing   []string
}

func (e *PinsMissingError) Error() string {
	return fmt.Sprintf("workspace %q: the state records %s applied since this machine booted, but %s holds none of their pins: this is another bpffs (a private mount namespace, or bpffs remounted) or they were removed by hand; nothing was changed. Run probectl where the pins are. Only if those probes are truly gone (not alive in another mount namespace: forgotten, they would be removed by the next command that sees them) forget them with: probectl state rm -workspace %s %s",
		e.Workspace, strings.Join(e.Missing, ", "), e.PinDir, e.Workspace, strings.Join(e.Missing, " "))
}

func short(lineage string) string {
	if lineage == "" {
		return "(none)"
	}
	if len(lineage) > 8 {
		return lineage[:8]
	}
	return lineage
}

// claim checks that s owns the workspace's pins: the identity names s's
// lineage, or the pins hold no probes (a new workspace, or one given up),
// or pins from before identities existed are all the state's. It changes
// nothing: Apply writes the identity when it first pins.
func (w *Workspace) claim(s *State) error {
	id, err := readIdentity(w.pins)
	if err != nil {
		return err
	}
	dirs, err := probeDirs(w.pins)
	if err != nil {
		return err
	}
	owned := id.names(s)
	if !owned && len(dirs) > 0 && !adoptable(id, s, dirs) {
		return &OwnerError{Workspace: w.Name, PinDir: w.PinDir(), Owner: id, StateDir: w.dir(), Lineage: s.Lineage}
	}
	if !owned || w.pins == nil {
		return w.checkPinsPresent(s)
	}
	return nil
}

// adoptable says whether pins not owned by s are from before identities
// existed, and s records them: then s adopts them.
func adoptable(id *identity, s *State, dirs []string) bool {
	if id != nil || s.Lineage == "" {
		return false
	}
	recorded := s.recordedDirs()
	for _, d := range dirs {
		if recorded[d] {
			return true
		}
	}
	return false
}

// checkPinsPresent refuses, to a writer, a state whose probes of this boot
// have no pins; readers report them as drift.
func (w *Workspace) checkPinsPresent(s *State) error {
	boot := bootID()
	var missing []string
	for _, p := range s.Probes {
		if p.BootID == boot && (w.pins == nil || !w.pins.exists(p.PinDir)) {
			missing = append(missing, p.Address.String())
		}
	}
	if len(missing) == 0 || !w.locked {
		return nil
	}
	return &PinsMissingError{Workspace: w.Name, PinDir: w.PinDir(), Missing: missing}
}

// ensureIdentity makes the workspace's pins s's before Apply pins anything:
// a state never written gets its lineage, committed first (a crash before
// the apply's own commit then leaves pins a state of the same lineage does
// not record, which Repair removes; a state file lost later, with no
// lineage, never owns them), and the identity is written. t undoes the
// identity if the apply fails.
func (w *Workspace) ensureIdentity(t *txn, s *State) error {
	id, err := readIdentity(w.pins)
	if err != nil {
		return err
	}
	if id.names(s) {
		return nil
	}
	if s.Lineage == "" {
		s.Lineage = newLineage()
		if err := w.commit(s); err != nil {
			return err
		}
	}
	return w.writeIdentity(t, s, id)
}

// names says the identity (nil when none is pinned) names s's lineage.
func (id *identity) names(s *State) bool {
	return id != nil && s.Lineage != "" && id.Lineage == s.Lineage
}

// writeIdentity pins s's identity in place of old, another lineage's or
// nil; t undoes it.
func (w *Workspace) writeIdentity(t *txn, s *State, old *identity) error {
	if err := w.step("write identity"); err != nil {
		return err
	}
	if old != nil { // another lineage's, over no probes: claim checked
		if err := w.pins.removeAll(identityPin); err != nil {
			return err
		}
	}
	b, _ := json.Marshal(identity{Lineage: s.Lineage, StateDir: w.StateDir, Workspace: w.Name, CreatedAt: time.Now().UTC().Truncate(time.Second)})
	mid, err := pinBlob(w.pins, identityPin, "probectl.ident", b)
	if err != nil {
		return fmt.Errorf("workspace identity: %w", err)
	}
	w.created("identity", uint32(mid))
	t.onUndo(func() { _ = w.pins.removeAll(identityPin) })
	return nil
}

// Begin locks the workspace, reads its state, checks that the state owns
// the pins (claiming a new workspace), and repairs what an interrupted
// command left. It returns what Repair removed. On error nothing is held.
func (w *Workspace) Begin() (*State, []string, error) {
	if err := w.Lock(); err != nil {
		return nil, nil, err
	}
	s, err := w.State()
	if err == nil {
		err = w.claim(s)
	}
	var removed []string
	if err == nil {
		removed, err = w.Repair(s)
	}
	if err != nil {
		w.Unlock()
		return nil, nil, err
	}
	return s, removed, nil
}

// Inspect reads the state for a command that changes nothing (status,
// show, plan): no lock, no repair, no directory created, nothing mounted.
// It fails when the pins belong to another state.
func (w *Workspace) Inspect() (*State, error) {
	if !w.locked {
		w.pins.close()
		pins, err := openPins(w.Name, false)
		if err != nil {
			return nil, err
		}
		w.pins = pins
	}
	s, err := w.State()
	if err != nil {
		return nil, err
	}
	if err := w.claim(s); err != nil {
		return nil, err
	}
	return s, nil
}

// Close releases what Inspect opened.
func (w *Workspace) Close() {
	if !w.locked {
		w.pins.close()
		w.pins = nil
	}
}

// Repair removes what an interrupted apply or destroy left behind: probe
// directories under the workspace's pins that the state does not record
// (their links detach and their maps are freed once unpinned) and stray
// temporary state files. It runs under the lock, after claim; it never
// touches anything outside the workspace's own directories. It returns
// what it removed.
func (w *Workspace) Repair(s *State) ([]string, error) {
	if !w.locked {
		return nil, errors.New("repair needs the workspace lock")
	}
	w.state.removeTemps()
	dirs, err := probeDirs(w.pins)
	if err != nil {
		return nil, err
	}
	var removed []string
	recorded := s.recordedDirs()
	for _, d := range dirs {
		if recorded[d] {
			continue
		}
		if err := w.pins.removeAll(d); err != nil {
			return removed, fmt.Errorf("remove orphaned pins %s: %w", d, err)
		}
		removed = append(removed, d)
	}
	return removed, nil
}

// Leftovers lists the probe directories under the workspace's pins that
// the state does not record: what an interrupted apply left (a process
// killed between pinning and writing the state), its links attached and
// its programs running, until the next apply or destroy repairs it. It
// reads only (no lock); while another command holds the workspace it
// returns nothing, since an apply in progress makes its directories
// before it records them.
func (w *Workspace) Leftovers(s *State) ([]string, error) {
	if w.pins == nil {
		return nil, nil
	}
	if _, held := w.pins.flockHolder(); held && !w.locked {
		return nil, nil
	}
	dirs, err := probeDirs(w.pins)
	if err != nil {
		return nil, err
	}
	var out []string
	recorded := s.recordedDirs()
	for _, d := range dirs {
		if !recorded[d] {
			out = append(out, d)
		}
	}
	return out, nil
}

// bootID identifies this boot of the machine: pins never outlive it. It
// is read once: a process lives in one boot, and an apply of 1,000 probes
// asked for it 1,000 times (4% of its profile, issue 22).
var bootID = sync.OnceValue(func() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
})
