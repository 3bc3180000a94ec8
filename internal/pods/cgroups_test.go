package pods

import (
	"syscall"
	"testing"
)

// cgroup_path shows the cgroup2 path of an id (the directory's inode), and
// no path for an id it cannot find.
func TestCgroupPath(t *testing.T) {
	root := ""
	for _, dir := range cgroupRoots {
		var fs syscall.Statfs_t
		if syscall.Statfs(dir, &fs) == nil && fs.Type == 0x63677270 { // CGROUP2_SUPER_MAGIC
			root = dir
			break
		}
	}
	if root == "" {
		t.Skipf("no cgroup2 mount at %v", cgroupRoots)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(root, &st); err != nil {
		t.Fatal(err)
	}
	if got, _ := CgroupPath(st.Ino); got != "/" {
		t.Errorf("root cgroup %d = %v, want /", st.Ino, got)
	}
	cgroups.scanned = cgroups.scanned.Add(-cgroupRescan)
	if got, ok := CgroupPath(1<<64 - 5); ok {
		t.Errorf("id 2^64-5 = %v", got)
	}
}
