package bpf

import "strconv"

//go:generate go run ../cmd/mksyscalls

// SyscallName is the name of system call nr on arch ("openat"), or "" when
// arch has no such call.
func SyscallName(arch Arch, nr int64) string { return syscallNames[arch][nr] }

// SyscallNames lists arch's system calls, the number written in decimal:
// the table syscall_name(x) shows a key through. It is nil for an
// architecture probectl does not know.
func SyscallNames(arch Arch) map[string]string {
	table := syscallNames[arch]
	if table == nil {
		return nil
	}
	out := make(map[string]string, len(table))
	for nr, name := range table {
		out[strconv.FormatInt(nr, 10)] = name
	}
	return out
}
