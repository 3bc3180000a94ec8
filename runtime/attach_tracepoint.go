package runtime

import (
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

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
