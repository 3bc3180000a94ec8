package runtime

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// dir is a directory opened without following symlinks, whose owner and
// mode were checked when it was opened. Every file operation of the runtime
// goes through one, relative to its descriptor, so nothing a local user
// plants (a symlink, a directory of theirs) can redirect it.
type dir struct {
	fd   int
	path string // for messages; never used to reach the directory again
}

// Names that the runtime creates or reads inside a dir are single path
// elements from its own vocabulary; anything else is refused.
func checkName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") || len(name) > 255 {
		return fmt.Errorf("invalid file name %q", name)
	}
	return nil
}

// trust describes who may own a directory and whether others may write to it.
type trust int

const (
	// trustPrivate: owned by root or by us, writable by nobody else.
	trustPrivate trust = iota
	// trustAncestor: as private, but a sticky directory writable by all
	// (/tmp, /sys/fs/bpf) is fine above ours: others cannot rename or
	// remove what they do not own in it.
	trustAncestor
)

func checkDir(st *unix.Stat_t, path string, t trust) error {
	euid := uint32(os.Geteuid())
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("%s is not a directory", path)
	}
	if st.Uid != 0 && st.Uid != euid {
		return fmt.Errorf("%s is owned by uid %d, not by root or by this user: probectl refuses a directory another user controls; remove it or give it to root", path, st.Uid)
	}
	loose := st.Mode&0o022 != 0
	if loose && t == trustAncestor && st.Mode&unix.S_ISVTX != 0 {
		loose = false
	}
	if loose {
		return fmt.Errorf("%s is writable by other users (mode %04o): probectl refuses it, as ssh refuses loose key files; run chmod go-w %s", path, st.Mode&0o7777, path)
	}
	return nil
}

// OpenPrivateDir opens the directory path as the state directory is
// opened (openPath): every element without following a symbolic link (a
// link in the path as given must be root's or this user's), each ancestor
// owned by root or this user and writable by nobody else unless sticky,
// the directory itself owned by root or this user and writable by nobody
// else. It is not made when missing. Files in it are reached through the
// descriptor: serve's -events-out writes there.
func OpenPrivateDir(path string) (*os.File, error) {
	d, err := openPath(path, false)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(d.fd), d.path), nil
}

// CheckPrivateFile checks what fstat said of a file probectl appends to:
// a regular file with one link, owned by root or this user, writable by
// nobody else (a file another user made, or may write, is theirs: it
// could hold lines they forged, or be a name for a file of root's).
func CheckPrivateFile(st *unix.Stat_t, path string) error {
	euid := uint32(os.Geteuid())
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return fmt.Errorf("%s is not a regular file: refused", path)
	case st.Nlink != 1:
		return fmt.Errorf("%s has %d hard links: refused (another name for it could be anything)", path, st.Nlink)
	case st.Uid != 0 && st.Uid != euid:
		return fmt.Errorf("%s is owned by uid %d, not by root or by this user: refused (another user's file could hold lines they wrote); remove it", path, st.Uid)
	case st.Mode&0o022 != 0:
		return fmt.Errorf("%s is writable by other users (mode %04o): refused (they could write lines into it); run chmod go-w %s", path, st.Mode&0o7777, path)
	}
	return nil
}

// openPath opens an absolute directory path one element at a time, never
// following a symlink, and checks every element: ancestors may be sticky
// and world-writable, the directory itself must be private. Symlinks in
// the path as given (an administrator's /var/lib -> /data) are resolved
// first; the resolved path is then checked element by element. With
// create, missing elements are created, mode 0700.
func openPath(path string, create bool) (*dir, error) {
	return openPathTrust(path, create, trustPrivate)
}

// openPathTrust is openPath with the trust the directory itself needs.
func openPathTrust(path string, create bool, final trust) (*dir, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	resolved, missing, err := resolveExisting(abs)
	if err != nil {
		return nil, err
	}
	fd, err := unix.Open("/", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open /: %w", err)
	}
	d := &dir{fd: fd, path: "/"}
	elems := pathElems(resolved)
	if !create && len(missing) > 0 {
		// Check what exists all the same: a loose directory above a
		// missing one is refused, not taken for absence.
		d, err := d.descend(elems, len(elems), trustAncestor)
		if err != nil {
			return nil, err
		}
		d.close()
		return nil, fmt.Errorf("%s: %w", abs, os.ErrNotExist)
	}
	elems = append(elems, missing...)
	d, err = d.descend(elems, len(elems)-len(missing), final)
	if err != nil {
		return nil, err
	}
	if len(elems) == 0 {
		if err := checkOpenDir(d, "/", final); err != nil {
			d.close()
			return nil, err
		}
	}
	d.path = abs
	return d, nil
}

// descend opens the directories elems one below the other from d, which
// it closes, and returns the last (d when elems is empty): each checked
// as an ancestor, the last with trust final, and those from index
// createFrom on created when missing. On an error every one is closed.
func (d *dir) descend(elems []string, createFrom int, final trust) (*dir, error) {
	for i, name := range elems {
		t := trustAncestor
		if i == len(elems)-1 {
			t = final
		}
		next, err := d.sub(name, i >= createFrom, t)
		d.close()
		if err != nil {
			return nil, err
		}
		d = next
	}
	return d, nil
}

