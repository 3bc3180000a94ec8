package runtime

import (
	"bytes"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler/compiled"
	"golang.org/x/sys/unix"
)

// attached is one link of a probe, before and after pinning.
type attached struct {
	family   compiled.Family
	function string
	program  string
	link     link.Link
	file     *FileID // user probes: the binary attached to
}

// AttachError is an attach refusal: the probe, the function, and the
// kernel's reason.
type AttachError struct {
	Probe    string
	Family   compiled.Family
	Function string
	Err      error
}

func (e *AttachError) Error() string {
	what := string(e.Family)
	if e.Function != "" {
		what += " to " + e.Function
	}
	return fmt.Sprintf("%s: attach %s: %v%s", e.Probe, what, e.Err, hint(e.Err))
}

func (e *AttachError) Unwrap() error { return e.Err }

// hint adds what an errno usually means here.
func hint(err error) string {
	switch {
	case errors.Is(err, os.ErrPermission):
		return " (probectl needs CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN; is the kernel locked down?)"
	case errors.Is(err, os.ErrNotExist):
		return " (the function or event does not exist, or cannot be probed: notrace, inlined, or blacklisted)"
	case errors.Is(err, ebpf.ErrNotSupported):
		return " (the kernel lacks the link type, or the function has no BTF; plan with -target auto to see the routes it has)"
	}
	return ""
}

// linker attaches the links of one program of a probe.
type linker struct {
	w      *Workspace
	p      *compiled.Probe
	prog   *compiled.Program
	coll   *ebpf.Collection
	onLink func(attached)
}

// attachers attach each link family.
var attachers = map[compiled.Family]func(*linker) error{
	compiled.FamilyKprobeMulti:    (*linker).kprobeMulti,
	compiled.FamilyKretprobeMulti: (*linker).kprobeMulti,
	compiled.FamilyKprobeSession:  (*linker).kprobeMulti,
	compiled.FamilyFentry:         (*linker).tracing,
	compiled.FamilyFexit:          (*linker).tracing,
	compiled.FamilyFsession:       (*linker).fsession,
	compiled.FamilyKprobe:         (*linker).kprobe,
	compiled.FamilyKretprobe:      (*linker).kprobe,
	compiled.FamilyUprobeMulti:    (*linker).uprobeMulti,
	compiled.FamilyUretprobeMulti: (*linker).uprobeMulti,
	compiled.FamilyUprobeSession:  (*linker).uprobeSession,
	compiled.FamilyUprobe:         (*linker).uprobe,
	compiled.FamilyUretprobe:      (*linker).uprobe,
	compiled.FamilyTracepoint:     (*linker).tracepoint,
	compiled.FamilyPerfEvent:      (*linker).perfEvent,
}

// attach attaches every link of a loaded probe; each link goes through
// step first, so tests can fail any one of them.
func (w *Workspace) attach(t *txn, l *live) error {
	for _, prog := range l.probe.Programs {
		fn := attachers[prog.Family]
		if fn == nil {
			return fmt.Errorf("%s: unknown link family %q", l.probe.Address, prog.Family)
		}
		lk := &linker{w: w, p: l.probe, prog: prog, coll: l.coll, onLink: func(a attached) {
			l.links = append(l.links, a)
			t.onUndo(func() { _ = a.link.Close() })
			if info, err := a.link.Info(); err == nil {
				w.created("link", uint32(info.ID))
			}
		}}
		if err := fn(lk); err != nil {
			return err
		}
	}
	return nil
}

func (l *linker) fail(fn string, err error) error {
	return &AttachError{Probe: l.p.Address.String(), Family: l.prog.Family, Function: fn, Err: err}
}

// one makes one link to function fn ("" for links over every function).
func (l *linker) one(fn string, file *FileID, mk func(*ebpf.Program) (link.Link, error)) error {
	if err := l.w.step("attach %s %s %s", l.p.Address, l.prog.Family, fn); err != nil {
		return l.fail(fn, err)
	}
	key := compiled.ProgramKey(l.prog, fn)
	lk, err := mk(l.coll.Programs[key])
	if err != nil {
		return l.fail(fn, err)
	}
	l.onLink(attached{family: l.prog.Family, function: fn, program: key, link: lk, file: file})
	return nil
}

// cookies are the functions' indexes: the attach cookie says which fired.
func (l *linker) cookies() []uint64 {
	c := make([]uint64, len(l.p.Functions))
	for i := range c {
		c[i] = uint64(i)
	}
	return c
}

func (l *linker) kprobeMulti() error {
	fam := l.prog.Family
	return l.one("", nil, func(pr *ebpf.Program) (link.Link, error) {
		opts := link.KprobeMultiOptions{Symbols: l.p.Functions, Session: fam == compiled.FamilyKprobeSession}
		if readsCookie(l.prog) {
			// The kernel sorts the cookies with the functions: a
			// program that never reads them is attached without.
			opts.Cookies = l.cookies()
		}
		if fam == compiled.FamilyKretprobeMulti {
			return link.KretprobeMulti(pr, opts)
		}
		return link.KprobeMulti(pr, opts)
	})
}

