package main

import (
	"fmt"
	"path"
	"sort"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/internal/views"
	"github.com/probectl/probectl/runtime"

	"github.com/spf13/cobra"
)

func newStateCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "state",
		Short: "List a workspace's state, recover it from the pins, or forget probes",
	}
	list := &cobra.Command{
		Use:   "list [PATTERN...]",
		Short: "List the addresses the state records, one a line",
		Long: `State list prints the address of every probe, table and event buffer the
workspace's state records, one a line, in address order (as terraform
state list). With PATTERNs (globs: kernel.*, *.vfs_*, user.calls) it
prints only the addresses that match one of them. It changes nothing: no
lock, no repair.

Exit status: 0 (even when nothing matches), 1 errors.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkPatterns(args); err != nil {
				return err
			}
			if err := requireBPF("state list"); err != nil {
				return err
			}
			w, s, err := g.inspect()
			if err != nil {
				return err
			}
			defer w.Close()
			for _, a := range stateAddresses(s) {
				if matchesAny(a.String(), args) {
					cmd.Println(a)
				}
			}
			return nil
		},
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
	cmd.AddCommand(list, recover, rm)
	return cmd
}

func shortLineage(l string) string {
	if len(l) > 8 {
		return l[:8]
	}
	return l
}

// stateAddresses is every address s records, in address order.
func stateAddresses(s *runtime.State) []bpf.Address {
	var out []bpf.Address
	for _, p := range s.Probes {
		out = append(out, p.Address)
	}
	for _, t := range s.Tables {
		out = append(out, t.Address)
	}
	if s.Events != nil {
		out = append(out, s.Events.Address)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Less(out[j]) })
	return out
}

// checkPatterns refuses a pattern path.Match cannot read.
func checkPatterns(patterns []string) error {
	for _, p := range patterns {
		if _, err := path.Match(p, ""); err != nil {
			return fmt.Errorf("pattern %q: %w (a glob of addresses: kernel.*, *.vfs_*)", p, err)
		}
	}
	return nil
}

// matchesAny reports whether addr matches one of patterns; no patterns
// match everything.
func matchesAny(addr string, patterns []string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, addr); ok {
			return true
		}
	}
	return len(patterns) == 0
}
