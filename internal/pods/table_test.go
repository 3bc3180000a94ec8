package pods

import (
	"fmt"
	"testing"
	"time"
)

func TestTableNames(t *testing.T) {
	tab := NewTable()
	now := time.Unix(1e9, 0)
	tab.now = func() time.Time { return now }
	ref := Ref{PodUID: uid, ContainerID: cid}
	if got, want := tab.Names(ref), (Names{Pod: uid, Container: cid}); got != want {
		t.Errorf("before the pod is known: %+v, want %+v", got, want)
	}
	if got := tab.Names(Ref{}); got != (Names{}) {
		t.Errorf("no pod: %+v", got)
	}
	tab.Set(Pod{UID: uid, Name: "web-0", Namespace: "shop", Containers: map[string]string{"containerd://" + cid: "web"}})
	if got, want := tab.Names(ref), (Names{"web-0", "shop", "web"}); got != want {
		t.Errorf("known: %+v, want %+v", got, want)
	}
	if got, want := tab.Names(Ref{PodUID: uid}), (Names{"web-0", "shop", ""}); got != want {
		t.Errorf("the pod's own cgroup: %+v, want %+v", got, want)
	}
	// The container restarts: a new ID, and the old one keeps its name.
	cid2 := "ffff" + cid[4:]
	tab.Set(Pod{UID: uid, Name: "web-0", Namespace: "shop", Containers: map[string]string{"containerd://" + cid2: "web"}})
	for _, id := range []string{cid, cid2} {
		if got, want := tab.Names(Ref{PodUID: uid, ContainerID: id}), (Names{"web-0", "shop", "web"}); got != want {
			t.Errorf("after the restart, %s: %+v, want %+v", id[:4], got, want)
		}
	}
	// Deleted: the names stay for DeletedPodsKept, then go.
	tab.Replace(nil)
	now = now.Add(DeletedPodsKept)
	if got, want := tab.Names(ref), (Names{"web-0", "shop", "web"}); got != want {
		t.Errorf("deleted, within the time kept: %+v, want %+v", got, want)
	}
	now = now.Add(time.Second)
	tab.Set(Pod{UID: "other", Name: "x"})
	if got, want := tab.Names(ref), (Names{Pod: uid, Container: cid}); got != want {
		t.Errorf("deleted, past the time kept: %+v, want %+v", got, want)
	}
}

// TestTableBounded: a node's API server that lists more pods than
// MaxPods, or more containers per pod than MaxContainers, fills the table
// to its bounds; a deleted pod makes room for a new one.
func TestTableBounded(t *testing.T) {
	tab := NewTable()
	many := map[string]string{}
	for i := range 2 * MaxContainers {
		many[fmt.Sprintf("%064x", i)] = "c"
	}
	for i := range MaxPods + 10 {
		tab.Set(Pod{UID: fmt.Sprint(i), Name: fmt.Sprint("p", i), Containers: many})
	}
	if n := len(tab.pods); n != MaxPods {
		t.Errorf("%d pods kept, want %d", n, MaxPods)
	}
	if n := len(tab.pods["0"].pod.Containers); n != MaxContainers {
		t.Errorf("%d containers kept, want %d", n, MaxContainers)
	}
	tab.Delete("0")
	tab.Set(Pod{UID: "new", Name: "new"})
	if got := tab.Names(Ref{PodUID: "new"}).Pod; got != "new" {
		t.Errorf("a new pod in a full table with a deleted one: %q, want new", got)
	}
}
