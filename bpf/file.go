package bpf

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// OpenRegular opens a file for reading if it is a regular file (a symlink
// to one is fine). It never blocks: a named pipe, a device or a directory
// is refused, after a non-blocking open, with an error that says what it is.
func OpenRegular(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	return KeepRegular(f)
}

// KeepRegular returns f if it is a regular file; otherwise it closes f
// and says what f is, by its name.
func KeepRegular(f *os.File) (*os.File, error) {
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is %s, not a regular file", f.Name(), fileKind(st.Mode()))
	}
	return f, nil
}

func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	}
	return "special"
}

// ReadRegular reads a regular file (see [OpenRegular]) of at most limit
// bytes, reading no more than limit+1.
func ReadRegular(path string, limit int64) ([]byte, error) {
	f, err := OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// Read into a buffer of the file's size (a facts file is megabytes:
	// io.ReadAll's growing copies cost more than the read).
	size := int64(512)
	if st, err := f.Stat(); err == nil && st.Size() > 0 {
		size = min(st.Size(), limit) + 1
	}
	buf := bytes.NewBuffer(make([]byte, 0, size))
	if _, err := buf.ReadFrom(io.LimitReader(f, limit+1)); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return b, nil
}

// WriteNew writes data to path through a new file: a temporary file made in
// path's directory (O_EXCL, never through a symlink), synced, then renamed
// over path. Whatever path was (a symlink another user planted, a file
// another user made writable), it is replaced, never written through; in a
// sticky directory, such as /tmp, the kernel refuses to replace another
// user's file, and so does this.
func WriteNew(path string, data []byte, perm os.FileMode) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(dir, "."+base+"."+hex.EncodeToString(rnd[:])+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, perm)
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	ok = true
	return nil
}

// CheckOwned refuses a file that another user owns or may write: what
// probectl reads to act on (a saved plan) must be what its owner wrote.
func CheckOwned(f *os.File) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if euid := uint32(os.Geteuid()); sys.Uid != 0 && sys.Uid != euid {
		return fmt.Errorf("%s is owned by uid %d, not by root or by this user: probectl will not act on a file another user controls", f.Name(), sys.Uid)
	}
	if st.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s is writable by other users (mode %04o): probectl will not act on it; run chmod go-w %s", f.Name(), st.Mode().Perm(), f.Name())
	}
	return nil
}
