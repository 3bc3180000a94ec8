package runtime

import (
	"encoding/binary"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/probectl/probectl/bpf/symbols"
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

// fillKaddr writes into a probe's kaddr map (compiled.Map.Symbols) the
// addresses of its kernel symbols, read from /proc/kallsyms now: the
// kernel's addresses move at each boot. A symbol kallsyms lacks or
// hides stops the load, naming the probe and the symbol.
func fillKaddr(p *compiled.Probe, coll *ebpf.Collection) error {
	for _, m := range p.Maps {
		if len(m.Symbols) == 0 {
			continue
		}
		addrs, err := symbols.KernelAddresses(m.Symbols)
		if err != nil {
			return fmt.Errorf("%s: kaddr: %w", p.Address, err)
		}
		value := make([]byte, 8*len(m.Symbols))
		for i, s := range m.Symbols {
			binary.NativeEndian.PutUint64(value[8*i:], addrs[s])
		}
		if err := coll.Maps[m.Ref].Put(uint32(0), value); err != nil {
			return fmt.Errorf("%s: kaddr map: %w", p.Address, err)
		}
	}
	return nil
}
