package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/hashicorp/hcl/v2"
	"github.com/probectl/probectl/spec"
	"golang.org/x/sys/unix"
)

// specSet is the directory's specs at one read.
type specSet struct {
	files  map[string][]byte
	names  []string
	digest string
	// real is the directory the read resolved -config to: another one
	// than the live specs' is a symlink swapped (git-sync).
	real string
	// writing are the files a process holds open for writing, not read:
	// such a set is never applied.
	writing []string
}

// maxAgentFiles bounds the spec files of one directory.
const maxAgentFiles = 4096

// readSpecFile reads a regular file, refusing a symlink at its name (a
// symlinked directory above it, -config itself, is resolved by the caller),
// up to one byte over spec.MaxFileSize: spec.Parse refuses a larger one.
// trust, when not nil, checks the opened file's owner and mode.
func readSpecFile(path string, trust func(os.FileInfo) error) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, errors.New("it is a symlink")
		}
		return nil, errors.Unwrap(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, errors.New("it is not a regular file")
	}
	if trust != nil {
		if err := trust(st); err != nil {
			return nil, err
		}
	}
	if err := noWriters(f); err != nil {
		return nil, err
	}
	return io.ReadAll(io.LimitReader(f, spec.MaxFileSize+1))
}

// errBeingWritten is a spec file that a process holds open for writing:
// it may be half written, whatever it parses to.
var errBeingWritten = errors.New("a process holds it open for writing")

// noWriters returns errBeingWritten when a process holds f's file open
// for writing. It asks the kernel for a read lease, which it refuses
// (EAGAIN) while the file has a writer, and drops it at once (close would
// too; a writer that opens meanwhile waits for that). A file system
// without leases (NFS, FUSE, fs.leases-enable=0) answers nothing: the
// settle time alone tells then.
func noWriters(f *os.File) error {
	_, err := unix.FcntlInt(f.Fd(), unix.F_SETLEASE, unix.F_RDLCK)
	if errors.Is(err, unix.EAGAIN) {
		return errBeingWritten
	}
	if err == nil {
		unix.FcntlInt(f.Fd(), unix.F_SETLEASE, unix.F_UNLCK)
	}
	return nil
}

// trustedByRoot refuses a file or directory that someone other than root
// (or the agent's own user) owns or may write: its writer would decide
// what the agent, as root, attaches. A sticky directory (/tmp) may be
// writable by all when it is an ancestor: nobody can rename another's
// entry in it.
func trustedByRoot(st os.FileInfo, ancestor bool) error {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return errors.New("its owner is unknown")
	}
	if sys.Uid != 0 && int(sys.Uid) != os.Geteuid() {
		return fmt.Errorf("it is owned by uid %d, not root", sys.Uid)
	}
	if st.Mode().Perm()&0o022 != 0 && !(ancestor && st.IsDir() && st.Mode()&os.ModeSticky != 0) {
		return fmt.Errorf("it is writable by its group or by anyone (mode %04o)", st.Mode().Perm())
	}
	return nil
}

// TrustedDir checks dir (resolved, without symlinks) and every directory
// above it with trustedByRoot.
func TrustedDir(dir string) error {
	for p, ancestor := dir, false; ; p, ancestor = filepath.Dir(p), true {
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if err := trustedByRoot(st, ancestor); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// readSpecs reads DIR's *.hcl files, but hidden ones. A symlinked DIR (git-sync swaps one)
// is resolved once, so the files all come from one revision; they are
// named DIR/NAME in diagnostics.
func readSpecs(dir string, insecure bool) (*specSet, hcl.Diagnostics) {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot read the specs' directory",
			Detail: fmt.Sprintf("%s. -config names a directory of *.hcl files.", err)}}
	}
	var trust func(os.FileInfo) error
	if !insecure {
		if diags := trustSpecDir(dir, real); diags != nil {
			return nil, diags
		}
		trust = func(st os.FileInfo) error { return trustedByRoot(st, false) }
	}
	paths, diags := listSpecs(dir, real)
	if diags != nil {
		return nil, diags
	}
	return readSpecFiles(dir, real, paths, trust)
}

