package main

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/fleet"
	"github.com/probectl/probectl/fleet/api/v1alpha1"
	"github.com/probectl/probectl/fleet/kubetest"
	"github.com/probectl/probectl/internal/engine"
	"github.com/probectl/probectl/runtime"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const kubeAgentSpec = `probe "tracepoint" "opens" {
  event = "syscalls:sys_enter_openat"
  on_entry {
    count "calls" { by = [comm] }
  }
}
`

// TestKubeAgentApplies runs the node agents of two pretend nodes on this
// host (fleet.NodeAgent with the host's live facts and the agent's atomic
// apply, each with its own pod-bound credentials, state and workspace)
// against a real API server: a ClusterProbeSet in mode apply is applied on both
// (digest, probes, hits in the records); probes destroyed behind an
// agent's back are applied again; a change the kernel cannot run fails
// at its spec line and leaves the applied probes live; deleting the
// ProbeSet destroys them on both.
func TestKubeAgentApplies(t *testing.T) {
	if err := bpf.CheckPrivileges(); err != nil {
		t.Skipf("applying probes needs root: %v", err)
	}
	c := kubetest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	objs, err := kubetest.ReadObjects("../../deploy/kubernetes/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, r := range objs[0].Object["resources"].([]any) {
		paths = append(paths, "../../deploy/kubernetes/"+r.(string))
	}
	if _, err := kubetest.Apply(ctx, c.Admin, false, paths...); err != nil {
		t.Fatal(err)
	}
	admin, err := client.New(c.Admin, client.Options{Scheme: kubetest.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	facts, err := bpf.Detect(bpf.DetectOptions{Functions: true})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// Two pretend nodes on this host, each with its own credentials,
	// state directory and workspaces, as two DaemonSet pods would have.
	done := make(chan error, 2)
	start := func(node string) (*globals, *engine.KubeApplier) {
		cfg, err := c.PodToken(ctx, "probectl-system", "probectl-agent", node)
		if err != nil {
			t.Fatal(err)
		}
		g := &globals{stateDir: t.TempDir(), lockTimeout: 10 * time.Second}
		applier := engine.NewKubeApplier(g.engineWorkspace(), log, 1000)
		fc, err := fleet.NewClient(cfg)
		if err != nil {
			t.Fatal(err)
		}
		agent := &fleet.NodeAgent{Client: fc, Node: node, Facts: facts, Applier: applier, Log: log}
		go func() { done <- agent.Run(ctx, time.Second) }()
		return g, applier
	}
	g, applier := start("host")
	gB, applierB := start("host-b")

	// Node-wide (this process's openat calls, outside any pod): a
	// ClusterProbeSet.
	ps := &v1alpha1.ClusterProbeSet{ObjectMeta: metav1.ObjectMeta{Name: "opens-" + strings.ToLower(t.Name()[4:])},
		Spec: v1alpha1.ProbeSetSpec{HCL: kubeAgentSpec, Mode: v1alpha1.ModeApply}}
	if err := admin.Create(ctx, ps); err != nil {
		t.Fatal(err)
	}
	asSet := &v1alpha1.ProbeSet{ObjectMeta: metav1.ObjectMeta{Name: ps.Name}} // no namespace: the cluster's
	ws, wsB := fleet.Workspace("host", asSet), fleet.Workspace("host-b", asSet)
	defer applier.Destroy(context.Background(), ws)
	defer applierB.Destroy(context.Background(), wsB)
	recordOf := func(node string, gen int64, phase v1alpha1.Phase) *v1alpha1.ProbeSetNode {
		t.Helper()
		var r v1alpha1.ProbeSetNode
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
			err := admin.Get(ctx, client.ObjectKey{Namespace: fleet.ClusterNamespace, Name: "cluster." + ps.Name + "." + node}, &r)
			return err == nil && r.Status.ObservedGeneration == gen && r.Status.Phase == phase, nil
		})
		if err != nil {
			t.Fatalf("%s's record of generation %d %s: %+v", node, gen, phase, r.Status)
		}
		return &r
	}
	record := func(gen int64, phase v1alpha1.Phase) *v1alpha1.ProbeSetNode {
		t.Helper()
		return recordOf("host", gen, phase)
	}
	// probesIn counts the probes in a workspace; one the agent removed
	// whole (as it does once no ProbeSet wants it), even while this reads
	// it, holds none.
	probesIn := func(g *globals, ws string) int {
		w, err := runtime.Open(g.stateDir, ws)
		if errors.Is(err, fs.ErrNotExist) {
			return 0
		}
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		s, err := w.Inspect() // no lock: the agent may be applying
		if errors.Is(err, fs.ErrNotExist) {
			return 0
		}
		if err != nil {
			t.Fatal(err)
		}
		return len(s.Probes)
	}
	probes := func() int { return probesIn(g, ws) }

	digest := fleet.Digest(map[string][]byte{ps.Name + ".hcl": []byte(kubeAgentSpec)})
	r := record(1, v1alpha1.PhaseApplied)
	if r.Status.AppliedDigest != digest || r.Status.SpecDigest != digest {
		t.Errorf("applied digest %s, spec digest %s, want %s", r.Status.AppliedDigest, r.Status.SpecDigest, digest)
	}
	if len(r.Status.Probes) != 1 || r.Status.Probes[0].Route != "tracepoint" {
		t.Errorf("probes %+v", r.Status.Probes)
	}
	if n := probes(); n != 1 {
		t.Errorf("%d probes applied in %s, want 1", n, ws)
	}
	if rb := recordOf("host-b", 1, v1alpha1.PhaseApplied); rb.Status.AppliedDigest != digest {
		t.Errorf("host-b applied %s, want %s", rb.Status.AppliedDigest, digest)
	}
	if n := probesIn(gB, wsB); n != 1 {
		t.Errorf("%d probes applied in host-b's %s, want 1", n, wsB)
	}
	// The counters reach the record at the next resync: 100 openat calls
	// of this process are among the hits.
	for i := 0; i < 100; i++ {
		f, err := os.Open("/proc/self/stat")
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := admin.Get(ctx, client.ObjectKeyFromObject(r), r); err != nil {
			return false, err
		}
		p := r.Status.Probes
		return len(p) == 1 && p[0].Hits != nil && *p[0].Hits >= 100, nil
	})
	if err != nil {
		t.Errorf("hits in the record: %+v", r.Status.Probes)
	} else if p := r.Status.Probes[0]; p.Missed == nil || p.Drops == nil || *p.Drops != 0 || *p.Links != 1 {
		t.Errorf("record's probe: links %v missed %v drops %v", p.Links, p.Missed, p.Drops)
	}

	// Probes destroyed behind the agent's back (by hand, a reboot) are
	// applied again at the next resync.
	if err := applier.Destroy(ctx, ws); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return probes() == 1, nil
	})
	if err != nil {
		t.Errorf("%d probes in %s after destroying them by hand, want them applied again", probes(), ws)
	}

	// A spec this kernel cannot run: the record says where, the probes stay.
	if err := admin.Get(ctx, client.ObjectKeyFromObject(ps), ps); err != nil {
		t.Fatal(err)
	}
	ps.Spec.HCL = kubeAgentSpec + "\nprobe \"tracepoint\" \"none\" {\n  event = \"syscalls:probectl_no_such_event\"\n  on_entry {\n    count \"n\" {}\n  }\n}\n"
	if err := admin.Update(ctx, ps); err != nil {
		t.Fatal(err)
	}
	r = record(2, v1alpha1.PhaseFailed)
	if len(r.Status.Errors) != 1 || !strings.HasPrefix(r.Status.Errors[0], ps.Name+".hcl:9:11: Tracepoint not found") {
		t.Errorf("errors %q", r.Status.Errors)
	}
	if r.Status.AppliedDigest != digest {
		t.Errorf("applied digest %s after a failure, want the previous %s", r.Status.AppliedDigest, digest)
	}
	if n := probes(); n != 1 {
		t.Errorf("%d probes in %s after a failed change, want the previous 1", n, ws)
	}
	if rb := recordOf("host-b", 2, v1alpha1.PhaseFailed); rb.Status.AppliedDigest != digest || probesIn(gB, wsB) != 1 {
		t.Errorf("host-b after the failed change: applied %s, %d probes", rb.Status.AppliedDigest, probesIn(gB, wsB))
	}

	// Deleted: the agent destroys the workspace's probes.
	if err := admin.Delete(ctx, ps); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		return probes() == 0 && probesIn(gB, wsB) == 0, nil
	})
	if err != nil {
		t.Errorf("%d probes left in %s and %d in %s after the ProbeSet was deleted", probes(), ws, probesIn(gB, wsB), wsB)
	}
	cancel()
	for range 2 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}
