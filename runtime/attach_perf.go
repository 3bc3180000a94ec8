package runtime

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/probectl/probectl/bpf"
)

// perfEvent opens the sampler's perf event on every online CPU (on the
// first only for a one_cpu sampler) and links the program to each. The link holds the event: the descriptor is closed
// once linked, and a pinned link keeps sampling after probectl exits.
func (l *linker) perfEvent() error {
	if l.p.Sampler == nil {
		return l.fail("", errors.New("no sampler in the plan"))
	}
	cpus, err := bpf.OnlineCPUs()
	if err != nil {
		return l.fail("", err)
	}
	if l.p.Sampler.OneCPU && len(cpus) > 0 {
		cpus = cpus[:1]
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
