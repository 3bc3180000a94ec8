package runtime

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler/compiled"
	"golang.org/x/sys/unix"
)

// EventsState is the applied event buffer: its description (as compiled),
// its pins, and the layouts of the records it may still hold from probes
// that are gone. It belongs to the spec set, like a table: an apply that
// keeps its size keeps it, with the records nobody read yet.
type EventsState struct {
	compiled.EventBuffer
	PinDir    string     `json:"pin_dir"`
	Pins      []MapState `json:"pins"`
	BootID    string     `json:"boot_id,omitempty"`
	MetaID    ebpf.MapID `json:"meta_id,omitempty"`
	AppliedAt int64      `json:"applied_at"`
	// Retired are the event layouts of probes replaced or destroyed since
	// the buffer was made, newest last, at most MaxRetiredLayouts: their
	// records may still be in the buffer, and are decoded with them.
	Retired []*RetiredLayout `json:"retired,omitempty"`
}

// RetiredLayout is the layout of an event whose probe was replaced (by
// one that writes another layout) or destroyed, with what decoding it
// takes from the probe.
type RetiredLayout struct {
	Probe bpf.Address           `json:"probe"`
	Event *compiled.EventLayout `json:"event"`
	// Functions, Tracepoints and TracepointEvent are the probe's, kept
	// when a field is func or event.
	Functions       []string `json:"functions,omitempty"`
	Tracepoints     []string `json:"tracepoints,omitempty"`
	TracepointEvent string   `json:"tracepoint_event,omitempty"`
	// Serial is the state serial that retired it.
	Serial uint64 `json:"serial"`
}

// MaxRetiredLayouts bounds the retired layouts a state keeps: records of
// older ones are counted as undecodable.
const MaxRetiredLayouts = 256

// eventsPinDir is the directory prefix of the event buffer's pins.
const eventsPinDir = "events-buffer-"

// liveBuffer is the event buffer during an apply or a session: made
// anew, or opened from the pins of the buffer the apply keeps.
type liveBuffer struct {
	buf  *compiled.EventBuffer
	m    *ebpf.Map
	made bool
}

func (l *liveBuffer) close() {
	if l != nil && l.m != nil {
		l.m.Close()
	}
}

// makeBuffer creates the event buffer's ring buffer map.
func (w *Workspace) makeBuffer(t *txn, b *compiled.EventBuffer) (*liveBuffer, error) {
	if err := w.step("load %s", b.Address); err != nil {
		return nil, err
	}
	spec := b.Maps[0].Spec()
	m, err := ebpf.NewMap(spec)
	if err != nil {
		return nil, fmt.Errorf("%s: create the %s ring buffer: %w%s", b.Address, bpf.SizeText(b.Size), err, ringbufHint(err))
	}
	if info, err := m.Info(); err == nil {
		id, _ := info.ID()
		w.created("map", uint32(id))
	}
	l := &liveBuffer{buf: b, m: m, made: true}
	t.onUndo(l.close)
	return l, nil
}

func ringbufHint(err error) string {
	if errSays(err, unix.EINVAL) {
		return fmt.Sprintf(" (a ring buffer is a power of two pages; this kernel's pages are %d bytes)", os.Getpagesize())
	}
	if errSays(err, unix.ENOMEM) || errSays(err, unix.EPERM) {
		return " (the kernel would not lock that much memory: lower buffer_size in the events block)"
	}
	return ""
}

// openBuffer opens the pinned ring buffer of an applied event buffer.
func (w *Workspace) openBuffer(es *EventsState, readOnly bool) (*ebpf.Map, error) {
	d, err := w.eventsDir(es)
	if err != nil {
		return nil, err
	}
	defer d.close()
	return openBufferIn(d, es, readOnly)
}

func openBufferIn(d *dir, es *EventsState, readOnly bool) (*ebpf.Map, error) {
	for _, p := range es.Pins {
		if p.Ref != es.Maps[0].Ref {
			continue
		}
		path, err := d.procPath(p.Pin)
		if err != nil {
			return nil, err
		}
		m, err := ebpf.LoadPinnedMap(path, &ebpf.LoadPinOptions{ReadOnly: readOnly})
		if err != nil {
			return nil, fmt.Errorf("%s: open map %s: %w", es.Address, p.Name, err)
		}
		if m.Type() != ebpf.RingBuf {
			m.Close()
			return nil, fmt.Errorf("%s: map %s is a %s, not a ring buffer", es.Address, p.Name, m.Type())
		}
		return m, nil
	}
	return nil, fmt.Errorf("%s: no ring buffer in the state", es.Address)
}

