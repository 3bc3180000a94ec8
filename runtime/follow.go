package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/probectl/probectl/bpf"
)

// EventPrinter is what a Follower prints into: probectl's text and NDJSON
// views of the records, the drop notices and the summary. It holds what
// it prints until Flush (a flood must not slow the reader into dropping
// more).
type EventPrinter interface {
	// Record prints a record.
	Record(*EventRecord) error
	// Drops reports the events dropped since it last did; ds are the
	// stream's counts so far.
	Drops(ds []ProbeDrops)
	// EndStream reports what a stream dropped and carries its counts
	// into the summary: the follower closed the stream of a removed
	// buffer, and reads the workspace's next one.
	EndStream(ds []ProbeDrops)
	// Summary prints the totals, ds being the last stream's counts (none
	// without a stream).
	Summary(ds []ProbeDrops) error
	// Flush writes what the printer holds; its error is the first write
	// error (a sink's disk full).
	Flush() error
	// Held is how many bytes the printer holds unwritten; Printed how
	// many it printed, held or written: the offset in its output where
	// the next line begins.
	Held() int
	Printed() int64
}

// FollowOptions say how a Follower follows.
type FollowOptions struct {
	// Wait: when the buffer is removed, close its stream and wait for
	// the workspace's next buffer (a sink), instead of ending after what
	// was left in it (events -follow).
	Wait bool
	// Written, when set, is how many bytes of the printer's output were
	// written as whole lines (a sink's file): a write that failed part
	// way commits the records whose lines it wrote.
	Written func() int64
	// LastLine is the last line of a sink's file when it opened: the
	// records the sink before it wrote and was killed before it consumed
	// are not written twice.
	LastLine []byte
	// Notices receives what the follower says, a line each: a buffer
	// made anew or removed, what keeps it waiting (stderr).
	Notices io.Writer
}

// Follower reads a workspace's events into a printer as they come: the
// one follow-reader of events -follow and of the event sinks of serve and
// agent (-events-out). An apply that makes a new buffer moves it there,
// after what the old one held. When the buffer is removed (destroy, or an
// apply that left no probe with events), it ends after what was left; one
// that waits closes the stream and waits for the workspace's next buffer,
// as it does when there is none at its start.
//
// A record is consumed only once its line was written: the stream holds
// the records, and the follower commits them after each write of the
// lines it printed (32KiB, or what came before the buffer went idle).
// What it read and had not written when it died (kill -9), or could not
// write (a full disk), is still in the buffer for the next reader.
type Follower struct {
	w    *Workspace
	st   *EventStream // nil while a waiting follower has no buffer
	pr   EventPrinter
	opts FollowOptions
	// unsent pairs each record read since the last commit with the
	// printer's position after it (with Written).
	unsent []sentAt
	// repeat is LastLine until the first stream was read.
	repeat []byte
	// busy is the last reason a waiting follower could not open a buffer,
	// said once; read says it read a buffer before.
	busy string
	read bool
}

// sentAt is a record read: the stream's mark after it, and the printer's
// position after its line.
type sentAt struct {
	mark Mark
	end  int64
}

// NewFollower follows w's events from st (nil: none yet; the follower
// waits for a buffer) into pr. The follower owns st from then on: Finish
// closes it.
func NewFollower(w *Workspace, st *EventStream, pr EventPrinter, o FollowOptions) *Follower {
	if o.Notices == nil {
		o.Notices = io.Discard
	}
	return &Follower{w: w, st: st, pr: pr, opts: o, repeat: o.LastLine}
}

// Run reads until ctx ends (then what the buffer holds at that moment)
// or, unless it waits, the buffer is removed (then what is left in it).
func (f *Follower) Run(ctx context.Context) error {
	f.read = f.read || f.st != nil
	for {
		if f.st == nil {
			if !f.awaitBuffer(ctx) {
				return nil
			}
		}
		removed, err := f.pump(ctx)
		if err != nil || !removed {
			return err
		}
		if !f.opts.Wait {
			fmt.Fprintln(f.opts.Notices, "The event buffer was removed (destroy, or an apply that left no probe with events): nothing more to follow.")
			return nil
		}
		f.pr.EndStream(f.st.Drops())
		f.st.Close()
		f.st = nil
		fmt.Fprintln(f.opts.Notices, "The event buffer was removed (destroy, or an apply that left no probe with events): waiting for the next one.")
		f.busy = f.noBuffer()
	}
}

// pump reads one stream until ctx ends or its buffer is removed with no
// new one to move to (removed).
func (f *Follower) pump(ctx context.Context) (removed bool, err error) {
	st, pr := f.st, f.pr
	st.HoldRecords()
	if f.repeat != nil {
		f.skipRepeated()
	}
	lastCheck := time.Now()
	for n := 0; ; n++ {
		if ctx.Err() != nil {
			return false, f.drain()
		}
		rec, err := st.Next(time.Now().Add(250 * time.Millisecond))
		switch {
		case err == nil:
			if err := f.print(rec); err != nil {
				return false, err
			}
			if n%1024 != 0 || time.Since(lastCheck) < time.Second {
				continue
			}
		case errors.Is(err, ErrIdle):
			if err := f.commit(); err != nil {
				return false, err
			}
		default:
			return false, err
		}
		lastCheck = time.Now()
		if removed, err := f.check(st, pr); err != nil || removed {
			return removed, err
		}
	}
}

// check samples the stream's clock and drops, and moves on when its
// buffer was removed.
func (f *Follower) check(st *EventStream, pr EventPrinter) (removed bool, err error) {
	st.Housekeep()
	pr.Drops(st.Drops())
	if !st.Gone() {
		return false, nil
	}
	return f.moveOn()
}

