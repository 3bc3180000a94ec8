package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/runtime"
	"github.com/probectl/probectl/spec"
	"github.com/spf13/cobra"
)

func newApplyCmd(g *globals) *cobra.Command {
	var autoApprove bool
	cmd := &cobra.Command{
		Use:   "apply [-auto-approve] [PATH... | PLANFILE]",
		Short: "Attach the probes of the specs: all of them, or none",
		Long: `Apply compiles the specs for the running kernel, shows the plan against the
workspace's state, asks for confirmation, and makes the kernel match:
every program loads before anything attaches, everything attaches, then
the state is committed. On any failure the kernel and the state are left
exactly as they were. Unchanged probes keep their links and counts;
changed ones are replaced create-before-destroy.

A saved plan (plan -out FILE) is applied as it was planned, and refused
when the state or the kernel's facts moved since.

  -auto-approve  apply without asking (required when stdin is not a terminal)

Exit status: 0 applied (or nothing to do), 1 errors.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireBPF("apply"); err != nil {
				return err
			}
			saved, err := readSavedPlan(args)
			if err != nil {
				return err
			}
			var cfg *spec.Config
			var out *compiler.Output
			if saved != nil {
				cfg, out, err = compileSaved(cmd, saved)
			} else {
				cfg, out, err = compileLive(cmd, args)
			}
			if err != nil {
				return err
			}
			w, s, err := g.lockAndRepair(cmd)
			if err != nil {
				return err
			}
			defer w.Unlock()
			plan := runtime.Diff(s, out, w.Drift(s))
			if saved != nil {
				if err := checkSaved(saved, s, plan); err != nil {
					return err
				}
			}
			renderPlan(cmd.OutOrStdout(), plan)
			if plan.Summary.Create+plan.Summary.Replace+plan.Summary.Delete == 0 {
				cmd.Println("\nNo changes. The kernel matches the specs.")
				return nil
			}
			if saved == nil && !autoApprove {
				if err := confirm(cmd, "apply these changes"); err != nil {
					return err
				}
			}
			_, res, err := w.Apply(s, out, plan)
			if err != nil {
				return reportApplyError(cmd, err, cfg)
			}
			cmd.Printf("\nApply complete! Probes: %d created, %d replaced, %d destroyed, %d unchanged.\n",
				len(res.Created), len(res.Replaced), len(res.Deleted), len(res.Unchanged))
			warnLeftovers(cmd, res)
			return nil
		},
	}
	cmd.Flags().BoolVar(&autoApprove, "auto-approve", false, "apply without asking")
	g.addLockTimeout(cmd)
	return cmd
}

func warnLeftovers(cmd *cobra.Command, res *runtime.Result) {
	for _, l := range res.Leftovers {
		fmt.Fprintf(cmd.ErrOrStderr(), "Warning: could not remove the old pins %s; the next command removes them.\n", l)
	}
}

// confirm asks on a terminal; without one it refuses.
func confirm(cmd *cobra.Command, what string) error {
	if !isTerminal(os.Stdin) {
		return fmt.Errorf("refusing to %s: stdin is not a terminal to confirm on; add -auto-approve", what)
	}
	cmd.Printf("\nDo you want to %s? Only 'yes' will be accepted: ", what)
	line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
	if strings.TrimSpace(line) != "yes" {
		cmd.Println("Cancelled: nothing was changed.")
		return exitError{1}
	}
	return nil
}

// readSavedPlan returns the saved plan when args is one plan file.
func readSavedPlan(args []string) (*SavedPlan, error) {
	if len(args) != 1 {
		return nil, nil
	}
	b, err := os.ReadFile(args[0])
	if err != nil || !json.Valid(b) {
		return nil, nil // a spec; spec.LoadPaths reports unreadable paths
	}
	var sp SavedPlan
	if err := json.Unmarshal(b, &sp); err != nil || sp.Plan == nil || sp.Facts == nil {
		return nil, fmt.Errorf("%s is JSON but not a saved plan (make one with probectl plan -out FILE)", args[0])
	}
	return &sp, nil
}

// compileSaved recompiles a saved plan's sources for the live kernel and
// refuses when the kernel is not the one the plan was made for.
func compileSaved(cmd *cobra.Command, sp *SavedPlan) (*spec.Config, *compiler.Output, error) {
	files := map[string][]byte{}
	for name, src := range sp.Sources {
		files[name] = []byte(src)
	}
	cfg, err := parseSources(cmd, files)
	if err != nil {
		return nil, nil, err
	}
	live, err := loadTarget("auto", cfg)
	if err != nil {
		return nil, nil, err
	}
	if d := live.Differences(sp.Facts); len(d) > 0 {
		return nil, nil, fmt.Errorf("saved plan is stale: it was made for %s, and this kernel differs (%s); plan again", sp.Facts.Label(), strings.Join(d, "; "))
	}
	return compileFor(cmd, cfg, sp.Facts)
}

// checkSaved refuses a saved plan when the state moved since it was made,
// or when it no longer plans the same changes.
func checkSaved(sp *SavedPlan, s *runtime.State, now *compiler.Plan) error {
	if sp.Workspace != "" && sp.Workspace != s.Workspace {
		return fmt.Errorf("saved plan is for workspace %q, not %q", sp.Workspace, s.Workspace)
	}
	// A plan made before the workspace's first write saw no lineage: the
	// state it meant is one with no probes at serial 0.
	fresh := sp.StateLineage == "" && sp.StateSerial == 0 && s.Serial == 0 && len(s.Probes) == 0
	if !fresh && (sp.StateLineage != s.Lineage || sp.StateSerial != s.Serial) {
		return fmt.Errorf("saved plan is stale: the state moved since it was made (serial %d, now %d; lineage %s, now %s); plan again",
			sp.StateSerial, s.Serial, short(sp.StateLineage), short(s.Lineage))
	}
	if len(sp.Plan.Changes) != len(now.Changes) {
		return fmt.Errorf("saved plan is stale: it no longer matches the kernel; plan again")
	}
	for i, c := range sp.Plan.Changes {
		if c.Address != now.Changes[i].Address || c.Action != now.Changes[i].Action || c.Digest != now.Changes[i].Digest {
			return fmt.Errorf("saved plan is stale: %s now plans %s; plan again", c.Address, now.Changes[i].Action)
		}
	}
	return nil
}

func short(lineage string) string {
	if lineage == "" {
		return "(none)"
	}
	if len(lineage) > 8 {
		return lineage[:8]
	}
	return lineage
}
