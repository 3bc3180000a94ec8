package compiled

import (
	"fmt"
	"strconv"

	"github.com/probectl/probectl/bpf"
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

// LayoutID returns the layout's id, as the records carry it; 0 for a
// layout of a probectl that had none.
func (ev *EventLayout) LayoutID() EventLayoutID {
	id, _ := ParseEventLayoutID(ev.Layout)
	return id
}