// moveOn finishes a stream whose buffer was removed: what it holds is
// printed, then the stream moves to the workspace's new buffer, if an
// apply made one (removed is false), or ends.
func (f *Follower) moveOn() (removed bool, err error) {
	st := f.st
	// Removed: its writers are detached; what it holds is still ours.
	time.Sleep(100 * time.Millisecond)
	if err := f.drain(); err != nil {
		return false, err
	}
	old := st.Size()
	moved, err := st.Reopen()
	if err != nil && !f.opts.Wait {
		return false, err
	}
	if err := f.pr.Flush(); err != nil {
		return false, err
	}
	if err != nil || !moved {
		return true, nil
	}
	st.HoldRecords()
	fmt.Fprintf(f.opts.Notices, "The event buffer was made anew by an apply (%s, was %s): following the new one.\n", bpf.SizeText(st.Size()), bpf.SizeText(old))
	return false, nil
}

// print prints a record, and writes and commits every 32KiB.
func (f *Follower) print(rec *EventRecord) error {
	if err := f.pr.Record(rec); err != nil {
		return err
	}
	if f.opts.Written != nil {
		f.unsent = append(f.unsent, sentAt{f.st.Mark(), f.pr.Printed()})
	}
	if f.pr.Held() >= 32<<10 {
		return f.commit()
	}
	return nil
}

// commit writes what the printer holds, then consumes the records whose
// lines were written: all of them, or, when the write failed part way,
// those before it.
func (f *Follower) commit() error {
	err := f.pr.Flush()
	if f.opts.Written != nil {
		n, done := f.opts.Written(), 0
		for done < len(f.unsent) && f.unsent[done].end <= n {
			done++
		}
		if done > 0 {
			f.st.CommitTo(f.unsent[done-1].mark)
		}
		f.unsent = f.unsent[:copy(f.unsent, f.unsent[done:])]
	}
	if err != nil {
		return err
	}
	f.st.Commit()
	f.unsent = f.unsent[:0]
	return nil
}

// drain prints and commits what the buffer holds now.
func (f *Follower) drain() error {
	if err := f.st.ReadBuffered(f.print); err != nil {
		return err
	}
	return f.commit()
}

// skipRepeated consumes, without writing them, the records at the start
// of the buffer up to the one whose line is the file's last: the sink
// before wrote them and was killed before it consumed them. They are
// looked for among the first 64KiB of lines (more than a write holds);
// when the last line is not among them, nothing is skipped.
func (f *Follower) skipRepeated() {
	last := f.repeat
	f.repeat = nil
	for n, size := 1, 0; size < 64<<10; n++ {
		rec, err := f.st.Next(time.Now())
		if err != nil {
			break
		}
		b, err := rec.MarshalJSON()
		if err != nil {
			break
		}
		if sameRecordLine(b, last) {
			f.st.Commit()
			fmt.Fprintf(f.opts.Notices, "The first %d records in the buffer were written before (by a reader stopped before it consumed them): not written again.\n", n)
			return
		}
		size += len(b) + 1
	}
	f.st.Rewind()
}

// awaitBuffer waits until the workspace has an event buffer and opens it;
// false when ctx ended first. What keeps it waiting (no buffer, another
// reader, a state it cannot read) is said once each time it changes.
func (f *Follower) awaitBuffer(ctx context.Context) bool {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		st, why := f.open()
		if st != nil {
			f.st = st
			switch {
			case f.read:
				fmt.Fprintf(f.opts.Notices, "Reading the events of workspace %q again.\n", f.w.Name)
			case f.busy != "":
				fmt.Fprintf(f.opts.Notices, "Reading the events of workspace %q.\n", f.w.Name)
			}
			f.busy, f.read = "", true
			return true
		}
		if why != f.busy {
			fmt.Fprintln(f.opts.Notices, why)
			f.busy = why
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}

// open opens the workspace's buffer, or says why it cannot.
func (f *Follower) open() (*EventStream, string) {
	s, err := f.w.Inspect()
	if err != nil {
		return nil, fmt.Sprintf("Waiting for the events of workspace %q: %v.", f.w.Name, err)
	}
	if s.Events == nil {
		return nil, f.noBuffer()
	}
	st, err := f.w.OpenEvents(s)
	if err != nil {
		return nil, fmt.Sprintf("Waiting for the events of workspace %q: %v.", f.w.Name, err)
	}
	return st, ""
}

func (f *Follower) noBuffer() string {
	return fmt.Sprintf("Workspace %q has no event buffer (no applied probe emits events): waiting for one.", f.w.Name)
}

// Finish writes the summary and closes the stream.
func (f *Follower) Finish() error {
	var ds []ProbeDrops
	if f.st != nil {
		ds = f.st.Drops()
		f.st.Close()
		f.st = nil
	}
	return f.pr.Summary(ds)
}

// sameRecordLine reports whether two event lines are of one record: the
// same but for the wall time (converted with the offset of each reader's
// clock sample). A record's mono_ns is its reservation's nanosecond: two
// records with the same one and the same fields are one.
func sameRecordLine(a, b []byte) bool {
	return bytes.Equal(withoutWall(a), withoutWall(b))
}

// withoutWall removes the first "wall" member: the record's (MarshalJSON
// writes it before the fields).
func withoutWall(l []byte) []byte {
	i := bytes.Index(l, []byte(`,"wall":"`))
	if i < 0 {
		return l
	}
	j := bytes.IndexByte(l[i+9:], '"')
	if j < 0 {
		return l
	}
	return append(append([]byte(nil), l[:i]...), l[i+9+j+1:]...)
}
