package bpf

import (
	"errors"

	"golang.org/x/sys/unix"
)

// ErrPermission is returned when the process lacks the capabilities BPF
// needs.
var ErrPermission = errors.New("probectl needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN)")

// Capabilities that suffice to load, attach and pin probes: CAP_BPF with
// CAP_PERFMON (Linux 5.8), or CAP_SYS_ADMIN.
const (
	capSysAdmin = 21
	capPerfmon  = 38
	capBPF      = 39
)

// CheckPrivileges reports ErrPermission unless the process's effective
// capabilities suffice; root has them all, but root is not required.
func CheckPrivileges() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return err
	}
	has := func(c uint) bool { return data[c/32].Effective&(1<<(c%32)) != 0 }
	if has(capSysAdmin) || (has(capBPF) && has(capPerfmon)) {
		return nil
	}
	return ErrPermission
}
