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
// [Cluster.AggregateRoles] does it once, for tests that bind them without
// starting the controllers. The API server's authorizer sees new rules
// and bindings through its informers, a moment later: a test that binds
// a role polls (a SelfSubjectAccessReview) until the request is allowed.
//
// Real pods: [StartNode] starts a node of the cluster (and, once,
// kube-controller-manager and kube-scheduler: [Cluster.StartControllers]):
// a private containerd (Debian's, runc, cgroupfs driver; its own root,
// state and socket under the node's directory) and a kubelet built by
// lab.sh (its own root directory, cgroup root, ports, a serving and a
// client certificate from the lab's CA as system:node:NAME, which the
// Node authorizer knows). Pods get a bridge of the node's own with a
// private /24 (Debian's bridge and host-local CNI plugins); the node's IP
// is the bridge's, so the host reaches every pod. There is no registry:
// [WriteOCIArchive] writes an image archive of local files and
// [Node.ImportImage] imports it (the pod sandbox's pause image is built
// with gcc -static); pods use them with imagePullPolicy IfNotPresent or
// Never. [Node.RunPod] runs a pod on the node and waits until it is Ready
// or done. The kubelet runs with failCgroupV1: false on a cgroup v1 host.
// Stopping a node removes its containers, network namespaces, mounts,
// cgroups and bridge; a node whose test was killed is removed by the next
// StartNode. The kubelet changes kernel.panic, kernel.panic_on_oops and
// vm.overcommit_memory when it starts: the last node stopped puts the
// host's values back.
//
// Imports nothing of probectl.
package kubetest
