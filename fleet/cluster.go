package fleet

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/fleet/api/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// SpecFiles returns a ProbeSet's spec files: the inline spec as
// "<probeset>.hcl", or the keys of its ConfigMap that end in ".hcl".
func SpecFiles(ctx context.Context, r *Client, ps *v1alpha1.ProbeSet) (map[string][]byte, error) {
	if ps.Spec.ConfigMapRef == nil {
		return map[string][]byte{ps.Name + ".hcl": []byte(ps.Spec.HCL)}, nil
	}
	var cm ConfigMap
	key := types.NamespacedName{Namespace: ps.Namespace, Name: ps.Spec.ConfigMapRef.Name}
	if err := r.Get(ctx, key, &cm); err != nil {
		return nil, fmt.Errorf("ProbeSet %s/%s: ConfigMap %s: %w", ps.Namespace, ps.Name, key.Name, err)
	}
	files := map[string][]byte{}
	for k, v := range cm.Data {
		if strings.HasSuffix(k, ".hcl") {
			files[k] = []byte(v)
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("ProbeSet %s/%s: ConfigMap %s has no key ending in .hcl", ps.Namespace, ps.Name, key.Name)
	}
	return files, nil
}

// Selects reports whether a node selector selects a node with these labels (an empty one
// selects every node).
func Selects(selector, nodeLabels map[string]string) bool {
	return labels.SelectorFromSet(selector).Matches(labels.Set(nodeLabels))
}

// ClusterPlan is a spec set planned for every selected node.
type ClusterPlan struct {
	Digest string `json:"digest"`
	// Scope is whose tasks the probes see on each node.
	Scope string `json:"scope"`
	// Nodes are the selected nodes that published facts, by name.
	Nodes []*NodePlan `json:"nodes"`
	// NoFacts are the selected nodes without NodeFacts (no agent yet, or
	// it has not published): nothing can be planned for them.
	NoFacts []string `json:"no_facts,omitempty"`
	// BadFacts are the selected nodes whose NodeFacts cannot be read.
	BadFacts map[string]string `json:"bad_facts,omitempty"`
}

// PlanCluster plans files for every node the selector selects, from the
// facts each node published, under the tenant policy of tenant (a
// namespaced ProbeSet's namespace; "" for none). It reads Nodes and
// NodeFacts; it writes nothing.
func PlanCluster(ctx context.Context, r *Client, files map[string][]byte, selector map[string]string, tenant string) (*ClusterPlan, error) {
	var nodes NodeList
	if err := r.List(ctx, &nodes, ListOptions{}); err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	sort.Slice(nodes.Items, func(i, j int) bool { return nodes.Items[i].Name < nodes.Items[j].Name })
	cp := &ClusterPlan{Digest: Digest(files), Scope: compiler.ScopeOf(tenant).String()}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if !Selects(selector, n.Labels) {
			continue
		}
		var nf v1alpha1.NodeFacts
		if err := r.Get(ctx, types.NamespacedName{Name: n.Name}, &nf); err != nil {
			if apierrors.IsNotFound(err) {
				cp.NoFacts = append(cp.NoFacts, n.Name)
				continue
			}
			return nil, fmt.Errorf("NodeFacts %s: %w", n.Name, err)
		}
		facts, err := FactsOf(&nf)
		if err != nil {
			if cp.BadFacts == nil {
				cp.BadFacts = map[string]string{}
			}
			cp.BadFacts[n.Name] = err.Error()
			continue
		}
		cp.Nodes = append(cp.Nodes, PlanNode(n.Name, files, facts, tenant))
	}
	return cp, nil
}
