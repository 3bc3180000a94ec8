package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"github.com/probectl/probectl/compiler"
	"strings"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/runtime"
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
		RunE: func(cmd *cobra.Command, args []string) error {
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
			if asJSON {
				if st == nil {
					st = []runtime.ProbeStatus{}
				}
				b, _ := json.MarshalIndent(struct {
					Workspace string                `json:"workspace"`
					Lineage   string                `json:"lineage"`
					Serial    uint64                `json:"serial"`
					Probes    []runtime.ProbeStatus `json:"probes"`
					Events    *runtime.EventsStatus `json:"events,omitempty"`
					Leftovers []string              `json:"leftovers,omitempty"`
				}{s.Workspace, s.Lineage, s.Serial, st, ev, left}, "", "  ")
				cmd.Println(string(b))
			} else {
				renderStatus(cmd, s, st)
				renderEventsStatus(cmd, ev)
				if len(left) > 0 {
					n := fmt.Sprintf("%d probe directories", len(left))
					if len(left) == 1 {
						n = "1 probe directory"
					}
					cmd.Printf("\n  LEFTOVERS  %s that the state does not record, left by an interrupted\n"+
						"             command, links attached (the next apply or destroy removes them): %s\n", n, abbreviate(left, 6))
				}
			}
			if drift {
				return exitError{2}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func renderStatus(cmd *cobra.Command, s *runtime.State, st []runtime.ProbeStatus) {
	cmd.Printf("Workspace %q: %s applied (serial %d)\n", s.Workspace, plural(len(st), "probe"), s.Serial)
	for _, p := range st {
		cmd.Printf("\n  %s\n", p.Address)
		cmd.Printf("    route      %s via %s\n", p.Route, compiler.JoinFamilies(p.Attach))
		switch {
		case p.Event != "":
			cmd.Printf("    event      %s\n", printable(p.Event))
		case len(p.Tracepoints) > 0:
			cmd.Printf("    events     %d: %s\n", len(p.Tracepoints), abbreviate(p.Tracepoints, 6))
		case p.Sampler != nil:
			cmd.Printf("    sample     %s\n", samplerText(p.Sampler))
		default:
			cmd.Printf("    functions  %d: %s\n", len(p.Functions), abbreviate(p.Functions, 6))
		}
		if p.Binary != "" {
			cmd.Printf("    binary     %s\n", printable(p.Binary))
		}
		var ids []string
		for _, l := range p.Links {
			ids = append(ids, fmt.Sprint(l.ID))
		}
		cmd.Printf("    links      %d (ids %s)\n", len(p.Links), abbreviate(ids, 8))
		cmd.Printf("    hits       %d entry, %d exit; missed %d\n", p.EntryHits, p.ExitHits, p.Missed)
		cmd.Printf("    dropped    %d keys, %d events\n", p.DroppedKeys, p.DroppedEvents)
		if len(p.Drift) > 0 {
			cmd.Printf("    DRIFT      %s (apply replaces it)\n", printable(strings.Join(p.Drift, "; ")))
		}
	}
}

// renderEventsStatus writes the event buffer's health: how full it is,
// who reads it.
func renderEventsStatus(cmd *cobra.Command, ev *runtime.EventsStatus) {
	if ev == nil {
		return
	}
	cmd.Printf("\n  %s\n", ev.Address)
	switch {
	case len(ev.Drift) > 0:
		cmd.Printf("    size       %s\n", bpf.SizeText(ev.Size))
	case ev.Unread < 0:
		cmd.Printf("    size       %s (how full cannot be read)\n", bpf.SizeText(ev.Size))
	default:
		cmd.Printf("    size       %s; %s not read yet (%.1f%%)\n", bpf.SizeText(ev.Size), bytesString(ev.Unread), 100*float64(ev.Unread)/float64(ev.Size))
	}
	if ev.Reader != "" {
		cmd.Printf("    reader     %s\n", printable(ev.Reader))
	} else {
		cmd.Printf("    reader     none: records are kept up to the size, then dropped and counted (probectl events reads them)\n")
	}
	if ev.Retired > 0 {
		cmd.Printf("    retired    %s of probes replaced or destroyed, for their records still unread\n", plural(ev.Retired, "layout"))
	}
	if len(ev.Drift) > 0 {
		cmd.Printf("    DRIFT      %s (apply replaces it)\n", printable(strings.Join(ev.Drift, "; ")))
	}
}
