package runtime

import (
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// tracepoint attaches one link per event, its index in the probe's sorted
// events as the cookie: the program reads it to know which event fired.
// A program that never reads it gets none, so that a kernel without attach
// cookies (5.10) attaches it.
func (l *linker) tracepoint() error {
	cookie := cookieOf(l.prog)
	for i, ev := range l.events() {
		group, name, _ := strings.Cut(ev, ":")
		if err := l.one(ev, nil, func(pr *ebpf.Program) (link.Link, error) {
			return link.Tracepoint(group, name, pr, &link.TracepointOptions{Cookie: cookie(i)})
		}); err != nil {
			return err
		}
	}
	return nil
}

// rawTracepoint attaches one raw tracepoint link per event, named by the
// event's name without its group. The links carry no cookie: the compiler
// takes this route only for probes that never ask which event fired.
func (l *linker) rawTracepoint() error {
	for _, ev := range l.events() {
		_, name, _ := strings.Cut(ev, ":")
		if err := l.one(ev, nil, func(pr *ebpf.Program) (link.Link, error) {
			return link.AttachRawTracepoint(link.RawTracepointOptions{Name: name, Program: pr})
		}); err != nil {
			return err
		}
	}
	return nil
}

// tpBtf attaches each event's own tp_btf program (loaded against its
// btf_trace_NAME typedef) by a tracing link.
func (l *linker) tpBtf() error {
	for _, ev := range l.events() {
		if err := l.one(ev, nil, func(pr *ebpf.Program) (link.Link, error) {
			return link.AttachTracing(link.TracingOptions{Program: pr, AttachType: ebpf.AttachTraceRawTp})
		}); err != nil {
			return err
		}
	}
	return nil
}

// events are a tracepoint probe's events, sorted.
func (l *linker) events() []string { return l.p.EventNames() }
