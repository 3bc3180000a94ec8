package bpf

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The commands of bpf(2) that PinnedObject uses.
const (
	bpfObjGet         = 7
	bpfObjGetInfoByFD = 15
)

// PinnedObject is what a pin names: its kind's type number, its id and,
// for a link only, the id of its program (the first fields of
// bpf_map_info and bpf_link_info). It reads them with two system calls, where opening the
// pin as a cilium/ebpf Map or Link takes several more and a read of
// /proc (status checks every pin of every probe).
type PinnedObject struct {
	Type, ID, ProgramID uint32
}

// ReadPinnedObject reads the object pinned at path (opened read-write, as
// the kernel wants for a link; nothing is written).
func ReadPinnedObject(path string) (PinnedObject, error) {
	p, err := unix.BytePtrFromString(path)
	if err != nil {
		return PinnedObject{}, err
	}
	get := struct {
		pathname  uint64
		bpfFD     uint32
		fileFlags uint32
		pathFD    int32
		_         uint32
	}{pathname: uint64(uintptr(unsafe.Pointer(p)))}
	fd, _, errno := unix.Syscall(unix.SYS_BPF, bpfObjGet, uintptr(unsafe.Pointer(&get)), unsafe.Sizeof(get))
	runtime.KeepAlive(p)
	if errno != 0 {
		return PinnedObject{}, fmt.Errorf("%s: %w", path, errno)
	}
	defer unix.Close(int(fd))
	var info [3]uint32
	attr := struct {
		fd, infoLen uint32
		info        uint64
	}{fd: uint32(fd), infoLen: uint32(unsafe.Sizeof(info)), info: uint64(uintptr(unsafe.Pointer(&info)))}
	_, _, errno = unix.Syscall(unix.SYS_BPF, bpfObjGetInfoByFD, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	runtime.KeepAlive(&info)
	if errno != 0 {
		return PinnedObject{}, fmt.Errorf("%s: %w", path, errno)
	}
	return PinnedObject{Type: info[0], ID: info[1], ProgramID: info[2]}, nil
}
