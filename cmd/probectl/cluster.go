package main

import (
	"fmt"
	"strings"

	"github.com/probectl/probectl/fleet"
	"github.com/probectl/probectl/fleet/api/v1alpha1"
	"github.com/probectl/probectl/internal/termtext"
	"github.com/probectl/probectl/internal/views"
	"github.com/probectl/probectl/spec"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
)

// clusterPlanOptions are plan's flags for -cluster.
type clusterPlanOptions struct {
	cluster                                             bool
	probeSet, clusterSet, selector, kubeconfig, context string
	// tenant is the namespace whose tenant policy the specs are planned
	// under ("" none: a ClusterProbeSet's).
	tenant string
	json   bool
}

// kubeClient connects as kubectl would: -kubeconfig, else KUBECONFIG,
// else ~/.kube/config, else the pod's service account.
func kubeClient(kubeconfig, kubecontext string) (*fleet.Client, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubecontext})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig: %w", err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		ns = "default"
	}
	c, err := fleet.NewClient(cfg)
	return c, ns, err
}

// clusterInput is what plan -cluster plans: the spec files, the node
// selector, the tenant whose policy applies ("" none), and how the plan's
// header names them.
type clusterInput struct {
	files        map[string][]byte
	selector     map[string]string
	tenant       string
	what, detail string
}

func runClusterPlan(cmd *cobra.Command, o clusterPlanOptions, args []string) error {
	ctx := cmd.Context()
	c, defaultNS, err := kubeClient(o.kubeconfig, o.context)
	if err != nil {
		return err
	}
	var in *clusterInput
	switch {
	case o.probeSet != "":
		in, err = probeSetInput(cmd, c, o.probeSet, defaultNS)
	case o.clusterSet != "":
		in, err = clusterProbeSetInput(cmd, c, o.clusterSet)
	default:
		in, err = pathsInput(cmd, o, args)
	}
	if err != nil {
		return err
	}
	cp, err := fleet.PlanCluster(ctx, c, in.files, in.selector, in.tenant)
	if err != nil {
		return err
	}
	if err := views.NewClusterPlan(o.json, cmd.OutOrStdout()).ClusterPlan(in.what, in.detail, in.selector, cp); err != nil {
		return err
	}
	return clusterExit(cp)
}

// clusterExit is plan -cluster's exit status: 1 when a node cannot run
// the specs or its facts cannot be read, else 2 when a node's facts could
// not check them in full, else 0.
func clusterExit(cp *fleet.ClusterPlan) error {
	code := 0
	for _, n := range cp.Nodes {
		switch n.Status {
		case fleet.StatusCannot:
			return exitError{1}
		case fleet.StatusUnchecked:
			code = 2
		}
	}
	if len(cp.BadFacts) > 0 {
		return exitError{1}
	}
	if code != 0 {
		return exitError{code}
	}
	return nil
}

// probeSetInput is the ProbeSet ref ("NS/NAME", or NAME in defaultNS),
// planned under its namespace's tenant policy.
func probeSetInput(cmd *cobra.Command, c *fleet.Client, ref, defaultNS string) (*clusterInput, error) {
	ns, name, ok := strings.Cut(ref, "/")
	if !ok {
		ns, name = defaultNS, ref
	}
	var ps v1alpha1.ProbeSet
	if err := c.Get(cmd.Context(), types.NamespacedName{Namespace: ns, Name: name}, &ps); err != nil {
		return nil, fmt.Errorf("ProbeSet %s/%s: %w", ns, name, err)
	}
	return setInput(cmd, c, &ps, fmt.Sprintf("ProbeSet %s/%s", ns, name), ns)
}

// clusterProbeSetInput is the ClusterProbeSet name, node-wide; its
// ConfigMap is in the agents' namespace.
func clusterProbeSetInput(cmd *cobra.Command, c *fleet.Client, name string) (*clusterInput, error) {
	var cps v1alpha1.ClusterProbeSet
	if err := c.Get(cmd.Context(), types.NamespacedName{Name: name}, &cps); err != nil {
		return nil, fmt.Errorf("ClusterProbeSet %s: %w", name, err)
	}
	ps := v1alpha1.ProbeSet{ObjectMeta: cps.ObjectMeta, Spec: cps.Spec}
	ps.Namespace = fleet.ClusterNamespace
	return setInput(cmd, c, &ps, "ClusterProbeSet "+name, "")
}

// setInput reads ps's spec files.
func setInput(cmd *cobra.Command, c *fleet.Client, ps *v1alpha1.ProbeSet, what, tenant string) (*clusterInput, error) {
	files, err := fleet.SpecFiles(cmd.Context(), c, ps)
	if err != nil {
		return nil, err
	}
	return &clusterInput{files: files, selector: ps.Spec.NodeSelector, tenant: tenant, what: what,
		detail: fmt.Sprintf("mode %s, generation %d, ", ps.Spec.Mode, ps.Generation)}, nil
}

// pathsInput is the spec files at args, for the nodes -selector selects.
func pathsInput(cmd *cobra.Command, o clusterPlanOptions, args []string) (*clusterInput, error) {
	cfg, diags := spec.LoadPaths(args)
	if diags.HasErrors() {
		termtext.Diagnostics(cmd.ErrOrStderr(), diags, sourcesOf(cfg))
		return nil, exitError{1}
	}
	selector, err := labels.ConvertSelectorToLabelsMap(o.selector)
	if err != nil {
		return nil, fmt.Errorf("-selector %q: %w (write K=V,K2=V2)", o.selector, err)
	}
	return &clusterInput{files: cfg.Sources, selector: selector, tenant: o.tenant, what: strings.Join(args, " ")}, nil
}
