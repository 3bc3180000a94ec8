package runtime

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strconv"
	"syscall"

	"github.com/probectl/probectl/compiler/compiled"
	"github.com/probectl/probectl/internal/pods"
	"golang.org/x/sys/unix"
)

// Display decoders: a key or an event field whose layout names a decoder
// (compiled.KeyField.Decode) shows through it in show, -json and events.
// The kernel keeps the number; only what prints changes. A value a
// decoder does not know shows as the number, named ("errno 999"), never
// blank.

// decoder turns a field's raw bytes (its slot, little-endian) into what
// prints.
type decoder func(f compiled.KeyField, raw []byte) any

// decoders by the name a layout gives. A name missing here (a layout of a
// newer probectl) shows the value by its kind. Decoders of addresses
// (ksym, usym) go here too.
var decoders = map[string]decoder{
	"errno":                  decodeErrno,
	"signal":                 decodeSignal,
	"syscall":                decodeSyscall,
	"labels":                 decodeLabels,
	"hex":                    decodeHex,
	"inet":                   decodeInet,
	"inet6":                  decodeInet6,
	"cgroup":                 decodeCgroup,
	compiled.DecodePod:       func(_ compiled.KeyField, raw []byte) any { return podNames(raw).Pod },
	compiled.DecodeNamespace: func(_ compiled.KeyField, raw []byte) any { return podNames(raw).Namespace },
	compiled.DecodeContainer: func(_ compiled.KeyField, raw []byte) any { return podNames(raw).Container },
	compiled.DecodeNode:      func(compiled.KeyField, []byte) any { return pods.NodeName() },
	"ksym":                   decodeKsym,
	"usym":                   decodeUsym,
}

// podNames are the names of the pod whose cgroup raw's id is
// (internal/pods).
func podNames(raw []byte) pods.Names { return pods.ByCgroup(uint64(decodeInt(raw))) }

// kernelErrnos are the kernel's own error numbers (include/linux/errno.h),
// which system calls return on their way out (raw_syscalls:sys_exit sees
// ERESTARTSYS) and kernel functions return, but user space never gets.
var kernelErrnos = map[int64]string{
	512: "ERESTARTSYS", 513: "ERESTARTNOINTR", 514: "ERESTARTNOHAND", 515: "ENOIOCTLCMD",
	516: "ERESTART_RESTARTBLOCK", 517: "EPROBE_DEFER", 518: "EOPENSTALE", 519: "ENOPARAM",
	521: "EBADHANDLE", 522: "ENOTSYNC", 523: "EBADCOOKIE", 524: "ENOTSUPP", 525: "ETOOSMALL",
	526: "ESERVERFAULT", 527: "EBADTYPE", 528: "EJUKEBOX", 529: "EIOCBQUEUED", 530: "ERECALLCONFLICT",
	531: "ENOGRACE",
}

// decodeErrno names an errno, given negative (-ret) or positive.
func decodeErrno(_ compiled.KeyField, raw []byte) any {
	n := decodeInt(raw)
	if n == 0 {
		return "0"
	}
	e := n
	if e < 0 {
		e = -e
	}
	if e > 0 && e < 1<<16 {
		if name := unix.ErrnoName(syscall.Errno(e)); name != "" {
			return name
		}
	}
	if name, ok := kernelErrnos[e]; ok {
		return name
	}
	return fmt.Sprintf("errno %d", n)
}

// decodeSignal names a signal: SIGKILL, and the real-time signals as the
// kernel numbers them (SIGRTMIN is 32). 0, no signal (kill(2) only
// checks that the target exists and may be signalled), is "N/A", as
// bpftrace's killsnoop.bt prints it.
func decodeSignal(_ compiled.KeyField, raw []byte) any {
	n := decodeInt(raw)
	switch {
	case n == 0:
		return "N/A"
	case n > 0 && n < 32:
		if name := unix.SignalName(syscall.Signal(n)); name != "" {
			return name
		}
	case n == 32:
		return "SIGRTMIN"
	case n == 64:
		return "SIGRTMAX"
	case n > 32 && n < 64:
		return fmt.Sprintf("SIGRTMIN+%d", n-32)
	}
	return fmt.Sprintf("signal %d", n)
}

// decodeSyscall names a system call by the target's table, which the
// layout carries.
func decodeSyscall(f compiled.KeyField, raw []byte) any {
	n := decodeInt(raw)
	if name, ok := f.Labels[strconv.FormatInt(n, 10)]; ok {
		return name
	}
	return fmt.Sprintf("syscall %d", n)
}

// decodeLabels names a number by the spec's labels block.
func decodeLabels(f compiled.KeyField, raw []byte) any {
	n := strconv.FormatInt(decodeInt(raw), 10)
	if name, ok := f.Labels[n]; ok {
		return name
	}
	return n
}

// decodeHex writes the 64 bits in hex.
func decodeHex(_ compiled.KeyField, raw []byte) any {
	return fmt.Sprintf("0x%x", uint64(decodeInt(raw)))
}

// decodeInet writes an IPv4 address kept as the kernel stores it (network
// byte order: the bytes in memory order), and the port after it, kept
// likewise, when the slot has one.
func decodeInet(_ compiled.KeyField, raw []byte) any {
	if len(raw) < 4 {
		return fmt.Sprintf("inet %x", raw)
	}
	addr := netip.AddrFrom4([4]byte(raw[:4]))
	if len(raw) >= 16 {
		return netip.AddrPortFrom(addr, binary.BigEndian.Uint16(raw[8:10])).String()
	}
	return addr.String()
}

// decodeInet6 writes an IPv6 address of 16 bytes, and the port after it
// when the slot has one.
func decodeInet6(_ compiled.KeyField, raw []byte) any {
	if len(raw) < 16 {
		return fmt.Sprintf("inet6 %x", raw)
	}
	addr := netip.AddrFrom16([16]byte(raw[:16]))
	if len(raw) >= 24 {
		return netip.AddrPortFrom(addr, binary.BigEndian.Uint16(raw[16:18])).String()
	}
	return addr.String()
}

// decodeCgroup writes a cgroup v2 id as the cgroup's path under the
// cgroup2 mount, as it is when the key is shown; an id that names no
// cgroup there now (removed since, or on another mount) shows as itself.
func decodeCgroup(_ compiled.KeyField, raw []byte) any {
	id := uint64(decodeInt(raw))
	if path, ok := pods.CgroupPath(id); ok {
		return path
	}
	return fmt.Sprintf("cgroup %d", id)
}