func (w *Workspace) eventsDir(es *EventsState) (*dir, error) {
	if w.pins == nil {
		return nil, fmt.Errorf("%s: %s is not there", es.Address, w.PinDir())
	}
	d, err := w.pins.sub(es.PinDir, false, trustPrivate)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", es.Address, err)
	}
	return d, nil
}

// pinBuffer pins a new event buffer under a new directory, then its
// description.
func (w *Workspace) pinBuffer(t *txn, l *liveBuffer, serial uint64) (*EventsState, error) {
	b := l.buf
	name := fmt.Sprintf("%s%d", eventsPinDir, serial)
	if err := w.pins.mkdirExcl(name); err != nil {
		return nil, fmt.Errorf("%s: pin directory: %w", b.Address, err)
	}
	t.onUndo(func() { _ = w.pins.removeAll(name) })
	d, err := w.pins.sub(name, false, trustPrivate)
	if err != nil {
		return nil, err
	}
	defer d.close()
	es := &EventsState{EventBuffer: *b, PinDir: name, BootID: bootID(), AppliedAt: nowUnix()}
	m := b.Maps[0]
	if err := w.step("pin %s map %s", b.Address, m.Ref); err != nil {
		return nil, fmt.Errorf("%s: pin map %s: %w", b.Address, m.Ref, err)
	}
	pin := "map_" + m.Ref
	path, err := d.procPath(pin)
	if err != nil {
		return nil, err
	}
	if err := l.m.Pin(path); err != nil {
		return nil, fmt.Errorf("%s: pin map %s: %w", b.Address, m.Ref, err)
	}
	info, err := l.m.Info()
	if err != nil {
		return nil, err
	}
	id, _ := info.ID()
	es.Pins = []MapState{{Ref: m.Ref, Name: m.Name, ID: id, Pin: pin}}
	bs, err := json.Marshal(es)
	if err != nil {
		return nil, err
	}
	mid, err := pinBlob(d, metaPin, "probectl.meta", bs)
	if err != nil {
		return nil, fmt.Errorf("%s: pin meta: %w", b.Address, err)
	}
	w.created("map", uint32(mid))
	es.MetaID = mid
	return es, nil
}

// liveEvents makes the event buffer the plan creates or replaces, or
// opens the one it keeps; nil when the plan has none.
func (w *Workspace) liveEvents(t *txn, s *State, out *compiled.Output, plan *compiled.Plan) (*liveBuffer, error) {
	c := plan.Events
	if c == nil {
		return nil, nil
	}
	switch c.Action {
	case compiled.ActionCreate, compiled.ActionReplace:
		if out.Events == nil || out.Events.Digest != c.Digest {
			return nil, fmt.Errorf("%s: the plan does not match the compiled event buffer; plan again", c.Address)
		}
		return w.makeBuffer(t, out.Events)
	case compiled.ActionNoOp:
		if s.Events == nil {
			return nil, fmt.Errorf("%s: the plan keeps an event buffer the state does not have; plan again", c.Address)
		}
		m, err := w.openBuffer(s.Events, false)
		if err != nil {
			return nil, err
		}
		return &liveBuffer{buf: out.Events, m: m}, nil
	}
	return nil, nil
}

// withBuffer adds the event buffer to the maps a probe's programs are
// given, when the probe emits events.
func withBuffer(shared map[string]*ebpf.Map, p *compiled.Probe, l *liveBuffer) map[string]*ebpf.Map {
	if p.Buffer != nil && l != nil {
		for _, m := range p.Buffer.Maps {
			shared[m.Ref] = l.m
		}
	}
	return shared
}

// diffEvents plans the event buffer: the same size keeps the applied
// buffer and what it holds; another size replaces it with a new, empty
// one; a spec set without events deletes it.
func diffEvents(s *State, out *compiled.Output, plan *compiled.Plan, drift map[bpf.Address][]string) {
	old := s.Events
	switch {
	case out.Events == nil && old == nil:
	case out.Events == nil:
		plan.Events = &compiled.EventsChange{EventBuffer: old.EventBuffer, Action: compiled.ActionDelete, Why: "no probe emits events", Users: []bpf.Address{}}
	default:
		c := out.EventsChange(compiled.ActionCreate)
		if old != nil {
			switch {
			case len(drift[old.Address]) > 0:
				c.Action, c.Why = compiled.ActionReplace, "drift: "+joinDrift(drift[old.Address])
			case old.Digest == out.Events.Digest:
				c.Action = compiled.ActionNoOp
			default:
				c.Action, c.Why = compiled.ActionReplace, fmt.Sprintf("its size changed, %s → %s: a new, empty buffer", bpf.SizeText(old.Size), bpf.SizeText(out.Events.Size))
			}
		}
		plan.Events = c
	}
}

