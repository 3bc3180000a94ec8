package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/probectl/probectl/internal/views"
	"github.com/probectl/probectl/runtime"
	"github.com/spf13/cobra"
)

func newEventsCmd(g *globals) *cobra.Command {
	var o eventsOptions
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
			o.addrs = args
			return o.run(g, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().BoolVar(&o.json, "json", false, "print NDJSON")
	cmd.Flags().BoolVar(&o.follow, "follow", false, "wait for more events until interrupted")
	return cmd
}

// eventsOptions are the arguments of events.
type eventsOptions struct {
	json, follow bool
	addrs        []string // only these probes' events
}

// run reads the workspace's event buffer: once, or following it.
func (o *eventsOptions) run(g *globals, stdout, stderr io.Writer) error {
	if err := requireBPF("events"); err != nil {
		return err
	}
	w, s, err := g.inspect()
	if err != nil {
		return err
	}
	defer w.Close()
	filter, err := eventFilter(s, o.addrs)
	if err != nil {
		return err
	}
	if s.Events == nil {
		switch {
		case len(s.Probes) == 0:
			fmt.Fprintln(stderr, "No probes applied in this workspace: there are no events to read.")
		default:
			fmt.Fprintln(stderr, "No applied probe emits events: this workspace has no event buffer.")
		}
		return nil
	}
	st, err := w.OpenEvents(s)
	if err != nil {
		return err
	}
	defer st.Close()
	// Held for the one-shot read too: an interrupt does not cut it short.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	pr := views.NewEvents(stdout, stderr, o.json, filter)
	defer pr.Flush()
	if o.follow {
		return followEvents(ctx, w, st, pr, stderr)
	}
	// Consumed once printed: a failed write leaves the records.
	st.HoldRecords()
	if err := st.ReadBuffered(pr.Record); err != nil {
		return err
	}
	if err := pr.Summary(st.Drops()); err != nil {
		return err
	}
	st.Commit()
	return nil
}

// followEvents is events -follow: it prints until ctx ends (an
// interrupt), or until the buffer is removed, then the summary.
func followEvents(ctx context.Context, w *runtime.Workspace, st *runtime.EventStream, pr *views.Events, stderr io.Writer) error {
	fmt.Fprintf(stderr, "Reading the events of workspace %q (%s).\n", w.Name, "following; Ctrl-C to stop")
	f := runtime.NewFollower(w, st, pr, runtime.FollowOptions{Notices: stderr})
	if err := f.Run(ctx); err != nil {
		return err
	}
	return pr.Summary(st.Drops())
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
