// Package podwatch fills the node's pod table (internal/pods) from the
// API server: a node-scoped list and watch of pods (fieldSelector
// spec.nodeName=NODE), each pod's UID, name, namespace and the IDs of its
// containers (containerStatuses[].containerID, and the previous one of a
// restarted container). The node agent runs it, so that the pod,
// namespace and container values name what probes counted.
//
// Imports internal/pods; of Kubernetes apimachinery and client-go's
// dynamic client only, as fleet does.
package podwatch
