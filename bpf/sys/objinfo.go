package sys

import (
	"fmt"
	goruntime "runtime"
	"unsafe"

	"github.com/cilium/ebpf"
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
	fd, err := objGet(path, 0)
	if err != nil {
		return PinnedObject{}, err
	}
	defer unix.Close(fd)
	var info [3]uint32
	if err := objInfo(fd, unsafe.Pointer(&info), unsafe.Sizeof(info)); err != nil {
		return PinnedObject{}, fmt.Errorf("%s: %w", path, err)
	}
	return PinnedObject{Type: info[0], ID: info[1], ProgramID: info[2]}, nil
}

// ObjectInfo is what ReadPinnedObject reads, from an open fd.
func ObjectInfo(fd int) (PinnedObject, error) {
	var info [3]uint32
	if err := objInfo(fd, unsafe.Pointer(&info), unsafe.Sizeof(info)); err != nil {
		return PinnedObject{}, err
	}
	return PinnedObject{Type: info[0], ID: info[1], ProgramID: info[2]}, nil
}

// ObjectID is the kernel id of the map, program or link fd refers to,
// read with one BPF_OBJ_GET_INFO_BY_FD of its first two fields (type, id:
// the same in bpf_map_info, bpf_prog_info and bpf_link_info). cilium/ebpf's
// Map.Info and Program.Info take two or three system calls and a read of
// /proc/self/fdinfo for it; an apply of 1,000 probes asked for ids 9,000
// times (issue 22).
func ObjectID(fd int) (uint32, error) {
	var info [2]uint32
	if err := objInfo(fd, unsafe.Pointer(&info), unsafe.Sizeof(info)); err != nil {
		return 0, err
	}
	return info[1], nil
}

const (
	bpfMapLookupElem  = 1
	bpfMapLookupBatch = 24
	bpfFRdonly        = 1 << 3
	mapTypePerCPUArr  = 6
)

// objGet opens a pinned object; flags is 0 (read-write, the only way
// programs and links open) or bpfFRdonly (maps).
func objGet(path string, flags uint32) (int, error) {
	p, err := unix.BytePtrFromString(path)
	if err != nil {
		return -1, err
	}
	get := struct {
		pathname  uint64
		bpfFD     uint32
		fileFlags uint32
		pathFD    int32
		_         uint32
	}{pathname: uint64(uintptr(unsafe.Pointer(p))), fileFlags: flags}
	fd, _, errno := unix.Syscall(unix.SYS_BPF, bpfObjGet, uintptr(unsafe.Pointer(&get)), unsafe.Sizeof(get))
	goruntime.KeepAlive(p)
	if errno != 0 {
		return -1, fmt.Errorf("%s: %w", path, errno)
	}
	return int(fd), nil
}

