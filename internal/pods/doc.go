// Package pods names the pod, namespace and container a task's cgroup
// belongs to, for the pod, namespace, container and node values.
//
// A cgroup's path says the pod's UID and the container's ID, in the
// layouts the kubelet makes (ParsePath: the cgroupfs and systemd drivers,
// containerd, CRI-O and Docker, under any --cgroup-root); a Table, which
// the node agent fills from the API server's pods of its node, gives the
// names. Without one (probectl on a host, off Kubernetes) a pod shows as
// its UID and a container as its ID; a task in no pod shows "".
//
// It imports nothing of probectl: runtime decodes with it, fleet/pods
// fills its table.
package pods
