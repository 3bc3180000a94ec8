package cgrouptest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Root is where the cgroup v2 hierarchy is mounted: /sys/fs/cgroup/unified
// on a v1 hybrid host, /sys/fs/cgroup on a v2 one, "" when neither is.
func Root() string {
	for _, dir := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
		var st syscall.Statfs_t
		if syscall.Statfs(dir, &st) == nil && st.Type == cgroup2Magic {
			return dir
		}
	}
	return ""
}

// cgroup2Magic is CGROUP2_SUPER_MAGIC, statfs' f_type of a cgroup2 mount.
const cgroup2Magic = 0x63677270

// Prefix makes a private directory for the test's cgroups under the v2
// hierarchy (a fresh name per test and process), removed with everything
// below it when the test ends. It fails the test when there is no v2
// hierarchy.
func Prefix(t testing.TB) string {
	t.Helper()
	root := Root()
	if root == "" {
		t.Fatal("no cgroup2 hierarchy is mounted")
	}
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	dir := filepath.Join(root, fmt.Sprintf("probectl-test-%d-%s", os.Getpid(), name))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeTree(t, dir) })
	return dir
}

// Make makes the cgroup dir (and its parents) and returns its id, the
// directory's inode number (what bpf_get_current_cgroup_id returns).
func Make(t testing.TB, dir string) uint64 {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return ID(t, dir)
}

// ID is the id of the cgroup dir.
func ID(t testing.TB, dir string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// Command is cmd made to start in the cgroup dir (clone3 with
// CLONE_INTO_CGROUP: it runs nothing outside it). The caller starts it.
func Command(t testing.TB, dir string, cmd *exec.Cmd) *exec.Cmd {
	t.Helper()
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, fd
	return cmd
}

// removeTree kills the processes left in the cgroups under dir and
// removes them, deepest first.
func removeTree(t testing.TB, dir string) {
	var dirs []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		d := dirs[i]
		os.WriteFile(filepath.Join(d, "cgroup.kill"), []byte("1"), 0)
		var err error
		for range 100 { // the killed processes leave the cgroup
			if err = os.Remove(d); err == nil || !errors.Is(err, syscall.EBUSY) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil && !os.IsNotExist(err) {
			t.Errorf("remove cgroup %s: %v", d, err)
		}
	}
}

// RunAll starts each command in its cgroup (the key; "" for the test's
// own) at once and waits for them all, failing the test when one fails.
func RunAll(t testing.TB, cmds map[string]*exec.Cmd) {
	t.Helper()
	var started []*exec.Cmd
	for dir, cmd := range cmds {
		if dir != "" {
			cmd = Command(t, dir, cmd)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		started = append(started, cmd)
	}
	for _, cmd := range started {
		if err := cmd.Wait(); err != nil {
			t.Fatal(err)
		}
	}
}
