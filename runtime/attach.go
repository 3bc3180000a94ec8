package runtime

import (
	"errors"
	"fmt"
	"os"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/probectl/probectl/compiler/compiled"
)

// attached is one link of a probe, before and after pinning.
type attached struct {
	family   compiled.Family
	function string
	program  string
	link     link.Link
	file     *FileID // user probes: the binary attached to
}

// pinnable refuses, before anything is loaded, a probe whose links the
// target cannot pin (the plan says so: compiled.Unpinnable): apply keeps
// only what it pins. A [Session] holds such probes instead.
func pinnable(p *compiled.Probe) error {
	if p.Unpinnable == "" {
		return nil
	}
	return fmt.Errorf("%s: cannot apply: %s", p.Address, p.Unpinnable)
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
	h := hint(e.Err)
	if e.Family == compiled.FamilyPerfEvent && errors.Is(e.Err, os.ErrNotExist) {
		h = "" // the sampler's own (bpf.Sampler.Open): a missing PMU
	}
	return fmt.Sprintf("%s: attach %s: %v%s", e.Probe, what, e.Err, h)
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

// attachers attach each link family, one per entry of compiler's family
// table (TestAttachersCoverFamilies), in files by family group:
// attach_kprobe.go, attach_trampoline.go, attach_uprobe.go,
// attach_tracepoint.go, attach_perf.go.
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
	compiled.FamilyRawTracepoint:  (*linker).rawTracepoint,
	compiled.FamilyTPBtf:          (*linker).tpBtf,
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
