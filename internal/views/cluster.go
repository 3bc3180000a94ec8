package views

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/probectl/probectl/fleet"
	"k8s.io/apimachinery/pkg/labels"
)

// ClusterPlan shows a plan per node (plan -cluster): the human view as a
// table per node, the JSON view as fleet.ClusterPlan.
type ClusterPlan interface {
	// ClusterPlan shows cp, the plan of what (detail: how it was read) for
	// the nodes selector picks.
	ClusterPlan(what, detail string, selector map[string]string, cp *fleet.ClusterPlan) error
}

// NewClusterPlan is the cluster plan view -json selects, writing to w.
func NewClusterPlan(asJSON bool, w io.Writer) ClusterPlan {
	if asJSON {
		return ClusterPlanJSON{w}
	}
	return ClusterPlanHuman{w}
}

// ClusterPlanHuman is the cluster plan as text.
type ClusterPlanHuman struct{ W io.Writer }

// ClusterPlanJSON is the cluster plan as indented JSON.
type ClusterPlanJSON struct{ W io.Writer }

// ClusterPlan writes cp as JSON.
func (v ClusterPlanJSON) ClusterPlan(_, _ string, _ map[string]string, cp *fleet.ClusterPlan) error {
	return writeJSON(v.W, cp)
}

// ClusterPlan writes cp as text.
func (v ClusterPlanHuman) ClusterPlan(what, detail string, selector map[string]string, cp *fleet.ClusterPlan) error {
	renderClusterPlan(v.W, what, detail, selector, cp)
	return nil
}

// renderNodePlan writes one node's part of a cluster plan.
func renderNodePlan(w io.Writer, n *fleet.NodePlan) {
	if !n.OK() {
		fmt.Fprintf(w, "%s  %s: cannot run it\n", n.Node, n.Kernel)
		for _, e := range n.Errors {
			fmt.Fprintf(w, "  error: %s\n", e)
		}
		return
	}
	if n.Status == fleet.StatusUnchecked {
		fmt.Fprintf(w, "%s  %s: not checked in full\n", n.Node, n.Kernel)
	} else {
		fmt.Fprintf(w, "%s  %s\n", n.Node, n.Kernel)
	}
	for _, u := range n.Unchecked {
		fmt.Fprintf(w, "  not checked on %s: %s\n", n.Node, u)
	}
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

func renderClusterPlan(w io.Writer, what, detail string, selector map[string]string, cp *fleet.ClusterPlan) {
	sel := "every node"
	if len(selector) > 0 {
		sel = "the nodes with " + labels.SelectorFromSet(selector).String()
	}
	count := map[string]int{}
	for _, n := range cp.Nodes {
		count[n.Status]++
	}
	unchecked := ""
	if count[fleet.StatusUnchecked] > 0 {
		unchecked = fmt.Sprintf(", %d not checked in full", count[fleet.StatusUnchecked])
	}
	fmt.Fprintf(w, "Plan of %s (%sdigest %s) for %s: %d can run it%s, %d cannot, %d without facts.\n",
		what, detail, cp.Digest, sel, count[fleet.StatusOK], unchecked, count[fleet.StatusCannot], len(cp.NoFacts)+len(cp.BadFacts))
	fmt.Fprintf(w, "scope: %s\n", cp.Scope)
	for _, n := range cp.Nodes {
		fmt.Fprintln(w)
		renderNodePlan(w, n)
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
