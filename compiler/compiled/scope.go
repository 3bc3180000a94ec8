package compiled

import "fmt"

// Scope is whose tasks a spec set's probes see: every task of the node,
// or the tasks of one namespace's pods on it (a tenant's spec set: a
// namespaced ProbeSet). A tenant's programs begin with the tenant filter
// (TenantMapRef): an event of any other task returns before anything is
// counted.
type Scope struct {
	// Kind is ScopeNode or ScopeNamespace.
	Kind string `json:"kind"`
	// Namespace is the namespace of a ScopeNamespace.
	Namespace string `json:"namespace,omitempty"`
}

// The scope kinds.
const (
	ScopeNode      = "node"
	ScopeNamespace = "namespace"
)

// ScopeOf is the scope of a spec set kept to namespace ("" for none).
func ScopeOf(namespace string) Scope {
	if namespace == "" {
		return Scope{Kind: ScopeNode}
	}
	return Scope{Kind: ScopeNamespace, Namespace: namespace}
}

// String is how plans show it.
func (s Scope) String() string {
	if s.Kind == ScopeNamespace {
		return fmt.Sprintf("namespace %s (tasks of its pods on this node)", s.Namespace)
	}
	return ScopeNode
}

// The tenant filter: a hash map per probe of the cgroup ids (cgroup v2)
// of the namespace's pods on the node, filled by the node agent as pods
// come and go. A program passes the filter when the current task's
// cgroup, or one of its ancestors from level 1 to TenantLevels, is in the
// map: a task in a pod's cgroup or in any cgroup below it (a container's,
// one a container made) passes; every other task returns at once.
const (
	TenantMapRef = "tenant"
	// TenantLevels is the deepest cgroup level the filter looks at.
	TenantLevels = 12
	// TenantMaxCgroups is how many cgroups the map holds.
	TenantMaxCgroups = 4096
)

// PodMatch is a when's pod value compared with a name (namespace ==
// "shop"): Value is pod, namespace, container or node. The program looks
// the task's cgroup and its ancestors (as the tenant filter does) up in
// a hash map of the cgroups whose pod matches, which the runtime fills
// from the node's pods and keeps current; node's map holds the root
// cgroup (level 0, every task's) when the node is Name, else nothing.
type PodMatch struct {
	Value string `json:"value"`
	Name  string `json:"name"`
}

// String is the predicate as written, ==.
func (m PodMatch) String() string { return fmt.Sprintf("%s == %q", m.Value, m.Name) }

// PodMapRef is the ref of a probe's n-th pod map.
func PodMapRef(n int) string { return fmt.Sprintf("pods_%d", n) }

// PodMaxCgroups is how many cgroups a pod map holds.
const PodMaxCgroups = TenantMaxCgroups
