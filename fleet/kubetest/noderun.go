package kubetest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// containerdConfig is the private containerd's configuration: %[1]s is
// the node's directory, %[2]s the pause image, %[3]s the CNI bin dir.
const containerdConfig = `version = 2
root = "%[1]s/containerd/root"
state = "%[1]s/containerd/state"
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "%[1]s/containerd.sock"
[ttrpc]
  address = "%[1]s/containerd.sock.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "%[2]s"
  disable_apparmor = true
  # This machine runs without CAP_SYS_RESOURCE: no container may be
  # less likely to be OOM-killed than containerd (the kubelet asks -998).
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "%[1]s/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "%[3]s"
    conf_dir = "%[1]s/cni"
`

// cniConfig is the node's pod network: its own bridge and a private /24.
const cniConfig = `{"cniVersion": "0.4.0", "name": "%[1]s", "plugins": [
  {"type": "bridge", "bridge": "%[1]s", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "%[2]s.0/24", "gateway": "%[2]s.1"}]],
            "dataDir": "%[3]s/cni-ipam"}},
  {"type": "loopback"}]}
`

// setupNetwork makes the node's bridge with the node's address (before
// the first pod, so the kubelet has its node IP) and the CNI config.
func (n *Node) setupNetwork() error {
	br := n.bridge()
	for _, args := range [][]string{
		{"link", "add", br, "type", "bridge"},
		{"addr", "add", n.IP + "/24", "dev", br},
		{"link", "set", br, "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	if err := os.MkdirAll(filepath.Join(n.Dir, "cni"), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(n.Dir, "cni", "10-lab.conflist"),
		[]byte(fmt.Sprintf(cniConfig, br, n.subnet, n.Dir)), 0o644)
}

// PauseImage is the pod sandbox's image every node imports (built here:
// no registry).
const PauseImage = "probectl.test/pause:1"

func (n *Node) startContainerd() error {
	cfg := filepath.Join(n.Dir, "containerd.toml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(containerdConfig, n.Dir, PauseImage, cniBinDir)), 0o644); err != nil {
		return err
	}
	p, err := startProc(n.Dir, "containerd", "containerd.log", "--config", cfg)
	if err != nil {
		return err
	}
	n.procs = append(n.procs, p)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if exited(n.procs) {
			return fmt.Errorf("containerd exited: %s", tail(filepath.Join(n.Dir, "containerd.log")))
		}
		if n.ctr("version") == nil {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("containerd not answering: %s", tail(filepath.Join(n.Dir, "containerd.log")))
}

// kubeletConfig is the kubelet's configuration file.
const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This host runs cgroup v1 (hybrid): kubelet 1.35+ refuses it by default.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: %[2]s
cgroupsPerQOS: true
enforceNodeAllocatable: [pods]
failSwapOn: false
address: 127.0.0.1
port: %[3]s
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %[4]s
tlsCertFile: %[5]s.crt
tlsPrivateKeyFile: %[5]s.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %[6]s}
authorization: {mode: AlwaysAllow}
containerRuntimeEndpoint: unix://%[1]s/containerd.sock
# Never evict or collect images because the shared test machine's disk is
# full: the lab's images exist nowhere else.
evictionHard: {memory.available: "0%%", nodefs.available: "0%%", nodefs.inodesFree: "0%%", imagefs.available: "0%%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
makeIPTablesUtilChains: false
nodeStatusUpdateFrequency: 2s
syncFrequency: 5s
fileCheckFrequency: 5s
resolvConf: %[1]s/resolv.conf
containerLogMaxSize: 10Mi
`

func (n *Node) startKubelet(opts NodeOptions) error {
	ports, err := portStrings(2)
	if err != nil {
		return err
	}
	cfg := filepath.Join(n.Dir, "kubelet.yaml")
	body := fmt.Sprintf(kubeletConfig, n.Dir, n.CgroupRoot, ports[0], ports[1],
		filepath.Join(n.c.Dir, "kubelet-"+n.Name), filepath.Join(n.c.Dir, "ca.crt"))
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(n.Dir, "resolv.conf"), []byte("nameserver 127.0.0.1\n"), 0o644); err != nil {
		return err
	}
	if err := saveSysctls(n.Dir); err != nil {
		return err
	}
	assets, err := Assets()
	if err != nil {
		return err
	}
	var labels []string
	for k, v := range opts.Labels {
		labels = append(labels, k+"="+v)
	}
	sort.Strings(labels)
	p, err := startProc(n.Dir, filepath.Join(assets, "kubelet"), "kubelet.log",
		"--config="+cfg, "--kubeconfig="+filepath.Join(n.Dir, "kubelet.kubeconfig"),
		"--root-dir="+n.KubeletRoot, "--cert-dir="+filepath.Join(n.Dir, "kubelet-pki"),
		"--hostname-override="+n.Name, "--node-ip="+n.IP,
		"--node-labels="+strings.Join(labels, ","), "--v=2")
	if err != nil {
		return err
	}
	n.procs = append(n.procs, p)
	return nil
}
