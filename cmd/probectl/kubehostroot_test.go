package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/probectl/probectl/internal/testenv"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/probectl/probectl/fleet"
	"github.com/probectl/probectl/fleet/api/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// hostRootWork calls hr_target N times; hostRootNoTarget is node-b's build
// of the same binary, without hr_target.
const (
	hostRootWork = `__attribute__((noinline)) long hr_target(long x) { return x * 2; }
int main(int argc, char **argv) {
	long n = 0, s = 0;
	for (char *p = argv[1]; *p; p++) n = n * 10 + (*p - '0');
	for (long i = 0; i < n; i++) s += hr_target(i);
	return n > 1 && s == 0;
}
`
	hostRootNoTarget = `__attribute__((noinline)) long hr_other(long x) { return x * 3; }
int main(int argc, char **argv) { return hr_other(argc) == 0; }
`
)

// hostRootTree lays out a pretend host's "/" at root: the binary at
// /usr/lib/hr/hr-work, reached through a relative link /usr/bin/hr-work
// and an absolute one /usr/local/bin/hr-work (resolved within root, as
// the host resolves it), and /usr/lib/evil.so, a link that climbs out of
// root to the binary outside it.
func hostRootTree(t *testing.T, root, bin, outside string) string {
	t.Helper()
	real := filepath.Join(root, "usr", "lib", "hr", "hr-work")
	for _, d := range []string{filepath.Dir(real), filepath.Join(root, "usr", "bin"), filepath.Join(root, "usr", "local", "bin")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(real, b, 0o755); err != nil {
		t.Fatal(err)
	}
	up := strings.Repeat("../", strings.Count(root, "/")+2)
	for target, link := range map[string]string{
		"../lib/hr/hr-work": "usr/bin/hr-work",
		"/usr/bin/hr-work":  "usr/local/bin/hr-work",
		up + outside[1:]:    "usr/lib/evil.so",
	} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	return real
}

// TestKubeHostRoots: two pretend nodes whose agents read the host's
// binaries under -host-root, each a different tree: node-a's binary has
// hr_target, node-b's build of it lacks it. The agents publish the
// binaries their ClusterProbeSet names (node-wide: the workload is a host
// process in no pod); "plan -cluster" plans each node from its
// NodeFacts only: node-a can run the spec, node-b cannot (naming the
// function at its line), and a binary neither published is reported not
// checked (exit 2), never ok. Applied, node-b's agent fails with the very
// error the plan predicted while node-a's uprobe, on the file under its
// root, counts a host process's calls exactly. A link that climbs out of
// node-b's root stays inside it: its published record says not found.
func TestKubeHostRoots(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("applying probes needs root")
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		testenv.Absent(t, "gcc is missing")
	}
	ctx := context.Background()
	c, admin := kubeLab(t)
	dir := t.TempDir()
	outside := buildC(t, dir, "hr-work", hostRootWork) // has hr_target; outside both roots
	hostA := hostRootTree(t, filepath.Join(dir, "host-a"), outside, outside)
	hostRootTree(t, filepath.Join(dir, "host-b"), buildC(t, dir, "hr-none", hostRootNoTarget), outside)

	ns := fleet.ClusterNamespace // where a ClusterProbeSet's records are
	nodes := []string{"hr-node-a", "hr-node-b"}
	agents := map[string]*kubeAgent{}
	states := map[string]string{}
	for _, n := range nodes {
		cfg, err := c.PodToken(ctx, "probectl-system", "probectl-agent", n)
		if err != nil {
			t.Fatal(err)
		}
		kc := filepath.Join(dir, n+".kubeconfig")
		if err := c.WriteKubeconfig(kc, cfg); err != nil {
			t.Fatal(err)
		}
		states[n] = filepath.Join(dir, "state-"+n)
		root := filepath.Join(dir, "host-"+n[len(n)-1:])
		agents[n] = startKubeAgent(t, n, kc, states[n], "", "-host-root", root, "-publish-binary", "/usr/lib/evil.so")
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			for _, ws := range workspacesOf(states[n]) {
				var out strings.Builder
				run([]string{"-state-dir", states[n], "-workspace", ws, "destroy", "-auto-approve"}, &out, &out)
			}
		}
	})

	hcl := "probe \"user\" \"hr\" {\n  binary    = \"/usr/local/bin/hr-work\"\n  functions = [\"hr_target\"]\n  on_entry {\n    count \"calls\" {}\n  }\n}\n"
	ps := &v1alpha1.ClusterProbeSet{ObjectMeta: metav1.ObjectMeta{Name: "hr"},
		Spec: v1alpha1.ProbeSetSpec{HCL: hcl, Mode: v1alpha1.ModePlan}}
	if err := admin.Create(ctx, ps); err != nil {
		t.Fatal(err)
	}
	published := waitPublished(t, admin, nodes, "/usr/local/bin/hr-work", agents)

	// What each node published: node-a's binary has hr_target, node-b's
	// not; the hostile link stays inside node-b's root (not found there).
	for _, n := range nodes {
		evil := published[n]["/usr/lib/evil.so"]
		if evil.Error == "" || !strings.Contains(evil.Error, "no such file") || len(evil.Functions) > 0 {
			t.Errorf("%s published /usr/lib/evil.so as %+v, want not found within its root", n, evil)
		}
		if b := published[n]["/usr/local/bin/hr-work"]; b.Path != "/usr/local/bin/hr-work" || b.BuildID == "" || len(b.Functions) == 0 {
			t.Errorf("%s published hr-work as path %q, build id %q, %d bytes of functions", n, b.Path, b.BuildID, len(b.Functions))
		}
	}

	// plan -cluster from the NodeFacts: node-a can, node-b cannot.
	line := strings.Count(hcl[:strings.Index(hcl, `["hr_target"]`)], "\n") + 1
	cp, code := planClusterJSON(t, c.Kubeconfig, "-clusterprobeset", "hr")
	if code != 1 {
		t.Errorf("plan -cluster exit %d, want 1 (node-b cannot)", code)
	}
	byNode := map[string]*fleet.NodePlan{}
	for _, np := range cp.Nodes {
		byNode[np.Node] = np
	}
	a, b := byNode["hr-node-a"], byNode["hr-node-b"]
	if a == nil || a.Status != fleet.StatusOK || len(a.Probes) != 1 || a.Probes[0].Route != "uprobe" {
		t.Fatalf("node-a's plan %+v, want ok with the uprobe", a)
	}
	wantErr := fmt.Sprintf("hr.hcl:%d:", line)
	if b == nil || b.Status != fleet.StatusCannot || len(b.Errors) != 1 || !strings.HasPrefix(b.Errors[0], wantErr) || !strings.Contains(b.Errors[0], `"hr_target"`) {
		t.Fatalf("node-b's plan %+v, want it unable, at %s, naming hr_target", b, wantErr)
	}

	// A binary no node published: not checked on either, exit 2.
	other := filepath.Join(dir, "other.hcl")
	os.WriteFile(other, []byte(strings.ReplaceAll(hcl, "/usr/local/bin/hr-work", "/usr/bin/not-published")), 0o644)
	cp2, code := planClusterJSON(t, c.Kubeconfig, other)
	if code != 2 {
		t.Errorf("plan -cluster of an unpublished binary: exit %d, want 2", code)
	}
	for _, np := range cp2.Nodes {
		if np.Node != "hr-node-a" && np.Node != "hr-node-b" {
			continue
		}
		if np.Status != fleet.StatusUnchecked || len(np.Unchecked) != 1 || !strings.Contains(np.Unchecked[0], "/usr/bin/not-published is not in the target's facts") ||
			!strings.Contains(np.Unchecked[0], "-publish-binary") {
			t.Errorf("%s: %+v, want /usr/bin/not-published not checked", np.Node, np)
		}
	}
	var human, stderr bytes.Buffer
	run([]string{"plan", "-cluster", "-kubeconfig", c.Kubeconfig, other}, &human, &stderr)
	if !strings.Contains(human.String(), "hr-node-b  ") || !strings.Contains(human.String(), "not checked on hr-node-b: ") {
		t.Errorf("plan -cluster's human view:\n%s%s", human.String(), stderr.String())
	}

	// Applied: node-b fails exactly as planned; node-a counts a host
	// process running the binary by its own path.
	var cur v1alpha1.ClusterProbeSet
	if err := admin.Get(ctx, types.NamespacedName{Name: "hr"}, &cur); err != nil {
		t.Fatal(err)
	}
	cur.Spec.Mode = v1alpha1.ModeApply
	if err := admin.Update(ctx, &cur); err != nil {
		t.Fatal(err)
	}
	ra := waitRecord(t, admin, ns, "cluster.hr.hr-node-a", cur.Generation, v1alpha1.PhaseApplied, agents["hr-node-a"])
	rb := waitRecord(t, admin, ns, "cluster.hr.hr-node-b", cur.Generation, v1alpha1.PhaseFailed, agents["hr-node-b"])
	if len(rb.Status.Errors) != 1 || rb.Status.Errors[0] != b.Errors[0] {
		t.Errorf("node-b's agent failed with %q; the plan said %q", rb.Status.Errors, b.Errors[0])
	}
	if len(ra.Status.Probes) != 1 {
		t.Fatalf("node-a's record: %+v", ra.Status)
	}
	if out, err := exec.Command(hostA, "13").CombinedOutput(); err != nil {
		t.Fatalf("workload: %v\n%s", err, out)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		got := agents["hr-node-a"].metric(`probectl_count_user_hr_calls_total{probeset="hr"}`)
		if got == 13 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node-a counted %v calls, want 13\n%s", got, agents["hr-node-a"].log)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitPublished waits until every node's NodeFacts hold the binary name,
// and returns what each published, by binary name.
func waitPublished(t *testing.T, admin client.Client, nodes []string, name string, agents map[string]*kubeAgent) map[string]map[string]v1alpha1.NodeBinary {
	t.Helper()
	out := map[string]map[string]v1alpha1.NodeBinary{}
	deadline := time.Now().Add(90 * time.Second)
	for _, n := range nodes {
		for {
			var nf v1alpha1.NodeFacts
			if err := admin.Get(context.Background(), types.NamespacedName{Name: n}, &nf); err == nil {
				out[n] = map[string]v1alpha1.NodeBinary{}
				for _, b := range nf.Spec.Binaries {
					out[n][b.Name] = b
				}
				if _, ok := out[n][name]; ok {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never published %s: %v\n%s", n, name, out[n], agents[n].log)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return out
}

// waitRecord waits for a record of generation gen in phase.
func waitRecord(t *testing.T, admin client.Client, ns, name string, gen int64, phase v1alpha1.Phase, agent *kubeAgent) *v1alpha1.ProbeSetNode {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		var r v1alpha1.ProbeSetNode
		err := admin.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &r)
		if err == nil && r.Status.ObservedGeneration == gen && r.Status.Phase == phase && r.Status.SpecDigest != "" {
			if phase != v1alpha1.PhaseApplied || len(r.Status.Probes) > 0 {
				return &r
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("record %s: %+v (%v), want phase %s\n%s", name, r.Status, err, phase, agent.log)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// planClusterJSON runs "plan -cluster -json" and returns its plan and
// exit code.
func planClusterJSON(t *testing.T, kubeconfig string, args ...string) (*fleet.ClusterPlan, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(append([]string{"plan", "-cluster", "-json", "-kubeconfig", kubeconfig}, args...), &stdout, &stderr)
	var cp fleet.ClusterPlan
	if err := json.Unmarshal(stdout.Bytes(), &cp); err != nil {
		t.Fatalf("plan -cluster %v: exit %d, %v\n%s%s", args, code, err, stdout.String(), stderr.String())
	}
	return &cp, code
}