// retire returns es with the layouts of the probes gone (replaced or
// destroyed) added to its retired ones, unless a probe of next still
// writes that layout; the oldest beyond MaxRetiredLayouts are forgotten.
func (es *EventsState) retire(gone []*ProbeState, next []*ProbeState, serial uint64) *EventsState {
	if es == nil {
		return nil
	}
	live := liveLayouts(next)
	c := *es
	c.Retired = append([]*RetiredLayout(nil), es.Retired...)
	for _, p := range gone {
		for _, ev := range p.Events {
			if ev.Layout == "" || live[ev.Layout] {
				continue
			}
			live[ev.Layout] = true
			c.Retired = append(c.Retired, retiredLayout(p, ev, serial))
		}
	}
	c.Retired = newestRetired(c.Retired)
	return &c
}

// liveLayouts is the set of event layouts the probes of next write.
func liveLayouts(next []*ProbeState) map[string]bool {
	live := map[string]bool{}
	for _, p := range next {
		for _, ev := range p.Events {
			live[ev.Layout] = true
		}
	}
	return live
}

// retiredLayout keeps the layout ev of probe p, retired at serial, with
// the functions and tracepoints its fields name.
func retiredLayout(p *ProbeState, ev *compiled.EventLayout, serial uint64) *RetiredLayout {
	r := &RetiredLayout{Probe: p.Address, Event: ev, Serial: serial}
	for _, f := range ev.Fields {
		switch f.Kind {
		case compiled.KeyFunc:
			r.Functions = p.Functions
		case compiled.KeyEvent:
			r.Tracepoints, r.TracepointEvent = p.Tracepoints, p.Event
		}
	}
	return r
}

// newestRetired returns the retired layouts, oldest first, each kept once
// (the newest: a probe put back, then replaced once more, retires it
// again) and at most MaxRetiredLayouts of them.
func newestRetired(retired []*RetiredLayout) []*RetiredLayout {
	seen := map[string]bool{}
	kept := retired[:0:0]
	for i := len(retired) - 1; i >= 0; i-- {
		r := retired[i]
		if r == nil || r.Event == nil || seen[r.Event.Layout] {
			continue
		}
		seen[r.Event.Layout] = true
		kept = append(kept, r)
	}
	for i, j := 0, len(kept)-1; i < j; i, j = i+1, j-1 {
		kept[i], kept[j] = kept[j], kept[i]
	}
	if len(kept) > MaxRetiredLayouts {
		kept = kept[len(kept)-MaxRetiredLayouts:]
	}
	return kept
}

// checkEvents checks the event buffer's pins: there, and the map recorded.
func (w *Workspace) checkEvents(es *EventsState) []string {
	d, err := w.eventsDir(es)
	if err != nil {
		if es.BootID != "" && es.BootID != bootID() {
			return []string{"pins gone: the machine rebooted since it was applied"}
		}
		return []string{"pins gone"}
	}
	defer d.close()
	var drift []string
	for _, p := range es.Pins {
		path, _ := d.procPath(p.Pin)
		m, err := ebpf.LoadPinnedMap(path, &ebpf.LoadPinOptions{ReadOnly: true})
		if err != nil {
			drift = append(drift, fmt.Sprintf("map %s: pin gone", p.Name))
			continue
		}
		if info, err := m.Info(); err == nil {
			if id, _ := info.ID(); id != p.ID {
				drift = append(drift, fmt.Sprintf("map %s: replaced (id %d, was %d)", p.Name, id, p.ID))
			}
		}
		m.Close()
	}
	return drift
}

// readEventsMeta reads an event buffer directory's description.
func (w *Workspace) readEventsMeta(name string) (*EventsState, error) {
	var es EventsState
	if err := w.readDirMeta(name, &es); err != nil {
		return nil, err
	}
	if es.PinDir != name {
		return nil, fmt.Errorf("its description is of %s", es.PinDir)
	}
	return &es, nil
}

