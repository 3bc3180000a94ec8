package main

import (
	"bufio"

	"github.com/probectl/probectl/internal/views"
	"github.com/spf13/cobra"
)

func newStatusCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status [-json]",
		Short: "Show the applied probes: routes, links, hits, misses, drops and drift",
		Long: `Status lists the workspace's applied probes with their route, link families
and IDs, functions, hits (program runs), missed hits (the kernel's per-link
counters, where it has them), dropped keys and events, and drift: a link or
pin gone, a program replaced, or a user probe's binary replaced, outside
probectl; and the leftovers of an interrupted apply (probe directories the
state does not record, their links still attached). It changes nothing: no
lock, no repair (apply and destroy repair).

Exit status: 0, 1 errors, 2 drift or leftovers found.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return runStatus(cmd, g, asJSON) },
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// runStatus reads the state and the kernel's objects without a lock and
// shows them; drift or leftovers exit 2.
func runStatus(cmd *cobra.Command, g *globals, asJSON bool) error {
	// One write at the end, not one per line: a workspace may
	// hold thousands of probes.
	out := bufio.NewWriter(cmd.OutOrStdout())
	defer out.Flush()
	cmd.SetOut(out)
	if err := requireBPF("status"); err != nil {
		return err
	}
	w, s, err := g.inspect()
	if err != nil {
		return err
	}
	defer w.Close()
	st := w.Status(s)
	ev := w.EventsStatus(s)
	left, err := w.Leftovers(s)
	if err != nil {
		return err
	}
	drift := ev != nil && len(ev.Drift) > 0 || len(left) > 0
	for _, p := range st {
		drift = drift || len(p.Drift) > 0
	}
	if err := views.NewStatus(asJSON, cmd.OutOrStdout()).Status(s, st, ev, left); err != nil {
		return err
	}
	if drift {
		return exitError{2}
	}
	return nil
}