// readsCookie says whether prog calls bpf_get_attach_cookie, which says
// which function fired.
func readsCookie(prog *compiled.Program) bool {
	for _, ins := range prog.Instructions {
		if ins.IsBuiltinCall() && ins.Constant == int64(asm.FnGetAttachCookie) {
			return true
		}
	}
	return false
}

func (l *linker) tracing() error {
	at := ebpf.AttachTraceFEntry
	if l.prog.Family == compiled.FamilyFexit {
		at = ebpf.AttachTraceFExit
	}
	for i, fn := range l.p.Functions {
		if err := l.one(fn, nil, func(pr *ebpf.Program) (link.Link, error) {
			return link.AttachTracing(link.TracingOptions{Program: pr, AttachType: at, Cookie: uint64(i)})
		}); err != nil {
			return err
		}
	}
	return nil
}

// fsession attaches an fsession program to each function by the raw
// system call (cilium/ebpf has no API for it), the function's index as
// the cookie.
func (l *linker) fsession() error {
	for i, fn := range l.p.Functions {
		if err := l.one(fn, nil, func(pr *ebpf.Program) (link.Link, error) {
			fd, err := bpf.FsessionLink(pr.FD(), uint64(i))
			if err != nil {
				return nil, err
			}
			return link.NewFromFD(fd)
		}); err != nil {
			return err
		}
	}
	return nil
}

func (l *linker) kprobe() error {
	ret := l.prog.Family == compiled.FamilyKretprobe
	for i, fn := range l.p.Functions {
		if err := l.one(fn, nil, func(pr *ebpf.Program) (link.Link, error) {
			opts := &link.KprobeOptions{Cookie: uint64(i)}
			if ret {
				return link.Kretprobe(fn, pr, opts)
			}
			return link.Kprobe(fn, pr, opts)
		}); err != nil {
			return err
		}
	}
	return nil
}

// executable opens the probe's binary once, without blocking, and attaches
// through that descriptor (/proc/self/fd/N): the symbols are read from, and
// the kernel puts the uprobes on, the very file that was checked, whatever
// happens to the path meanwhile (a FIFO swapped in, a new build moved into
// place). The caller closes the file when the links are made.
func (l *linker) executable() (*link.Executable, *os.File, *FileID, error) {
	f, id, err := openBinary(l.p.Binary)
	if err != nil {
		return nil, nil, nil, l.fail("", err)
	}
	ex, err := link.OpenExecutable(fmt.Sprintf("/proc/self/fd/%d", f.Fd()))
	if err != nil {
		f.Close()
		return nil, nil, nil, l.fail("", err)
	}
	return ex, f, id, nil
}

func (l *linker) uprobeMulti() error {
	ex, f, id, err := l.executable()
	if err != nil {
		return err
	}
	defer f.Close()
	ret := l.prog.Family == compiled.FamilyUretprobeMulti
	mk := func(fns []string, cookies []uint64) func(*ebpf.Program) (link.Link, error) {
		return func(pr *ebpf.Program) (link.Link, error) {
			opts := &link.UprobeMultiOptions{Cookies: cookies, PID: uint32(l.p.PID)}
			if ret {
				return ex.UretprobeMulti(fns, pr, opts)
			}
			return ex.UprobeMulti(fns, pr, opts)
		}
	}
	if err := l.one("", id, mk(l.p.Functions, l.cookies())); err != nil {
		// One link for every function: the kernel does not say which one
		// it refused, so find it by trying each alone.
		if fn := l.culprit(mk); fn != "" {
			var ae *AttachError
			if errors.As(err, &ae) {
				ae.Function = fn
			}
		}
		return err
	}
	return nil
}

// uprobeSession makes one uprobe.session link for every function of the
// binary, by the raw system call: cilium/ebpf has no API for it.
func (l *linker) uprobeSession() error {
	f, id, err := openBinary(l.p.Binary)
	if err != nil {
		return l.fail("", err)
	}
	defer f.Close()
	mk := func(fns []string, cookies []uint64) func(*ebpf.Program) (link.Link, error) {
		return func(pr *ebpf.Program) (link.Link, error) {
			offsets, err := bpf.UprobeOffsets(f, fns)
			if err != nil {
				return nil, err
			}
			fd, err := bpf.UprobeSessionLink(pr.FD(), fmt.Sprintf("/proc/self/fd/%d", f.Fd()), offsets, cookies, uint32(l.p.PID))
			if err != nil {
				return nil, err
			}
			return link.NewFromFD(fd)
		}
	}
	if err := l.one("", id, mk(l.p.Functions, l.cookies())); err != nil {
		if fn := l.culprit(mk); fn != "" {
			var ae *AttachError
			if errors.As(err, &ae) {
				ae.Function = fn
			}
		}
		return err
	}
	return nil
}

// culprit returns the first function that cannot be attached on its own.
func (l *linker) culprit(mk func([]string, []uint64) func(*ebpf.Program) (link.Link, error)) string {
	if len(l.p.Functions) < 2 {
		return ""
	}
	pr := l.coll.Programs[compiled.ProgramKey(l.prog, "")]
	for i, fn := range l.p.Functions {
		lk, err := mk([]string{fn}, []uint64{uint64(i)})(pr)
		if err != nil {
			return fn
		}
		_ = lk.Close()
	}
	return ""
}

