package runtime_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/internal/pods"
	"github.com/probectl/probectl/internal/pods/podstest"
)

// The pods of the when tests (their own: the table keeps a deleted pod's
// names for a while) and their containers; C is made after the apply.
const (
	uidWA = "1a000000-0000-4000-8000-00000000001a"
	uidWB = "1b000000-0000-4000-8000-00000000001b"
	uidWC = "1c000000-0000-4000-8000-00000000001c"
	cidWA = "d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1"
	cidWS = "d2d2d2d2d2d2d2d2d2d2d2d2d2d2d2d2d2d2d2d2d2d2d2d2d2d2d2d2d2d2d2d2"
	cidWB = "e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1"
	cidWC = "f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1f1"
)

// podWhenSpec counts the workload's opens under four when conditions on
// the pod values; NODE is this node's name, UID pod B's UID.
const podWhenSpec = `probe "tracepoint" "shop" {
  event = "syscalls:sys_enter_openat"
  on_entry {
    when = comm == "pcruntime" && namespace == "shop" && node == "NODE"
    count "n" {}
  }
}
probe "tracepoint" "not_web0" {
  event = "syscalls:sys_enter_openat"
  on_entry {
    when = comm == "pcruntime" && pod != "web-0" && (namespace == "shop" || namespace == "books")
    count "n" {}
  }
}
probe "tracepoint" "by_uid" {
  event = "syscalls:sys_enter_openat"
  on_entry {
    when = comm == "pcruntime" && pod == "UID"
    count "n" {}
  }
}
probe "tracepoint" "side" {
  event = "syscalls:sys_enter_openat"
  on_entry {
    when = comm == "pcruntime" && container == "sidecar" && !(node == "not-NODE")
    count "n" {}
  }
}`

// Real cgroups in the kubelet's layout, two pods of two namespaces (A:
// web-0 in shop with containers web and sidecar, B: web-1 in books) and
// the workload run in them a known number of times: each when condition
// on pod values counts exactly the opens of the pods that match it. At
// apply the table is empty (off Kubernetes): a pod is its UID and has no
// namespace. With the node's pods in the table and the maps filled again
// (as the node agent does as pods change), by name; a pod made after
// that (C: web-2 in shop) is not matched until the next fill, then is.
func TestWhenPodsMatchedByName(t *testing.T) {
	requireRoot(t)
	tree := podstest.NewTree(t)
	work := workload(t)
	a, b, c := "kubepods/burstable/pod"+uidWA, "kubepods/besteffort/pod"+uidWB, "kubepods/pod"+uidWC
	_, podA := tree.Make(a)
	_, ctrA := tree.Make(a + "/" + cidWA)
	_, ctrS := tree.Make(a + "/" + cidWS)
	tree.Make(b + "/" + cidWB)
	w := workspace(t)
	node := pods.NodeName()
	s, _ := apply(t, w, strings.NewReplacer("NODE", node, "UID", uidWB).Replace(podWhenSpec))
	counts := func(what string, shop, notWeb0, byUID, side int64) {
		t.Helper()
		for probe, n := range map[string]int64{"shop": shop, "not_web0": notWeb0, "by_uid": byUID, "side": side} {
			want(t, what+": "+probe, values(aggregation(t, w, s, "tracepoint."+probe, "n")), nonZero(n))
		}
	}
	tree.Run(a+"/"+cidWA, work, "3")
	tree.Run(b+"/"+cidWB, work, "2")
	counts("off Kubernetes", 0, 0, 2, 0)

	pods.Default.Set(pods.Pod{UID: uidWA, Name: "web-0", Namespace: "shop",
		Containers: map[string]string{"containerd://" + cidWA: "web", "containerd://" + cidWS: "sidecar"}})
	pods.Default.Set(pods.Pod{UID: uidWB, Name: "web-1", Namespace: "books",
		Containers: map[string]string{"containerd://" + cidWB: "web"}})
	t.Cleanup(func() { pods.Default.Delete(uidWA); pods.Default.Delete(uidWB); pods.Default.Delete(uidWC) })
	if n, err := w.SetCgroups(s, nil); err != nil || n != 4 {
		t.Fatalf("SetCgroups: %d probes, %v; want 4", n, err)
	}
	// namespace == "shop" holds pod A's cgroup and its containers'.
	shop := s.Probe(mustAddress(t, "tracepoint.shop"))
	if ids, err := w.CgroupMap(shop, "pods_0"); err != nil || fmt.Sprint(ids) != fmt.Sprint(sorted(podA, ctrA, ctrS)) {
		t.Errorf("shop's namespace map: %v %v, want %v", ids, err, sorted(podA, ctrA, ctrS))
	}
	tree.Run(a+"/"+cidWA, work, "30")
	tree.Run(a+"/"+cidWS, work, "6")
	tree.Run(b+"/"+cidWB, work, "7")
	counts("named", 36, 7, 2, 6)

	tree.Make(c + "/" + cidWC)
	pods.Default.Set(pods.Pod{UID: uidWC, Name: "web-2", Namespace: "shop",
		Containers: map[string]string{"containerd://" + cidWC: "web"}})
	tree.Run(c+"/"+cidWC, work, "4")
	counts("a new pod before the fill", 36, 7, 2, 6)
	if _, err := w.SetCgroups(s, nil); err != nil {
		t.Fatal(err)
	}
	tree.Run(c+"/"+cidWC, work, "11")
	counts("a new pod after the fill", 47, 18, 2, 6)
}

// nonZero is a count's values as values reads them: none for 0.
func nonZero(n int64) map[string]int64 {
	if n == 0 {
		return map[string]int64{}
	}
	return map[string]int64{"": n}
}

func sorted(ids ...uint64) []uint64 { slices.Sort(ids); return ids }

func mustAddress(t *testing.T, s string) bpf.Address {
	a, err := bpf.ParseAddress(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
