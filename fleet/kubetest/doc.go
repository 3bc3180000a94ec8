// Package kubetest starts a real Kubernetes control plane for tests: etcd
// and kube-apiserver, built from the Go module proxy by lab.sh into a cache
// outside the git tree (~/.cache/probectl/kube), listening on loopback at
// random ports with their data in a temporary directory.
//
// The API server authenticates client certificates signed by the test's
// CA (admin: O=system:masters) and service account tokens, authorizes with
// RBAC, and runs the in-tree admission plugins (ValidatingAdmissionPolicy
// included), so tests can prove what an agent's credentials may not do:
// [Cluster.PodToken] issues a token bound to a pod on a node, exactly the
// credentials a DaemonSet's pod gets.
//
// No controller manager runs unless a test starts one
// ([Cluster.StartControllerManager], with the controllers it names: the
// garbage collector and the namespace controller delete what Kubernetes
// deletes, in its order). There is no scheduler or kubelet: pods are
// objects that never run. Tests run agents as processes and use a
// namespace of their own. The built-in view, edit and
// admin roles get their rules from the controller manager's aggregation:
// [Cluster.AggregateRoles] does it once, for tests that bind them.
//
// Imports nothing of probectl.
package kubetest
