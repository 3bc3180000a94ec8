package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/probectl/probectl/runtime"
	"github.com/spf13/cobra"
)

func newEventsCmd(g *globals) *cobra.Command {
	var asJSON, follow bool
	cmd := &cobra.Command{
		Use:   "events [ADDRESS...] [-json] [-follow]",
		Short: "Print the events of the applied probes, in the order they happened",
		Long: `Events reads the workspace's event buffer: the records of every probe's
event actions, in the order they were reserved, each with its time
(CLOCK_MONOTONIC nanoseconds, and the wall clock). It prints what the
buffer holds and exits; with -follow it then waits for more until
interrupted (Ctrl-C), or until the buffer is removed (destroy).

Reading consumes: what one reader read, the next does not see. One reader
at a time: a second is refused, naming the first. ADDRESS... prints only
those probes' events; the others' records are read too, and counted as
skipped. Events that found the buffer full are counted per probe (also by
status) and summed up at the end.

Apply and destroy are never held up by a reader: an apply that keeps the
buffer keeps the records and the reader going; one that makes a new
buffer (another size) moves the reader to it; destroy ends it.

  -json    NDJSON: one object per line (README, "Events JSON")
  -follow  wait for more events until interrupted

Exit status: 0, 1 errors.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireBPF("events"); err != nil {
				return err
			}
			w, s, err := g.inspect()
			if err != nil {
				return err
			}
			defer w.Close()
			filter, err := eventFilter(s, args)
			if err != nil {
				return err
			}
			if s.Events == nil {
				switch {
				case len(s.Probes) == 0:
					fmt.Fprintln(cmd.ErrOrStderr(), "No probes applied in this workspace: there are no events to read.")
				default:
					fmt.Fprintln(cmd.ErrOrStderr(), "No applied probe emits events: this workspace has no event buffer.")
				}
				return nil
			}
			st, err := w.OpenEvents(s)
			if err != nil {
				return err
			}
			defer st.Close()
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			pr := newEventPrinter(cmd.OutOrStdout(), cmd.ErrOrStderr(), asJSON, filter)
			defer pr.flush()
			if follow {
				mode := "following; Ctrl-C to stop"
				fmt.Fprintf(cmd.ErrOrStderr(), "Reading the events of workspace %q (%s).\n", w.Name, mode)
				f := &eventFollower{w: w, st: st, pr: pr}
				if err := f.run(ctx); err != nil {
					return err
				}
				return pr.summary(st.Drops())
			}
			// Consumed once printed: a failed write leaves the records.
			st.HoldRecords()
			if err := st.ReadBuffered(pr.record); err != nil {
				return err
			}
			if err := pr.summary(st.Drops()); err != nil {
				return err
			}
			st.Commit()
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print NDJSON")
	cmd.Flags().BoolVar(&follow, "follow", false, "wait for more events until interrupted")
	return cmd
}

// eventFilter checks the addresses given: applied probes that emit events.
func eventFilter(s *runtime.State, args []string) (map[string]bool, error) {
	if len(args) == 0 {
		return nil, nil
	}
	addrs, err := parseAddresses(args)
	if err != nil {
		return nil, err
	}
	filter := map[string]bool{}
	for _, a := range addrs {
		p := s.Probe(a)
		if p == nil {
			return nil, errors.New(a.String() + " is not applied in this workspace")
		}
		if len(p.Events) == 0 {
			return nil, errors.New(a.String() + " emits no events: it has no event action")
		}
		filter[a.String()] = true
	}
	return filter, nil
}

// eventFollower reads a workspace's events into a printer as they come:
// the one follow-reader of events -follow and of the event sinks of serve
// and agent (-events-out). An apply that makes a new buffer moves it there,
// after what the old one held. When the buffer is removed (destroy, or an
// apply that left no probe with events), events -follow ends after what
// was left; a follower that waits (a sink) closes it and waits for the
// workspace's next buffer, as it does when there is none at its start.
//
// A record is consumed only once its line was written: the stream holds
// the records, and the follower commits them after each write of the
// lines it printed (32KiB, or what came before the buffer went idle).
// What it read and had not written when it died (kill -9), or could not
// write (a full disk), is still in the buffer for the next reader. With
// written (a sink's file: how many bytes of whole lines it wrote), a
// write that failed part way commits the records whose lines it wrote.
type eventFollower struct {
	w    *runtime.Workspace
	st   *runtime.EventStream // nil while a waiting follower has no buffer
	pr   *eventPrinter
	wait bool
	// written, when set, is how much of the printer's output was written
	// as whole lines; unsent pairs each record read since the last commit
	// with the printer's position after it.
	written func() int64
	unsent  []sentAt
	// repeat is the last line of a sink's file when it opened: the
	// records the sink before it wrote and was killed before it consumed
	// are not written twice (skipRepeated).
	repeat []byte
	// busy is the last reason a waiting follower could not open a buffer,
	// said once; read says it read a buffer before.
	busy string
	read bool
}

// sentAt is a record read: the stream's mark after it, and the printer's
// position after its line.
type sentAt struct {
	mark runtime.Mark
	end  int64
}

// run reads until ctx ends (then what the buffer holds at that moment) or,
// unless it waits, the buffer is removed (then what is left in it).
func (f *eventFollower) run(ctx context.Context) error {
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
		if !f.wait {
			fmt.Fprintln(f.pr.errw, "The event buffer was removed (destroy, or an apply that left no probe with events): nothing more to follow.")
			return nil
		}
		f.pr.endStream(f.st.Drops())
		f.st.Close()
		f.st = nil
		fmt.Fprintln(f.pr.errw, "The event buffer was removed (destroy, or an apply that left no probe with events): waiting for the next one.")
		f.busy = f.noBuffer()
	}
}

// pump reads one stream until ctx ends or its buffer is removed with no
// new one to move to (removed).
func (f *eventFollower) pump(ctx context.Context) (removed bool, err error) {
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
		case errors.Is(err, runtime.ErrIdle):
			if err := f.commit(); err != nil {
				return false, err
			}
		default:
			return false, err
		}
		lastCheck = time.Now()
		st.Housekeep()
		pr.drops(st.Drops())
		if !st.Gone() {
			continue
		}
		// Removed: its writers are detached; what it holds is still ours.
		time.Sleep(100 * time.Millisecond)
		if err := f.drain(); err != nil {
			return false, err
		}
		old := st.Size()
		moved, err := st.Reopen()
		if err != nil && !f.wait {
			return false, err
		}
		if err := pr.flush(); err != nil {
			return false, err
		}
		if err != nil || !moved {
			return true, nil
		}
		st.HoldRecords()
		fmt.Fprintf(pr.errw, "The event buffer was made anew by an apply (%s, was %s): following the new one.\n", sizeName(st.Size()), sizeName(old))
	}
}

// print prints a record, and writes and commits every 32KiB.
func (f *eventFollower) print(rec *runtime.EventRecord) error {
	if err := f.pr.record(rec); err != nil {
		return err
	}
	if f.written != nil {
		f.unsent = append(f.unsent, sentAt{f.st.Mark(), f.pr.position()})
	}
	if f.pr.buffered() >= 32<<10 {
		return f.commit()
	}
	return nil
}

// commit writes what the printer holds, then consumes the records whose
// lines were written: all of them, or, when the write failed part way,
// those before it.
func (f *eventFollower) commit() error {
	err := f.pr.flush()
	if f.written != nil {
		n, done := f.written(), 0
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
func (f *eventFollower) drain() error {
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
func (f *eventFollower) skipRepeated() {
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
			fmt.Fprintf(f.pr.errw, "The first %d records in the buffer were written before (by a reader stopped before it consumed them): not written again.\n", n)
			return
		}
		size += len(b) + 1
	}
	f.st.Rewind()
}

// awaitBuffer waits until the workspace has an event buffer and opens it;
// false when ctx ended first. What keeps it waiting (no buffer, another
// reader, a state it cannot read) is said once each time it changes.
func (f *eventFollower) awaitBuffer(ctx context.Context) bool {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		st, why := f.open()
		if st != nil {
			f.st = st
			switch {
			case f.read:
				fmt.Fprintf(f.pr.errw, "Reading the events of workspace %q again.\n", f.w.Name)
			case f.busy != "":
				fmt.Fprintf(f.pr.errw, "Reading the events of workspace %q.\n", f.w.Name)
			}
			f.busy, f.read = "", true
			return true
		}
		if why != f.busy {
			fmt.Fprintln(f.pr.errw, why)
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
func (f *eventFollower) open() (*runtime.EventStream, string) {
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

func (f *eventFollower) noBuffer() string {
	return fmt.Sprintf("Workspace %q has no event buffer (no applied probe emits events): waiting for one.", f.w.Name)
}

// finish writes the summary and closes the stream.
func (f *eventFollower) finish() error {
	var ds []runtime.ProbeDrops
	if f.st != nil {
		ds = f.st.Drops()
		f.st.Close()
		f.st = nil
	}
	return f.pr.summary(ds)
}

func sizeName(n int) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}

// eventPrinter prints records, drop notices and the summary, as text or
// NDJSON. Writes are buffered (a flood must not slow the reader into
// dropping more) and serialized: run prints its results between them.
type eventPrinter struct {
	mu     sync.Mutex
	out    *bufio.Writer
	errw   io.Writer
	json   bool
	filter map[string]bool

	printed, skipped, undecodable uint64
	// sent counts what out passed on: position is sent.n + what out
	// holds.
	sent *countWriter
	// noticed is what was already reported dropped from the current
	// stream, per probe; carried and carriedBefore sum up the streams a
	// sink read before it (dropped while it read, and before each began).
	noticed, carried, carriedBefore map[string]uint64
}

func newEventPrinter(stdout, stderr io.Writer, asJSON bool, filter map[string]bool) *eventPrinter {
	sent := &countWriter{w: stdout}
	return &eventPrinter{out: bufio.NewWriterSize(sent, 64<<10), sent: sent, errw: stderr, json: asJSON, filter: filter, noticed: map[string]uint64{},
		carried: map[string]uint64{}, carriedBefore: map[string]uint64{}}
}

// countWriter counts the bytes given to w.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return c.w.Write(p)
}

// position is how many bytes the printer printed: the offset in its
// output where the next line begins.
func (p *eventPrinter) position() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sent.n + int64(p.out.Buffered())
}

func (p *eventPrinter) record(r *runtime.EventRecord) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r.Type == runtime.RecordEvent && p.filter != nil && !p.filter[r.Probe] {
		p.skipped++
		return nil
	}
	if r.Type == runtime.RecordUndecodable {
		p.undecodable++
	} else {
		p.printed++
	}
	if p.json {
		b, err := r.MarshalJSON()
		if err != nil {
			return err
		}
		p.out.Write(b)
		return p.out.WriteByte('\n')
	}
	at := r.Wall.Local().Format("15:04:05.000000000")
	var err error
	if r.Type == runtime.RecordUndecodable {
		_, err = fmt.Fprintf(p.out, "%s (undecodable: a record of layout %s, %d bytes, written by a probe replaced or destroyed whose layout the state no longer records)\n", at, r.Layout, r.Size)
	} else {
		_, err = fmt.Fprintf(p.out, "%s %s %s: %s\n", at, r.Probe, printable(r.Name), keyText(r.Fields))
	}
	return err
}

// drops reports the events dropped since the last report: on stderr as
// text, in the stream as "dropped" objects.
func (p *eventPrinter) drops(ds []runtime.ProbeDrops) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, d := range ds {
		if p.filter != nil && !p.filter[d.Probe] {
			continue
		}
		n := d.During - p.noticed[d.Probe]
		if n == 0 {
			continue
		}
		p.noticed[d.Probe] = d.During
		if p.json {
			fmt.Fprintf(p.out, `{"type":"dropped","probe":%q,"count":%d,"total":%d}`+"\n", d.Probe, n, d.Before+d.During)
			continue
		}
		p.out.Flush()
		fmt.Fprintf(p.errw, "%s: %d events dropped (the buffer was full; %d in all)\n", d.Probe, n, d.Before+d.During)
	}
}

// endStream reports what a stream dropped and carries its counts into
// the summary: a sink closes a removed buffer's stream and opens the next.
func (p *eventPrinter) endStream(ds []runtime.ProbeDrops) {
	p.drops(ds)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, d := range ds {
		if p.filter != nil && !p.filter[d.Probe] {
			continue
		}
		p.carried[d.Probe] += d.During
		p.carriedBefore[d.Probe] += d.Before
	}
	p.noticed = map[string]uint64{}
}

// eventSummary is the last line of the NDJSON stream.
type eventSummary struct {
	Type          string            `json:"type"`
	Events        uint64            `json:"events"`
	Undecodable   uint64            `json:"undecodable"`
	Skipped       uint64            `json:"skipped"`
	Dropped       map[string]uint64 `json:"dropped"`
	DroppedBefore map[string]uint64 `json:"dropped_before"`
}

// summary prints the totals: records printed, and per probe the events
// that found the buffer full while this command read (and before).
func (p *eventPrinter) summary(ds []runtime.ProbeDrops) error {
	p.drops(ds)
	p.mu.Lock()
	defer p.mu.Unlock()
	s := eventSummary{Type: "summary", Events: p.printed, Undecodable: p.undecodable, Skipped: p.skipped,
		Dropped: map[string]uint64{}, DroppedBefore: map[string]uint64{}}
	for probe, n := range p.carried {
		s.Dropped[probe], s.DroppedBefore[probe] = n, p.carriedBefore[probe]
	}
	for _, d := range ds {
		if p.filter != nil && !p.filter[d.Probe] {
			continue
		}
		s.Dropped[d.Probe] += d.During
		s.DroppedBefore[d.Probe] += d.Before
	}
	var during, before uint64
	for probe := range s.Dropped {
		during += s.Dropped[probe]
		before += s.DroppedBefore[probe]
	}
	if p.json {
		b, _ := json.Marshal(s)
		p.out.Write(b)
		p.out.WriteByte('\n')
		return p.out.Flush()
	}
	var more []string
	if before > 0 {
		var who []string
		for probe, n := range s.DroppedBefore {
			if n > 0 {
				who = append(who, fmt.Sprintf("%s %d", probe, n))
			}
		}
		sort.Strings(who)
		more = append(more, fmt.Sprintf("%d were dropped before this read began, while the buffer was full and nobody read (%s)", before, strings.Join(who, ", ")))
	}
	if p.undecodable > 0 {
		more = append(more, fmt.Sprintf("%d records were undecodable", p.undecodable))
	}
	if p.skipped > 0 {
		more = append(more, fmt.Sprintf("%d records of other probes were read and skipped", p.skipped))
	}
	p.out.Flush()
	line := fmt.Sprintf("Events: %d printed, none dropped.", p.printed)
	if during > 0 {
		line = fmt.Sprintf("Events: %d printed, %d dropped (the buffer was full).", p.printed, during)
	}
	for _, m := range more {
		line += " " + strings.ToUpper(m[:1]) + m[1:] + "."
	}
	fmt.Fprintln(p.out, line)
	return p.out.Flush()
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

// buffered is how many bytes the printer holds unwritten.
func (p *eventPrinter) buffered() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Buffered()
}

// flush writes what the printer holds; its error is the first write
// error (a sink's disk full).
func (p *eventPrinter) flush() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Flush()
}

// withPrinter runs f with the printer's output flushed and held: run
// prints its results between events.
func (p *eventPrinter) withPrinter(f func(w io.Writer)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.out.Flush()
	f(p.out)
	p.out.Flush()
}