func (l *linker) uprobe() error {
	ex, f, id, err := l.executable()
	if err != nil {
		return err
	}
	defer f.Close()
	ret := l.prog.Family == compiled.FamilyUretprobe
	for i, fn := range l.p.Functions {
		if err := l.one(fn, id, func(pr *ebpf.Program) (link.Link, error) {
			opts := &link.UprobeOptions{Cookie: uint64(i), PID: l.p.PID}
			if ret {
				return ex.Uretprobe(fn, pr, opts)
			}
			return ex.Uprobe(fn, pr, opts)
		}); err != nil {
			return err
		}
	}
	return nil
}

// tracepoint attaches one link per event, its index in the probe's sorted
// events as the cookie: the program reads it to know which event fired.
func (l *linker) tracepoint() error {
	events := l.p.Tracepoints
	if len(events) == 0 {
		events = []string{l.p.Event}
	}
	for i, ev := range events {
		group, name, _ := strings.Cut(ev, ":")
		if err := l.one(ev, nil, func(pr *ebpf.Program) (link.Link, error) {
			return link.Tracepoint(group, name, pr, &link.TracepointOptions{Cookie: uint64(i)})
		}); err != nil {
			return err
		}
	}
	return nil
}

// perfEvent opens the sampler's perf event on every online CPU and links
// the program to each. The link holds the event: the descriptor is closed
// once linked, and a pinned link keeps sampling after probectl exits.
func (l *linker) perfEvent() error {
	if l.p.Sampler == nil {
		return l.fail("", errors.New("no sampler in the plan"))
	}
	cpus, err := bpf.OnlineCPUs()
	if err != nil {
		return l.fail("", err)
	}
	for _, cpu := range cpus {
		if err := l.one(fmt.Sprintf("cpu%d", cpu), nil, func(pr *ebpf.Program) (link.Link, error) {
			f, err := l.p.Sampler.Open(cpu)
			if err != nil {
				return nil, err
			}
			defer f.Close()
			return link.AttachRawLink(link.RawLinkOptions{Target: int(f.Fd()), Program: pr, Attach: ebpf.AttachPerfEvent})
		}); err != nil {
			return err
		}
	}
	return nil
}

// FileID identifies the file a uprobe is attached to. The kernel holds the
// inode, not the path: a binary replaced by rename (a package upgrade)
// leaves the probes on the old file, so a new inode at the path is drift.
type FileID struct {
	Dev     uint64 `json:"dev"`
	Inode   uint64 `json:"inode"`
	Size    int64  `json:"size"`
	BuildID string `json:"build_id,omitempty"`
}

// Same reports whether a and b are the same file.
func (a *FileID) Same(b *FileID) bool {
	return a != nil && b != nil && a.Dev == b.Dev && a.Inode == b.Inode && a.BuildID == b.BuildID
}

func (a *FileID) String() string {
	s := fmt.Sprintf("inode %d", a.Inode)
	if a.BuildID != "" {
		s += ", build-id " + a.BuildID
	}
	return s
}

// fileID identifies the regular file at path, following symlinks as the
// kernel does when it attaches. It never blocks: a FIFO is refused.
func fileID(path string) (*FileID, error) {
	f, id, err := openBinary(path)
	if err != nil {
		return nil, err
	}
	f.Close()
	return id, nil
}

// openBinary opens a regular file without blocking and identifies it.
func openBinary(path string) (*os.File, *FileID, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		f.Close()
		return nil, nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		f.Close()
		return nil, nil, fmt.Errorf("%s is not a regular file", path)
	}
	id := &FileID{Dev: st.Dev, Inode: st.Ino, Size: st.Size}
	if ef, err := elf.NewFile(io.NewSectionReader(f, 0, st.Size)); err == nil {
		id.BuildID = buildID(ef)
	}
	return f, id, nil
}

// buildID returns the GNU build-id note of an ELF file, or "".
func buildID(ef *elf.File) string {
	for _, s := range ef.Sections {
		if s.Type != elf.SHT_NOTE || s.Size > 1<<16 {
			continue
		}
		b, err := s.Data()
		if err != nil {
			continue
		}
		order := ef.ByteOrder
		for len(b) >= 12 {
			nameSz, descSz, typ := order.Uint32(b), order.Uint32(b[4:]), order.Uint32(b[8:])
			nameEnd := 12 + (int(nameSz)+3)&^3
			descEnd := nameEnd + (int(descSz)+3)&^3
			if nameSz > 1<<10 || descSz > 1<<10 || descEnd > len(b) {
				break
			}
			if typ == 3 && bytes.Equal(bytes.TrimRight(b[12:12+nameSz], "\x00"), []byte("GNU")) { // NT_GNU_BUILD_ID
				return hex.EncodeToString(b[nameEnd : nameEnd+int(descSz)])
			}
			b = b[descEnd:]
		}
	}
	return ""
}
