// Command vminit is /init in the VMs of the kernel matrix. It mounts what
// probectl needs (proc, sysfs, devtmpfs, tmpfs, tracefs, bpffs), runs the
// test binary /probectl.test with the arguments in /args (one per line),
// prints "PROBECTL-VM-EXIT: CODE" on the console and powers the VM off.
//
// vmexec builds it statically for the VM's architecture; it never runs on
// a host.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	code := run()
	fmt.Printf("\nPROBECTL-VM-EXIT: %d\n", code)
	unix.Sync()
	_ = unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	time.Sleep(time.Hour) // the kernel powers off; never return from init
}

func run() int {
	mounts := []struct{ src, dir, fs string }{
		{"proc", "/proc", "proc"},
		{"sysfs", "/sys", "sysfs"},
		{"devtmpfs", "/dev", "devtmpfs"},
		{"tmpfs", "/tmp", "tmpfs"},
		{"tracefs", "/sys/kernel/tracing", "tracefs"},
		{"bpf", "/sys/fs/bpf", "bpf"},
		{"debugfs", "/sys/kernel/debug", "debugfs"},
	}
	for _, m := range mounts {
		_ = os.MkdirAll(m.dir, 0o755)
		if err := unix.Mount(m.src, m.dir, m.fs, 0, ""); err != nil && m.fs != "debugfs" {
			fmt.Printf("vminit: mount %s on %s: %v\n", m.fs, m.dir, err)
			return 125
		}
	}
	var args []string
	if b, err := os.ReadFile("/args"); err == nil {
		for _, a := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
			if a != "" {
				args = append(args, a)
			}
		}
	}
	env := []string{"PATH=/bin", "HOME=/tmp", "TMPDIR=/tmp", "PROBECTL_VM=1"}
	if b, err := os.ReadFile("/env"); err == nil {
		for _, e := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
			if e != "" {
				env = append(env, e)
			}
		}
	}
	cmd := exec.Command("/probectl.test", args...)
	cmd.Dir = "/tmp"
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, os.Stdout, os.Stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			fmt.Printf("vminit: test binary killed by %v\n", ws.Signal())
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	if err != nil {
		fmt.Printf("vminit: %v\n", err)
		return 126
	}
	return 0
}
