package kubetest

import (
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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
	f := func(name string) string { return filepath.Join(c.Dir, name) }
	err = c.startControllerManager(filepath.Join(assets, "kube-controller-manager"), []string{"*"},
		"--root-ca-file="+f("ca.crt"), "--service-account-private-key-file="+f("sa.key"),
		"--concurrent-daemonset-syncs=2", "--node-monitor-grace-period=60s")
	if err != nil {
		return err
	}
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	err = c.run(filepath.Join(assets, "kube-scheduler"), "kube-scheduler.log",
		"--kubeconfig="+c.Kubeconfig, "--authentication-kubeconfig="+c.Kubeconfig,
		"--authorization-kubeconfig="+c.Kubeconfig,
		"--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(ports[0]), "--v=1")
	if err != nil {
		return fmt.Errorf("kube-scheduler: %w", err)
	}
	if err := c.startServiceProxy(); err != nil {
		return err
	}
	c.controllers = true
	return nil
}

// randomServiceNet picks the service /24 of a cluster: 10.A.B.0/24 with A
// in 0..99 (nodes' pod networks are 10.100-199.X.0/24).
func randomServiceNet() string {
	b := make([]byte, 2)
	rand.Read(b)
	return fmt.Sprintf("10.%d.%d", int(b[0])%100, b[1])
}

// ServiceIP is the kubernetes Service's ClusterIP, which pods reach the
// API server at (KUBERNETES_SERVICE_HOST).
func (c *Cluster) ServiceIP() string { return c.serviceNet + ".1" }

// startServiceProxy stands in for kube-proxy for the one Service pods
// need, kubernetes (port 443): the ClusterIP is made an address of the
// host (on lo) and a forwarder there passes connections to the API
// server on loopback. Once per cluster; stopped with it.
func (c *Cluster) startServiceProxy() error {
	if c.proxy != nil {
		return nil
	}
	ip := c.ServiceIP()
	if out, err := exec.Command("ip", "addr", "add", ip+"/32", "dev", "lo").CombinedOutput(); err != nil {
		return fmt.Errorf("ip addr add %s/32 dev lo: %v: %s", ip, err, out)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "443"))
	if err != nil {
		exec.Command("ip", "addr", "del", ip+"/32", "dev", "lo").Run()
		return err
	}
	c.proxy = ln
	target := strings.TrimPrefix(c.Host, "https://")
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go forward(conn, target)
		}
	}()
	return nil
}

func forward(conn net.Conn, target string) {
	defer conn.Close()
	up, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, conn); done <- struct{}{} }()
	go func() { io.Copy(conn, up); done <- struct{}{} }()
	<-done
}

func (c *Cluster) stopServiceProxy() {
	c.ctrlMu.Lock()
	defer c.ctrlMu.Unlock()
	if c.proxy == nil {
		return
	}
	c.proxy.Close()
	c.proxy = nil
	exec.Command("ip", "addr", "del", c.ServiceIP()+"/32", "dev", "lo").Run()
}
