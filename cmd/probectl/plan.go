package main

import (
	"errors"
	"fmt"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/internal/engine"
	"github.com/probectl/probectl/internal/termtext"
	"github.com/probectl/probectl/internal/views"
	"github.com/probectl/probectl/runtime"
	"github.com/probectl/probectl/spec"
	"github.com/spf13/cobra"
)

// planOptions are plan's flags.
type planOptions struct {
	target, outFile  string
	asJSON, detailed bool
	destroy          bool
	replace          []string
	deny             denyFlag
	cl               clusterPlanOptions
}

// check refuses the cluster's flags without -cluster.
func (o *planOptions) check() error {
	if !o.cl.cluster && (o.cl.probeSet != "" || o.cl.clusterSet != "" || o.cl.selector != "") {
		return errors.New("-probeset, -clusterprobeset and -selector plan for a cluster: add -cluster")
	}
	if o.cl.probeSet != "" && o.cl.clusterSet != "" {
		return errors.New("-probeset and -clusterprobeset: choose one")
	}
	if o.cl.tenant != "" {
		if o.cl.probeSet != "" {
			return errors.New("-tenant: a ProbeSet's tenant is its namespace; drop -tenant")
		}
		if o.deny.p.String() != "" {
			return errors.New("-tenant refuses every -deny class already; drop -deny")
		}
		o.deny.p = spec.TenantPolicy(o.cl.tenant)
	}
	if (o.destroy || len(o.replace) > 0) && (o.cl.cluster || o.target != "auto") {
		return errors.New("-destroy and -replace plan against the probes applied on this machine: they need -target auto, without -cluster")
	}
	if o.destroy && len(o.replace) > 0 {
		return errors.New("-destroy removes every probe: -replace has nothing to replace")
	}
	return nil
}

