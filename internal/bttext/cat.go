package bttext

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// CatFiles are the files bpftrace's cat(PATH) may name in an imported
// program: world-readable kernel files of the whole machine, the same for
// every reader, none of a process. probectl reads them as root, and what
// it reads reaches whoever reads the events (a tenant's, on the node
// agent), so any other path, which could name /etc/shadow or a process's
// memory map as easily, is refused where the program names it.
var CatFiles = []string{
	"/proc/loadavg",
	"/proc/uptime",
	"/proc/pressure/cpu",
	"/proc/pressure/memory",
	"/proc/pressure/io",
}

// MaxCatBytes is how much of a file cat prints: bpftrace's
// max_cat_bytes default.
const MaxCatBytes = 10240

// ErrCatRefused is Cat's error for a path not in CatFiles.
var ErrCatRefused = errors.New("not a file cat may read")

// CatAllowed says whether cat may read path.
func CatAllowed(path string) bool { return slices.Contains(CatFiles, path) }

// CatList is CatFiles for a diagnostic.
func CatList() string { return strings.Join(CatFiles, ", ") }

// Cat is what bpftrace's cat(path) prints: the file's first MaxCatBytes
// bytes, as they are now. Only CatFiles are read, opened without
// following a symbolic link anywhere in the path (openat2
// RESOLVE_NO_SYMLINKS; O_NOFOLLOW where the kernel lacks openat2), and
// only from procfs.
func Cat(path string) (string, error) {
	if !CatAllowed(path) {
		return "", fmt.Errorf("cat %q: %w (%s)", path, ErrCatRefused, CatList())
	}
	fd, err := unix.Openat2(unix.AT_FDCWD, path, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if errors.Is(err, unix.ENOSYS) {
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return "", fmt.Errorf("cat %q: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	var fs unix.Statfs_t
	if err := unix.Fstatfs(fd, &fs); err != nil {
		return "", fmt.Errorf("cat %q: %w", path, err)
	}
	if fs.Type != unix.PROC_SUPER_MAGIC {
		return "", fmt.Errorf("cat %q: %w (not on procfs)", path, ErrCatRefused)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxCatBytes))
	if err != nil {
		return "", fmt.Errorf("cat %q: %w", path, err)
	}
	return string(b), nil
}

// CatJSON is the -f json line of what cat printed.
func CatJSON(text string) string {
	return `{"type": "cat", "data": "` + JSONEscape(text) + "\"}\n"
}
