// Package v1alpha1 is probectl's Kubernetes API, group probectl.dev:
//
//   - ProbeSet (namespaced): an HCL spec set (inline, or a ConfigMap's
//     *.hcl keys), the nodes it selects, and plan-only or apply. Its status
//     is a roll-up: counts of nodes planned / applied / failed, a short line
//     per node, and the conditions Planned, Applied and Degraded.
//   - ProbeSetNode (namespaced, named "<probeset>.<node>"): one node's
//     record of one ProbeSet: its plan (route and link families per probe,
//     and why), the applied digest, the errors at their spec lines, hits
//     and drops. Only the agent of that node writes it.
//   - NodeFacts (cluster-scoped, named after the node): the kernel facts a
//     node's agent publishes (bpf.Facts as "probectl target -o" writes
//     them, without the function list and the BTF, which do not fit an
//     object), so that "probectl plan -cluster" plans for every node
//     before anything is applied.
//
// Why per-node objects and not ProbeSet.status.nodes written by each agent:
// RBAC grants a verb on a resource (or a subresource), never on a field, so
// any agent that may write ProbeSet's status may write every node's entry
// in it. A per-node object carries its node in spec.nodeName, and a
// ValidatingAdmissionPolicy (deploy/kubernetes/admission.yaml) compares
// that field with the node the agent's credentials are bound to (a pod's
// service account token carries its node:
// userInfo.extra["authentication.kubernetes.io/node-name"]). The roll-up
// in ProbeSet.status is derived from the per-node objects, so any agent
// may recompute it, and a wrong one is corrected by the next.
//
// This package imports nothing of probectl: the facts travel as JSON.
//
// +groupName=probectl.dev
// +kubebuilder:object:generate=true
package v1alpha1