// objInfo fills the first size bytes of info (zeroed: no pointers) with
// the object's info; a kernel older than the layout leaves the rest 0.
func objInfo(fd int, info unsafe.Pointer, size uintptr) error {
	attr := struct {
		fd, infoLen uint32
		info        uint64
	}{fd: uint32(fd), infoLen: uint32(size), info: uint64(uintptr(info))}
	_, _, errno := unix.Syscall(unix.SYS_BPF, bpfObjGetInfoByFD, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	if errno != 0 {
		return errno
	}
	return nil
}

// progInfo is struct bpf_prog_info up to recursion_misses (5.12), the
// kernel's layout (TestProgInfoLayout).
type progInfo struct {
	Type, ID                               uint32
	Tag                                    [8]byte
	JitedLen, XlatedLen                    uint32
	JitedInsns, XlatedInsns, LoadTime      uint64
	CreatedByUID, NrMapIDs                 uint32
	MapIDs                                 uint64
	Name                                   [16]byte
	Ifindex, GPL                           uint32
	NetnsDev, NetnsIno                     uint64
	NrJitedKsyms, NrJitedFuncLens          uint32
	JitedKsyms, JitedFuncLens              uint64
	BTFID, FuncInfoRecSize                 uint32
	FuncInfo                               uint64
	NrFuncInfo, NrLineInfo                 uint32
	LineInfo, JitedLineInfo                uint64
	NrJitedLineInfo, LineInfoRecSize       uint32
	JitedLineInfoRecSize, NrProgTags       uint32
	ProgTags, RunTimeNs, RunCnt, RecMisses uint64
}

// PinnedProgram is what status reads of a pinned program.
type PinnedProgram struct {
	ID uint32
	// RecursionMisses counts the runs the kernel skipped because another
	// BPF program was running on the CPU (0 before 5.12).
	RecursionMisses uint64
}

// ReadPinnedProgram reads a pinned program's id and recursion misses in
// two system calls and a close, where opening it through cilium/ebpf
// takes a dozen: status does it for every probe.
func ReadPinnedProgram(path string) (PinnedProgram, error) {
	fd, err := objGet(path, 0)
	if err != nil {
		return PinnedProgram{}, err
	}
	defer unix.Close(fd)
	var info progInfo
	if err := objInfo(fd, unsafe.Pointer(&info), unsafe.Sizeof(info)); err != nil {
		return PinnedProgram{}, fmt.Errorf("%s: %w", path, err)
	}
	return PinnedProgram{ID: info.ID, RecursionMisses: info.RecMisses}, nil
}

// SumPinnedCounters opens a pinned per-CPU array of u64 counters
// read-only and returns its id and its first n elements, each summed over
// the possible CPUs: every probe's stats map, read by status.
func SumPinnedCounters(path string, n int) (id uint32, sums []uint64, err error) {
	fd, err := objGet(path, bpfFRdonly)
	if err != nil {
		return 0, nil, err
	}
	defer unix.Close(fd)
	var info [5]uint32 // type, id, key_size, value_size, max_entries
	if err := objInfo(fd, unsafe.Pointer(&info), unsafe.Sizeof(info)); err != nil {
		return 0, nil, fmt.Errorf("%s: %w", path, err)
	}
	if info[0] != mapTypePerCPUArr || info[2] != 4 || info[3] != 8 || int(info[4]) < n {
		return info[1], nil, fmt.Errorf("%s: not a per-CPU array of %d u64 counters", path, n)
	}
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		return info[1], nil, err
	}
	sums = make([]uint64, n)
	if batchSumCounters(fd, cpus, sums) {
		return info[1], sums, nil
	}
	per := make([]uint64, cpus)
	for i := range sums {
		key := uint32(i)
		attr := struct {
			mapFD uint32
			_     uint32
			key   uint64
			value uint64
			flags uint64
		}{mapFD: uint32(fd), key: uint64(uintptr(unsafe.Pointer(&key))), value: uint64(uintptr(unsafe.Pointer(&per[0])))}
		_, _, errno := unix.Syscall(unix.SYS_BPF, bpfMapLookupElem, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
		goruntime.KeepAlive(&key)
		goruntime.KeepAlive(per)
		if errno != 0 {
			return info[1], nil, fmt.Errorf("%s: lookup %d: %w", path, i, errno)
		}
		for _, v := range per {
			sums[i] += v
		}
	}
	return info[1], sums, nil
}

// batchSumCounters reads the first len(sums) counters of the per-CPU
// array fd in one BPF_MAP_LOOKUP_BATCH (Linux 5.6), summed over the CPUs
// into sums. It reports false, sums untouched, where the kernel did not
// give them all: the caller looks them up one by one.
func batchSumCounters(fd, cpus int, sums []uint64) bool {
	n := len(sums)
	if n == 0 {
		return true
	}
	keys := make([]uint32, n)
	values := make([]uint64, n*cpus) // per key, a u64 per possible CPU
	var out uint32
	attr := struct {
		inBatch, outBatch, keys, values uint64
		count, mapFD                    uint32
		elemFlags, flags                uint64
	}{
		outBatch: uint64(uintptr(unsafe.Pointer(&out))),
		keys:     uint64(uintptr(unsafe.Pointer(&keys[0]))),
		values:   uint64(uintptr(unsafe.Pointer(&values[0]))),
		count:    uint32(n), mapFD: uint32(fd),
	}
	_, _, errno := unix.Syscall(unix.SYS_BPF, bpfMapLookupBatch, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	goruntime.KeepAlive(&out)
	goruntime.KeepAlive(keys)
	goruntime.KeepAlive(values)
	if errno != 0 || int(attr.count) != n {
		return false
	}
	for i, k := range keys {
		if int(k) != i {
			return false
		}
	}
	for i := range sums {
		for _, v := range values[i*cpus : (i+1)*cpus] {
			sums[i] += v
		}
	}
	return true
}
