package kubetest

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupDirs lists the directories of cgroup root in every hierarchy
// mounted under /sys/fs/cgroup (v1 controllers, name=systemd, unified).
func cgroupDirs(root string) []string {
	hs, _ := filepath.Glob("/sys/fs/cgroup/*/cgroup.procs")
	dirs := []string{}
	for _, h := range hs {
		dirs = append(dirs, filepath.Join(filepath.Dir(h), root))
	}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil { // cgroup v2 alone
		dirs = append(dirs, filepath.Join("/sys/fs/cgroup", root))
	}
	return dirs
}

// makeCgroupRoot makes the kubelet's cgroup root (it must exist) in
// every hierarchy, cpuset's with its parent's CPUs and memory nodes.
func makeCgroupRoot(root string) error {
	for _, d := range cgroupDirs(root) {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if v, err := os.ReadFile(filepath.Join(filepath.Dir(d), f)); err == nil {
				if err := os.WriteFile(filepath.Join(d, f), v, 0o644); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// removeNode removes what a node's kubelet and containerd left on the
// host: its containers' processes and shims, network namespaces, mounts
// under dir, cgroups under cgroupRoot and its bridge.
func removeNode(dir, cgroupRoot, bridge string) {
	netns := sandboxNetns(dir)
	for i := 0; i < 3; i++ {
		killCgroups(cgroupRoot)
		killShims(dir)
		time.Sleep(200 * time.Millisecond)
	}
	for _, ns := range netns {
		syscall.Unmount(ns, syscall.MNT_DETACH)
		os.Remove(ns)
	}
	unmountUnder(dir)
	removeCgroups(cgroupRoot)
	exec.Command("ip", "link", "del", bridge).Run()
}

// sandboxNetns returns the network namespaces of the node's containers,
// read from the OCI specs in containerd's state.
func sandboxNetns(dir string) []string {
	specs, _ := filepath.Glob(filepath.Join(dir, "containerd/state/io.containerd.runtime.v2.task/k8s.io/*/config.json"))
	var paths []string
	for _, f := range specs {
		var spec struct {
			Linux struct {
				Namespaces []struct{ Type, Path string }
			}
		}
		b, err := os.ReadFile(f)
		if err != nil || json.Unmarshal(b, &spec) != nil {
			continue
		}
		for _, ns := range spec.Linux.Namespaces {
			if ns.Type == "network" && strings.HasPrefix(ns.Path, "/var/run/netns/") {
				paths = append(paths, ns.Path)
			}
		}
	}
	return paths
}

// killCgroups kills every process in the cgroups under root.
func killCgroups(root string) {
	for _, d := range cgroupDirs(root) {
		filepath.WalkDir(d, func(path string, e os.DirEntry, err error) error {
			if err != nil || e.IsDir() || e.Name() != "cgroup.procs" {
				return nil
			}
			b, _ := os.ReadFile(path)
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			return nil
		})
	}
}

// killShims kills the containerd shims of the node whose directory is
// dir (their command line names its containerd's socket).
func killShims(dir string) {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	sock := filepath.Join(dir, "containerd.sock")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(b), "containerd-shim") || !strings.Contains(string(b), sock) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// unmountUnder unmounts every mount under dir, the deepest first.
func unmountUnder(dir string) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return
	}
	defer f.Close()
	var mounts []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && (fields[4] == dir || strings.HasPrefix(fields[4], dir+"/")) {
			mounts = append(mounts, fields[4])
		}
	}
	sort.Slice(mounts, func(i, j int) bool { return len(mounts[i]) > len(mounts[j]) })
	for _, m := range mounts {
		syscall.Unmount(m, syscall.MNT_DETACH)
	}
}

// removeCgroups removes the cgroups under root, the deepest first.
func removeCgroups(root string) {
	for _, d := range cgroupDirs(root) {
		var dirs []string
		filepath.WalkDir(d, func(path string, e os.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			for try := 0; try < 10 && os.Remove(dirs[i]) != nil && !errors.Is(statErr(dirs[i]), os.ErrNotExist); try++ {
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
}

func statErr(path string) error { _, err := os.Stat(path); return err }

// cleanStaleNodes removes the nodes whose test process is gone.
func cleanStaleNodes() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), nodeDirPrefix+"*"))
	for _, dir := range dirs {
		if dir == sysctlsFile || ownerAlive(dir) {
			continue
		}
		b, _ := os.ReadFile(filepath.Join(dir, "owner"))
		lines := strings.Split(string(b), "\n")
		if len(lines) < 3 {
			continue
		}
		removeNode(dir, lines[1], lines[2])
		restoreSysctls(dir)
		os.RemoveAll(dir)
	}
}

// ownerAlive says the process that made the node in dir still runs.
func ownerAlive(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "owner"))
	if err != nil {
		// Being made, or not a node: leave it alone unless it is old.
		st, err := os.Stat(dir)
		return err == nil && time.Since(st.ModTime()) < time.Hour
	}
	pid, err := strconv.Atoi(strings.SplitN(string(b), "\n", 2)[0])
	if err != nil {
		return false
	}
	return syscall.Kill(pid, 0) == nil || pid == os.Getpid()
}

// kubeletSysctls are the kernel settings the kubelet changes when it
// starts (protectKernelDefaults: false): the lab puts them back.
var kubeletSysctls = []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic",
	"kernel/panic_on_oops", "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes"}

// sysctlsFile holds the host's values from before the first live node.
var sysctlsFile = filepath.Join(os.TempDir(), nodeDirPrefix+"sysctls.json")

// saveSysctls records the host's values unless a live node did.
func saveSysctls(string) error {
	vals := map[string]string{}
	for _, k := range kubeletSysctls {
		b, err := os.ReadFile("/proc/sys/" + k)
		if err != nil {
			continue
		}
		vals[k] = strings.TrimSpace(string(b))
	}
	b, _ := json.Marshal(vals)
	f, err := os.OpenFile(sysctlsFile, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.Write(b)
	return err
}

// restoreSysctls puts the host's values back when no other node lives.
func restoreSysctls(self string) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), nodeDirPrefix+"*"))
	for _, d := range dirs {
		if d != self && d != sysctlsFile && ownerAlive(d) {
			return
		}
	}
	b, err := os.ReadFile(sysctlsFile)
	if err != nil {
		return
	}
	var vals map[string]string
	if json.Unmarshal(b, &vals) == nil {
		for k, v := range vals {
			os.WriteFile("/proc/sys/"+k, []byte(v), 0o644)
		}
	}
	os.Remove(sysctlsFile)
}
