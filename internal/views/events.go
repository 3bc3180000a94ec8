package views

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/runtime"
)

// Events prints records, drop notices and the summary, as text or
// NDJSON: the views of events, run and the sinks (runtime.Follower and
// eventfile print through it). Writes are buffered (a flood must not slow
// the reader into dropping more) and serialized: run prints its results
// between them.
type Events struct {
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

	// quiet, when > 0, holds text records back: counted by probe, the
	// last quiet lines kept, for Digest.
	quiet  int
	counts map[string]uint64
	last   []string
}

// Quiet makes the printer hold text records back: it counts them by
// probe and keeps the last n lines, which Digest prints (run without -v:
// a flood of events does not bury the results).
func (p *Events) Quiet(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.quiet, p.counts = n, map[string]uint64{}
}

// Digest prints what Quiet held back since the last digest: the records
// by probe, and the last lines.
func (p *Events) Digest() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.counts) == 0 {
		return
	}
	var by []string
	var n uint64
	for probe, c := range p.counts {
		by = append(by, fmt.Sprintf("%s %d", probe, c))
		n += c
	}
	sort.Strings(by)
	fmt.Fprintf(p.out, "\n--- %s (%s); the last %d:\n", plural(int(n), "event"), strings.Join(by, ", "), len(p.last))
	for _, l := range p.last {
		p.out.WriteString(l)
	}
	p.counts, p.last = map[string]uint64{}, p.last[:0]
}

var _ runtime.EventPrinter = (*Events)(nil)

// NewEvents is the events view printing to stdout (NDJSON if asJSON), its
// notices to stderr; filter, if not nil, names the probes whose events it
// prints.
func NewEvents(stdout, stderr io.Writer, asJSON bool, filter map[string]bool) *Events {
	sent := &countWriter{w: stdout}
	return &Events{out: bufio.NewWriterSize(sent, 64<<10), sent: sent, errw: stderr, json: asJSON, filter: filter, noticed: map[string]uint64{},
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

// Printed is how many bytes the printer printed: the offset in its
// output where the next line begins.
func (p *Events) Printed() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sent.n + int64(p.out.Buffered())
}

// Record prints one record of the event buffer.
func (p *Events) Record(r *runtime.EventRecord) error {
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
	line := recordLine(r)
	if p.quiet > 0 {
		p.counts[r.Probe]++
		if len(p.last) == p.quiet {
			p.last = append(p.last[:0], p.last[1:]...)
		}
		p.last = append(p.last, line)
		return nil
	}
	_, err := p.out.WriteString(line)
	return err
}

// recordLine is a record as text, its time first.
func recordLine(r *runtime.EventRecord) string {
	at := r.Wall.Local().Format("15:04:05.000000000")
	if r.Type == runtime.RecordUndecodable {
		return fmt.Sprintf("%s (undecodable: a record of layout %s, %d bytes, written by a probe replaced or destroyed whose layout the state no longer records)\n", at, r.Layout, r.Size)
	}
	return fmt.Sprintf("%s %s %s: %s\n", at, r.Probe, printable(r.Name), KeyText(r.Fields))
}

// Drops reports the events dropped since the last report: on stderr as
// text, in the stream as "dropped" objects.
func (p *Events) Drops(ds []runtime.ProbeDrops) {
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
			probe, _ := bpf.JSON(d.Probe)
			fmt.Fprintf(p.out, `{"type":"dropped","probe":%s,"count":%d,"total":%d}`+"\n", probe, n, d.Before+d.During)
			continue
		}
		p.out.Flush()
		fmt.Fprintf(p.errw, "%s: %d events dropped (the buffer was full; %d in all)\n", d.Probe, n, d.Before+d.During)
	}
}

// EndStream reports what a stream dropped and carries its counts into
// the summary: a sink closes a removed buffer's stream and opens the next.
func (p *Events) EndStream(ds []runtime.ProbeDrops) {
	p.Drops(ds)
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

// Summary prints the totals: records printed, and per probe the events
// that found the buffer full while this command read (and before).
func (p *Events) Summary(ds []runtime.ProbeDrops) error {
	p.Drops(ds)
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
		b, _ := bpf.JSON(s)
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
	verb := "printed"
	if p.quiet > 0 {
		verb = "read (the last of each interval printed; -v prints every one)"
	}
	line := fmt.Sprintf("Events: %d %s, none dropped.", p.printed, verb)
	if during > 0 {
		line = fmt.Sprintf("Events: %d %s, %d dropped (the buffer was full).", p.printed, verb, during)
	}
	for _, m := range more {
		line += " " + strings.ToUpper(m[:1]) + m[1:] + "."
	}
	fmt.Fprintln(p.out, line)
	return p.out.Flush()
}

// Held is how many bytes the printer holds unwritten.
func (p *Events) Held() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Buffered()
}

// Flush writes what the printer holds; its error is the first write
// error (a sink's disk full).
func (p *Events) Flush() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Flush()
}

// WithPrinter runs f with the printer's output flushed and held: run
// prints its results between events.
func (p *Events) WithPrinter(f func(w io.Writer)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.out.Flush()
	f(p.out)
	p.out.Flush()
}
