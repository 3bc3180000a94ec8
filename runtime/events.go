package runtime

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/cilium/ebpf"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler/compiled"
	"golang.org/x/sys/unix"
)

// EventRecord is one record of the event buffer, decoded: one line of
// "probectl events -json" (README, "Events JSON").
type EventRecord struct {
	// Type is "event", or "undecodable" for a record whose layout the
	// state no longer records (its probe was replaced or destroyed long
	// ago, or by an apply that was undone).
	Type string
	// Probe and Name say which probe and which of its event actions wrote
	// it; Fields are its fields, decoded as show decodes keys.
	Probe  string
	Name   string
	Fields OrderedKey
	// MonoNS is when the record was reserved: CLOCK_MONOTONIC, from
	// bpf_ktime_get_ns. Wall is the same instant on the wall clock,
	// converted in user space (README, "Events").
	MonoNS uint64
	Wall   time.Time
	// Layout is the id an undecodable record carries, and Size its size.
	Layout string
	Size   int
}

// The record types.
const (
	RecordEvent       = "event"
	RecordUndecodable = "undecodable"
)

// MarshalJSON writes the record as one JSON object, its members in a
// fixed order: type, probe, event, mono_ns, wall, fields (undecodable:
// type, layout, mono_ns, wall, size).
func (r *EventRecord) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"type":`)
	b.WriteString(strconv.Quote(r.Type))
	if r.Type == RecordUndecodable {
		b.WriteString(`,"layout":`)
		b.WriteString(strconv.Quote(r.Layout))
	} else {
		b.WriteString(`,"probe":`)
		writeJSONString(&b, r.Probe)
		b.WriteString(`,"event":`)
		writeJSONString(&b, r.Name)
	}
	b.WriteString(`,"mono_ns":`)
	b.WriteString(strconv.FormatUint(r.MonoNS, 10))
	b.WriteString(`,"wall":"`)
	b.WriteString(WallText(r.Wall))
	b.WriteByte('"')
	if r.Type == RecordUndecodable {
		b.WriteString(`,"size":`)
		b.WriteString(strconv.Itoa(r.Size))
	} else {
		b.WriteString(`,"fields":`)
		f, err := r.Fields.MarshalJSON()
		if err != nil {
			return nil, err
		}
		b.Write(f)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func writeJSONString(b *bytes.Buffer, s string) {
	q, _ := bpf.JSON(s)
	b.Write(q)
}

// WallText writes a wall-clock time as the JSON carries it: RFC 3339 in
// UTC, always nine digits of nanoseconds.
func WallText(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000000Z") }

// ErrIdle is returned by EventStream.Next when its deadline passed, or
// Wake was called, with no record to return; and at once, without
// waiting, when the stream holds records (HoldRecords) and has no more to
// return: the caller writes and commits what it holds first.
var ErrIdle = errors.New("no event")

// ErrNoBuffer says the workspace has no event buffer: no applied probe
// emits events.
var ErrNoBuffer = errors.New("no event buffer")

// ReaderError says another process reads the workspace's events: a ring
// buffer has one consumer position, and reading consumes.
type ReaderError struct {
	Workspace string
	Holder    string
}

func (e *ReaderError) Error() string {
	return fmt.Sprintf("the events of workspace %q are being read by %s: reading consumes them, and a buffer has one reader at a time. Stop that reader first (it is a probectl events, or a program reading the pinned buffer)",
		e.Workspace, e.Holder)
}

// resolveWait bounds how long a record of a layout the state does not
// have yet waits for the apply that writes it (which holds the
// workspace's lock while its new probes already run) to commit.
const resolveWait = 60 * time.Second

// layoutRef is what decodes one layout: the event and its probe.
type layoutRef struct {
	probe *ProbeState
	ev    *compiled.EventLayout
}

// dropCounter is one probe's counter of events that found the buffer
// full, in its stats map (held open: a probe replaced while the stream
// reads still counts).
type dropCounter struct {
	addr  string
	m     *ebpf.Map
	index int
	base  uint64 // the counter when the stream opened, or 0 for a probe applied since
	last  uint64
}

func (c *dropCounter) read() uint64 {
	var per []uint64
	if err := c.m.Lookup(uint32(c.index), &per); err != nil {
		return c.last
	}
	var n uint64
	for _, v := range per {
		n += v
	}
	c.last = max(n, c.last)
	return c.last
}

// EventStream reads an event buffer: the records of every probe, in the
// order they were reserved, decoded. A workspace's stream holds the
// buffer's reader lock (a flock on its pin directory, which apply and
// destroy never take: they are never held up by a reader).
type EventStream struct {
	rd   *ringReader
	m    *ebpf.Map
	rec  []byte
	hold bool // records are consumed by Commit, not by Next
	ws   string
	w    *Workspace // nil for a session
	lock *dir       // the buffer's pin directory, flocked
	// pinDir is the buffer's pin directory; size its size.
	pinDir string
	size   int

	layouts map[compiled.EventLayoutID]layoutRef
	unknown map[compiled.EventLayoutID]time.Time
	// counters by probe instance (pin directory, or address in a session).
	counters map[string]*dropCounter
	clock    wallClock
	sampled  time.Time
	// stacks reads the stacks of records (runtime/stacks.go).
	stacks eventStacks
}

// OpenEvents opens the workspace's event buffer for reading, taking its
// reader lock: a second reader is refused, naming the first. The workspace
// is read as Inspect reads it (no workspace lock).
func (w *Workspace) OpenEvents(s *State) (*EventStream, error) {
	st := &EventStream{ws: w.Name, w: w, layouts: map[compiled.EventLayoutID]layoutRef{},
		unknown: map[compiled.EventLayoutID]time.Time{}, counters: map[string]*dropCounter{}}
	st.stacks.open = w.pinnedMaps
	if err := st.open(s); err != nil {
		st.Close()
		return nil, err
	}
	st.learn(s, true)
	st.clock.sample()
	st.sampled = time.Now()
	return st, nil
}

func (st *EventStream) open(s *State) error {
	w := st.w
	if s.Events == nil {
		return ErrNoBuffer
	}
	d, err := w.eventsDir(s.Events)
	if err != nil {
		return err
	}
	if err := unix.Flock(d.fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		holder := d.lockHolder()
		d.close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return &ReaderError{Workspace: w.Name, Holder: holder}
		}
		return fmt.Errorf("%s: reader lock: %w", s.Events.Address, err)
	}
	m, err := openBufferIn(d, s.Events, false)
	if err != nil {
		d.close()
		return err
	}
	rd, err := newRingReader(m)
	if err != nil {
		m.Close()
		d.close()
		return fmt.Errorf("%s: read: %w", s.Events.Address, err)
	}
	st.rd, st.m, st.lock, st.pinDir, st.size = rd, m, d, s.Events.PinDir, s.Events.Size
	return nil
}

// OpenEvents opens the session's event buffer; nil when no probe emits
// events.
func (s *Session) OpenEvents() (*EventStream, error) {
	if s.buffer == nil {
		return nil, nil
	}
	rd, err := newRingReader(s.buffer.m)
	if err != nil {
		return nil, fmt.Errorf("%s: read: %w", s.buffer.buf.Address, err)
	}
	st := &EventStream{rd: rd, size: s.buffer.buf.Size, layouts: map[compiled.EventLayoutID]layoutRef{},
		unknown: map[compiled.EventLayoutID]time.Time{}, counters: map[string]*dropCounter{}}
	st.stacks.open = s.stackMaps
	for i, p := range s.States {
		st.addProbe(p)
		if len(p.Events) > 0 {
			if m := s.probes[i].coll.Maps[refStats]; m != nil {
				st.counters[p.Address.String()] = &dropCounter{addr: p.Address.String(), m: m, index: p.Stats.EventsDropped}
			}
		}
	}
	for _, c := range st.counters {
		c.base = c.read()
	}
	st.clock.sample()
	st.sampled = time.Now()
	return st, nil
}

// learn adds the layouts s records (its probes', and the retired ones)
// and opens the drop counters of its probes; at the stream's opening
// their counts so far are what was dropped before.
func (st *EventStream) learn(s *State, opening bool) {
	for _, p := range s.Probes {
		st.addProbe(p)
		if len(p.Events) == 0 || st.counters[p.PinDir] != nil {
			continue
		}
		m, release, err := st.w.pinnedMaps(p)(refStats)
		if err != nil {
			continue
		}
		_ = release // held until Close
		c := &dropCounter{addr: p.Address.String(), m: m, index: p.Stats.EventsDropped}
		if opening {
			c.base = c.read()
		}
		st.counters[p.PinDir] = c
	}
	if s.Events != nil {
		for _, r := range s.Events.Retired {
			p := &ProbeState{}
			p.Address, p.Functions, p.Tracepoints, p.Event = r.Probe, r.Functions, r.Tracepoints, r.TracepointEvent
			st.add(p, r.Event)
		}
	}
}

func (st *EventStream) addProbe(p *ProbeState) {
	for _, ev := range p.Events {
		st.add(p, ev)
	}
}

func (st *EventStream) add(p *ProbeState, ev *compiled.EventLayout) {
	if id := ev.LayoutID(); id != 0 {
		if _, ok := st.layouts[id]; !ok {
			st.layouts[id] = layoutRef{probe: p, ev: ev}
		}
	}
}

// Next returns the next record, waiting until deadline for one (the zero
// time waits for ever); ErrIdle when the deadline passed or Wake was
// called first. The record is consumed (its room in the buffer given back
// to the probes) at once, or, after HoldRecords, by the next Commit.
func (st *EventStream) Next(deadline time.Time) (*EventRecord, error) {
	b, err := st.rd.next(st.rec, deadline)
	switch {
	case errors.Is(err, errRingIdle), errors.Is(err, errRingHeld):
		return nil, ErrIdle
	case err != nil:
		return nil, err
	}
	st.rec = b
	if !st.hold {
		st.rd.commit()
	}
	return st.decode(b), nil
}

// HoldRecords makes the stream consume records only when Commit is
// called, not as Next returns them: a reader that writes each record
// somewhere commits once it is written, so a record it read and had not
// written when it died (kill -9), or failed to write (a full disk), is
// still in the buffer for the next reader. The records held take room in
// the buffer until then; while it holds some, Next never waits.
func (st *EventStream) HoldRecords() { st.hold = true }

// Commit consumes every record Next returned.
func (st *EventStream) Commit() {
	if st.rd != nil {
		st.rd.commit()
	}
}

// A Mark is a place in the stream: after the records Next returned
// before it was taken.
type Mark struct {
	pos    uintptr
	pinDir string
}

// Mark is the place after the last record Next returned.
func (st *EventStream) Mark() Mark { return Mark{pos: st.rd.pos, pinDir: st.pinDir} }

// CommitTo consumes the records before m, and none after: a reader that
// wrote some of the records it read commits those. A mark of another
// buffer (the stream moved since), or of a place already consumed, does
// nothing.
func (st *EventStream) CommitTo(m Mark) {
	if st.rd != nil && m.pinDir == st.pinDir {
		st.rd.commitTo(m.pos)
	}
}

// Rewind makes Next return again the records it returned since the last
// commit.
func (st *EventStream) Rewind() {
	if st.rd != nil {
		st.rd.rewind()
	}
}

// Wake makes a Next that waits return ErrIdle (or the records the buffer
// holds first). It is safe while another goroutine is in Next.
func (st *EventStream) Wake() { st.rd.wakeUp() }

// ReadBuffered reads what the buffer holds now, and no more: the records
// up to the producer's position when it was called (a flood that goes on
// meanwhile does not keep it reading), each given to fn. After
// HoldRecords, what fn was given is consumed by the caller's Commit.
func (st *EventStream) ReadBuffered(fn func(*EventRecord) error) error {
	want := st.rd.unread()
	for read := 0; read < want; {
		rec, err := st.Next(time.Now())
		if errors.Is(err, ErrIdle) {
			return nil
		}
		if err != nil {
			return err
		}
		read += compiled.RingbufHeaderSize + (len(st.rec)+7)&^7
		if err := fn(rec); err != nil {
			return err
		}
	}
	return nil
}

// decode decodes one record by the layout its header names.
func (st *EventStream) decode(b []byte) *EventRecord {
	if len(b) < compiled.EventHeaderSize {
		return &EventRecord{Type: RecordUndecodable, Size: len(b), Wall: st.clock.wall(0)}
	}
	id := compiled.EventLayoutID(binary.LittleEndian.Uint64(b[compiled.EventLayoutOffset:]))
	mono := binary.LittleEndian.Uint64(b[compiled.EventTimeOffset:])
	l, ok := st.layouts[id]
	if !ok {
		l, ok = st.resolve(id)
	}
	if !ok || len(b) < l.ev.Size {
		return &EventRecord{Type: RecordUndecodable, Layout: id.String(), MonoNS: mono, Wall: st.clock.wall(mono), Size: len(b)}
	}
	rec := &EventRecord{Type: RecordEvent, Probe: l.probe.Address.String(), Name: l.ev.Name, MonoNS: mono, Wall: st.clock.wall(mono),
		Fields: decodeKey(l.ev.Fields, b, l.probe)}
	st.stacks.resolve(l.probe, rec.Fields)
	return rec
}

// resolve finds a layout the stream does not know: the state may record
// it since (an apply while the stream reads). An apply runs its new
// probes before it commits the state, so while a writer holds the
// workspace the record waits for its commit (at most resolveWait).
func (st *EventStream) resolve(id compiled.EventLayoutID) (layoutRef, bool) {
	if st.w == nil {
		return layoutRef{}, false
	}
	at, seen := st.unknown[id]
	if seen && time.Since(at) < time.Second {
		return layoutRef{}, false
	}
	return st.await(id, seen)
}

// await reads the state for layout id until it is there, waiting while a
// writer holds the workspace (at most resolveWait). It waits for a writer
// once per layout (not when seen): records of a layout nobody records (a
// state rebuilt by recover) must not stall the stream each time while an
// apply waits at its prompt.
func (st *EventStream) await(id compiled.EventLayoutID, seen bool) (layoutRef, bool) {
	deadline := time.Now().Add(resolveWait)
	for {
		held := !seen && st.writerHolds()
		if s, err := st.w.State(); err == nil {
			st.learn(s, false)
		}
		if l, ok := st.layouts[id]; ok {
			delete(st.unknown, id)
			return l, true
		}
		if !held || time.Now().After(deadline) {
			st.unknown[id] = time.Now()
			return layoutRef{}, false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// writerHolds reports whether a writer (apply, destroy, state) holds the
// workspace's lock, from /proc/locks: the stream never takes that lock.
func (st *EventStream) writerHolds() bool {
	d, err := openPath(st.w.dir(), false)
	if err != nil {
		return false
	}
	defer d.close()
	_, held := d.flockHolder()
	return held
}

// Housekeep samples the wall clock's offset again (once a second at
// most): NTP may slew or step the wall clock while a stream reads.
func (st *EventStream) Housekeep() {
	if time.Since(st.sampled) >= time.Second {
		st.clock.sample()
		st.sampled = time.Now()
	}
}

// Gone reports whether the workspace's buffer was removed (by destroy, or
// by an apply that made a new one or left no probe with events). What it
// held is still readable through the stream.
func (st *EventStream) Gone() bool {
	if st.lock == nil {
		return false
	}
	var fst unix.Stat_t
	return unix.Fstat(st.lock.fd, &fst) == nil && fst.Nlink == 0
}

// Reopen moves the stream to the workspace's current buffer after Gone:
// false when the workspace has none.
func (st *EventStream) Reopen() (bool, error) {
	w := st.w
	w.Close()
	s, err := w.Inspect()
	if err != nil {
		return false, err
	}
	if s.Events == nil || s.Events.PinDir == st.pinDir {
		return false, nil
	}
	st.closeBuffer()
	if err := st.open(s); err != nil {
		return false, err
	}
	st.learn(s, false)
	return true, nil
}

// Size is the buffer's size in bytes.
func (st *EventStream) Size() int { return st.size }

// ClockError is the uncertainty of the wall-clock conversion's last
// sample, in nanoseconds.
func (st *EventStream) ClockError() int64 { return st.clock.uncertainty }

// ProbeDrops counts one probe's events that found the buffer full.
type ProbeDrops struct {
	Probe string
	// Before were dropped before the stream opened (since the probe was
	// applied), During while it read.
	Before, During uint64
}

// Drops reads the probes' counters of events that found the buffer full.
func (st *EventStream) Drops() []ProbeDrops {
	by := map[string]*ProbeDrops{}
	for _, c := range st.counters {
		d := by[c.addr]
		if d == nil {
			d = &ProbeDrops{Probe: c.addr}
			by[c.addr] = d
		}
		n := c.read()
		d.Before += c.base
		d.During += n - c.base
	}
	out := make([]ProbeDrops, 0, len(by))
	for _, d := range by {
		out = append(out, *d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Probe < out[j].Probe })
	return out
}

func (st *EventStream) closeBuffer() {
	if st.rd != nil {
		st.rd.close()
		st.rd = nil
	}
	if st.m != nil && st.w != nil {
		st.m.Close()
	}
	st.m = nil
	st.lock.close()
	st.lock = nil
}

// Close stops reading: a Next blocked in another goroutine returns an
// error. It releases the reader lock.
func (st *EventStream) Close() {
	st.closeBuffer()
	if st.w != nil {
		for _, c := range st.counters {
			c.m.Close()
		}
	}
	st.counters = nil
}

// wallClock converts CLOCK_MONOTONIC to the wall clock: the offset
// between the two, sampled by reading MONOTONIC, REALTIME, MONOTONIC and
// keeping the tightest of five tries (the error is half its width).
type wallClock struct {
	offset      int64
	uncertainty int64
}

func clockNow(id int32) int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(id, &ts)
	return ts.Nano()
}

func (c *wallClock) sample() {
	best := int64(math.MaxInt64)
	for range 5 {
		m1 := clockNow(unix.CLOCK_MONOTONIC)
		r := clockNow(unix.CLOCK_REALTIME)
		m2 := clockNow(unix.CLOCK_MONOTONIC)
		if d := m2 - m1; d < best {
			best = d
			c.offset = r - (m1 + d/2)
		}
	}
	c.uncertainty = best / 2
}

func (c *wallClock) wall(mono uint64) time.Time { return time.Unix(0, int64(mono)+c.offset) }
