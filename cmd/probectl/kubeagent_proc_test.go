package main

import (
	"bufio"
	"context"
	"fmt"
	"github.com/probectl/probectl/internal/testenv"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/probectl/probectl/fleet"
	"github.com/probectl/probectl/fleet/api/v1alpha1"
	"github.com/probectl/probectl/fleet/kubetest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// kubeAgent is a node agent running as its own process, as a DaemonSet's
// pod would run it.
type kubeAgent struct {
	t    *testing.T
	node string
	cmd  *exec.Cmd
	base string
	log  *syncWriter
	done chan error
}

// startKubeAgent runs "probectl agent -kubernetes" for node, with the
// kubeconfig given, in a mount namespace of its own when prefix (a shell
// command run before it, e.g. a bind mount) is not empty.
func startKubeAgent(t *testing.T, node, kubeconfig, state, prefix string, extra ...string) *kubeAgent {
	t.Helper()
	args := append([]string{"-state-dir", state, "agent", "-kubernetes", "-node", node, "-kubeconfig", kubeconfig,
		"-listen", "127.0.0.1:0", "-log-json", "-status-interval", "1s"}, extra...)
	var cmd *exec.Cmd
	if prefix == "" {
		cmd = exec.Command("probectl", args...)
	} else {
		// probectl is the test binary, on the PATH TestMain made.
		cmd = exec.Command("unshare", append([]string{"--mount", "--propagation", "private", "sh", "-c",
			prefix + ` && exec probectl "$@"`, "sh"}, args...)...)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	a := &kubeAgent{t: t, node: node, cmd: cmd, log: &syncWriter{w: &strings.Builder{}}, done: make(chan error, 1)}
	cmd.Stderr = a.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		t.Fatalf("agent of %s: %v\n%s", node, err, a.log)
	}
	go func() { a.done <- cmd.Wait() }()
	i := strings.Index(line, "http://")
	a.base = strings.TrimSuffix(strings.Fields(line[i:])[0], "/metrics")
	t.Cleanup(func() { a.kill() })
	return a
}

func (a *kubeAgent) kill() {
	if a.cmd.ProcessState == nil {
		a.cmd.Process.Kill()
		<-a.done
	}
}

func (a *kubeAgent) metric(series string) float64 {
	a.t.Helper()
	resp, err := http.Get(a.base + "/metrics")
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return seriesValue(b, series)
}

// seriesValue is series' value in a scrape (-1: absent).
func seriesValue(scrape []byte, series string) float64 {
	for _, line := range strings.Split(string(scrape), "\n") {
		if v, ok := strings.CutPrefix(withoutApplied(line), series+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return -1
}

// TestKubeAgents: node agents, one process per pretend node, each with its
// own credentials (a token bound to a pod on its node) and workspace,
// apply a ProbeSet against a real kube-apiserver; the workload's exact
// counts reach each node's record and metrics; a change is applied with
// the unchanged probe counting on; a spec one node cannot run fails there
// alone, at its line, while that node's old probes count on; one agent's
// credentials cannot write the other's records; an agent killed and
// restarted reports the truth; deleting the ProbeSet removes everything.
func TestKubeAgents(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("applying probes needs root")
	}
	for _, p := range []string{"gcc", "unshare"} {
		if _, err := exec.LookPath(p); err != nil {
			testenv.Absent(t, "%s is missing", p)
		}
	}
	ctx := context.Background()
	c, admin := kubeLab(t)
	dir := t.TempDir()
	work := buildC(t, dir, "kwork", serveWork)
	// extra: a function node-a's binary has and node-b's lacks (node-b's
	// agent sees another file at the same path, in its mount namespace).
	withExtra := buildC(t, dir, "kextra", "__attribute__((noinline)) long extra(long x) { return x + 1; }\nint main(void) { return extra(0) != 1; }\n")
	withoutExtra := buildC(t, dir, "knoextra", "int main(void) { return 0; }\n")
	runWork := func(n int) {
		t.Helper()
		if out, err := exec.Command(work, strconv.Itoa(n)).CombinedOutput(); err != nil {
			t.Fatalf("workload: %v\n%s", err, out)
		}
	}

	// Node-wide (the workload runs outside any pod): a ClusterProbeSet,
	// its records in the agents' namespace.
	ns := fleet.ClusterNamespace
	nodes := []string{"node-a", "node-b"}
	agents := map[string]*kubeAgent{}
	kubeconfigs := map[string]string{}
	states := map[string]string{}
	for _, n := range nodes {
		cfg, err := c.PodToken(ctx, "probectl-system", "probectl-agent", n)
		if err != nil {
			t.Fatal(err)
		}
		kubeconfigs[n] = filepath.Join(dir, n+".kubeconfig")
		if err := c.WriteKubeconfig(kubeconfigs[n], cfg); err != nil {
			t.Fatal(err)
		}
		states[n] = filepath.Join(dir, "state-"+n)
	}
	nodeB := fmt.Sprintf("mount --bind '%s' '%s'", withoutExtra, withExtra) // temp paths: no quotes in them
	agents["node-a"] = startKubeAgent(t, "node-a", kubeconfigs["node-a"], states["node-a"], "")
	agents["node-b"] = startKubeAgent(t, "node-b", kubeconfigs["node-b"], states["node-b"], nodeB)
	t.Cleanup(func() {
		for _, n := range nodes {
			for _, ws := range workspacesOf(states[n]) {
				var out strings.Builder
				run([]string{"-state-dir", states[n], "-workspace", ws, "destroy", "-auto-approve"}, &out, &out)
			}
		}
	})

	probe := func(name, bin, fn string) string {
		return fmt.Sprintf("probe \"user\" %q {\n  binary    = %q\n  functions = [%q]\n  on_entry {\n    count \"calls\" {}\n  }\n}\n", name, bin, fn)
	}
	ps := &v1alpha1.ClusterProbeSet{ObjectMeta: metav1.ObjectMeta{Name: "calls"},
		Spec: v1alpha1.ProbeSetSpec{HCL: probe("kone", work, "target"), Mode: v1alpha1.ModeApply}}
	if err := admin.Create(ctx, ps); err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Name: "calls"}
	setHCL := func(hcl string) {
		t.Helper()
		var cur v1alpha1.ClusterProbeSet
		if err := admin.Get(ctx, key, &cur); err != nil {
			t.Fatal(err)
		}
		cur.Spec.HCL = hcl
		if err := admin.Update(ctx, &cur); err != nil {
			t.Fatal(err)
		}
	}
	record := func(node string) *v1alpha1.ProbeSetNode {
		var r v1alpha1.ProbeSetNode
		if err := admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: "cluster.calls." + node}, &r); err != nil {
			return nil
		}
		return &r
	}
	generation := func() int64 {
		var cur v1alpha1.ClusterProbeSet
		if err := admin.Get(ctx, key, &cur); err != nil {
			t.Fatal(err)
		}
		return cur.Generation
	}
	// wait waits until every node's record is of the current generation
	// in phase and its hits read want[node].
	wait := func(what string, phase map[string]v1alpha1.Phase, want map[string]string) {
		t.Helper()
		gen := generation()
		deadline := time.Now().Add(90 * time.Second)
		for {
			ok := true
			var got []string
			for _, n := range nodes {
				r := record(n)
				if r == nil {
					ok = false
					got = append(got, n+": no record")
					continue
				}
				got = append(got, fmt.Sprintf("%s: gen %d %s [%s] %v", n, r.Status.ObservedGeneration, r.Status.Phase, recordHits(r), r.Status.Errors))
				if r.Status.ObservedGeneration != gen || r.Status.Phase != phase[n] || recordHits(r) != want[n] {
					ok = false
				}
			}
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: want %v %v, got\n  %s\nnode-a log:\n%s\nnode-b log:\n%s", what, phase, want, strings.Join(got, "\n  "), agents["node-a"].log, agents["node-b"].log)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	applied := map[string]v1alpha1.Phase{"node-a": v1alpha1.PhaseApplied, "node-b": v1alpha1.PhaseApplied}

	// Applied on both nodes; 7 calls counted by each.
	wait("applied", applied, map[string]string{"node-a": "user.kone=0", "node-b": "user.kone=0"})
	runWork(7)
	wait("7 calls", applied, map[string]string{"node-a": "user.kone=7", "node-b": "user.kone=7"})
	for _, n := range nodes {
		if got := agents[n].metric(`probectl_count_user_kone_calls_total{probeset="calls"}`); got != 7 {
			t.Errorf("%s metrics: %v, want 7", n, got)
		}
	}

	// A second probe: the first is unchanged and counts on.
	setHCL(probe("kone", work, "target") + probe("ktwo", work, "target"))
	wait("two probes", applied, map[string]string{"node-a": "user.kone=7,user.ktwo=0", "node-b": "user.kone=7,user.ktwo=0"})
	runWork(3)
	wait("3 more calls", applied, map[string]string{"node-a": "user.kone=10,user.ktwo=3", "node-b": "user.kone=10,user.ktwo=3"})

	// A probe of a function node-b's binary lacks: node-a applies it,
	// node-b fails at the spec line and keeps its probes counting.
	third := probe("kone", work, "target") + probe("ktwo", work, "target") + probe("kextra", withExtra, "extra")
	setHCL(third)
	split := map[string]v1alpha1.Phase{"node-a": v1alpha1.PhaseApplied, "node-b": v1alpha1.PhaseFailed}
	wait("node-b fails", split, map[string]string{"node-a": "user.kextra=0,user.kone=10,user.ktwo=3", "node-b": "user.kone=10,user.ktwo=3"})
	rb := record("node-b")
	line := strings.Count(third[:strings.Index(third, `"extra"`)], "\n") + 1
	if len(rb.Status.Errors) == 0 || !strings.HasPrefix(rb.Status.Errors[0], fmt.Sprintf("calls.hcl:%d:", line)) {
		t.Errorf("node-b's errors %q, want calls.hcl:%d:...", rb.Status.Errors, line)
	}
	if ra := record("node-a"); rb.Status.AppliedDigest == ra.Status.AppliedDigest || rb.Status.SpecDigest != ra.Status.SpecDigest {
		t.Errorf("digests: node-b applied %s (spec %s), node-a applied %s (spec %s)", rb.Status.AppliedDigest, rb.Status.SpecDigest, ra.Status.AppliedDigest, ra.Status.SpecDigest)
	}
	runWork(2)
	wait("node-b's old probes count on", split, map[string]string{"node-a": "user.kextra=0,user.kone=12,user.ktwo=5", "node-b": "user.kone=12,user.ktwo=5"})
	if got := agents["node-b"].metric(`probectl_apply_errors_total{stage="compile"}`); got < 1 {
		t.Errorf("node-b's apply errors: %v", got)
	}
	// The roll-up.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var cur v1alpha1.ClusterProbeSet
		if err := admin.Get(ctx, key, &cur); err != nil {
			t.Fatal(err)
		}
		s := cur.Status
		deg := false
		for _, cnd := range s.Conditions {
			deg = deg || cnd.Type == v1alpha1.ConditionDegraded && cnd.Status == metav1.ConditionTrue
		}
		if s.ObservedGeneration == cur.Generation && s.Selected == 2 && s.Applied == 1 && s.Failed == 1 && deg {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ProbeSet status %+v", s)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// node-a's credentials cannot write node-b's record or facts.
	cfgA, err := c.PodToken(ctx, "probectl-system", "probectl-agent", "node-a")
	if err != nil {
		t.Fatal(err)
	}
	asA, err := client.New(cfgA, client.Options{Scheme: kubetest.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	forged := record("node-b")
	forged.Status.Phase = v1alpha1.PhaseApplied
	forged.Status.Errors = nil
	if err := asA.Status().Update(ctx, forged); !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
		t.Errorf("node-a writing node-b's record: %v, want a refusal", err)
	}
	var nf v1alpha1.NodeFacts
	if err := asA.Get(ctx, types.NamespacedName{Name: "node-b"}, &nf); err != nil {
		t.Fatal(err)
	}
	nf.Spec.Kernel = "0.0.1"
	if err := asA.Update(ctx, &nf); !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
		t.Errorf("node-a writing node-b's NodeFacts: %v, want a refusal", err)
	}

	// node-a's agent killed and restarted: nothing lost, the truth reported.
	agents["node-a"].kill()
	runWork(4)
	agents["node-a"] = startKubeAgent(t, "node-a", kubeconfigs["node-a"], states["node-a"], "")
	wait("after node-a's restart", split, map[string]string{"node-a": "user.kextra=0,user.kone=16,user.ktwo=9", "node-b": "user.kone=16,user.ktwo=9"})

	// Deleted: every node destroys it; nothing is left.
	if err := admin.Delete(ctx, &v1alpha1.ClusterProbeSet{ObjectMeta: metav1.ObjectMeta{Name: "calls"}}); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(60 * time.Second)
	for {
		var left []string
		for _, n := range nodes {
			if record(n) != nil {
				left = append(left, "record of "+n)
			}
			for _, ws := range workspacesOf(states[n]) {
				left = append(left, n+" workspace "+ws)
			}
		}
		for _, n := range nodes {
			pins, _ := filepath.Glob("/sys/fs/bpf/probectl/" + fleet.Workspace(n, &v1alpha1.ProbeSet{ObjectMeta: metav1.ObjectMeta{Name: "calls"}}))
			left = append(left, pins...)
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after delete, left: %v", left)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, n := range nodes {
		if err := agents[n].cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := <-agents[n].done; err != nil {
			t.Errorf("agent of %s on SIGTERM: %v", n, err)
		}
	}
}

// kubeManifests are what the node agents need of deploy/kubernetes (not
// the DaemonSet: the tests run the agents).
var kubeManifests = []string{"../../deploy/kubernetes/namespace.yaml", "../../deploy/kubernetes/crds/probectl.dev_probesets.yaml",
	"../../deploy/kubernetes/crds/probectl.dev_clusterprobesets.yaml",
	"../../deploy/kubernetes/crds/probectl.dev_probesetnodes.yaml", "../../deploy/kubernetes/crds/probectl.dev_nodefacts.yaml",
	"../../deploy/kubernetes/rbac.yaml", "../../deploy/kubernetes/admission.yaml"}

// kubeLab starts the lab's API server with what the node agents need of
// deploy/kubernetes, and returns it with an admin client.
func kubeLab(t *testing.T) (*kubetest.Cluster, client.Client) {
	t.Helper()
	c := kubetest.Start(t)
	if _, err := kubetest.Apply(context.Background(), c.Admin, false, kubeManifests...); err != nil {
		t.Fatal(err)
	}
	admin, err := client.New(c.Admin, client.Options{Scheme: kubetest.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c, admin
}

// workspacesOf lists the node agent's workspaces in a state dir.
func workspacesOf(state string) []string {
	entries, _ := os.ReadDir(state)
	var out []string
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), "k8s-") {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestKubePlanOnlyProfiles: plan-only agents publishing the built-in
// profiles' facts write, for a ProbeSet in plan mode, the route each
// kernel takes, as the route table says; nothing is applied. The roll-up
// counts five nodes planned.
func TestKubePlanOnlyProfiles(t *testing.T) {
	ctx := context.Background()
	c, admin := kubeLab(t)
	dir := t.TempDir()
	want := map[string]string{ // node → profile, route and link families
		"p61":     "linux-6.1-amd64 trampoline fentry,fexit",
		"p612":    "linux-6.12-amd64 rethook kprobe.session",
		"p72":     "linux-7.2-amd64 fgraph kprobe.session",
		"p612arm": "linux-6.12-arm64 trampoline fentry,fexit",
		"p72arm":  "linux-7.2-arm64 fgraph kprobe.session",
	}
	for node, w := range want {
		cfg, err := c.PodToken(ctx, "probectl-system", "probectl-agent", node)
		if err != nil {
			t.Fatal(err)
		}
		var n corev1.Node
		if err := admin.Get(ctx, types.NamespacedName{Name: node}, &n); err != nil {
			t.Fatal(err)
		}
		n.Labels = map[string]string{"pool": "profiles"}
		if err := admin.Update(ctx, &n); err != nil {
			t.Fatal(err)
		}
		kc := filepath.Join(dir, node+".kubeconfig")
		if err := c.WriteKubeconfig(kc, cfg); err != nil {
			t.Fatal(err)
		}
		startKubeAgent(t, node, kc, filepath.Join(dir, "state-"+node), "", "-facts", strings.Fields(w)[0])
	}
	ps := &v1alpha1.ClusterProbeSet{ObjectMeta: metav1.ObjectMeta{Name: "vfs"},
		Spec: v1alpha1.ProbeSetSpec{Mode: v1alpha1.ModePlan, NodeSelector: map[string]string{"pool": "profiles"},
			HCL: "probe \"kernel\" \"vfs\" {\n  functions = [\"vfs_read\"]\n  on_entry {\n    save = { start = ktime }\n  }\n  on_exit {\n    hist \"ns\" { value = ktime - entry.start }\n  }\n}\n"}}
	if err := admin.Create(ctx, ps); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		got := map[string]string{}
		for node, w := range want {
			var r v1alpha1.ProbeSetNode
			if err := admin.Get(ctx, types.NamespacedName{Namespace: "probectl-system", Name: "cluster.vfs." + node}, &r); err != nil || r.Status.Phase != v1alpha1.PhasePlanned || len(r.Status.Probes) != 1 {
				continue
			}
			p := r.Status.Probes[0]
			got[node] = strings.Fields(w)[0] + " " + p.Route + " " + strings.Join(p.Attach, ",")
			if p.Hits != nil || r.Status.AppliedDigest != "" {
				t.Errorf("%s: a plan-only record shows an apply: %+v", node, r.Status)
			}
		}
		if fmt.Sprint(got) == fmt.Sprint(want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("plans:\n got %v\nwant %v", got, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		var cur v1alpha1.ClusterProbeSet
		if err := admin.Get(ctx, types.NamespacedName{Name: "vfs"}, &cur); err != nil {
			t.Fatal(err)
		}
		if cur.Status.Selected == 5 && cur.Status.Planned == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ProbeSet status %+v", cur.Status)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
