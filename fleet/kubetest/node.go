package kubetest

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeOptions change how StartNode makes its node.
type NodeOptions struct {
	// Labels are added to the node's (kubelet --node-labels).
	Labels map[string]string
}

// Node is a real node of a Cluster: a private containerd (runc, cgroupfs
// driver, its own root, state and socket) and a kubelet registered under a
// name of its own, with its own root directory, cgroup root and a bridge
// network (Debian's bridge and host-local CNI plugins, a private /24).
type Node struct {
	// Name is the Node object's name.
	Name string
	// Dir holds the node's sockets, state and logs.
	Dir string
	// Socket is containerd's socket (for ctr -a).
	Socket string
	// IP is the node's InternalIP: its bridge's address, which the pods'
	// gateway is.
	IP string
	// CgroupRoot is the kubelet's cgroup root ("/NAME"): the pods'
	// cgroups are under it in every hierarchy.
	CgroupRoot string
	// KubeletRoot is the kubelet's --root-dir (pods' volumes).
	KubeletRoot string

	c      *Cluster
	procs  []*proc
	subnet string
}

// nodeDirPrefix names the nodes' directories under os.TempDir(): short,
// for the sockets' 108-byte limit; StartNode cleans the ones whose test
// died.
const nodeDirPrefix = "pcnode-"

// StartNode starts a node for the cluster (and its controllers: see
// StartControllers), waits until it is Ready and stops it, removing its
// containers, mounts, cgroups and bridge, when the test ends. Nodes that
// a killed test left behind are removed first. It fails the test when the
// node cannot start; with CI=true a missing containerd, runc or CNI
// plugin is a failure, otherwise a skip.
func StartNode(t testing.TB, c *Cluster, opts NodeOptions) *Node {
	t.Helper()
	requireNodeTools(t)
	cleanStaleNodes()
	if err := c.StartControllers(); err != nil {
		t.Fatalf("kube lab: %v", err)
	}
	n, err := newNode(c)
	if err != nil {
		t.Fatalf("kube lab: %v", err)
	}
	t.Cleanup(func() {
		n.Stop()
		if t.Failed() {
			t.Logf("kube lab: node %s's logs kept in %s", n.Name, n.Dir)
			return
		}
		os.RemoveAll(n.Dir)
	})
	if err := n.start(opts); err != nil {
		t.Fatalf("kube lab: node %s: %v", n.Name, err)
	}
	if err := n.waitReady(3 * time.Minute); err != nil {
		t.Fatalf("kube lab: node %s: %v (kubelet log: %s)", n.Name, err, tail(filepath.Join(n.Dir, "kubelet.log")))
	}
	return n
}

// requireNodeTools skips (fails with CI=true) when the node's tools are
// not installed.
func requireNodeTools(t testing.TB) {
	t.Helper()
	var missing []string
	for _, tool := range []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	for _, plugin := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join(cniBinDir, plugin)); err != nil {
			missing = append(missing, cniBinDir+"/"+plugin)
		}
	}
	if len(missing) == 0 {
		return
	}
	msg := fmt.Sprintf("kube lab node: %s not installed (apt-get install containerd runc containernetworking-plugins iproute2)", strings.Join(missing, ", "))
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// cniBinDir is where Debian's containernetworking-plugins are.
const cniBinDir = "/usr/lib/cni"

func newNode(c *Cluster) (*Node, error) {
	dir, err := os.MkdirTemp("", nodeDirPrefix)
	if err != nil {
		return nil, err
	}
	id := make([]byte, 4)
	rand.Read(id)
	name := "lab-" + hex.EncodeToString(id)
	n := &Node{Name: name, Dir: dir, Socket: filepath.Join(dir, "containerd.sock"),
		CgroupRoot: "/pc-" + hex.EncodeToString(id), KubeletRoot: filepath.Join(dir, "kubelet"), c: c}
	// 10.A.B.0/24, A in 100..199: a clash between two labs is unlikely
	// and only costs a retry of the test.
	n.subnet = fmt.Sprintf("10.%d.%d", 100+int(id[0])%100, id[1])
	n.IP = n.subnet + ".1"
	// What a later StartNode needs to clean up after this test if it is
	// killed.
	owner := fmt.Sprintf("%d\n%s\n%s\n", os.Getpid(), n.CgroupRoot, n.bridge())
	return n, os.WriteFile(filepath.Join(dir, "owner"), []byte(owner), 0o644)
}

