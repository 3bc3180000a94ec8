package eventfile

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/probectl/probectl/runtime"
	"golang.org/x/sys/unix"
)

// File is an append-only file rotated by size, between lines:
// PATH is written until the next line would take it past max, then PATH.N
// is removed, PATH.k renamed PATH.k+1, PATH renamed PATH.1, and a new PATH
// made. A line longer than max has a file of its own. The directory is
// opened as the state directory is (runtime.OpenPrivateDir: no link
// followed, owners and modes checked up to /), and every name is resolved
// in it, never through a symbolic link: PATH is opened with O_NOFOLLOW
// and must be a regular file with one link that only root or this user
// can write (runtime.CheckPrivateFile), a new PATH is made with O_EXCL,
// and renames and removals act on names, not on what they point at.
//
// The file never keeps a line cut short: a write that fails removes what
// it wrote of its last line, and a file that ends inside a line when
// opened (a failed truncate, a crash, a power loss) is cut back to its
// last whole line. The file is fsynced before it is rotated, and when
// closed.
type File struct {
	mu      sync.Mutex
	dir     *os.File
	base    string
	f       int // -1 once closed
	size    int64
	max     int64
	keep    int
	pending []byte // a line not complete yet
	// cut is how many bytes of a line cut short the opening removed;
	// last is the file's last line then (without its newline), when it
	// is at most maxLastLine long.
	cut  int64
	last []byte
	// written counts the bytes given to Write that are in a file as
	// whole lines: a write that fails part way counts the lines before.
	written int64
}

// Written is how many of the bytes given to Write are written as whole
// lines.
func (r *File) Written() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.written
}

const maxLastLine = 1 << 20

