package main

import (
	"bufio"
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
				if err := pumpEvents(ctx, st, pr); err != nil {
					return err
				}
			} else if err := st.ReadBuffered(pr.record); err != nil {
				return err
			}
			pr.summary(st.Drops())
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

// pumpEvents prints records as they come until ctx ends (then what the
// buffer holds at that moment) or the buffer is removed (then what is
// left in it). A buffer made anew by an apply is followed.
func pumpEvents(ctx context.Context, st *runtime.EventStream, pr *eventPrinter) error {
	lastCheck := time.Now()
	for n := 0; ; n++ {
		if ctx.Err() != nil {
			return st.ReadBuffered(pr.record)
		}
		rec, err := st.Next(time.Now().Add(250 * time.Millisecond))
		switch {
		case err == nil:
			if err := pr.record(rec); err != nil {
				return err
			}
			if n%1024 != 0 || time.Since(lastCheck) < time.Second {
				continue
			}
		case errors.Is(err, runtime.ErrIdle):
			pr.flush()
		default:
			return err
		}
		lastCheck = time.Now()
		st.Housekeep()
		pr.drops(st.Drops())
		if !st.Gone() {
			continue
		}
		// Removed: its writers are detached; what it holds is still ours.
		time.Sleep(100 * time.Millisecond)
		if err := st.ReadBuffered(pr.record); err != nil {
			return err
		}
		old := st.Size()
		moved, err := st.Reopen()
		if err != nil {
			return err
		}
		pr.flush()
		if !moved {
			fmt.Fprintln(pr.errw, "The event buffer was removed (destroy, or an apply that left no probe with events): nothing more to follow.")
			return nil
		}
		fmt.Fprintf(pr.errw, "The event buffer was made anew by an apply (%s, was %s): following the new one.\n", sizeName(st.Size()), sizeName(old))
	}
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
	// noticed is what was already reported dropped, per probe.
	noticed map[string]uint64
}

func newEventPrinter(stdout, stderr io.Writer, asJSON bool, filter map[string]bool) *eventPrinter {
	return &eventPrinter{out: bufio.NewWriterSize(stdout, 64<<10), errw: stderr, json: asJSON, filter: filter, noticed: map[string]uint64{}}
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
		p.out.WriteByte('\n')
		return nil
	}
	at := r.Wall.Local().Format("15:04:05.000000000")
	if r.Type == runtime.RecordUndecodable {
		fmt.Fprintf(p.out, "%s (undecodable: a record of layout %s, %d bytes, written by a probe replaced or destroyed whose layout the state no longer records)\n", at, r.Layout, r.Size)
		return nil
	}
	fmt.Fprintf(p.out, "%s %s %s: %s\n", at, r.Probe, printable(r.Name), keyText(r.Fields))
	return nil
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
func (p *eventPrinter) summary(ds []runtime.ProbeDrops) {
	p.drops(ds)
	p.mu.Lock()
	defer p.mu.Unlock()
	s := eventSummary{Type: "summary", Events: p.printed, Undecodable: p.undecodable, Skipped: p.skipped,
		Dropped: map[string]uint64{}, DroppedBefore: map[string]uint64{}}
	var during, before uint64
	for _, d := range ds {
		if p.filter != nil && !p.filter[d.Probe] {
			continue
		}
		s.Dropped[d.Probe], s.DroppedBefore[d.Probe] = d.During, d.Before
		during += d.During
		before += d.Before
	}
	if p.json {
		b, _ := json.Marshal(s)
		p.out.Write(b)
		p.out.WriteByte('\n')
		p.out.Flush()
		return
	}
	var more []string
	if before > 0 {
		var who []string
		for _, d := range ds {
			if d.Before > 0 && (p.filter == nil || p.filter[d.Probe]) {
				who = append(who, fmt.Sprintf("%s %d", d.Probe, d.Before))
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
	p.out.Flush()
}

func (p *eventPrinter) flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.out.Flush()
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
