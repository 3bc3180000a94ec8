package pods

import (
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Pod is what the API server says of one pod on the node.
type Pod struct {
	UID, Name, Namespace string
	// Containers names the pod's containers by ID (the ID of
	// containerStatuses[].containerID, without its runtime:// scheme),
	// init and ephemeral ones too.
	Containers map[string]string
}

// Names are the names a task's cgroup resolves to; "" for a task in no
// pod.
type Names struct{ Pod, Namespace, Container string }

// Bounds of a Table: pods kept, container IDs kept per pod (a container
// that restarts gets a new ID; the old ones keep their name), and how
// long a deleted pod keeps its names for the results already counted.
const (
	MaxPods          = 4096
	MaxContainers    = 64
	DeletedPodsKept  = 15 * time.Minute
	maxNameLen       = 253
	containerIDField = "://"
)

// Table holds the pods of a node by UID. It is safe for concurrent use.
type Table struct {
	mu   sync.RWMutex
	pods map[string]*entry
	now  func() time.Time
}

type entry struct {
	pod     Pod
	deleted time.Time // zero while the pod exists
}

// Default is the table the node agent fills and the decoders read.
var Default = NewTable()

// NewTable returns an empty table.
func NewTable() *Table { return &Table{pods: map[string]*entry{}, now: time.Now} }

// Set records p (added or changed). Its containers join those it had, so
// a restarted container's old ID keeps its name.
func (t *Table) Set(p Pod) {
	p = clean(p)
	if p.UID == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.pods[p.UID]
	if old == nil {
		t.evict()
		if len(t.pods) >= MaxPods {
			return
		}
		t.pods[p.UID] = &entry{pod: p}
		return
	}
	for id, name := range old.pod.Containers {
		if _, ok := p.Containers[id]; !ok && len(p.Containers) < MaxContainers {
			p.Containers[id] = name
		}
	}
	*old = entry{pod: p}
}

// Delete records that the pod of uid is gone: it keeps its names for
// DeletedPodsKept.
func (t *Table) Delete(uid string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.pods[strings.ToLower(uid)]; e != nil && e.deleted.IsZero() {
		e.deleted = t.now()
	}
}

// Replace records pods as all the node has (a fresh list): the others
// are deleted.
func (t *Table) Replace(pods []Pod) {
	seen := map[string]bool{}
	for _, p := range pods {
		t.Set(p)
		seen[strings.ToLower(p.UID)] = true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for uid, e := range t.pods {
		if !seen[uid] && e.deleted.IsZero() {
			e.deleted = t.now()
		}
	}
}

// evict drops the pods deleted longer ago than DeletedPodsKept, and, when
// the table is full, the oldest deleted one. t.mu is held.
func (t *Table) evict() {
	var oldest string
	for uid, e := range t.pods {
		switch {
		case e.deleted.IsZero():
		case t.now().Sub(e.deleted) > DeletedPodsKept:
			delete(t.pods, uid)
		case oldest == "" || e.deleted.Before(t.pods[oldest].deleted):
			oldest = uid
		}
	}
	if len(t.pods) >= MaxPods && oldest != "" {
		delete(t.pods, oldest)
	}
}

// Names resolves ref: the pod's name, namespace and container name when
// the table has the pod; else (a pod not yet seen, or any pod off
// Kubernetes, where nothing fills the table) the pod's UID and the container's ID.
func (t *Table) Names(ref Ref) Names {
	if ref.PodUID == "" {
		return Names{}
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	e := t.pods[ref.PodUID]
	if e == nil {
		return Names{Pod: ref.PodUID, Container: ref.ContainerID}
	}
	n := Names{Pod: e.pod.Name, Namespace: e.pod.Namespace}
	if ref.ContainerID != "" {
		n.Container = ref.ContainerID
		if name, ok := e.pod.Containers[ref.ContainerID]; ok {
			n.Container = name
		}
	}
	return n
}

// clean bounds p's texts and normalises its IDs: lower case, container
// IDs without their runtime's scheme.
func clean(p Pod) Pod {
	out := Pod{UID: strings.ToLower(bound(p.UID)), Name: bound(p.Name), Namespace: bound(p.Namespace), Containers: map[string]string{}}
	for id, name := range p.Containers {
		if len(out.Containers) >= MaxContainers {
			break
		}
		out.Containers[ContainerID(id)] = bound(name)
	}
	return out
}

// ContainerID is the ID of an API server's containerID
// ("containerd://<ID>"), lower case.
func ContainerID(s string) string {
	if _, after, ok := strings.Cut(s, containerIDField); ok {
		s = after
	}
	return strings.ToLower(bound(s))
}

func bound(s string) string {
	if len(s) > maxNameLen {
		return s[:maxNameLen]
	}
	return s
}

// nodeName is the node agent's -node, when it runs.
var nodeName atomic.Value

// SetNodeName says which node this is (the node agent's -node).
func SetNodeName(n string) { nodeName.Store(bound(n)) }

// NodeName is the node the results are of: the node agent's, else
// $NODE_NAME (the DaemonSet sets it from spec.nodeName), else the host's
// name.
func NodeName() string {
	if n, _ := nodeName.Load().(string); n != "" {
		return n
	}
	if n := os.Getenv("NODE_NAME"); n != "" {
		return bound(n)
	}
	h, _ := os.Hostname()
	return h
}
