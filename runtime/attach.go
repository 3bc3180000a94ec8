package runtime

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/probectl/probectl/compiler"
)

// attached is one link of a probe, before and after pinning.
type attached struct {
	family   string
	function string
	program  string
	link     link.Link
}

// AttachError is an attach refusal: the probe, the function, and the
// kernel's reason.
type AttachError struct {
	Probe    string
	Family   string
	Function string
	Err      error
}

func (e *AttachError) Error() string {
	what := e.Family
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
		return " (probectl needs root: CAP_BPF and CAP_PERFMON; is the kernel locked down?)"
	case errors.Is(err, os.ErrNotExist):
		return " (the function or event does not exist, or cannot be probed: notrace, inlined, or blacklisted)"
	case errors.Is(err, ebpf.ErrNotSupported):
		return " (the kernel lacks the link type, or the function has no BTF; plan with -target auto to see the routes it has)"
	}
	return ""
}

// attachProbe attaches every link of p from the loaded collection. Each
// link goes through step first, so tests can fail any one of them.
func (w *Workspace) attachProbe(p *compiler.Probe, coll *ebpf.Collection, onLink func(attached)) error {
	cookies := make([]uint64, len(p.Functions))
	for i := range cookies {
		cookies[i] = uint64(i)
	}
	addr := p.Addr.String()
	wrap := func(fam, fn string, err error) error {
		return &AttachError{Probe: addr, Family: fam, Function: fn, Err: err}
	}
	for _, prog := range p.Programs {
		fam := prog.Family
		one := func(fn string, mk func(*ebpf.Program) (link.Link, error)) error {
			if err := w.step("attach %s %s %s", addr, fam, fn); err != nil {
				return wrap(fam, fn, err)
			}
			key := compiler.ProgramKey(prog, fn)
			l, err := mk(coll.Programs[key])
			if err != nil {
				return wrap(fam, fn, err)
			}
			onLink(attached{family: fam, function: fn, program: key, link: l})
			return nil
		}
		var err error
		switch fam {
		case compiler.FamilyKprobeMulti, compiler.FamilyKretprobeMulti, compiler.FamilyKprobeSession:
			err = one("", func(pr *ebpf.Program) (link.Link, error) {
				opts := link.KprobeMultiOptions{Symbols: p.Functions, Cookies: cookies, Session: fam == compiler.FamilyKprobeSession}
				if fam == compiler.FamilyKretprobeMulti {
					return link.KretprobeMulti(pr, opts)
				}
				return link.KprobeMulti(pr, opts)
			})
		case compiler.FamilyFentry, compiler.FamilyFexit:
			at := ebpf.AttachTraceFEntry
			if fam == compiler.FamilyFexit {
				at = ebpf.AttachTraceFExit
			}
			for i, fn := range p.Functions {
				if err = one(fn, func(pr *ebpf.Program) (link.Link, error) {
					return link.AttachTracing(link.TracingOptions{Program: pr, AttachType: at, Cookie: uint64(i)})
				}); err != nil {
					break
				}
			}
		case compiler.FamilyKprobe, compiler.FamilyKretprobe:
			for i, fn := range p.Functions {
				if err = one(fn, func(pr *ebpf.Program) (link.Link, error) {
					opts := &link.KprobeOptions{Cookie: uint64(i)}
					if fam == compiler.FamilyKretprobe {
						return link.Kretprobe(fn, pr, opts)
					}
					return link.Kprobe(fn, pr, opts)
				}); err != nil {
					break
				}
			}
		case compiler.FamilyUprobeMulti, compiler.FamilyUretprobeMulti:
			ex, xerr := link.OpenExecutable(p.Binary)
			if xerr != nil {
				return wrap(fam, "", xerr)
			}
			err = one("", func(pr *ebpf.Program) (link.Link, error) {
				opts := &link.UprobeMultiOptions{Cookies: cookies, PID: uint32(p.PID)}
				if fam == compiler.FamilyUretprobeMulti {
					return ex.UretprobeMulti(p.Functions, pr, opts)
				}
				return ex.UprobeMulti(p.Functions, pr, opts)
			})
		case compiler.FamilyUprobe, compiler.FamilyUretprobe:
			ex, xerr := link.OpenExecutable(p.Binary)
			if xerr != nil {
				return wrap(fam, "", xerr)
			}
			for i, fn := range p.Functions {
				if err = one(fn, func(pr *ebpf.Program) (link.Link, error) {
					opts := &link.UprobeOptions{Cookie: uint64(i), PID: p.PID}
					if fam == compiler.FamilyUretprobe {
						return ex.Uretprobe(fn, pr, opts)
					}
					return ex.Uprobe(fn, pr, opts)
				}); err != nil {
					break
				}
			}
		case compiler.FamilyTracepoint:
			group, name, _ := strings.Cut(p.Event, ":")
			err = one("", func(pr *ebpf.Program) (link.Link, error) {
				return link.Tracepoint(group, name, pr, nil)
			})
		default:
			err = fmt.Errorf("%s: unknown link family %q", addr, fam)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
