package sys

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	goruntime "runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// bpfLinkCreate is BPF_LINK_CREATE; attachTraceUprobeSession is
// BPF_TRACE_UPROBE_SESSION (6.13), which cilium/ebpf v0.22 has no API for.
const (
	bpfLinkCreate            = 28
	attachTraceUprobeSession = 57
)

// UprobeOffsets are the file offsets of functions in an ELF file, where
// the kernel puts uprobes: a function symbol's address less its loadable
// segment's address, plus the segment's offset in the file.
func UprobeOffsets(f *os.File, functions []string) ([]uint64, error) {
	ef, err := elf.NewFile(f)
	if err != nil {
		return nil, err
	}
	addr, err := functionAddrs(ef)
	if err != nil {
		return nil, err
	}
	out := make([]uint64, len(functions))
	for i, fn := range functions {
		a, ok := addr[fn]
		if !ok {
			return nil, fmt.Errorf("function %s: no such symbol", fn)
		}
		off, found := executableOffset(ef, a)
		if !found {
			return nil, fmt.Errorf("function %s at %#x: in no executable segment", fn, a)
		}
		out[i] = off
	}
	return out, nil
}

// functionAddrs returns the address of each defined function symbol of
// ef, from .symtab first, then .dynsym.
func functionAddrs(ef *elf.File) (map[string]uint64, error) {
	addr := map[string]uint64{}
	for _, read := range []func() ([]elf.Symbol, error){ef.Symbols, ef.DynamicSymbols} {
		syms, err := read()
		if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
			return nil, err
		}
		for _, s := range syms {
			if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Value != 0 && s.Section != elf.SHN_UNDEF {
				if _, seen := addr[s.Name]; !seen {
					addr[s.Name] = s.Value
				}
			}
		}
	}
	return addr, nil
}

// executableOffset returns the file offset of address a in an executable
// loadable segment of ef, and whether one holds it.
func executableOffset(ef *elf.File, a uint64) (uint64, bool) {
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 && a >= p.Vaddr && a < p.Vaddr+p.Memsz {
			return a - p.Vaddr + p.Off, true
		}
	}
	return 0, false
}

// UprobeSessionLink makes a uprobe.session link (6.13): prog runs at the
// entry and the return of each offset of the file at path, with the
// cookie of the same index; pid > 0 limits it to that process. It returns
// the link's file descriptor.
func UprobeSessionLink(prog int, path string, offsets, cookies []uint64, pid uint32) (int, error) {
	if len(offsets) == 0 || len(cookies) != len(offsets) {
		return -1, errors.New("uprobe.session: one cookie per offset")
	}
	p, err := unix.BytePtrFromString(path)
	if err != nil {
		return -1, err
	}
	attr := struct {
		progFD, targetFD, attachType, flags uint32
		path, offsets, refCtrOffsets        uint64
		cookies                             uint64
		cnt, umFlags, pid                   uint32
		_                                   uint32
	}{
		progFD: uint32(prog), attachType: attachTraceUprobeSession,
		path:    uint64(uintptr(unsafe.Pointer(p))),
		offsets: uint64(uintptr(unsafe.Pointer(&offsets[0]))),
		cookies: uint64(uintptr(unsafe.Pointer(&cookies[0]))),
		cnt:     uint32(len(offsets)), pid: pid,
	}
	fd, _, errno := unix.Syscall(unix.SYS_BPF, bpfLinkCreate, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	goruntime.KeepAlive(p)
	goruntime.KeepAlive(offsets)
	goruntime.KeepAlive(cookies)
	if errno != 0 {
		return -1, errno
	}
	return int(fd), nil
}
