package runtime_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/probectl/probectl/internal/pods"
	"github.com/probectl/probectl/internal/pods/podstest"
	"github.com/probectl/probectl/metrics"
	"github.com/probectl/probectl/runtime"
	"github.com/prometheus/client_golang/prometheus"
)

// Two pods' UIDs and three containers' IDs of the tests: pod A has two
// containers, pod B one.
const (
	uidA = "0a000000-0000-4000-8000-00000000000a"
	uidB = "0b000000-0000-4000-8000-00000000000b"
	cidA = "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1"
	cidS = "a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2"
	cidB = "b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1"
)

// podsSpec counts the workload's opens (one per iteration) by pod, by
// pod and container, and sends an event per open with the four names.
const podsSpec = `probe "tracepoint" "opens" {
  event = "syscalls:sys_enter_openat"
  on_entry {
    when = comm == "pcruntime"
    count "by_pod" { by = { pod = pod, namespace = namespace } }
    count "by_container" { by = { pod = pod, container = container, node = node } }
    sum "sum_by_pod" {
      value = 1
      by    = { pod = pod }
    }
  }
}`

// Real cgroups in the kubelet's cgroupfs layout (under a prefix of the
// test's own: a --cgroup-root), the workload run in each container's
// cgroup a known number of times: each pod counts exactly its own opens,
// its two containers' cgroups one entry of pod, and a pod whose cgroups
// are removed (it exited) keeps its name. Without a table (off
// Kubernetes) a pod shows as its UID, a container as its ID; with the
// node's pods in it, by their names.
func TestPodsFromRealCgroups(t *testing.T) {
	requireRoot(t)
	tree := podstest.NewTree(t)
	work := workload(t)
	a := "kubepods/burstable/pod" + uidA
	b := "kubepods/besteffort/pod" + uidB
	tree.Make(a + "/" + cidA)
	tree.Make(a + "/" + cidS)
	_, idB := tree.Make(b + "/" + cidB)
	w := workspace(t)
	s, _ := apply(t, w, podsSpec)
	tree.Run(a+"/"+cidA, work, "30")
	tree.Run(a+"/"+cidS, work, "12")
	tree.Run(b+"/"+cidB, work, "7")
	node := pods.NodeName()

	read := func() (map[string]int64, map[string]int64, map[string]int64) {
		return values(aggregation(t, w, s, "tracepoint.opens", "by_pod")),
			values(aggregation(t, w, s, "tracepoint.opens", "by_container")),
			values(aggregation(t, w, s, "tracepoint.opens", "sum_by_pod"))
	}
	byPod, byContainer, sums := read()
	want(t, "by pod, no table", byPod, map[string]int64{uidA + ",": 42, uidB + ",": 7})
	want(t, "sum by pod, no table", sums, map[string]int64{uidA: 42, uidB: 7})
	want(t, "by container, no table", byContainer, map[string]int64{
		uidA + "," + cidA + "," + node: 30, uidA + "," + cidS + "," + node: 12, uidB + "," + cidB + "," + node: 7})

	pods.Default.Set(pods.Pod{UID: uidA, Name: "web-0", Namespace: "shop",
		Containers: map[string]string{"containerd://" + cidA: "web", "containerd://" + cidS: "sidecar"}})
	pods.Default.Set(pods.Pod{UID: uidB, Name: "web-1", Namespace: "shop",
		Containers: map[string]string{"containerd://" + cidB: "web"}})
	t.Cleanup(func() { pods.Default.Delete(uidA); pods.Default.Delete(uidB) })
	byPod, byContainer, _ = read()
	want(t, "by pod", byPod, map[string]int64{"web-0,shop": 42, "web-1,shop": 7})
	want(t, "by container", byContainer, map[string]int64{
		"web-0,web," + node: 30, "web-0,sidecar," + node: 12, "web-1,web," + node: 7})

	wantSeries(t, w, map[string]float64{
		`by_pod{namespace="shop",pod="web-0"}`: 42, `by_pod{namespace="shop",pod="web-1"}`: 7,
		`by_container{container="web",node="` + node + `",pod="web-0"}`: 30, `by_container{container="sidecar",node="` + node + `",pod="web-0"}`: 12,
		`by_container{container="web",node="` + node + `",pod="web-1"}`: 7,
		`sum_by_pod{pod="web-0"}`: 42, `sum_by_pod{pod="web-1"}`: 7,
	})

	// Pod B exits: its cgroups go, and its object.
	tree.Remove(b + "/" + cidB)
	tree.Remove(b)
	pods.Default.Delete(uidB)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		pods.Rescan() // at most once a second
		if _, live := pods.CgroupPath(idB); !live {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cgroup %d still in the tree a minute after its removal", idB)
		}
	}
	byPod, _, _ = read()
	want(t, "after web-1 exited", byPod, map[string]int64{"web-0,shop": 42, "web-1,shop": 7})
}

// want compares an aggregation's values with what the test expects.
func want(t *testing.T, what string, got, want map[string]int64) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s: %v, want %v", what, got, want)
	}
}

// wantSeries scrapes the workspace as probectl serve does and compares
// its aggregations' series (the family's aggregation name, and the
// labels but probe and applied).
func wantSeries(t *testing.T, w *runtime.Workspace, want map[string]float64) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(&metrics.Collector{StateDir: w.StateDir, Workspace: w.Name})
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		_, name, ok := strings.Cut(f.GetName(), "_tracepoint_opens_")
		if !ok {
			continue
		}
		name = strings.TrimSuffix(name, "_total")
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				if l.GetName() != "probe" && l.GetName() != metrics.AppliedLabel {
					labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
				}
			}
			got[name+"{"+strings.Join(labels, ",")+"}"] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("series %v, want %v", got, want)
	}
}
