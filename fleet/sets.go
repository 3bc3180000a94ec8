package fleet

import (
	"context"
	"fmt"

	"github.com/probectl/probectl/fleet/api/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The agent handles a ClusterProbeSet as a ProbeSet of no namespace:
// same spec, same status, same records (in ClusterNamespace, named
// "cluster.<name>.<node>"), but node-wide: no tenant policy, no filter.

// ClusterNamespace is the agents' namespace, where the records and the
// spec ConfigMaps of ClusterProbeSets are.
const ClusterNamespace = "probectl-system"

// listSets lists the ProbeSets and the ClusterProbeSets (as ProbeSets of
// no namespace).
func listSets(ctx context.Context, c *Client) ([]*v1alpha1.ProbeSet, error) {
	var sets v1alpha1.ProbeSetList
	if err := c.List(ctx, &sets, ListOptions{}); err != nil {
		return nil, fmt.Errorf("list ProbeSets: %w", err)
	}
	var cluster v1alpha1.ClusterProbeSetList
	if err := c.List(ctx, &cluster, ListOptions{}); err != nil {
		return nil, fmt.Errorf("list ClusterProbeSets: %w", err)
	}
	// Not a whole list: what it lacks is not known to be gone.
	for _, l := range []metav1.ListMeta{sets.ListMeta, cluster.ListMeta} {
		if l.ResourceVersion == "" || l.Continue != "" {
			return nil, fmt.Errorf("list ProbeSets: an incomplete list (resourceVersion %q, continue %q)", l.ResourceVersion, l.Continue)
		}
	}
	out := make([]*v1alpha1.ProbeSet, 0, len(sets.Items)+len(cluster.Items))
	for i := range sets.Items {
		out = append(out, &sets.Items[i])
	}
	for i := range cluster.Items {
		out = append(out, asProbeSet(&cluster.Items[i]))
	}
	return out, nil
}

func asProbeSet(c *v1alpha1.ClusterProbeSet) *v1alpha1.ProbeSet {
	return &v1alpha1.ProbeSet{ObjectMeta: c.ObjectMeta, Spec: c.Spec, Status: c.Status}
}

// getSet reads the ProbeSet key, or the ClusterProbeSet key.Name when
// key.Namespace is "".
func getSet(ctx context.Context, c *Client, key types.NamespacedName) (*v1alpha1.ProbeSet, error) {
	if key.Namespace != "" {
		var ps v1alpha1.ProbeSet
		return &ps, c.Get(ctx, key, &ps)
	}
	var cps v1alpha1.ClusterProbeSet
	if err := c.Get(ctx, key, &cps); err != nil {
		return nil, err
	}
	return asProbeSet(&cps), nil
}

// updateSetStatus writes ps's status, to its ClusterProbeSet for one of
// no namespace; ps takes what the server stored.
func updateSetStatus(ctx context.Context, c *Client, ps *v1alpha1.ProbeSet) error {
	if ps.Namespace != "" {
		return c.UpdateStatus(ctx, ps)
	}
	cps := &v1alpha1.ClusterProbeSet{ObjectMeta: ps.ObjectMeta, Spec: ps.Spec, Status: ps.Status}
	if err := c.UpdateStatus(ctx, cps); err != nil {
		return err
	}
	*ps = *asProbeSet(cps)
	return nil
}

// setKind is the kind of ps: ProbeSet, or ClusterProbeSet.
func setKind(ps *v1alpha1.ProbeSet) string {
	if ps.Namespace == "" {
		return "ClusterProbeSet"
	}
	return "ProbeSet"
}

// setName is how logs and errors name ps.
func setName(ps *v1alpha1.ProbeSet) string {
	if ps.Namespace == "" {
		return "ClusterProbeSet " + ps.Name
	}
	return "ProbeSet " + ps.Namespace + "/" + ps.Name
}

// recordNamespace is where the records of ps are: its namespace, or
// ClusterNamespace.
func recordNamespace(ps *v1alpha1.ProbeSet) string {
	if ps.Namespace == "" {
		return ClusterNamespace
	}
	return ps.Namespace
}

// recordKey is the key of node's record of ps.
func recordKey(ps *v1alpha1.ProbeSet, node string) types.NamespacedName {
	name := ps.Name + "." + node
	if ps.Namespace == "" {
		name = "cluster." + name
	}
	return types.NamespacedName{Namespace: recordNamespace(ps), Name: name}
}

func (a *NodeAgent) recordKey(ps *v1alpha1.ProbeSet) types.NamespacedName {
	return recordKey(ps, a.Node)
}

// setOfRecord is the set record r is of (its name and namespace).
func setOfRecord(r *v1alpha1.ProbeSetNode) *v1alpha1.ProbeSet {
	ns := r.Namespace
	if r.Spec.Cluster {
		ns = ""
	}
	return &v1alpha1.ProbeSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: r.Spec.ProbeSet}}
}

// specSource is ps as SpecFiles reads it: a ClusterProbeSet's ConfigMap
// is in ClusterNamespace.
func (a *NodeAgent) specSource(ps *v1alpha1.ProbeSet) *v1alpha1.ProbeSet {
	if ps.Namespace != "" {
		return ps
	}
	cp := *ps
	cp.Namespace = ClusterNamespace
	return &cp
}

// restrict fills the cgroup maps of an applied ProbeSet: its tenant
// filter with the cgroups of its namespace's pods on the node (counted
// in st; a ClusterProbeSet has none), and the pod maps of its when
// conditions (namespace == "shop") from the node's pods. A failure is
// logged: the maps keep what they held (a pod gone stays admitted until
// the next sync; a new pod is not counted until then).
func (a *NodeAgent) restrict(ctx context.Context, ps *v1alpha1.ProbeSet, st *v1alpha1.ProbeSetNodeStatus) {
	if a.Applier == nil || st.AppliedDigest == "" {
		return
	}
	var ids []uint64 // nil: no tenant filter
	if ps.Namespace != "" {
		var ok bool
		if ids, ok = a.tenantCgroups(ctx, ps); !ok {
			return
		}
	}
	if _, err := a.Applier.Restrict(ctx, Workspace(a.Node, ps), ids); err != nil {
		a.log().Error("fill the cgroup maps", "probeset", setName(ps), "err", err)
		return
	}
	if ids != nil {
		n := int32(len(ids))
		st.Cgroups = &n
	}
}

// tenantCgroups are the cgroups of ps's namespace's pods on the node
// (never nil), false when the pods cannot be listed.
func (a *NodeAgent) tenantCgroups(ctx context.Context, ps *v1alpha1.ProbeSet) ([]uint64, bool) {
	var pods PodList
	if err := a.Client.List(ctx, &pods, ListOptions{Namespace: ps.Namespace, Fields: map[string]string{"spec.nodeName": a.Node}}); err != nil {
		a.log().Error("list the namespace's pods on the node", "probeset", setName(ps), "err", err)
		return nil, false
	}
	uids := make([]string, len(pods.Items))
	for i, p := range pods.Items {
		uids[i] = string(p.UID)
	}
	root := a.CgroupRoot
	if root == "" {
		root = CgroupRoot()
	}
	return append([]uint64{}, PodCgroups(unifiedUnder(root), uids)...), true
}

func equalCount(a, b *int32) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}
