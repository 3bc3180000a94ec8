package main

import (
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/internal/views"

	"github.com/spf13/cobra"
)

func newStateCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "state",
		Short: "Repair a workspace's state: recover it from the pins, or forget probes",
	}
	recover := &cobra.Command{
		Use:   "recover",
		Short: "Rebuild a lost state file from what is pinned",
		Long: `Recover rebuilds the workspace's state file from its pins: the lineage from
the workspace's identity, each probe from the description pinned next to its
maps and links. Use it when state.json was deleted or lost while probes
were applied: until then, every other command refuses to touch those pins.
It refuses when the state still records probes.

Exit status: 0 recovered, 1 errors.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireBPF("state recover"); err != nil {
				return err
			}
			w, err := g.open()
			if err != nil {
				return err
			}
			if err := w.Lock(); err != nil {
				return err
			}
			defer w.Unlock()
			s, skipped, err := w.Recover()
			if err != nil {
				return err
			}
			for _, p := range s.Probes {
				cmd.Printf("  recovered %s (%s via %s)\n", p.Address, p.Route, compiler.JoinFamilies(p.Attach))
			}
			if s.Events != nil {
				cmd.Printf("  recovered %s (%s; records of probes replaced before the state was lost read as undecodable)\n", s.Events.Address, bpf.SizeText(s.Events.Size))
			}
			for _, sk := range skipped {
				cmd.Printf("  not adopted: %s\n", sk)
			}
			cmd.Printf("Recovered the state of workspace %q: %s, lineage %s, serial %d.\n", w.Name, views.Plural(len(s.Probes), "probe"), shortLineage(s.Lineage), s.Serial)
			return nil
		},
	}
	rm := &cobra.Command{
		Use:   "rm ADDRESS...",
		Short: "Forget probes without touching the kernel",
		Long: `State rm removes probes from the state without touching the kernel: for
probes that are gone in a way probectl cannot see (their pins were removed
by hand). If their pins still exist where a later command can see them,
that command removes them.

Exit status: 0 done, 1 errors.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireBPF("state rm"); err != nil {
				return err
			}
			addrs, err := parseAddresses(args)
			if err != nil {
				return err
			}
			w, err := g.open()
			if err != nil {
				return err
			}
			if err := w.Lock(); err != nil {
				return err
			}
			defer w.Unlock()
			if _, err := w.Forget(addrs); err != nil {
				return err
			}
			cmd.Printf("Forgot %s.\n", views.Plural(len(addrs), "probe"))
			return nil
		},
	}
	g.addLockTimeout(recover)
	g.addLockTimeout(rm)
	cmd.AddCommand(recover, rm)
	return cmd
}

func shortLineage(l string) string {
	if len(l) > 8 {
		return l[:8]
	}
	return l
}
