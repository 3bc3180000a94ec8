package fleet_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/fleet"
	"github.com/probectl/probectl/fleet/kubetest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The nodes of the plan tests: the five profiles, a node whose facts
// file lacks a function the spec probes, a selected node with no facts,
// and a node the selector leaves out.
var planNodes = []struct{ node, profile string }{
	{"amd64-61", "linux-6.1-amd64"},
	{"amd64-612", "linux-6.12-amd64"},
	{"amd64-72", "linux-7.2-amd64"},
	{"arm64-612", "linux-6.12-arm64"},
	{"arm64-72", "linux-7.2-arm64"},
}

// wantRoutes is the route table for fleet.hcl: entry+exit probe, entry-only probe.
var wantRoutes = map[string]string{
	"amd64-61":  "kernel.opens trampoline fentry; kernel.vfs_latency trampoline fentry+fexit",
	"amd64-612": "kernel.opens ftrace kprobe.multi; kernel.vfs_latency rethook kprobe.session",
	"amd64-72":  "kernel.opens ftrace kprobe.multi; kernel.vfs_latency fgraph kprobe.session",
	"arm64-612": "kernel.opens trampoline fentry; kernel.vfs_latency trampoline fentry+fexit",
	"arm64-72":  "kernel.opens ftrace kprobe.multi; kernel.vfs_latency fgraph kprobe.session",
}

// PublishPlanNodes makes the nodes of the plan tests, each publishing its
// facts with its own agent's credentials.
func publishPlanNodes(t *testing.T, c *kubetest.Cluster) {
	t.Helper()
	ctx := context.Background()
	cs := c.Clientset()
	publish := func(node string, f *bpf.Facts) {
		nf, err := fleet.NodeFactsOf(node, f)
		if err != nil {
			t.Fatal(err)
		}
		if err := agentClient(t, c, node).Create(ctx, nf); err != nil {
			t.Fatalf("publish %s: %v", node, err)
		}
	}
	for _, n := range planNodes {
		f, err := bpf.Profile(n.profile)
		if err != nil {
			t.Fatal(err)
		}
		publish(n.node, f)
	}
	// A node whose kernel lacks do_sys_openat2: a facts file with its functions.
	old, _ := bpf.Profile("linux-6.12-amd64")
	old.Source, old.Name, old.Functions = "file", "old.json", []string{"vfs_read", "vfs_write"}
	publish("amd64-old", old)
	for _, n := range []string{"no-agent", "gpu-1"} {
		if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Label every node but gpu-1 for the selector.
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		if n.Name == "gpu-1" {
			continue
		}
		n.Labels = map[string]string{"probectl.dev/pool": "tracing"}
		if _, err := cs.CoreV1().Nodes().Update(ctx, &n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func routes(n *fleet.NodePlan) string {
	var s []string
	for _, p := range n.Probes {
		s = append(s, fmt.Sprintf("%s %s %s", p.Address, p.Route, strings.Join(p.Attach, "+")))
	}
	return strings.Join(s, "; ")
}

// TestPlanCluster plans a spec for every node of a real cluster from the
// facts each node's agent published: five kernels, five routes as the
// route table says, a node that cannot run the spec (its error at the
// spec line), a node with no facts, and a node the selector leaves out.
func TestPlanCluster(t *testing.T) {
	c, _ := setup(t)
	publishPlanNodes(t, c)
	src, err := os.ReadFile("testdata/fleet.hcl")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"fleet.hcl": src}
	fc, err := fleet.NewClient(c.Admin)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := fleet.PlanCluster(context.Background(), fc, files, map[string]string{"probectl.dev/pool": "tracing"}, "")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, n := range cp.Nodes {
		if n.OK() {
			got[n.Node] = routes(n)
		} else {
			got[n.Node] = "cannot: " + strings.Join(n.Errors, " | ")
		}
	}
	want := map[string]string{"amd64-old": `cannot: fleet.hcl:18:16: Function not found: "do_sys_openat2" is not a probe-able function in the target kernel (linux 6.12 x86_64 (file NodeFacts amd64-old)).`}
	for k, v := range wantRoutes {
		want[k] = v
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("routes per node (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"no-agent"}, cp.NoFacts); d != "" {
		t.Errorf("nodes without facts (-want +got):\n%s", d)
	}
	if cp.Digest != fleet.Digest(files) || len(cp.Digest) != 16 {
		t.Errorf("digest %q", cp.Digest)
	}
	for _, n := range cp.Nodes {
		for _, p := range n.Probes {
			if p.Reason == "" {
				t.Errorf("%s %s: no reason", n.Node, p.Address)
			}
		}
	}
}
