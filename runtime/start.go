package runtime

import (
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/probectl/probectl/compiler/compiled"
	"golang.org/x/sys/unix"
)

// fillStart writes the load's time into a probe's start map
// (compiled.Map.Start), before it is attached:
// CLOCK_MONOTONIC, bpf_ktime_get_ns's clock, which elapsed counts from.
func fillStart(p *compiled.Probe, coll *ebpf.Collection) error {
	for _, m := range p.Maps {
		if !m.Start {
			continue
		}
		var ts unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
			return err
		}
		if err := coll.Maps[m.Ref].Put(uint32(0), uint64(ts.Nano())); err != nil {
			return fmt.Errorf("%s: start map: %w", p.Address, err)
		}
	}
	return nil
}
