package compiler

import (
	"fmt"
	"sync"
	"syscall"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/bpf/symbols"
)

// files is what one compile reads of the planning host's files, each read
// once (issue 22): a user binary's symbol tables by its path under its
// root, and again by the file's identity (device, inode, size and
// modification time: a symlink and its target, or two roots that share
// a file, are one read), and the libraries named through a root's
// ld.so.cache. It lives for one Compile and is closed at its end: nothing
// read outlives the command, nor is shared between targets. It is safe
// for concurrent use.
type files struct {
	mu       sync.Mutex
	byPath   map[rootPath]*openedBinary
	byID     map[string]*openedBinary
	libs     map[libName]libResult
	opens    int // binaries opened and their symbols read: what tests count
	ldLookup int // ld.so.cache lookups
}

type rootPath struct{ root, path string }

type libName struct {
	root, name string
	arch       bpf.Arch
}

type libResult struct {
	path string
	err  error
}

// openedBinary is a binary as first read, or why it could not be.
type openedBinary struct {
	bin *elfBinary
	err error
}

func newFiles() *files {
	return &files{byPath: map[rootPath]*openedBinary{}, byID: map[string]*openedBinary{}, libs: map[libName]libResult{}}
}

// binary is openBinary(root, path), read once per compile. The binary
// stays open until close.
func (fs *files) binary(root, path string) (*elfBinary, error) {
	if fs == nil {
		return openBinary(root, path)
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	k := rootPath{root, path}
	if o := fs.byPath[k]; o != nil {
		return o.bin, o.err
	}
	bin, err := fs.open(root, path)
	o := &openedBinary{bin: bin, err: err}
	fs.byPath[k] = o
	return o.bin, o.err
}

// open opens path under root, and reads its symbols unless a file of the
// same identity was read already.
func (fs *files) open(root, path string) (*elfBinary, error) {
	f, err := symbols.OpenIn(root, path)
	if err != nil {
		return nil, err
	}
	id := fileID(f.Fd())
	if o := fs.byID[id]; id != "" && o != nil && o.bin != nil {
		f.Close()
		return o.bin, nil
	}
	fs.opens++
	bin, err := readBinary(f, symbols.InRoot(root, path))
	if err == nil && id != "" {
		fs.byID[id] = &openedBinary{bin: bin}
	}
	return bin, err
}

// fileID identifies an open file: device, inode, size and modification
// time; "" when it cannot be told.
func fileID(fd uintptr) string {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(fd), &st); err != nil {
		return ""
	}
	return fmt.Sprintf("%d:%d:%d:%d.%09d", st.Dev, st.Ino, st.Size, st.Mtim.Sec, st.Mtim.Nsec)
}

// library is symbols.ResolveLibraryIn, looked up once per compile.
func (fs *files) library(root, name string, arch bpf.Arch) (string, error) {
	if fs == nil {
		return symbols.ResolveLibraryIn(root, name, arch)
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	k := libName{root, name, arch}
	if r, ok := fs.libs[k]; ok {
		return r.path, r.err
	}
	fs.ldLookup++
	path, err := symbols.ResolveLibraryIn(root, name, arch)
	fs.libs[k] = libResult{path, err}
	return path, err
}

// close closes every binary the compile opened.
func (fs *files) close() {
	if fs == nil {
		return
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	closed := map[*elfBinary]bool{}
	for _, o := range fs.byPath {
		if o.bin != nil && !closed[o.bin] {
			closed[o.bin] = true
			o.bin.Close()
		}
	}
	fs.byPath, fs.byID = nil, nil
}
