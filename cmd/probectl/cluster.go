package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/probectl/probectl/fleet"
	"github.com/probectl/probectl/fleet/api/v1alpha1"
	"github.com/probectl/probectl/spec"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
)

// clusterPlanOptions are plan's flags for -cluster.
type clusterPlanOptions struct {
	cluster                                 bool
	probeSet, selector, kubeconfig, context string
	json                                    bool
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
	if o.probeSet != "" {
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
		selector = ps.Spec.NodeSelector
		what = fmt.Sprintf("ProbeSet %s/%s", ns, name)
		detail = fmt.Sprintf("mode %s, generation %d, ", ps.Spec.Mode, ps.Generation)
	} else {
		cfg, diags := spec.LoadPaths(args)
		if diags.HasErrors() {
			printDiags(cmd.ErrOrStderr(), diags, sourcesOf(cfg))
			return exitError{1}
		}
		files = cfg.Sources
		if selector, err = labels.ConvertSelectorToLabelsMap(o.selector); err != nil {
			return fmt.Errorf("-selector %q: %w (write K=V,K2=V2)", o.selector, err)
		}
		what = strings.Join(args, " ")
	}
	cp, err := fleet.PlanCluster(ctx, c, files, selector)
	if err != nil {
		return err
	}
	if o.json {
		b, _ := json.MarshalIndent(cp, "", "  ")
		cmd.Println(string(b))
	} else {
		renderClusterPlan(cmd.OutOrStdout(), what, detail, selector, cp)
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

func renderClusterPlan(w io.Writer, what, detail string, selector map[string]string, cp *fleet.ClusterPlan) {
	sel := "every node"
	if len(selector) > 0 {
		sel = "the nodes with " + labels.SelectorFromSet(selector).String()
	}
	ok, bad := 0, 0
	for _, n := range cp.Nodes {
		if n.OK() {
			ok++
		} else {
			bad++
		}
	}
	fmt.Fprintf(w, "Plan of %s (%sdigest %s) for %s: %d can run it, %d cannot, %d without facts.\n",
		what, detail, cp.Digest, sel, ok, bad, len(cp.NoFacts)+len(cp.BadFacts))
	for _, n := range cp.Nodes {
		fmt.Fprintln(w)
		if !n.OK() {
			fmt.Fprintf(w, "%s  %s: cannot run it\n", n.Node, n.Kernel)
			for _, e := range n.Errors {
				fmt.Fprintf(w, "  error: %s\n", e)
			}
			continue
		}
		fmt.Fprintf(w, "%s  %s\n", n.Node, n.Kernel)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, p := range n.Probes {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", p.Address, p.Route, strings.Join(p.Attach, "+"), p.Reason)
		}
		tw.Flush()
		for _, s := range n.Skipped {
			fmt.Fprintf(w, "  skipped: %s\n", s)
		}
		for _, s := range n.Warnings {
			fmt.Fprintf(w, "  warning: %s\n", s)
		}
	}
	if len(cp.NoFacts) > 0 {
		fmt.Fprintf(w, "\nNo published facts (no agent on the node yet): %s\n", strings.Join(cp.NoFacts, ", "))
	}
	if len(cp.BadFacts) > 0 {
		names := make([]string, 0, len(cp.BadFacts))
		for n := range cp.BadFacts {
			names = append(names, n)
		}
		sort.Strings(names)
		fmt.Fprintln(w, "\nFacts that cannot be read:")
		for _, n := range names {
			fmt.Fprintf(w, "  %s: %s\n", n, cp.BadFacts[n])
		}
	}
}
