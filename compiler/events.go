package compiler

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"

	"github.com/cilium/ebpf"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/spec"
)

// newEventBuffer makes the buffer of a spec set whose probes emit events.
func newEventBuffer(ev *spec.Events) *EventBuffer {
	size := spec.DefaultEventBuffer
	if ev != nil {
		size = ev.BufferSize
	}
	b := &EventBuffer{Address: EventBufferAddress, Size: size}
	b.Maps = []*Map{{Ref: refEvents, Name: "probectl.events", Type: ebpf.RingBuf, MaxEntries: uint32(size),
		Purpose: "the event records of every probe, in the order they were reserved"}}
	h := sha256.New()
	_ = json.NewEncoder(h).Encode([]any{b.Address.String(), b.Size, b.Maps})
	b.Digest = hex.EncodeToString(h.Sum(nil))[:16]
	return b
}

// layoutID identifies an event layout across applies: a digest of the
// probe's address, the event's name and fields, and what decoding the
// fields takes from the probe (its function list when a field is func,
// its events when a field is event). Two compilations that decode a
// record alike have one id; a probe replaced with another layout never
// shares an id with its old records.
func layoutID(ev *EventLayout, p *Probe) EventLayoutID {
	what := []any{p.Address.String(), ev.Name, ev.Fields}
	for _, f := range ev.Fields {
		switch f.Kind {
		case KeyFunc:
			what = append(what, "functions", p.Functions)
		case KeyEvent:
			what = append(what, "events", p.Event, p.Tracepoints)
		}
	}
	h := sha256.New()
	_ = json.NewEncoder(h).Encode(what)
	return EventLayoutID(binary.BigEndian.Uint64(h.Sum(nil)))
}

// checkEventBuffer sets the buffer's largest record and checks that it
// fits: a record larger than the buffer could never be reserved.
func (u *unit) checkEventBuffer(cfg *spec.Config, out *Output) {
	b := out.Events
	if b == nil {
		return
	}
	var largest *EventLayout
	var owner *Probe
	for _, p := range out.Probes {
		for _, ev := range p.Events {
			if n := RingbufHeaderSize + (ev.Size+7)&^7; n > b.MaxRecord {
				b.MaxRecord, largest, owner = n, ev, p
			}
		}
	}
	if largest != nil && b.MaxRecord > b.Size && cfg.Events != nil {
		u.diags = append(u.diags, diagf(cfg.Events.BufferSizeRange, "Event buffer too small",
			"A record of event %q of %s takes %d bytes (its fields, the 16-byte header and the kernel's 8), more than the buffer's %s: it could never be written. Raise buffer_size to %s or more.",
			largest.Name, owner.Address, b.MaxRecord, bpf.SizeText(b.Size), bpf.SizeText(nextPow2(b.MaxRecord))))
	}
}

func nextPow2(n int) int {
	p := spec.MinEventBuffer
	for p < n {
		p *= 2
	}
	return p
}
