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

func runClusterPlan(cmd *cobra.Command, o clusterPlanOptions, args []string) error {
	ctx := cmd.Context()
	c, defaultNS, err := kubeClient(o.kubeconfig, o.context)
	if err != nil {
		return err
	}
	var files map[string][]byte
	var selector map[string]string
	var what, detail string
	switch {
	case o.probeSet != "":
		ns, name, ok := strings.Cut(o.probeSet, "/")
		if !ok {
			ns, name = defaultNS, o.probeSet
		}
		var ps v1alpha1.ProbeSet
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &ps); err != nil {
			return fmt.Errorf("ProbeSet %s/%s: %w", ns, name, err)
		}
		if files, err = fleet.SpecFiles(ctx, c, &ps); err != nil {
			return err
		}
		selector, o.tenant = ps.Spec.NodeSelector, ns
		what = fmt.Sprintf("ProbeSet %s/%s", ns, name)
		detail = fmt.Sprintf("mode %s, generation %d, ", ps.Spec.Mode, ps.Generation)
	case o.clusterSet != "":
		var cps v1alpha1.ClusterProbeSet
		if err := c.Get(ctx, types.NamespacedName{Name: o.clusterSet}, &cps); err != nil {
			return fmt.Errorf("ClusterProbeSet %s: %w", o.clusterSet, err)
		}
		// SpecFiles reads a ConfigMap in the ProbeSet's namespace: a
		// ClusterProbeSet's is in the agents'.
		ps := v1alpha1.ProbeSet{ObjectMeta: cps.ObjectMeta, Spec: cps.Spec}
		ps.Namespace = fleet.ClusterNamespace
		if files, err = fleet.SpecFiles(ctx, c, &ps); err != nil {
			return err
		}
		selector = cps.Spec.NodeSelector
		what = "ClusterProbeSet " + cps.Name
		detail = fmt.Sprintf("mode %s, generation %d, ", cps.Spec.Mode, cps.Generation)
	default:
		cfg, diags := spec.LoadPaths(args)
		if diags.HasErrors() {
			termtext.Diagnostics(cmd.ErrOrStderr(), diags, sourcesOf(cfg))
			return exitError{1}
		}
		files = cfg.Sources
		if selector, err = labels.ConvertSelectorToLabelsMap(o.selector); err != nil {
			return fmt.Errorf("-selector %q: %w (write K=V,K2=V2)", o.selector, err)
		}
		what = strings.Join(args, " ")
	}
	cp, err := fleet.PlanCluster(ctx, c, files, selector, o.tenant)
	if err != nil {
		return err
	}
	if err := views.NewClusterPlan(o.json, cmd.OutOrStdout()).ClusterPlan(what, detail, selector, cp); err != nil {
		return err
	}
	for _, n := range cp.Nodes {
		if !n.OK() {
			return exitError{1}
		}
	}
	if len(cp.BadFacts) > 0 {
		return exitError{1}
	}
	return nil
}
