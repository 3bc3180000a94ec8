package compiler

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/cilium/ebpf"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/spec"
)

// EventBuffer is the spec set's event buffer: one BPF ring buffer that the
// events of every probe go through, so that they come out in the order
// they were reserved. It belongs to the spec set, like a table: an apply
// that keeps its size keeps it, and what it holds.
type EventBuffer struct {
	Address bpf.Address `json:"address"` // events.buffer
	// Size is the ring buffer's size in bytes, a power of two.
	Size int `json:"size"`
	// MaxRecord is the largest record a probe of the spec set writes,
	// with the kernel's 8-byte header: it says how many records the
	// buffer holds at the least.
	MaxRecord int    `json:"max_record"`
	Maps      []*Map `json:"maps"`
	Digest    string `json:"digest"`
}

// EventBufferAddress is the address of a spec set's event buffer.
var EventBufferAddress = bpf.Address{Kind: bpf.KindEvents, Name: "buffer"}

// Every event record starts with a header the programs write: the layout
// (8 bytes, identifying the probe, the event and the layout of its fields
// across applies) and the time it was reserved (bpf_ktime_get_ns:
// CLOCK_MONOTONIC, 8 bytes). The fields follow.
const (
	EventLayoutOffset = 0
	EventTimeOffset   = 8
	EventHeaderSize   = 16
	// RingbufHeaderSize is the kernel's header before each record
	// (struct bpf_ringbuf_hdr); records are padded to 8 bytes.
	RingbufHeaderSize = 8
)

// EventLayoutID is an event layout's id as the records carry it.
type EventLayoutID uint64

func (id EventLayoutID) String() string { return fmt.Sprintf("%016x", uint64(id)) }

// ParseEventLayoutID reads an id written by String.
func ParseEventLayoutID(s string) (EventLayoutID, error) {
	v, err := strconv.ParseUint(s, 16, 64)
	if err != nil || len(s) != 16 {
		return 0, fmt.Errorf("event layout %q is not 16 hex digits", s)
	}
	return EventLayoutID(v), nil
}

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

// MemoryBytes is the buffer's locked kernel memory: its data pages (the
// kernel maps them twice, for records that wrap, but holds them once) and
// the two pages of positions.
func (b *EventBuffer) MemoryBytes() int64 { return int64(b.Size) + 2*4096 }

// Records is how many records of the largest event the buffer holds: the
// kernel fills it to less than its size (a reserve that would use all of
// it fails).
func (b *EventBuffer) Records() int {
	if b.MaxRecord == 0 {
		return 0
	}
	return (b.Size - 1) / b.MaxRecord
}

// layoutID identifies an event layout across applies: a digest of the
// probe's address, the event's name and fields, and what decoding the
// fields takes from the probe (its function list when a field is func,
// its events when a field is event). Two compilations that decode a
// record alike have one id; a probe replaced with another layout never
// shares an id with its old records.
func (ev *EventLayout) layoutID(p *Probe) EventLayoutID {
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

// LayoutID returns the layout's id, as the records carry it; 0 for a
// layout of a probectl that had none.
func (ev *EventLayout) LayoutID() EventLayoutID {
	id, _ := ParseEventLayoutID(ev.Layout)
	return id
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