func newPlanCmd(g *globals) *cobra.Command {
	var o planOptions
	cmd := &cobra.Command{
		Use:   "plan [-target auto|PROFILE|FILE] [-json] [-out FILE] [PATH...]",
		Short: "Show what applying the specs would do on a kernel",
		Long: `Plan compiles the specs (no PATH: every *.hcl in the current directory)
for a target kernel and shows, per probe, the functions, the route and
why, the link families and how many links, where entry data lives, the
programs with their instruction counts, the maps with their key limits,
and the locked memory. Nothing touches the kernel. For the running
kernel (-target auto) the plan is a diff against the workspace's state:
create +, replace -/+ (with why), delete -, unchanged.

  -target auto     the running kernel (needs root)
  -target PROFILE  a built-in profile: ` + fmt.Sprint(bpf.ProfileNames()) + `
  -target FILE     facts written by "probectl target -o FILE"
  -json            the plan as JSON (README, "Plan JSON")
  -out FILE        save the plan for "probectl apply FILE"
  -detailed-exitcode  exit 0 when nothing would change, 2 when something would
  -destroy         plan what destroy would remove (with -out: apply FILE removes it)
  -replace ADDRESS  replace that applied probe even if unchanged (repeatable)
  -deny CLASS[,CLASS]  refuse constructs of these classes: ` + denyClasses() + `

With -cluster it plans for every node of a Kubernetes cluster instead,
from the facts each node's agent published (NodeFacts): per node, the
route and link families of each probe and why, and the nodes that cannot
run the specs, with the errors at their spec lines. The cluster is the
kubeconfig's (KUBECONFIG, ~/.kube/config, or in a pod its service account).

  -cluster            plan for the cluster's nodes
  -probeset NS/NAME   the specs and node selector of a ProbeSet (no PATH),
                      under the tenant policy of NS (README, "Tenants")
  -clusterprobeset NAME  those of a ClusterProbeSet (no PATH), node-wide
  -tenant NS          plan PATHs as a ProbeSet of namespace NS
  -selector K=V,...   the nodes to plan for, by label (default: all)
  -kubeconfig FILE    the kubeconfig to use; -context NAME its context

Exit status: 0 planned, 1 errors (with -detailed-exitcode: 0 no changes, 1 errors, 2 changes).
With -cluster: 0 every selected node can run the specs, 1 some cannot (or
errors), 2 none cannot but some nodes' facts lack what would check them
(a binary not published there, reads through BTF): the plan says which.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if o.cl.cluster && (o.cl.probeSet != "" || o.cl.clusterSet != "") {
				return cobra.NoArgs(cmd, args)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd, g, args) },
	}
	cmd.Flags().StringVar(&o.target, "target", "auto", "auto, a profile name, or a facts file")
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print the plan as JSON")
	cmd.Flags().StringVar(&o.outFile, "out", "", "save the plan to FILE")
	cmd.Flags().BoolVar(&o.detailed, "detailed-exitcode", false, "exit 2 when there are changes, 0 when none")
	cmd.Flags().BoolVar(&o.destroy, "destroy", false, "plan to remove every applied probe (with -out: a plan apply carries out)")
	cmd.Flags().StringArrayVar(&o.replace, "replace", nil, "replace the probe ADDRESS even if unchanged (repeatable)")
	o.deny.add(cmd)
	cmd.Flags().BoolVar(&o.cl.cluster, "cluster", false, "plan for the nodes of a Kubernetes cluster, from their published facts")
	cmd.Flags().StringVar(&o.cl.tenant, "tenant", "", "plan as a namespaced ProbeSet of namespace NS: its tenant policy, its probes filtered to its pods' tasks")
	cmd.Flags().StringVar(&o.cl.probeSet, "probeset", "", "with -cluster: plan the specs and node selector of ProbeSet NS/NAME")
	cmd.Flags().StringVar(&o.cl.clusterSet, "clusterprobeset", "", "with -cluster: plan the specs and node selector of ClusterProbeSet NAME")
	cmd.Flags().StringVar(&o.cl.selector, "selector", "", "with -cluster: the nodes to plan for, by label (K=V,...)")
	cmd.Flags().StringVar(&o.cl.kubeconfig, "kubeconfig", "", "with -cluster: the kubeconfig file (default: KUBECONFIG, ~/.kube/config)")
	cmd.Flags().StringVar(&o.cl.context, "context", "", "with -cluster: the kubeconfig context")
	return cmd
}

// run is plan: for the cluster, or this machine (-destroy: no specs).
func (o *planOptions) run(cmd *cobra.Command, g *globals, args []string) error {
	if err := o.check(); err != nil {
		return err
	}
	if o.destroy {
		if len(args) > 0 {
			return errors.New("plan -destroy removes every applied probe: give no PATH")
		}
		return runPlan(cmd, g, o, nil)
	}
	if !o.cl.cluster || o.cl.probeSet == "" && o.cl.clusterSet == "" {
		paths, err := specPaths(cmd, args)
		if err != nil {
			return err
		}
		args = paths
	}
	if o.cl.cluster {
		o.cl.json = o.asJSON
		return runClusterPlan(cmd, o.cl, args)
	}
	return runPlan(cmd, g, o, args)
}

// runPlan compiles the specs at args for -target and shows the plan: for
// the running kernel, the diff against the workspace's state. With -out
// it saves the plan.
func runPlan(cmd *cobra.Command, g *globals, o *planOptions, args []string) (err error) {
	replace, err := parseAddresses(o.replace)
	if err != nil {
		return err
	}
	compile := compileTarget
	if o.destroy {
		compile = compileNothing
	}
	cfg, facts, out, err := compile(cmd, o.target, args, o.deny.p)
	if err != nil {
		return err
	}
	plan := compiler.NewPlan(out)
	var state *runtime.State
	if facts.Source == "live" {
		if state, plan, err = g.diffLive(out, replace, o.destroy); err != nil {
			return err
		}
	}
	if o.outFile != "" {
		sp := runtime.NewSavedPlan(plan, facts, cfg.Sources, state)
		sp.Destroy, sp.Replace = o.destroy, replace
		if err := sp.Write(o.outFile); err != nil {
			return err
		}
	}
	changes := plan.Summary.Create+plan.Summary.Replace+plan.Summary.Delete > 0
	defer func() {
		if o.detailed && changes && err == nil {
			err = exitError{2}
		}
	}()
	if err := views.NewPlan(o.asJSON, cmd.OutOrStdout()).Plan(plan); err != nil || o.asJSON {
		return err
	}
	if o.outFile != "" {
		cmd.Printf("\nSaved the plan to %s. Apply it with: probectl apply %s\n", o.outFile, o.outFile)
	}
	return nil
}

// diffLive plans out against the workspace's state: the probes at
// replace replaced even if unchanged; with destroy (out compiled from no
// specs), every applied probe deleted, saying why.
func (g *globals) diffLive(out *compiler.Output, replace []bpf.Address, destroy bool) (*runtime.State, *compiler.Plan, error) {
	w, s, err := g.inspect()
	if err != nil {
		return nil, nil, err
	}
	defer w.Close()
	plan := runtime.Diff(s, out, w.Drift(s))
	if err := runtime.RequestReplace(plan, replace); err != nil {
		return nil, nil, err
	}
	markDestroy(plan, destroy)
	return s, plan, nil
}

// compileNothing compiles no specs for the live kernel: what plan
// -destroy diffs the state against.
func compileNothing(cmd *cobra.Command, target string, _ []string, policy spec.Policy) (*spec.Config, *bpf.Facts, *compiler.Output, error) {
	cfg, diags := spec.Parse(map[string][]byte{})
	if diags.HasErrors() {
		return nil, nil, nil, diags
	}
	facts, err := engine.TargetFacts(target, cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	out, _ := compiler.Compile(cfg, facts)
	return cfg, facts, out, nil
}

// compileTarget loads the specs at paths and compiles them for -target
// under policy, printing the diagnostics.
func compileTarget(cmd *cobra.Command, target string, paths []string, policy spec.Policy) (*spec.Config, *bpf.Facts, *compiler.Output, error) {
	cfg, diags := spec.LoadPaths(paths)
	if cfg != nil {
		diags = append(diags, cfg.Enforce(policy)...)
	}
	if diags.HasErrors() {
		termtext.Diagnostics(cmd.ErrOrStderr(), diags, sourcesOf(cfg))
		return nil, nil, nil, exitError{1}
	}
	facts, err := engine.TargetFacts(target, cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	out, more := compiler.Compile(cfg, facts)
	diags = append(diags, more...)
	termtext.Diagnostics(cmd.ErrOrStderr(), diags, cfg.Sources)
	if diags.HasErrors() {
		return nil, nil, nil, exitError{1}
	}
	return cfg, facts, out, nil
}

func sourcesOf(cfg *spec.Config) map[string][]byte {
	if cfg == nil {
		return nil
	}
	return cfg.Sources
}
