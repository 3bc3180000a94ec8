package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/runtime"
	"github.com/probectl/probectl/spec"
	"github.com/spf13/cobra"
)

func newPlanCmd(g *globals) *cobra.Command {
	var target, outFile string
	var asJSON, detailed bool
	cmd := &cobra.Command{
		Use:   "plan [-target auto|PROFILE|FILE] [-json] [-out FILE] PATH...",
		Short: "Show what applying the specs would do on a kernel",
		Long: `Plan compiles the specs for a target kernel and shows, per probe, the functions,
the route and why, the link families and how many links, where entry data
lives, the programs with their instruction counts, the maps with their key
limits, and the locked memory. Nothing touches the kernel. For the running
kernel (-target auto) the plan is a diff against the workspace's state:
create +, replace -/+ (with why), delete -, unchanged.

  -target auto     the running kernel (needs root)
  -target PROFILE  a built-in profile: ` + fmt.Sprint(bpf.ProfileNames()) + `
  -target FILE     facts written by "probectl target -o FILE"
  -json            the plan as JSON (README, "Plan JSON")
  -out FILE        save the plan for "probectl apply FILE"
  -detailed-exitcode  exit 0 when nothing would change, 2 when something would

Exit status: 0 planned, 1 errors (with -detailed-exitcode: 0 no changes, 1 errors, 2 changes).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			cfg, diags := spec.LoadPaths(args)
			if diags.HasErrors() {
				printDiags(cmd.ErrOrStderr(), diags, sourcesOf(cfg))
				return exitError{1}
			}
			facts, err := loadTarget(target, cfg)
			if err != nil {
				return err
			}
			out, more := compiler.Compile(cfg, facts)
			diags = append(diags, more...)
			printDiags(cmd.ErrOrStderr(), diags, cfg.Sources)
			if diags.HasErrors() {
				return exitError{1}
			}
			plan := compiler.NewPlan(out)
			var state *runtime.State
			if facts.Source == "live" {
				w, s, err := g.inspect()
				if err != nil {
					return err
				}
				state = s
				plan = runtime.Diff(state, out, w.Drift(state))
				w.Close()
			}
			if outFile != "" {
				if err := writeSavedPlan(outFile, plan, facts, cfg, state); err != nil {
					return err
				}
			}
			changes := plan.Summary.Create+plan.Summary.Replace+plan.Summary.Delete > 0
			defer func() {
				if detailed && changes && err == nil {
					err = exitError{2}
				}
			}()
			if asJSON {
				b, _ := json.MarshalIndent(plan, "", "  ")
				cmd.Println(string(b))
				return nil
			}
			renderPlan(cmd.OutOrStdout(), plan)
			if outFile != "" {
				cmd.Printf("\nSaved the plan to %s. Apply it with: probectl apply %s\n", outFile, outFile)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&target, "target", "auto", "auto, a profile name, or a facts file")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the plan as JSON")
	cmd.Flags().StringVar(&outFile, "out", "", "save the plan to FILE")
	cmd.Flags().BoolVar(&detailed, "detailed-exitcode", false, "exit 2 when there are changes, 0 when none")
	return cmd
}

func sourcesOf(cfg *spec.Config) map[string][]byte {
	if cfg == nil {
		return nil
	}
	return cfg.Sources
}

// loadTarget resolves -target: auto (the live kernel), a profile, or a file.
func loadTarget(target string, cfg *spec.Config) (*bpf.Facts, error) {
	switch {
	case target == "auto" || target == "":
		if err := runtime.CheckPrivileges(); err != nil {
			return nil, fmt.Errorf("-target auto reads the live kernel and needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN), which this process lacks: run it as root, or plan for a profile: -target %s", bpf.ProfileNames()[0])
		}
		facts, err := bpf.Detect(bpf.DetectOptions{Functions: true})
		if err != nil {
			return nil, err
		}
		var events []string
		for _, p := range cfg.Probes {
			if p.Event != "" {
				events = append(events, p.Event)
			}
		}
		if err := facts.LoadTracepoints(events); err != nil {
			return nil, err
		}
		return facts, nil
	}
	if f, err := bpf.Profile(target); err == nil {
		return f, nil
	}
	if _, err := os.Stat(target); err == nil {
		return bpf.ReadFactsFile(target)
	}
	return nil, fmt.Errorf("-target %q is neither auto, a profile (%v), nor a facts file", target, bpf.ProfileNames())
}

// SavedPlan is what "plan -out" writes: the plan, the full target facts and
// the spec sources it was made from.
type SavedPlan struct {
	Plan    *compiler.Plan    `json:"plan"`
	Facts   *bpf.Facts        `json:"facts"`
	Sources map[string]string `json:"sources"`
	// The state the plan was made against: apply refuses when it moved.
	Workspace    string `json:"workspace,omitempty"`
	StateLineage string `json:"state_lineage"`
	StateSerial  uint64 `json:"state_serial"`
}

func writeSavedPlan(path string, plan *compiler.Plan, facts *bpf.Facts, cfg *spec.Config, state *runtime.State) error {
	sp := SavedPlan{Plan: plan, Facts: facts, Sources: map[string]string{}}
	if state != nil {
		sp.Workspace, sp.StateLineage, sp.StateSerial = state.Workspace, state.Lineage, state.Serial
	}
	for name, src := range cfg.Sources {
		sp.Sources[name] = string(src)
	}
	b, err := json.MarshalIndent(sp, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}