// bridge is the name of the node's bridge (15 bytes at most).
func (n *Node) bridge() string { return "pcbr" + strings.TrimPrefix(n.Name, "lab-") }

func (n *Node) start(opts NodeOptions) error {
	if err := hostMounts(); err != nil {
		return err
	}
	if err := n.writeNodeCerts(); err != nil {
		return err
	}
	if err := n.setupNetwork(); err != nil {
		return err
	}
	if err := n.startContainerd(); err != nil {
		return err
	}
	if err := n.importPause(); err != nil {
		return err
	}
	if err := makeCgroupRoot(n.CgroupRoot); err != nil {
		return err
	}
	return n.startKubelet(opts)
}

// hostMounts mounts what a node's systemd mounts and the agent's
// DaemonSet binds: bpffs on /sys/fs/bpf and tracefs on
// /sys/kernel/tracing, when they are not mounted.
func hostMounts() error {
	for _, m := range []struct{ fs, dir, magic string }{
		{"bpf", "/sys/fs/bpf", "bpf"}, {"tracefs", "/sys/kernel/tracing", "tracefs"},
	} {
		mounts, _ := os.ReadFile("/proc/self/mounts")
		if strings.Contains(string(mounts), " "+m.dir+" "+m.magic+" ") {
			continue
		}
		if out, err := exec.Command("mount", "-t", m.fs, m.fs, m.dir).CombinedOutput(); err != nil {
			return fmt.Errorf("mount %s on %s: %v: %s", m.fs, m.dir, err, out)
		}
	}
	return nil
}

// writeNodeCerts issues the kubelet's client certificate
// (system:node:NAME in system:nodes, which the Node authorizer knows) and
// its serving certificate for the node's IP, and its kubeconfig.
func (n *Node) writeNodeCerts() error {
	c := n.c
	crt, key, err := c.ClientCert("system:node:"+n.Name, "system:nodes")
	if err != nil {
		return err
	}
	serving := &x509.Certificate{Subject: pkix.Name{CommonName: n.Name},
		IPAddresses: []net.IP{net.ParseIP(n.IP), net.IPv4(127, 0, 0, 1)}, DNSNames: []string{n.Name},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	if err := c.issue(serving, "kubelet-"+n.Name); err != nil {
		return err
	}
	cfg := *c.Admin
	cfg.TLSClientConfig.CertFile, cfg.TLSClientConfig.KeyFile = crt, key
	return c.WriteKubeconfig(filepath.Join(n.Dir, "kubelet.kubeconfig"), &cfg)
}

// waitReady waits for the Node object to be Ready.
func (n *Node) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	last := "not registered"
	for time.Now().Before(deadline) {
		if exited(n.procs) {
			return fmt.Errorf("a node process exited")
		}
		node, err := n.c.client.CoreV1().Nodes().Get(context.Background(), n.Name, metav1.GetOptions{})
		if err == nil {
			for _, cond := range node.Status.Conditions {
				if cond.Type == corev1.NodeReady {
					if cond.Status == corev1.ConditionTrue {
						return nil
					}
					last = cond.Reason + ": " + cond.Message
				}
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("not Ready after %s: %s", timeout, last)
}

func exited(procs []*proc) bool {
	for _, p := range procs {
		select {
		case <-p.done:
			return true
		default:
		}
	}
	return false
}

// Stop stops the kubelet and containerd and removes what they made on
// the host: containers and their shims, network namespaces, mounts under
// Dir, the cgroups under CgroupRoot, the bridge and its address leases.
func (n *Node) Stop() {
	for i := len(n.procs) - 1; i >= 0; i-- {
		n.procs[i].stop()
	}
	n.procs = nil
	removeNode(n.Dir, n.CgroupRoot, n.bridge())
	restoreSysctls(n.Dir)
}

// ctr runs ctr against the node's containerd in namespace k8s.io.
func (n *Node) ctr(args ...string) error {
	out, err := exec.Command("ctr", append([]string{"-a", n.Socket, "-n", "k8s.io"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ctr %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// ports returns n free loopback ports as strings.
func portStrings(n int) ([]string, error) {
	ports, err := freePorts(n)
	if err != nil {
		return nil, err
	}
	s := make([]string, n)
	for i, p := range ports {
		s[i] = strconv.Itoa(p)
	}
	return s, nil
}
