package podwatch

import (
	"context"
	"log/slog"
	"time"

	"github.com/probectl/probectl/internal/pods"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
)

// Watcher keeps Table to the pods of Node.
type Watcher struct {
	Client dynamic.Interface
	Node   string
	Table  *pods.Table
	Log    *slog.Logger // slog.Default() when nil
	// Retry is the wait after a failed list or a watch that ended (5 s
	// when zero).
	Retry time.Duration
}

var podsResource = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// rescanEvery is how often the cgroup tree is walked again while the
// watch runs, so that a container's cgroup is seen while it lives.
const rescanEvery = 5 * time.Second

// Run lists and watches until ctx ends, listing again after an error.
func (w *Watcher) Run(ctx context.Context) {
	retry := w.Retry
	if retry == 0 {
		retry = 5 * time.Second
	}
	if w.Log == nil {
		w.Log = slog.Default()
	}
	for ctx.Err() == nil {
		if err := w.listAndWatch(ctx); err != nil && ctx.Err() == nil {
			w.Log.Warn("pod watch", "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(retry):
		}
	}
}

// listAndWatch lists the node's pods into the table, then follows their
// changes until the watch ends.
func (w *Watcher) listAndWatch(ctx context.Context) error {
	res := w.Client.Resource(podsResource)
	opts := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", w.Node).String()}
	list, err := res.List(ctx, opts)
	if err != nil {
		return err
	}
	all := make([]pods.Pod, 0, len(list.Items))
	for i := range list.Items {
		all = append(all, podOf(&list.Items[i]))
	}
	w.Table.Replace(all)
	pods.Rescan()
	opts.ResourceVersion = list.GetResourceVersion()
	wi, err := res.Watch(ctx, opts)
	if err != nil {
		return err
	}
	defer wi.Stop()
	tick := time.NewTicker(rescanEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			pods.Rescan()
		case ev, ok := <-wi.ResultChan():
			if !ok || ev.Type == watch.Error {
				return nil // list again
			}
			w.apply(ev)
		}
	}
}

// apply records one change of a pod.
func (w *Watcher) apply(ev watch.Event) {
	u, ok := ev.Object.(*unstructured.Unstructured)
	if !ok {
		return
	}
	switch ev.Type {
	case watch.Added, watch.Modified:
		w.Table.Set(podOf(u))
	case watch.Deleted:
		w.Table.Delete(string(u.GetUID()))
	}
	pods.Rescan()
}

// podObject is the part of a core/v1 Pod read here.
type podObject struct {
	Status struct {
		ContainerStatuses          []containerStatus `json:"containerStatuses"`
		InitContainerStatuses      []containerStatus `json:"initContainerStatuses"`
		EphemeralContainerStatuses []containerStatus `json:"ephemeralContainerStatuses"`
	} `json:"status"`
}

type containerStatus struct {
	Name        string `json:"name"`
	ContainerID string `json:"containerID"`
	LastState   struct {
		Terminated *struct {
			ContainerID string `json:"containerID"`
		} `json:"terminated"`
	} `json:"lastState"`
}

// podOf reads a pod's names and its containers' IDs; fields it cannot
// read give no containers.
func podOf(u *unstructured.Unstructured) pods.Pod {
	p := pods.Pod{UID: string(u.GetUID()), Name: u.GetName(), Namespace: u.GetNamespace(), Containers: map[string]string{}}
	var o podObject
	if k8sruntime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &o) != nil {
		return p
	}
	for _, list := range [][]containerStatus{o.Status.ContainerStatuses, o.Status.InitContainerStatuses, o.Status.EphemeralContainerStatuses} {
		for _, c := range list {
			if c.ContainerID != "" {
				p.Containers[c.ContainerID] = c.Name
			}
			if t := c.LastState.Terminated; t != nil && t.ContainerID != "" {
				p.Containers[t.ContainerID] = c.Name
			}
		}
	}
	return p
}
