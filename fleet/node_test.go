package fleet_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/fleet"
	"github.com/probectl/probectl/fleet/api/v1alpha1"
	"github.com/probectl/probectl/fleet/kubetest"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// startPlanAgents runs a plan-only node agent per node, each with its own
// node's credentials and the facts of a profile (or a facts file), until
// the test ends.
func startPlanAgents(t *testing.T, c *kubetest.Cluster, facts map[string]*bpf.Facts) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for node, f := range facts {
		cfg, err := c.PodToken(ctx, agentNS, agentSA, node)
		if err != nil {
			t.Fatal(err)
		}
		cl, err := client.NewWithWatch(cfg, client.Options{Scheme: kubetest.Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		n := &corev1.Node{}
		if err := cl.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
			t.Fatal(err)
		}
		n.Labels = map[string]string{"probectl.dev/pool": "tracing"}
		if _, err := c.Clientset().CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		fc, err := fleet.NewClient(cfg)
		if err != nil {
			t.Fatal(err)
		}
		a := &fleet.NodeAgent{Client: fc, Node: node, Facts: f}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := a.Run(ctx, 5*time.Second); err != nil {
				t.Errorf("agent of %s: %v", node, err)
			}
		}()
	}
}

// TestPlanOnlyAgents: plan-only agents that publish the facts of the
// five profiles (and one facts file lacking a function) write a record
// per node with the route table's routes, and the ClusterProbeSet's
// roll-up, conditions and printer columns; a new generation is planned
// again; a deleted ClusterProbeSet's records are removed by their agents.
// (Node-wide kernel probes are a ClusterProbeSet's; its records are in
// the agents' namespace, named cluster.NAME.NODE.)
func TestPlanOnlyAgents(t *testing.T) {
	c, admin := setup(t)
	ctx := context.Background()
	facts := map[string]*bpf.Facts{}
	for _, n := range planNodes {
		f, err := bpf.Profile(n.profile)
		if err != nil {
			t.Fatal(err)
		}
		facts[n.node] = f
	}
	old, _ := bpf.Profile("linux-6.12-amd64")
	old.Source, old.Name, old.Functions = "file", "old.json", []string{"vfs_read", "vfs_write"}
	facts["amd64-old"] = old
	startPlanAgents(t, c, facts)

	src, err := os.ReadFile("testdata/fleet.hcl")
	if err != nil {
		t.Fatal(err)
	}
	ns := agentNS
	ps := &v1alpha1.ClusterProbeSet{ObjectMeta: metav1.ObjectMeta{Name: "vfs"},
		Spec: v1alpha1.ProbeSetSpec{HCL: string(src), NodeSelector: map[string]string{"probectl.dev/pool": "tracing"}, Mode: v1alpha1.ModePlan}}
	if err := admin.Create(ctx, ps); err != nil {
		t.Fatal(err)
	}
	waitStatus := func(what string, ok func(st *v1alpha1.ProbeSetStatus) bool) *v1alpha1.ClusterProbeSet {
		t.Helper()
		var got v1alpha1.ClusterProbeSet
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
			if err := admin.Get(ctx, client.ObjectKeyFromObject(ps), &got); err != nil {
				return false, err
			}
			return got.Status.ObservedGeneration == got.Generation && ok(&got.Status), nil
		})
		if err != nil {
			t.Fatalf("%s: %v; status %+v", what, err, got.Status)
		}
		return &got
	}
	got := waitStatus("every node planned", func(st *v1alpha1.ProbeSetStatus) bool { return st.Planned == 5 && st.Failed == 1 })
	if got.Status.Selected != 6 || got.Status.Applied != 0 {
		t.Errorf("status %+v", got.Status)
	}
	for typ, want := range map[string]metav1.ConditionStatus{v1alpha1.ConditionPlanned: metav1.ConditionFalse,
		v1alpha1.ConditionApplied: metav1.ConditionFalse, v1alpha1.ConditionDegraded: metav1.ConditionTrue} {
		cond := meta.FindStatusCondition(got.Status.Conditions, typ)
		if cond == nil || cond.Status != want || cond.ObservedGeneration != got.Generation {
			t.Errorf("condition %s: %+v, want %s", typ, cond, want)
		}
	}
	records := func() map[string]string {
		var list v1alpha1.ProbeSetNodeList
		if err := admin.List(ctx, &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, r := range list.Items {
			var s []string
			for _, p := range r.Status.Probes {
				s = append(s, fmt.Sprintf("%s %s %s", p.Address, p.Route, strings.Join(p.Attach, "+")))
			}
			m[r.Name] = fmt.Sprintf("%s: %s%s", r.Status.Phase, strings.Join(s, "; "), strings.Join(r.Status.Errors, " | "))
		}
		return m
	}
	want := map[string]string{"cluster.vfs.amd64-old": `Failed: vfs.hcl:18:16: Function not found: "do_sys_openat2" is not a probe-able function in the target kernel (linux 6.12 x86_64 (file old.json)).`}
	for node, routes := range wantRoutes {
		want["cluster.vfs."+node] = "Planned: " + routes
	}
	if d := cmp.Diff(want, records()); d != "" {
		t.Errorf("records (-want +got):\n%s", d)
	}

	// kubectl get probesets: the printer columns, from the server's table.
	var table metav1.Table
	err = c.Clientset().RESTClient().Get().AbsPath("/apis/probectl.dev/v1alpha1/clusterprobesets").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").Do(ctx).Into(&table)
	if err != nil {
		t.Fatal(err)
	}
	var cols []string
	for _, col := range table.ColumnDefinitions {
		cols = append(cols, col.Name)
	}
	if len(table.Rows) != 1 {
		t.Fatalf("table rows %d", len(table.Rows))
	}
	row := fmt.Sprint(table.Rows[0].Cells[:6])
	if got, want := strings.Join(cols, " ")+" | "+row, "Name Mode Selected Planned Applied Failed Age | [vfs plan 6 5 0 1]"; got != want {
		t.Errorf("kubectl get probesets: %q, want %q", got, want)
	}

	// A new generation: one probe, which every node can run.
	got.Spec.HCL = strings.SplitN(string(src), `probe "kernel" "opens"`, 2)[0]
	if err := admin.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	got = waitStatus("generation 2 planned", func(st *v1alpha1.ProbeSetStatus) bool { return st.Planned == 6 && st.Failed == 0 })
	if cond := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionPlanned); cond == nil || cond.Status != metav1.ConditionTrue || cond.ObservedGeneration != 2 {
		t.Errorf("Planned: %+v", cond)
	}
	if cond := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionDegraded); cond == nil || cond.Status != metav1.ConditionFalse {
		t.Errorf("Degraded: %+v", cond)
	}
	if r := records()["cluster.vfs.amd64-old"]; r != "Planned: kernel.vfs_latency rethook kprobe.session" {
		t.Errorf("amd64-old after the fix: %s", r)
	}

	// Deleted: every agent removes its record (no garbage collector here).
	if err := admin.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		return len(records()) == 0, nil
	})
	if err != nil {
		t.Errorf("records left after the ProbeSet was deleted: %v", records())
	}
}
