package runtime

import (
	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/probectl/probectl/compiler/compiled"
)

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

// cookieOf gives the cookie of a perf link to the i-th function or event
// of prog: i when prog reads it, else 0, which a kernel without attach
// cookies (before 5.15) accepts.
func cookieOf(prog *compiled.Program) func(i int) uint64 {
	reads := readsCookie(prog)
	return func(i int) uint64 {
		if !reads {
			return 0
		}
		return uint64(i)
	}
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

func (l *linker) kprobe() error {
	ret := l.prog.Family == compiled.FamilyKretprobe
	cookie := cookieOf(l.prog)
	for i, fn := range l.p.Functions {
		if err := l.one(fn, nil, func(pr *ebpf.Program) (link.Link, error) {
			opts := &link.KprobeOptions{Cookie: cookie(i)}
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
