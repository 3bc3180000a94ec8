package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/fleet"
	"github.com/probectl/probectl/fleet/api/v1alpha1"
	"github.com/probectl/probectl/fleet/kubetest"
	"github.com/rogpeppe/go-internal/diff"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestPlanCluster runs "probectl plan -cluster" against a real API server
// whose nodes published the facts of the five profiles (and one node
// published none, one is not selected), for a spec file and for a
// ProbeSet, and compares the output with testdata/golden/cluster.plan.
func TestPlanCluster(t *testing.T) {
	c := kubetest.Start(t)
	ctx := context.Background()
	if _, err := kubetest.Apply(ctx, c.Admin, false, "../../deploy/kubernetes/crds/probectl.dev_nodefacts.yaml",
		"../../deploy/kubernetes/crds/probectl.dev_probesets.yaml", "../../deploy/kubernetes/crds/probectl.dev_clusterprobesets.yaml"); err != nil {
		t.Fatal(err)
	}
	admin, err := client.New(c.Admin, client.Options{Scheme: kubetest.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	pool := map[string]string{"pool": "tracing"}
	for _, n := range []struct{ node, profile string }{
		{"n1", "linux-6.1-amd64"}, {"n2", "linux-6.12-amd64"}, {"n3", "linux-7.2-amd64"},
		{"n4", "linux-6.12-arm64"}, {"n5", "linux-7.2-arm64"}, {"n6", ""}, {"other", ""}, {"n7", "old"},
	} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.node, Labels: pool}}
		if n.node == "other" {
			node.Labels = nil
		}
		if err := admin.Create(ctx, node); err != nil {
			t.Fatal(err)
		}
		if n.profile == "" {
			continue
		}
		var f *bpf.Facts
		if n.profile == "old" {
			// A kernel without do_sys_openat2: facts from a file, with their functions.
			f, err = bpf.Profile("linux-6.12-amd64")
			f.Source, f.Name, f.Functions = "file", "old.json", []string{"vfs_read", "vfs_write"}
		} else {
			f, err = bpf.Profile(n.profile)
		}
		if err != nil {
			t.Fatal(err)
		}
		nf, err := fleet.NodeFactsOf(n.node, f)
		if err != nil {
			t.Fatal(err)
		}
		if err := admin.Create(ctx, nf); err != nil {
			t.Fatal(err)
		}
	}
	src, err := os.ReadFile("../../fleet/testdata/fleet.hcl")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "fleet.hcl"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	ps := &v1alpha1.ClusterProbeSet{ObjectMeta: metav1.ObjectMeta{Name: "fleet"},
		Spec: v1alpha1.ProbeSetSpec{HCL: string(src), NodeSelector: pool, Mode: v1alpha1.ModePlan}}
	if err := admin.Create(ctx, ps); err != nil {
		t.Fatal(err)
	}

	path, err := filepath.Abs("testdata/golden/cluster.plan")
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir) // the spec's file name is part of the digest: keep it short
	var out bytes.Buffer
	for _, args := range [][]string{
		{"plan", "-cluster", "-kubeconfig", c.Kubeconfig, "-selector", "pool=tracing", "fleet.hcl"},
		{"plan", "-cluster", "-kubeconfig", c.Kubeconfig, "-clusterprobeset", "fleet"},
		{"plan", "-cluster", "-kubeconfig", c.Kubeconfig, "-tenant", "shop", "-selector", "pool=tracing", "fleet.hcl"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(args, &stdout, &stderr)
		out.WriteString("$ probectl " + string(bytes.ReplaceAll([]byte(joinArgs(args)), []byte(dir), []byte("DIR"))) + "\n")
		out.Write(bytes.ReplaceAll(stdout.Bytes(), []byte(dir), []byte("DIR")))
		out.Write(stderr.Bytes())
		out.WriteString("exit " + string(rune('0'+code)) + "\n\n")
	}
	out = *bytes.NewBuffer(bytes.ReplaceAll(out.Bytes(), []byte(c.Kubeconfig), []byte("KUBECONFIG")))
	if *update {
		if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if !bytes.Equal(want, out.Bytes()) {
		t.Errorf("%s differs from the output (run go test ./cmd/probectl -run TestPlanCluster -update and review the diff):\n%s",
			path, diff.Diff(path, want, "output", out.Bytes()))
	}
}

func joinArgs(args []string) string {
	var b bytes.Buffer
	for i, a := range args {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(a)
	}
	return b.String()
}
