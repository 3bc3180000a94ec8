package pods

import (
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// cgroupRoots are where cgroup v2 is mounted: the host's tree mounted
// into the node agent's container (deploy/kubernetes), the unified
// hierarchy, or its place in a hybrid one.
var cgroupRoots = []string{"/host/sys/fs/cgroup", "/host/sys/fs/cgroup/unified", "/sys/fs/cgroup", "/sys/fs/cgroup/unified"}

// Bounds of a walk of the cgroup tree.
const (
	maxCgroups     = 100000
	maxCgroupDepth = 64
	cgroupRescan   = time.Second
)

// cgroupCache maps cgroup ids to paths. In cgroup v2 a cgroup's id is the
// inode number of its directory (kernfs). The tree is walked when an id is
// not found, at most once a second. A cgroup removed since it was seen
// is remembered for cgroupKept (up to maxCgroups of them), for the pod
// values: a pod that exited keeps its name in the results it left.
type cgroupCache struct {
	mu      sync.Mutex
	paths   map[uint64]string
	gone    map[uint64]goneCgroup
	scanned time.Time
}

// goneCgroup is a removed cgroup's path, and when it was found gone.
type goneCgroup struct {
	path string
	at   time.Time
}

// cgroupKept is how long a removed cgroup's path is remembered.
const cgroupKept = 15 * time.Minute

var cgroups cgroupCache

// CgroupPath is the path of the cgroup v2 id (under the cgroup2 mount:
// /system.slice/ssh.service), as the tree has it now.
func CgroupPath(id uint64) (string, bool) { return cgroups.path(id) }

// ByCgroup names the pod of the cgroup v2 id: by its path, which the tree
// gives, or gave while the cgroup existed (within cgroupKept), and the
// Default table.
func ByCgroup(id uint64) Names {
	path, ok := cgroups.known(id)
	if !ok {
		return Names{}
	}
	ref, ok := ParsePath(path)
	if !ok {
		return Names{}
	}
	return Default.Names(ref)
}

// Rescan walks the cgroup tree again, when it was not walked within the
// last second: the node agent calls it as pods change, so that a
// container's cgroup is seen while it exists.
func Rescan() {
	cgroups.mu.Lock()
	defer cgroups.mu.Unlock()
	cgroups.lookup(0)
}

// path is the path of the cgroup id names now.
func (c *cgroupCache) path(id uint64) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lookup(id)
}

// known is the path of the cgroup id names, or named when it was last
// seen within cgroupKept.
func (c *cgroupCache) known(id uint64) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.lookup(id); ok {
		return p, true
	}
	g, ok := c.gone[id]
	return g.path, ok
}

// lookup finds id, walking the tree again when it is not known. c.mu is
// held.
func (c *cgroupCache) lookup(id uint64) (string, bool) {
	if p, ok := c.paths[id]; ok {
		return p, true
	}
	if time.Since(c.scanned) < cgroupRescan {
		return "", false
	}
	c.scanned = time.Now()
	old := c.paths
	c.paths = scanCgroups()
	c.forget(old)
	p, ok := c.paths[id]
	return p, ok
}

// forget moves the cgroups of old that are gone now to c.gone, and drops
// those gone for longer than cgroupKept, or past the bound.
func (c *cgroupCache) forget(old map[uint64]string) {
	if c.gone == nil {
		c.gone = map[uint64]goneCgroup{}
	}
	for id, p := range old {
		if _, ok := c.paths[id]; !ok && len(c.gone) < maxCgroups {
			c.gone[id] = goneCgroup{path: p, at: c.scanned}
		}
	}
	for id, g := range c.gone {
		if _, back := c.paths[id]; back || c.scanned.Sub(g.at) > cgroupKept {
			delete(c.gone, id)
		}
	}
}

// scanCgroups walks the cgroup2 mount: directories only, never a symlink,
// within the bounds.
func scanCgroups() map[uint64]string {
	out := map[uint64]string{}
	for _, root := range cgroupRoots {
		var st unix.Statfs_t
		if unix.Statfs(root, &st) != nil || st.Type != unix.CGROUP2_SUPER_MAGIC {
			continue
		}
		_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			return addCgroup(out, root, path, d)
		})
		break
	}
	return out
}

// addCgroup records the cgroup directory d at path under root in out by
// its inode, or skips it and what is below past the bounds.
func addCgroup(out map[uint64]string, root, path string, d fs.DirEntry) error {
	rel, _ := filepath.Rel(root, path)
	if len(out) >= maxCgroups || depth(rel) > maxCgroupDepth {
		return filepath.SkipDir
	}
	info, err := d.Info()
	if err != nil {
		return nil
	}
	if sys, ok := info.Sys().(*syscall.Stat_t); ok {
		out[sys.Ino] = "/" + filepath.ToSlash(rel)
		if rel == "." {
			out[sys.Ino] = "/"
		}
	}
	return nil
}

func depth(rel string) int {
	n := 0
	for _, c := range rel {
		if c == os.PathSeparator {
			n++
		}
	}
	return n
}

// Cgroup is a cgroup of the node's tree now, and the names t gives it:
// a pod's cgroup names its pod (Container ""), a container's its
// container too; the root cgroup (ID 1 on cgroup v2) has Root set.
type Cgroup struct {
	ID   uint64
	Root bool
	Names
}

// Cgroups walks the cgroup tree now and names every cgroup of a pod by
// t (off Kubernetes, with nothing in t: the pod's UID and the
// container's ID, namespace ""), and the root cgroup. The walk is
// bounded as ByCgroup's is.
func (t *Table) Cgroups() []Cgroup {
	var out []Cgroup
	for id, path := range scanCgroups() {
		if path == "/" {
			out = append(out, Cgroup{ID: id, Root: true})
			continue
		}
		if ref, ok := ParsePath(path); ok && ref.PodUID != "" {
			out = append(out, Cgroup{ID: id, Names: t.Names(ref)})
		}
	}
	return out
}
