package runtime

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/probectl/probectl/bpf"
)

// EventRecord is one decoded event.
type EventRecord struct {
	Probe  string     `json:"probe"`
	Name   string     `json:"name"`
	Fields OrderedKey `json:"fields"`
}

// EventReader reads a probe's events from its ring buffer.
type EventReader struct {
	probe *ProbeState
	rd    *ringbuf.Reader
	// stacks reads the stacks of records, when the probe's events have
	// stack fields.
	stacks *stackResolver
}

// refEvents is the ref of a probe's ring buffer.
const refEvents = "events"

// Events opens the ring buffer of p, or returns nil when p has no events.
func (w *Workspace) Events(p *ProbeState) (*EventReader, error) {
	return newEventReader(p, w.pinnedMaps(p))
}

func newEventReader(p *ProbeState, open mapSource) (*EventReader, error) {
	if len(p.Events) == 0 {
		return nil, nil
	}
	m, release, err := open(refEvents)
	if err != nil {
		return nil, err
	}
	defer release()
	if m.Type() != ebpf.RingBuf {
		return nil, fmt.Errorf("%s: events map is a %s, not a ring buffer", p.Address, m.Type())
	}
	rd, err := ringbuf.NewReader(m)
	if err != nil {
		return nil, fmt.Errorf("%s: events: %w", p.Address, err)
	}
	er := &EventReader{probe: p, rd: rd}
	for _, ev := range p.Events {
		for _, f := range ev.Fields {
			if f.StackMap != "" && er.stacks == nil {
				er.stacks = newStackResolver(open, bpf.NewUserSymbols("", nil))
			}
		}
	}
	return er, nil
}

// Read blocks for the next event; it returns ErrClosed after Close, and
// ErrDrained once a deadline set by Drain passed with nothing left.
func (r *EventReader) Read() (*EventRecord, error) {
	rec, err := r.rd.Read()
	switch {
	case errors.Is(err, ringbuf.ErrClosed):
		return nil, ErrClosed
	case errors.Is(err, ringbuf.ErrFlushed), errors.Is(err, os.ErrDeadlineExceeded):
		return nil, ErrDrained
	case err != nil:
		return nil, err
	}
	b := rec.RawSample
	if len(b) < 8 {
		return nil, fmt.Errorf("%s: short event record", r.probe.Address)
	}
	id := binary.LittleEndian.Uint64(b)
	for _, ev := range r.probe.Events {
		if uint64(ev.ID) == id && len(b) >= ev.Size {
			rec := &EventRecord{Probe: r.probe.Address.String(), Name: ev.Name, Fields: decodeKey(ev.Fields, b, r.probe)}
			if r.stacks != nil {
				if err := r.stacks.resolveKey(rec.Fields); err != nil {
					return nil, err
				}
			}
			return rec, nil
		}
	}
	return nil, fmt.Errorf("%s: event record of unknown id %d", r.probe.Address, id)
}

// Drain makes Read return what is in the buffer without waiting, then
// ErrDrained: for after the producers are detached. It is safe while
// another goroutine is blocked in Read.
func (r *EventReader) Drain() error { return r.rd.Flush() }

// Close stops the reader; a blocked Read returns ErrClosed.
func (r *EventReader) Close() error { return r.rd.Close() }

// ErrClosed is returned by Read after Close.
var ErrClosed = errors.New("event reader closed")

// ErrDrained is returned by Read after Drain, once the buffer is empty.
var ErrDrained = errors.New("event buffer drained")
