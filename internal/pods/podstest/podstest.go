// Package podstest makes real cgroups in the kubelet's layout for tests,
// in the unified (cgroup v2) hierarchy under a private prefix, and runs
// processes in them. It imports nothing of probectl.
package podstest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Roots are where the unified hierarchy may be mounted.
var Roots = []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"}

// Root is the unified hierarchy's mount, or the test skips: without
// root, or with no cgroup2 mount (CI=true fails instead).
func Root(t testing.TB) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("making cgroups needs root")
	}
	for _, r := range Roots {
		var st unix.Statfs_t
		if unix.Statfs(r, &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
			return r
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("no cgroup2 mount at %v", Roots)
	}
	t.Skipf("no cgroup2 mount at %v", Roots)
	return ""
}

// Tree is a test's private prefix in the unified hierarchy: a
// --cgroup-root of its own.
type Tree struct {
	t    testing.TB
	root string // the mount
	base string // the prefix, under the mount
	made []string
}

// NewTree makes a prefix of the test's own (the pid and name in it), and
// removes every cgroup made under it when the test ends.
func NewTree(t testing.TB) *Tree {
	t.Helper()
	root := Root(t)
	name := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	tr := &Tree{t: t, root: root, base: fmt.Sprintf("probectl-%d-%s", os.Getpid(), name)}
	t.Cleanup(tr.remove)
	if err := os.Mkdir(filepath.Join(root, tr.base), 0o755); err != nil {
		t.Fatal(err)
	}
	tr.made = append(tr.made, filepath.Join(root, tr.base))
	return tr
}

// Make makes the cgroup rel (its parents first) under the prefix and
// returns its path from the mount ("/probectl-.../kubepods/...") and its
// id (the directory's inode: bpf_get_current_cgroup_id's value).
func (tr *Tree) Make(rel string) (string, uint64) {
	tr.t.Helper()
	path := "/" + tr.base
	for _, seg := range strings.Split(strings.Trim(rel, "/"), "/") {
		if seg == "" {
			continue
		}
		path += "/" + seg
		dir := filepath.Join(tr.root, path)
		if err := os.Mkdir(dir, 0o755); err == nil {
			tr.made = append(tr.made, dir)
		} else if !os.IsExist(err) {
			tr.t.Fatal(err)
		}
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(tr.root, path), &st); err != nil {
		tr.t.Fatal(err)
	}
	return path, st.Ino
}

// Remove removes the cgroup rel (empty of processes): a pod that exited.
func (tr *Tree) Remove(rel string) {
	tr.t.Helper()
	if err := os.Remove(filepath.Join(tr.root, tr.base, rel)); err != nil {
		tr.t.Fatal(err)
	}
}

func (tr *Tree) remove() {
	for i := len(tr.made) - 1; i >= 0; i-- {
		if err := os.Remove(tr.made[i]); err != nil && !os.IsNotExist(err) {
			tr.t.Errorf("remove cgroup: %v", err)
		}
	}
}

// Run runs name with args in the cgroup rel from its first instruction
// (clone3's CLONE_INTO_CGROUP), and waits for it.
func (tr *Tree) Run(rel, name string, args ...string) {
	tr.t.Helper()
	dir, err := os.Open(filepath.Join(tr.root, tr.base, rel))
	if err != nil {
		tr.t.Fatal(err)
	}
	defer dir.Close()
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(dir.Fd())}
	if out, err := cmd.CombinedOutput(); err != nil {
		tr.t.Fatalf("%s in %s: %v\n%s", name, rel, err, out)
	}
}
