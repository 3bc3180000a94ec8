package kubetest

import (
	"fmt"
	"path/filepath"
	"strconv"
)

// StartControllers starts kube-controller-manager and kube-scheduler
// against the cluster (once; later calls do nothing), so that DaemonSets
// get pods, pods get nodes, service accounts and kube-root-ca.crt get
// made and garbage is collected. They run as the admin, without leader
// election, serving on free loopback ports; both stop with the cluster.
func (c *Cluster) StartControllers() error {
	c.ctrlMu.Lock()
	defer c.ctrlMu.Unlock()
	if c.controllers {
		return nil
	}
	assets, err := Assets()
	if err != nil {
		return err
	}
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	f := func(name string) string { return filepath.Join(c.Dir, name) }
	err = c.run(filepath.Join(assets, "kube-controller-manager"), "kube-controller-manager.log",
		"--kubeconfig="+c.Kubeconfig, "--authentication-kubeconfig="+c.Kubeconfig,
		"--authorization-kubeconfig="+c.Kubeconfig,
		"--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(ports[0]),
		"--root-ca-file="+f("ca.crt"), "--service-account-private-key-file="+f("sa.key"),
		"--use-service-account-credentials=false", "--controllers=*",
		"--concurrent-daemonset-syncs=2", "--node-monitor-grace-period=60s", "--v=1")
	if err != nil {
		return fmt.Errorf("kube-controller-manager: %w", err)
	}
	err = c.run(filepath.Join(assets, "kube-scheduler"), "kube-scheduler.log",
		"--kubeconfig="+c.Kubeconfig, "--authentication-kubeconfig="+c.Kubeconfig,
		"--authorization-kubeconfig="+c.Kubeconfig,
		"--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(ports[1]), "--v=1")
	if err != nil {
		return fmt.Errorf("kube-scheduler: %w", err)
	}
	c.controllers = true
	return nil
}
