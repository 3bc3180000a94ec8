package runtime

import (
	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/probectl/probectl/bpf/sys"
	"github.com/probectl/probectl/compiler/compiled"
)

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
			fd, err := sys.FsessionLink(pr.FD(), uint64(i))
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
