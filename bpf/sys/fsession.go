package sys

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	goruntime "runtime"
	"strings"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"
)

// AttachTraceFsession is BPF_TRACE_FSESSION (Linux 7.0 on x86_64, later
// on arm64): one
// tracing program run by the function's BPF trampoline at its entry and at
// its exit, with a session cookie. cilium/ebpf v0.22 cannot load it (it
// does not resolve the target of attach type 58), so [LoadFsession] and
// [FsessionLink] make the system calls themselves.
const AttachTraceFsession = ebpf.AttachType(58)

// The bpf(2) commands and the program type used here.
const (
	bpfProgLoad     = 5
	progTypeTracing = 26
)

// progLoadAttr is the head of union bpf_attr for BPF_PROG_LOAD, up to
// log_true_size (6.4); the kernel zero-fills what follows.
type progLoadAttr struct {
	progType, insnCnt               uint32
	insns, license                  uint64
	logLevel, logSize               uint32
	logBuf                          uint64
	kernVersion, progFlags          uint32
	progName                        [16]byte
	progIfindex, expectedAttachType uint32
	progBTFFD, funcInfoRecSize      uint32
	funcInfo                        uint64
	funcInfoCnt, lineInfoRecSize    uint32
	lineInfo                        uint64
	lineInfoCnt, attachBTFID        uint32
	attachBTFObjFD, coreReloCnt     uint32
	fdArray, coreRelos              uint64
	coreReloRecSize, logTrueSize    uint32
}

// fsessionLogSize is the verifier log kept when a load fails.
const fsessionLogSize = 4 << 20

// LoadFsession loads spec, a tracing program, as an fsession program on
// the vmlinux function fn: kfunc calls must be resolved already
// (bpf.ResolveKfuncs), and maps gives the map of each reference. A verifier
// rejection is an [ebpf.VerifierError] with the log; errors name fn.
func LoadFsession(spec *ebpf.ProgramSpec, fn string, maps func(ref string) *ebpf.Map, kernel *btf.Spec) (*ebpf.Program, error) {
	id, err := fsessionTarget(kernel, fn)
	if err != nil {
		return nil, err
	}
	code, err := fsessionCode(spec.Instructions, fn, maps)
	if err != nil {
		return nil, err
	}
	license := []byte(spec.License + "\x00")
	attr := progLoadAttr{
		progType: progTypeTracing, insnCnt: uint32(len(code) / asm.InstructionSize),
		insns:              uint64(uintptr(unsafe.Pointer(&code[0]))),
		license:            uint64(uintptr(unsafe.Pointer(&license[0]))),
		expectedAttachType: uint32(AttachTraceFsession),
		attachBTFID:        uint32(id),
	}
	copy(attr.progName[:15], spec.Name)
	fd, err := loadFsessionAttr(&attr, code, license, fn)
	if err != nil {
		return nil, err
	}
	prog, err := ebpf.NewProgramFromFD(fd)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("fsession %s: %w", fn, err)
	}
	return prog, nil
}

// fsessionTarget returns the BTF id of the vmlinux function fn.
func fsessionTarget(kernel *btf.Spec, fn string) (btf.TypeID, error) {
	if kernel == nil {
		return 0, fmt.Errorf("fsession %s: no kernel BTF", fn)
	}
	var target *btf.Func
	if err := kernel.TypeByName(fn, &target); err != nil {
		return 0, fmt.Errorf("fsession %s: no such function in vmlinux's BTF (a kernel module's functions need attach = \"fentry\"): %w", fn, err)
	}
	id, err := kernel.TypeID(target)
	if err != nil {
		return 0, fmt.Errorf("fsession %s: %w", fn, err)
	}
	return id, nil
}

// fsessionCode returns the bytecode of src, each map reference
// associated with the map that maps gives it.
func fsessionCode(src asm.Instructions, fn string, maps func(ref string) *ebpf.Map) ([]byte, error) {
	insns := make(asm.Instructions, len(src))
	copy(insns, src)
	for i := range insns {
		ins := &insns[i]
		if !ins.IsLoadFromMap() || ins.Reference() == "" {
			continue
		}
		m := maps(ins.Reference())
		if m == nil {
			return nil, fmt.Errorf("fsession %s: no map %q", fn, ins.Reference())
		}
		if err := ins.AssociateMap(m); err != nil {
			return nil, fmt.Errorf("fsession %s: map %q: %w", fn, ins.Reference(), err)
		}
	}
	var buf bytes.Buffer
	if err := insns.Marshal(&buf, binary.LittleEndian); err != nil { // amd64 and arm64; cilium/ebpf takes no NativeEndian
		return nil, fmt.Errorf("fsession %s: %w", fn, err)
	}
	if buf.Len() == 0 {
		return nil, fmt.Errorf("fsession %s: no instructions", fn)
	}
	return buf.Bytes(), nil
}

// loadFsessionAttr loads the program attr describes (its code and
// license kept alive) and returns its descriptor; a refusal other than
// EPERM is loaded again with the verifier's log, to say why.
func loadFsessionAttr(attr *progLoadAttr, code, license []byte, fn string) (int, error) {
	load := func() (int, error) {
		fd, _, errno := unix.Syscall(unix.SYS_BPF, bpfProgLoad, uintptr(unsafe.Pointer(attr)), unsafe.Sizeof(*attr))
		goruntime.KeepAlive(code)
		goruntime.KeepAlive(license)
		if errno != 0 {
			return -1, errno
		}
		return int(fd), nil
	}
	fd, err := load()
	if err != nil && !errors.Is(err, unix.EPERM) {
		// Again with the verifier's log, to say why.
		log := make([]byte, fsessionLogSize)
		attr.logLevel, attr.logSize = 1, uint32(len(log))
		attr.logBuf = uint64(uintptr(unsafe.Pointer(&log[0])))
		fd, err = load()
		goruntime.KeepAlive(log)
		if err != nil {
			text := strings.TrimRight(unix.ByteSliceToString(log), "\n")
			if text != "" {
				return -1, &fsessionVerifierError{fn, &ebpf.VerifierError{Cause: err, Log: strings.Split(text, "\n")}}
			}
		}
	}
	if err != nil {
		return -1, fmt.Errorf("load fsession program on %s: %w", fn, err)
	}
	return fd, nil
}

// fsessionVerifierError is a verifier rejection of an fsession program:
// an [ebpf.VerifierError] (which cannot be given a source from outside
// cilium/ebpf) that says which function.
type fsessionVerifierError struct {
	fn string
	ve *ebpf.VerifierError
}

// Error reads as cilium/ebpf's: the cause, then the log's last lines.
func (e *fsessionVerifierError) Error() string {
	return "load fsession program on " + e.fn + e.ve.Error() // ve's starts ": CAUSE"
}

func (e *fsessionVerifierError) Unwrap() error { return e.ve }

// FsessionLink attaches an fsession program (loaded by [LoadFsession]) to
// its function, with cookie for bpf_get_attach_cookie, by BPF_LINK_CREATE.
// It returns the link's file descriptor.
func FsessionLink(prog int, cookie uint64) (int, error) {
	attr := struct {
		progFD, targetFD, attachType, flags uint32
		targetBTFID, _                      uint32
		cookie                              uint64
	}{progFD: uint32(prog), attachType: uint32(AttachTraceFsession), cookie: cookie}
	fd, _, errno := unix.Syscall(unix.SYS_BPF, bpfLinkCreate, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	if errno != 0 {
		return -1, errno
	}
	return int(fd), nil
}
