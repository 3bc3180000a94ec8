package fleet

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// CgroupRoot is where the cgroup v2 hierarchy is mounted: /sys/fs/cgroup
// on a v2 node, /sys/fs/cgroup/unified on a v1 hybrid one ("" when none
// is). bpf_get_current_cgroup_id and its ancestors are ids in it.
func CgroupRoot() string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS... - FSTYPE SOURCE SUPER
		fields := strings.Fields(sc.Text())
		for i, fld := range fields {
			if fld == "-" && i+1 < len(fields) && fields[i+1] == "cgroup2" && len(fields) > 4 && fields[3] == "/" {
				return fields[4]
			}
		}
	}
	return ""
}

// unifiedUnder is root when it is a cgroup v2 hierarchy (it has
// cgroup.controllers), else its "unified" directory when that is one (a
// v1 hybrid node's /sys/fs/cgroup), else root.
func unifiedUnder(root string) string {
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err == nil {
		return root
	}
	if u := filepath.Join(root, "unified"); exists(filepath.Join(u, "cgroup.controllers")) {
		return u
	}
	return root
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

// maxCgroupDepth bounds the walk of PodCgroups: kubelet's pod cgroups are
// 2 to 4 levels deep, below a --cgroup-root of a few more.
const maxCgroupDepth = 10

// PodCgroups returns the ids (inode numbers) of the cgroups under root
// of the pods with the given uids: a directory named for the pod in
// either of kubelet's layouts — cgroupfs "pod<UID>"
// (kubepods/burstable/pod<UID>), systemd "<...>-pod<UID with _>.slice"
// (kubepods-burstable-pod<UID_>.slice) — at any depth up to
// maxCgroupDepth below root. Its containers' cgroups are below it, and
// the tenant filter admits a cgroup's whole subtree. Unreadable parts of
// the tree are skipped: a cgroup that vanishes mid-walk is a pod gone.
func PodCgroups(root string, uids []string) []uint64 {
	want := map[string]bool{}
	for _, u := range uids {
		want[u] = true
	}
	var ids []uint64
	base := strings.Count(filepath.Clean(root), string(filepath.Separator))
	filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if strings.Count(path, string(filepath.Separator))-base > maxCgroupDepth {
			return filepath.SkipDir
		}
		if uid := podUID(d.Name()); uid != "" && want[uid] {
			if id, ok := inode(path); ok {
				ids = append(ids, id)
			}
			return filepath.SkipDir
		}
		return nil
	})
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// podUID is the pod uid a cgroup directory's name carries, "" for none:
// "pod<UID>" (cgroupfs) or "<...>-pod<UID_>.slice" (systemd, the uid's
// dashes as underscores).
func podUID(name string) string {
	if rest, ok := strings.CutSuffix(name, ".slice"); ok {
		i := strings.LastIndex(rest, "-pod")
		if i < 0 {
			return ""
		}
		return validUID(strings.ReplaceAll(rest[i+len("-pod"):], "_", "-"))
	}
	if rest, ok := strings.CutPrefix(name, "pod"); ok {
		return validUID(rest)
	}
	return ""
}

// validUID is s when it is a uid as the API server makes them (36
// characters of hex digits and dashes), else "".
func validUID(s string) string {
	if len(s) != 36 {
		return ""
	}
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f' || r == '-') {
			return ""
		}
	}
	return s
}

func inode(path string) (uint64, bool) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0, false
	}
	return st.Ino, true
}
