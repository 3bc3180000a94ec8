package runtime

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cilium/ebpf/ringbuf"
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
}

// Events opens the ring buffer of p, or returns nil when p has no events.
func (w *Workspace) Events(p *ProbeState) (*EventReader, error) {
	if len(p.Events) == 0 {
		return nil, nil
	}
	m, err := w.openMap(p, "events")
	if err != nil {
		return nil, err
	}
	rd, err := ringbuf.NewReader(m)
	m.Close()
	if err != nil {
		return nil, fmt.Errorf("%s: events: %w", p.Address, err)
	}
	return &EventReader{probe: p, rd: rd}, nil
}

// Read blocks for the next event; it returns ErrClosed after Close.
func (r *EventReader) Read() (*EventRecord, error) {
	rec, err := r.rd.Read()
	if errors.Is(err, ringbuf.ErrClosed) {
		return nil, ErrClosed
	}
	if err != nil {
		return nil, err
	}
	b := rec.RawSample
	if len(b) < 8 {
		return nil, fmt.Errorf("%s: short event record", r.probe.Address)
	}
	id := binary.LittleEndian.Uint64(b)
	for _, ev := range r.probe.Events {
		if uint64(ev.ID) == id && len(b) >= ev.Size {
			return &EventRecord{Probe: r.probe.Address.String(), Name: ev.Name, Fields: decodeKey(ev.Fields, b, r.probe.Functions)}, nil
		}
	}
	return nil, fmt.Errorf("%s: event record of unknown id %d", r.probe.Address, id)
}

// Close stops the reader; a blocked Read returns ErrClosed.
func (r *EventReader) Close() error { return r.rd.Close() }

// ErrClosed is returned by Read after Close.
var ErrClosed = errors.New("event reader closed")
