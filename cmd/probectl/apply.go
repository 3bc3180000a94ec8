package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/internal/engine"
	"github.com/probectl/probectl/internal/views"
	"github.com/probectl/probectl/runtime"
	"github.com/probectl/probectl/spec"
	"github.com/spf13/cobra"
)

func newApplyCmd(g *globals) *cobra.Command {
	var o applyOptions
	cmd := &cobra.Command{
		Use:   "apply [-auto-approve] [PATH... | PLANFILE]",
		Short: "Attach the probes of the specs: all of them, or none",
		Long: `Apply compiles the specs for the running kernel, shows the plan against the
workspace's state, asks for confirmation, and makes the kernel match:
every program loads before anything attaches, everything attaches, then
the state is committed. On any failure the kernel and the state are left
exactly as they were. Unchanged probes keep their links and counts;
changed ones are replaced create-before-destroy.

With no PATH it reads every *.hcl in the current directory.
A saved plan (plan -out FILE) is applied as it was planned, and refused
when the state or the kernel's facts moved since.

  -auto-approve  apply without asking (required when stdin is not a terminal)
  -replace ADDRESS  replace that probe even if unchanged: it is detached and
                attached anew, its counts start again (repeatable)
  -deny CLASS[,CLASS]  refuse specs (a saved plan's too) with constructs of
                these classes: ` + denyClasses() + `

Exit status: 0 applied (or nothing to do), 1 errors.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			paths, err := specPaths(cmd, args)
			if err != nil {
				return err
			}
			o.paths = paths
			return runApply(cmd, g, o)
		},
	}
	cmd.Flags().BoolVar(&o.autoApprove, "auto-approve", false, "apply without asking")
	cmd.Flags().StringArrayVar(&o.replace, "replace", nil, "replace the probe ADDRESS even if unchanged: detach it and attach it anew (repeatable)")
	o.deny.add(cmd)
	g.addLockTimeout(cmd)
	return cmd
}

// applyOptions are apply's arguments and flags.
type applyOptions struct {
	paths       []string // the specs, or one saved plan
	autoApprove bool
	deny        denyFlag
	replace     []string // -replace ADDRESS
}

// runApply is apply: the specs (or a saved plan's) compiled for the
// running kernel, then engine's apply path with the plan shown and
// confirmed under the workspace's lock.
func runApply(cmd *cobra.Command, g *globals, o applyOptions) error {
	if err := requireBPF("apply"); err != nil {
		return err
	}
	saved, err := readSavedPlan(o.paths)
	if err != nil {
		return err
	}
	ws := g.applyWorkspace(cmd)
	if ws.Replace, err = parseAddresses(o.replace); err != nil {
		return err
	}
	var cfg *spec.Config
	var out *compiler.Output
	if saved != nil {
		if len(o.replace) > 0 {
			return errors.New("-replace with a saved plan: plan -replace ADDRESS -out FILE, then apply FILE")
		}
		ws.Replace = saved.Replace
		cfg, out, err = compileSaved(cmd, saved, o.deny.p)
	} else {
		cfg, out, err = compileLive(cmd, o.paths, o.deny.p)
	}
	if err != nil {
		return err
	}
	review := func(s *runtime.State, plan *compiler.Plan) error {
		if saved != nil {
			if err := saved.CheckState(s, plan); err != nil {
				return err
			}
			markDestroy(plan, saved.Destroy)
		}
		if err := (views.PlanHuman{W: cmd.OutOrStdout()}).Plan(plan); err != nil {
			return err
		}
		if !engine.HasChanges(plan) {
			cmd.Println("\nNo changes. The kernel matches the specs.")
			return nil
		}
		if saved == nil && !o.autoApprove {
			return confirm(cmd, "apply these changes")
		}
		return nil
	}
	done, err := ws.Apply(cfg, out, review)
	var ae *engine.ApplyError
	if errors.As(err, &ae) {
		return reportApplyError(cmd, ae, cfg)
	}
	if err != nil || done.Result == nil {
		return err
	}
	res := done.Result
	cmd.Printf("\nApply complete! Probes: %d created, %d replaced, %d destroyed, %d unchanged.\n",
		len(res.Created), len(res.Replaced), len(res.Deleted), len(res.Unchanged))
	warnLeftovers(cmd, res)
	return nil
}

// markDestroy says why a plan -destroy deletes: destroy.
func markDestroy(plan *compiler.Plan, destroy bool) {
	for _, c := range plan.Changes {
		if destroy && c.Action == compiler.ActionDelete {
			c.Why = "destroy"
		}
	}
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
func readSavedPlan(args []string) (*runtime.SavedPlan, error) {
	if len(args) != 1 {
		return nil, nil
	}
	return runtime.ReadSavedPlan(args[0])
}

// compileSaved recompiles a saved plan's sources for the live kernel and
// refuses when the kernel is not the one the plan was made for.
func compileSaved(cmd *cobra.Command, sp *runtime.SavedPlan, policy spec.Policy) (*spec.Config, *compiler.Output, error) {
	files := map[string][]byte{}
	for name, src := range sp.Sources {
		files[name] = []byte(src)
	}
	cfg, err := parseSources(cmd, files)
	if err != nil {
		return nil, nil, err
	}
	live, err := engine.TargetFacts("auto", cfg)
	if err != nil {
		return nil, nil, err
	}
	if err := sp.CheckKernel(live); err != nil {
		return nil, nil, err
	}
	return compileFor(cmd, cfg, sp.Facts, policy)
}
