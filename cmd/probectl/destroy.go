package main

import (
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/runtime"
	"github.com/spf13/cobra"
)

func newDestroyCmd(g *globals) *cobra.Command {
	var autoApprove bool
	cmd := &cobra.Command{
		Use:   "destroy [-auto-approve] [ADDRESS...]",
		Short: "Detach and remove applied probes (all, or the addresses given)",
		Long: `Destroy removes applied probes: the state without them is committed first,
then their links, programs and maps go.

Exit status: 0 done, 1 errors.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireBPF("destroy"); err != nil {
				return err
			}
			addrs, err := parseAddresses(args)
			if err != nil {
				return err
			}
			w, s, err := g.lockAndRepair(cmd)
			if err != nil {
				return err
			}
			defer w.Unlock()
			plan := &compiler.Plan{FormatVersion: compiler.PlanFormatVersion}
			want := map[bpf.Address]bool{}
			for _, a := range addrs {
				want[a] = true
			}
			for _, p := range s.Probes {
				if len(want) == 0 || want[p.Address] {
					plan.Changes = append(plan.Changes, runtime.DeleteChange(p, "destroy"))
				}
			}
			if len(plan.Changes) == 0 && len(addrs) == 0 {
				cmd.Println("No probes applied in this workspace: nothing to destroy.")
				return nil
			}
			for _, c := range plan.Changes {
				cmd.Printf("  - %s will be destroyed\n", c.Address)
			}
			if !autoApprove {
				if err := confirm(cmd, "destroy these probes"); err != nil {
					return err
				}
			}
			_, res, err := w.Destroy(s, addrs)
			if err != nil {
				return err
			}
			cmd.Printf("Destroy complete! Probes: %d destroyed.\n", len(res.Deleted))
			warnLeftovers(cmd, res)
			return nil
		},
	}
	cmd.Flags().BoolVar(&autoApprove, "auto-approve", false, "destroy without asking")
	g.addLockTimeout(cmd)
	return cmd
}