// Open opens path for appending (made with mode 0640 if missing),
// cutting a last line that has no end. It refuses a path whose directory
// is not one only root or this user controls, and a path that is a
// symbolic link, a directory or another non-regular file, a file with
// other hard links, or a file another user owns or may write.
func Open(path string, max int64, keep int) (*File, error) {
	dir, base := filepath.Split(path)
	if base == "" || base == "." || base == ".." {
		return nil, fmt.Errorf("%s: not a file name", path)
	}
	if dir == "" {
		dir = "."
	}
	df, err := runtime.OpenPrivateDir(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: its directory: %w", path, err)
	}
	r := &File{dir: df, base: base, f: -1, max: max, keep: keep}
	fd, err := unix.Openat(r.dirfd(), base, unix.O_RDWR|unix.O_APPEND|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0o640)
	if err != nil {
		df.Close()
		switch {
		case errors.Is(err, unix.ELOOP):
			return nil, fmt.Errorf("%s is a symbolic link: refused (name the file itself)", path)
		case errors.Is(err, unix.EISDIR):
			return nil, fmt.Errorf("%s is a directory: name a file in it", path)
		case errors.Is(err, unix.ENXIO):
			return nil, fmt.Errorf("%s is not a regular file: refused", path)
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	r.f = fd
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		r.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := runtime.CheckPrivateFile(&st, path); err != nil {
		r.Close()
		return nil, err
	}
	r.size = st.Size
	if err := r.cutPartial(); err != nil {
		r.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

func (r *File) dirfd() int { return int(r.dir.Fd()) }

// cutPartial truncates the file back to the end of its last whole line
// and reads that line.
func (r *File) cutPartial() error {
	end, err := lineEnd(r.f, r.size)
	if err != nil {
		return err
	}
	if end < r.size {
		if err := unix.Ftruncate(r.f, end); err != nil {
			return fmt.Errorf("remove the line cut short at its end: %w", err)
		}
		r.cut, r.size = r.size-end, end
	}
	if end == 0 {
		return nil
	}
	from, err := lineEnd(r.f, end-1)
	if err != nil || end-1-from > maxLastLine {
		return err
	}
	r.last = make([]byte, end-1-from)
	_, err = unix.Pread(r.f, r.last, from)
	return err
}

// lineEnd is the offset just past the last newline in fd's first size
// bytes (0 without one).
func lineEnd(fd int, size int64) (int64, error) {
	buf := make([]byte, 64<<10)
	for end := size; end > 0; {
		start := max(end-int64(len(buf)), 0)
		b := buf[:end-start]
		if n, err := unix.Pread(fd, b, start); err != nil || n != len(b) {
			return 0, fmt.Errorf("read: %d of %d bytes: %v", n, len(b), err)
		}
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			return start + int64(i) + 1, nil
		}
		end = start
	}
	return 0, nil
}

// Write writes the whole lines of p (a line cut by the caller's buffer is
// kept until its end arrives), rotating between lines.
func (r *File) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f < 0 {
		return 0, errors.New("write to a closed file")
	}
	data := p
	if len(r.pending) > 0 {
		data = append(r.pending, p...)
	}
	end := bytes.LastIndexByte(data, '\n') + 1
	whole := data[:end]
	tail := append([]byte(nil), data[end:]...)
	for len(whole) > 0 {
		room := r.max - r.size
		n := 0
		if room > 0 {
			n = bytes.LastIndexByte(whole[:min(int64(len(whole)), room)], '\n') + 1
		}
		if n == 0 {
			if r.size > 0 {
				if err := r.rotate(); err != nil {
					return 0, err
				}
				continue
			}
			n = bytes.IndexByte(whole, '\n') + 1 // longer than max: alone
		}
		if err := r.write(whole[:n]); err != nil {
			return 0, err
		}
		whole = whole[n:]
	}
	r.pending = tail
	return len(p), nil
}

// write writes whole lines; when it fails it removes what it wrote of
// the line it was in.
func (r *File) write(b []byte) error {
	start, all := r.size, b
	for len(b) > 0 {
		n, err := unix.Write(r.f, b)
		if n > 0 {
			r.size += int64(n)
			b = b[n:]
		}
		if err == nil || errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN) {
			continue
		}
		err = fmt.Errorf("write %s: %w", r.base, err)
		whole := int64(bytes.LastIndexByte(all[:r.size-start], '\n') + 1)
		r.written += whole
		if keep := start + whole; keep < r.size {
			if terr := unix.Ftruncate(r.f, keep); terr != nil {
				return fmt.Errorf("%w (and removing the %d bytes written of its last line failed: %v; the next start removes them)", err, r.size-keep, terr)
			}
			r.size = keep
		}
		return err
	}
	r.written += int64(len(all))
	return nil
}

// rotate moves the file aside (or, keeping none, removes it) and makes a
// new one.
func (r *File) rotate() error {
	if err := unix.Fsync(r.f); err != nil {
		return fmt.Errorf("rotate: fsync %s: %w", r.base, err)
	}
	unix.Close(r.f)
	r.f = -1
	name := func(k int) string {
		if k == 0 {
			return r.base
		}
		return r.base + "." + strconv.Itoa(k)
	}
	gone := func(err error) bool { return err == nil || errors.Is(err, unix.ENOENT) }
	if err := unix.Unlinkat(r.dirfd(), name(r.keep), 0); !gone(err) {
		return fmt.Errorf("rotate: remove %s: %w", name(r.keep), err)
	}
	for k := r.keep - 1; k >= 0; k-- {
		if err := unix.Renameat(r.dirfd(), name(k), r.dirfd(), name(k+1)); !gone(err) {
			return fmt.Errorf("rotate: rename %s to %s: %w", name(k), name(k+1), err)
		}
	}
	fd, err := unix.Openat(r.dirfd(), r.base, unix.O_WRONLY|unix.O_APPEND|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o640)
	if err != nil {
		return fmt.Errorf("rotate: make %s: %w", r.base, err)
	}
	r.f, r.size = fd, 0
	if err := unix.Fsync(r.dirfd()); err != nil {
		return fmt.Errorf("rotate: fsync the directory: %w", err)
	}
	return nil
}

// Close fsyncs and closes the file. A line without its end (the caller
// stopped inside one) is not written: the file holds whole lines only.
func (r *File) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var err error
	if r.f >= 0 {
		if len(r.pending) > 0 {
			err = fmt.Errorf("%s: %d bytes of a line without its end not written", r.base, len(r.pending))
			r.pending = nil
		}
		if serr := unix.Fsync(r.f); err == nil && serr != nil {
			err = fmt.Errorf("fsync %s: %w", r.base, serr)
		}
		if cerr := unix.Close(r.f); err == nil && cerr != nil {
			err = cerr
		}
		r.f = -1
	}
	if r.dir != nil {
		r.dir.Close()
		r.dir = nil
	}
	return err
}