// checkOpenDir checks the open directory d, at path, with trust t.
func checkOpenDir(d *dir, path string, t trust) error {
	var st unix.Stat_t
	if err := unix.Fstat(d.fd, &st); err != nil {
		return err
	}
	return checkDir(&st, path, t)
}

// resolveExisting resolves the symlinks of the longest existing prefix of
// abs and returns it with the missing elements after it. A symlink that
// neither root nor this user owns is refused: it is another user's, and
// must not redirect probectl (the kernel's protected_symlinks rule, applied
// whatever the machine's sysctl says).
func resolveExisting(abs string) (string, []string, error) {
	euid := uint32(os.Geteuid())
	rest := pathElems(abs)
	cur := "/"
	for hops := 0; len(rest) > 0; {
		next := filepath.Join(cur, rest[0])
		var st unix.Stat_t
		if err := unix.Lstat(next, &st); err != nil {
			return cur, rest, nil
		}
		if st.Mode&unix.S_IFMT != unix.S_IFLNK {
			cur, rest = next, rest[1:]
			continue
		}
		if st.Uid != 0 && st.Uid != euid {
			return "", nil, fmt.Errorf("%s is a symlink owned by uid %d, not by root or by this user: probectl does not follow another user's link; remove it", next, st.Uid)
		}
		if hops++; hops > 40 {
			return "", nil, fmt.Errorf("%s: too many levels of symlinks", abs)
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", nil, err
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(cur, target)
		}
		cur, rest = "/", append(pathElems(filepath.Clean(target)), rest[1:]...)
	}
	return cur, nil, nil
}

// pathElems are the elements of the clean absolute path p; none for /.
func pathElems(p string) []string {
	if p == "/" {
		return nil
	}
	return strings.Split(strings.Trim(p, "/"), "/")
}

// sub opens the directory name inside d without following a symlink,
// creating it (mode 0700) when create is set and it is missing.
func (d *dir) sub(name string, create bool, t trust) (*dir, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	path := filepath.Join(d.path, name)
	// Ancestors are only passed through: O_PATH needs search permission
	// alone, as a path walk does.
	flags := unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	if t == trustAncestor {
		flags |= unix.O_PATH
	}
	fd, err := unix.Openat(d.fd, name, flags, 0)
	if errors.Is(err, unix.ENOENT) && create {
		if err := unix.Mkdirat(d.fd, name, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
			return nil, fmt.Errorf("create %s: %w", path, err)
		}
		fd, err = unix.Openat(d.fd, name, flags, 0)
	}
	if err != nil {
		return nil, openDirError(path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	if err := checkDir(&st, path, t); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return &dir{fd: fd, path: path}, nil
}

// openDirError says why the directory path did not open: a symlink or
// not a directory (refused), missing (os.ErrNotExist), or err.
func openDirError(path string, err error) error {
	switch {
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
		return fmt.Errorf("%s is a symlink or not a directory: probectl never follows a link it did not make; remove it", path)
	case errors.Is(err, unix.ENOENT):
		return fmt.Errorf("%s: %w", path, os.ErrNotExist)
	}
	return fmt.Errorf("open %s: %w", path, err)
}

// mkdirExcl creates name, failing when it exists: a command removes only
// what it created itself.
func (d *dir) mkdirExcl(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if err := unix.Mkdirat(d.fd, name, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Join(d.path, name), err)
	}
	return nil
}

func (d *dir) close() {
	if d != nil && d.fd >= 0 {
		unix.Close(d.fd)
		d.fd = -1
	}
}

// procPath names d's entry name through /proc/self/fd: the kernel reaches
// the very directory d holds open, whatever happens to its path. It is
// what the bpf(2) pin commands are given.
func (d *dir) procPath(name string) (string, error) {
	if err := checkName(name); err != nil {
		return "", err
	}
	return fmt.Sprintf("/proc/self/fd/%d/%s", d.fd, name), nil
}

// list returns the names in d.
func (d *dir) list() ([]string, error) {
	fd, err := unix.Openat(d.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", d.path, err)
	}
	f := os.NewFile(uintptr(fd), d.path)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", d.path, err)
	}
	return names, nil
}

// exists reports whether name is in d (without following it).
func (d *dir) exists(name string) bool {
	if checkName(name) != nil {
		return false
	}
	var st unix.Stat_t
	return unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil
}

// removeAll removes name and everything below it, never following a
// symlink: a link is removed, not its target.
func (d *dir) removeAll(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	err := unix.Unlinkat(d.fd, name, 0)
	switch {
	case err == nil, errors.Is(err, unix.ENOENT):
		return nil
	case !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM):
		return fmt.Errorf("remove %s: %w", filepath.Join(d.path, name), err)
	}
	return d.removeDir(name)
}