// validate checks what an event buffer's state names.
func (es *EventsState) validate() error {
	if es.Address != compiled.EventBufferAddress {
		return fmt.Errorf("event buffer %q is not the event buffer's address", es.Address)
	}
	if !isEventsPinDir(es.PinDir) {
		return fmt.Errorf("%s: pin_dir %q is not a pin directory of the event buffer", es.Address, es.PinDir)
	}
	if len(es.Maps) != 1 || es.Maps[0] == nil || !isMapRef(es.Maps[0].Ref) {
		return fmt.Errorf("%s: the buffer is not one map", es.Address)
	}
	if err := validMapPins(es.Address, es.Pins); err != nil {
		return err
	}
	return es.validateRetired()
}

// isEventsPinDir says name is a pin directory of the event buffer: a probe
// directory under the buffer's prefix, longer than it.
func isEventsPinDir(name string) bool {
	return isProbeDir(name) && len(name) > len(eventsPinDir) && name[:len(eventsPinDir)] == eventsPinDir
}

// validateRetired checks the retired layouts: at most MaxRetiredLayouts,
// none null.
func (es *EventsState) validateRetired() error {
	if len(es.Retired) > MaxRetiredLayouts {
		return fmt.Errorf("%s: %d retired layouts, more than %d", es.Address, len(es.Retired), MaxRetiredLayouts)
	}
	for _, r := range es.Retired {
		if r == nil || r.Event == nil {
			return fmt.Errorf("%s: a retired layout is null", es.Address)
		}
	}
	return nil
}

// EventsStatus is the event buffer's health: the "events" object of
// "probectl status -json".
type EventsStatus struct {
	compiled.EventBuffer
	// Unread is what the buffer holds that nobody has read yet, in bytes
	// (records and their headers); -1 when it cannot be read.
	Unread int64 `json:"unread_bytes"`
	// Reader names the process reading the events, if one is.
	Reader string `json:"reader,omitempty"`
	// Retired counts the layouts of probes gone whose records the
	// buffer may still hold.
	Retired       int      `json:"retired_layouts"`
	Drift         []string `json:"drift,omitempty"`
	AppliedAtUnix int64    `json:"applied_at"`
	PinDir        string   `json:"pin_dir"`
}

// EventsStatus checks the applied event buffer; nil when there is none.
// It changes nothing: it reads the buffer's positions through a read-only
// mapping (of a read-write descriptor: the kernel refuses to map a ring
// buffer through a read-only one), and who holds its reader lock from
// /proc/locks.
func (w *Workspace) EventsStatus(s *State) *EventsStatus {
	es := s.Events
	if es == nil {
		return nil
	}
	st := &EventsStatus{EventBuffer: es.EventBuffer, Unread: -1, Retired: len(es.Retired), AppliedAtUnix: es.AppliedAt,
		PinDir: w.PinDir() + "/" + es.PinDir}
	st.Drift = w.checkEvents(es)
	if len(st.Drift) > 0 {
		return st
	}
	if d, err := w.eventsDir(es); err == nil {
		if holder, ok := d.flockHolder(); ok {
			st.Reader = holder
		}
		if m, err := openBufferIn(d, es, false); err == nil {
			if cons, prod, err := ringPositions(m); err == nil {
				st.Unread = int64(prod - cons)
			}
			m.Close()
		}
		d.close()
	}
	return st
}

// ringPositions reads a ring buffer's consumer and producer positions
// through a read-only mapping of its first two pages.
func ringPositions(m *ebpf.Map) (cons, prod uint64, err error) {
	page := os.Getpagesize()
	b, err := unix.Mmap(m.FD(), 0, 2*page, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return 0, 0, fmt.Errorf("map the ring buffer's positions: %w", err)
	}
	defer unix.Munmap(b)
	cons = loadPos(b[0:8])
	prod = loadPos(b[page : page+8])
	return cons, prod, nil
}

// loadPos reads a ring buffer position the kernel writes concurrently.
func loadPos(b []byte) uint64 {
	return atomic.LoadUint64((*uint64)(unsafe.Pointer(&b[0])))
}

func joinDrift(d []string) string { return strings.Join(d, "; ") }

// errSays reports whether err is, or wraps, errno.
func errSays(err error, errno unix.Errno) bool { return errors.Is(err, errno) }
