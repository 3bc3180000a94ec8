package symbols

import (
	"debug/elf"
	"os"
	"path/filepath"
	"strconv"

	"github.com/probectl/probectl/bpf"
	"golang.org/x/sys/unix"
)

// IsHostRoot reports whether root is this machine's own "/" (written "" or
// "/"): paths are then opened as they are.
func IsHostRoot(root string) bool { return root == "" || root == "/" }

// OpenIn opens the regular file at path as a process whose root directory
// is root would (chroot-like), without blocking: every symlink is resolved
// within root, an absolute one from root and ".." never above it, by the
// kernel in one openat2(2) with RESOLVE_IN_ROOT, so a file swapped in
// meanwhile cannot lead out either. Magic links (/proc/PID/fd/N) inside
// root are refused. A root of "" or "/" opens path as it is.
//
// The node agent reads the host's binaries through the host's "/"
// mounted at -host-root, and a process's through its /proc/PID/root: the
// file opened is the host's, the same inode, so a uprobe on it traces the
// host's processes. Requires Linux 5.6 (openat2).
func OpenIn(root, path string) (*os.File, error) {
	if IsHostRoot(root) {
		return bpf.OpenRegular(path)
	}
	dir, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open root", Path: root, Err: err}
	}
	defer unix.Close(dir)
	how := &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_NONBLOCK | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
	}
	fd, err := unix.Openat2(dir, path, how)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: InRoot(root, path), Err: err}
	}
	return bpf.KeepRegular(os.NewFile(uintptr(fd), InRoot(root, path)))
}

// InRoot is how path under root is written in messages: "/usr/bin/x" for
// this machine's root, "/usr/bin/x (under /host)" otherwise.
func InRoot(root, path string) string {
	if IsHostRoot(root) {
		return path
	}
	return path + " (under " + root + ")"
}

// ProcessRoot is the root a probe with pid = N resolves its binary under,
// given the host's root: HOSTROOT/proc/N/root, the process's own view of
// the file system (a container's image), when the host's root is
// mounted elsewhere; root itself otherwise, and when pid is 0.
func ProcessRoot(root string, pid int) string {
	if pid == 0 || IsHostRoot(root) {
		return root
	}
	return filepath.Join(root, "proc", strconv.Itoa(pid), "root")
}

// ResolveLibraryIn finds a library by name as [ResolveLibrary] does, in
// the ld.so.cache of root (the host's, under the node agent's -host-root).
// The path it returns is one within root.
func ResolveLibraryIn(root, name string, arch bpf.Arch) (string, error) {
	if IsHostRoot(root) {
		return ResolveLibrary(LDCache, name, arch)
	}
	f, err := OpenIn(root, LDCache)
	if err != nil {
		return "", err
	}
	defer f.Close()
	return resolveLibrary(f, InRoot(root, LDCache), root, name, arch)
}

// BuildID returns the GNU build id of an ELF file, or "".
func BuildID(ef *elf.File) string { return elfBuildID(ef) }