// removeDir removes the directory name: what it holds, then itself.
func (d *dir) removeDir(name string) error {
	fd, err := unix.Openat(d.fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove %s: %w", filepath.Join(d.path, name), err)
	}
	sub := &dir{fd: fd, path: filepath.Join(d.path, name)}
	err = sub.empty()
	sub.close()
	if err != nil {
		return err
	}
	if err := unix.Unlinkat(d.fd, name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("remove %s: %w", filepath.Join(d.path, name), err)
	}
	return nil
}

// empty removes everything in d.
func (d *dir) empty() error {
	names, err := d.list()
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := d.removeAll(n); err != nil {
			return err
		}
	}
	return nil
}

// readFile reads the regular file name, at most limit bytes, without
// following a symlink or blocking on a FIFO.
func (d *dir) readFile(name string, limit int64) ([]byte, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	path := filepath.Join(d.path, name)
	fd, err := unix.Openat(d.fd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) {
		return nil, fmt.Errorf("%s is a symlink: probectl never follows a link it did not make; remove it", path)
	}
	if errors.Is(err, unix.ENOENT) {
		return nil, fmt.Errorf("%s: %w", path, os.ErrNotExist)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	return readLimited(f, path, st.Size(), limit)
}

// readLimited reads f, of size bytes by its stat, to its end: at most limit
// bytes, or an error that it is larger. The buffer is sized from the stat
// (a state file of thousands of probes is megabytes: growing from
// io.ReadAll's 512 bytes costs more than the read), bounded by the limit
// whatever the stat says.
func readLimited(f *os.File, path string, size, limit int64) ([]byte, error) {
	b := make([]byte, 0, min(max(size, 0), limit)+1)
	for {
		n, err := f.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		if int64(len(b)) > limit {
			break
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // the file grew since the stat
		}
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return b, nil
}

// writeFile replaces name atomically: a new temporary file (never an
// existing one, never through a symlink), fsync, rename over name, fsync
// of the directory.
func (d *dir) writeFile(name string, data []byte) error {
	if err := checkName(name); err != nil {
		return err
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := tempPrefix + hex.EncodeToString(rnd[:]) + tempSuffix
	fd, err := unix.Openat(d.fd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("write %s: %w", filepath.Join(d.path, name), err)
	}
	f := os.NewFile(uintptr(fd), tmp)
	ok := false
	defer func() {
		if !ok {
			_ = unix.Unlinkat(d.fd, tmp, 0)
		}
	}()
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", filepath.Join(d.path, name), err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", filepath.Join(d.path, name), err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Join(d.path, name), err)
	}
	if err := unix.Renameat(d.fd, tmp, d.fd, name); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Join(d.path, name), err)
	}
	ok = true
	return unix.Fsync(d.fd)
}

// Temporary files of writeFile: what Repair removes after a crash.
const (
	tempPrefix = ".state-"
	tempSuffix = ".tmp"
)

// removeTemps removes what an interrupted writeFile left.
func (d *dir) removeTemps() {
	names, _ := d.list()
	for _, n := range names {
		if strings.HasPrefix(n, tempPrefix) && strings.HasSuffix(n, tempSuffix) {
			_ = unix.Unlinkat(d.fd, n, 0)
		}
	}
}

// flock takes an exclusive lock on the directory itself, waiting up to
// timeout (waiting is called once if it has to wait); no lock file is
// created, truncated or written.
func (d *dir) flock(timeout time.Duration, waiting func()) error {
	deadline := time.Now().Add(timeout)
	for first := true; ; first = false {
		err := unix.Flock(d.fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return fmt.Errorf("lock %s: %w", d.path, err)
		}
		if !time.Now().Before(deadline) {
			return errWouldBlock
		}
		if first && waiting != nil {
			waiting()
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var errWouldBlock = errors.New("held by another process")

// lockHolder says who holds a flock on d, from /proc/locks: "probectl PID
// 1234", or the holder's command name when it is not probectl.
func (d *dir) lockHolder() string {
	if holder, ok := d.flockHolder(); ok {
		return holder
	}
	return "an unknown process"
}

// flockHolder says who holds a flock on d, from /proc/locks, and whether
// anyone does. It only reads: it never takes the lock, not even briefly.
func (d *dir) flockHolder() (string, bool) {
	var st unix.Stat_t
	if unix.Fstat(d.fd, &st) != nil {
		return "", false
	}
	want := fmt.Sprintf("%02x:%02x:%d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		return "", false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		// 1: FLOCK  ADVISORY  WRITE 1234 00:2a:5678 0 EOF
		if len(f) >= 6 && f[1] == "FLOCK" && f[5] == want {
			comm, _ := os.ReadFile("/proc/" + f[4] + "/comm")
			name := strings.TrimSpace(string(comm))
			if name == "" || strings.HasPrefix(name, "probectl") {
				name = "probectl"
			}
			return fmt.Sprintf("%s PID %s", strconv.Quote(name)[1:len(strconv.Quote(name))-1], f[4]), true
		}
	}
	return "", false
}