// trustSpecDir checks with TrustedDir the specs' directory (real) and the
// one holding -config (dir) when it is a symlink: whoever can write there
// can point it elsewhere.
func trustSpecDir(dir, real string) hcl.Diagnostics {
	for _, d := range []string{real, filepath.Dir(dir)} {
		if rd, err := filepath.EvalSymlinks(d); err == nil {
			d = rd
		}
		if err := TrustedDir(d); err != nil {
			return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Untrusted specs' directory",
				Detail: fmt.Sprintf("%s. Whoever can write the specs' directory, or a directory above it, decides what the agent attaches as root: make them root's, writable by no one else (chown root; chmod go-w), or run with -insecure-config when every writer is trusted (a git-sync sidecar in the same pod).", err)}}
		}
	}
	return nil
}

// listSpecs are the paths of the visible *.hcl files in real (-config
// dir resolved), at most maxAgentFiles.
func listSpecs(dir, real string) ([]string, hcl.Diagnostics) {
	paths, err := spec.ExpandPaths([]string{real})
	if err != nil {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot read the specs' directory",
			Detail: fmt.Sprintf("%s. -config names a directory of *.hcl files; to remove every probe, run probectl destroy.", strings.Replace(err.Error(), real, dir, 1))}}
	}
	if st, err := os.Stat(real); err == nil && !st.IsDir() {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot read the specs' directory",
			Detail: fmt.Sprintf("%s is a file. -config names a directory of *.hcl files.", dir)}}
	}
	// Hidden files are not specs: an editor's lock (Emacs's .#a.hcl, a
	// dangling symlink, there while a buffer is modified), a temporary
	// file renamed into place later.
	visible := paths[:0]
	for _, p := range paths {
		if !strings.HasPrefix(filepath.Base(p), ".") {
			visible = append(visible, p)
		}
	}
	if paths = visible; len(paths) == 0 {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot read the specs' directory",
			Detail: fmt.Sprintf("%s: no *.hcl files in the directory but hidden ones, which the agent skips. -config names a directory of *.hcl files; to remove every probe, run probectl destroy.", dir)}}
	}
	if len(paths) > maxAgentFiles {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Too many spec files",
			Detail: fmt.Sprintf("%s has %d *.hcl files; the agent reads at most %d. Put more probes in each file.", dir, len(paths), maxAgentFiles)}}
	}
	return paths, nil
}

// readSpecFiles reads paths with readSpecFile (trust, when not nil,
// checking each), names them dir/NAME and digests them in order.
func readSpecFiles(dir, real string, paths []string, trust func(os.FileInfo) error) (*specSet, hcl.Diagnostics) {
	set := &specSet{files: map[string][]byte{}, real: real}
	var diags hcl.Diagnostics
	h := sha256.New()
	for _, p := range paths {
		name := filepath.Join(dir, filepath.Base(p))
		b, err := readSpecFile(p, trust)
		if errors.Is(err, errBeingWritten) {
			set.writing = append(set.writing, name)
			continue
		}
		if err != nil {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Cannot read spec file",
				Detail:  fmt.Sprintf("%s: %v. The agent reads only regular files in -config that root owns and no one else may write (-insecure-config lifts the owner check), never through a symlink: whoever can plant one there would have root read any file into the log and /status.", name, err),
				Subject: &hcl.Range{Filename: name, Start: hcl.InitialPos, End: hcl.InitialPos}})
			continue
		}
		set.files[name] = b
		set.names = append(set.names, name)
		fmt.Fprintf(h, "%d:%s\n%d:", len(name), name, len(b))
		h.Write(b)
	}
	set.digest = hex.EncodeToString(h.Sum(nil))
	return set, diags
}
