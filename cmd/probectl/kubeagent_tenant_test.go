package main

import (
	"context"
	"fmt"
	"github.com/probectl/probectl/internal/testenv"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/probectl/probectl/fleet/api/v1alpha1"
	"github.com/probectl/probectl/internal/cgrouptest"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestKubeAgentTenants: two tenants, namespaces shop and bank, each with
// a pod on node-a (Pod objects in the real API server; their cgroups made
// by the test in kubelet's cgroupfs layout, kubepods/burstable/pod<UID>/
// <container>, with the workload's processes started in them), apply the
// same ProbeSet in their namespaces; the real agent binary of node-a
// applies both, each filtered to its namespace's pods. Both workloads
// (and one outside any pod) run the same function at the same time:
// each tenant's record counts exactly its own pod's calls. A tenant's
// node-wide or raw-address spec is refused at plan, with the reason at
// its line; a second pod of shop is admitted as it comes.
func TestKubeAgentTenants(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("applying probes needs root")
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		testenv.Absent(t, "gcc is missing")
	}
	ctx := context.Background()
	c, admin := kubeLab(t)
	dir := t.TempDir()
	work := buildC(t, dir, "twork", serveWork)
	prefix := cgrouptest.Prefix(t)
	pods := map[string]string{} // namespace → the container cgroup of its pod
	for _, ns := range []string{"shop", "bank"} {
		pods[ns] = tenantPod(t, admin, prefix, ns, "web-0", "node-a")
	}
	cfg, err := c.PodToken(ctx, "probectl-system", "probectl-agent", "node-a")
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "node-a.kubeconfig")
	if err := c.WriteKubeconfig(kubeconfig, cfg); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	tenantAddr := freeAddr(t)
	agent := startKubeAgent(t, "node-a", kubeconfig, state, "", "-tenant-listen", tenantAddr)
	t.Cleanup(func() { agent.kill(); destroyWorkspaces(state) })
	spec := fmt.Sprintf("probe \"user\" \"calls\" {\n  binary    = %q\n  functions = [\"target\"]\n  on_entry {\n    count \"n\" {}\n  }\n}\n", work)
	for _, ns := range []string{"shop", "bank"} {
		if err := admin.Create(ctx, &v1alpha1.ProbeSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "calls"},
			Spec: v1alpha1.ProbeSetSpec{HCL: spec, Mode: v1alpha1.ModeApply}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, ns := range []string{"shop", "bank"} {
		tenantRecord(t, admin, agent, ns, "calls", "node-a", func(r *v1alpha1.ProbeSetNode) bool {
			return r.Status.Phase == v1alpha1.PhaseApplied && r.Status.Cgroups != nil && *r.Status.Cgroups == 1
		})
	}
	// The same calls at the same time: 7 in shop's pod, 11 in bank's, 5
	// outside any pod.
	runIn(t, map[string]int{pods["shop"]: 7, pods["bank"]: 11, "": 5}, work)
	for ns, want := range map[string]string{"shop": "user.calls=7", "bank": "user.calls=11"} {
		r := tenantRecord(t, admin, agent, ns, "calls", "node-a", func(r *v1alpha1.ProbeSetNode) bool { return recordHits(r) == want })
		if r.Status.Scope != "namespace "+ns+" (tasks of its pods on this node)" {
			t.Errorf("%s's record: scope %q", ns, r.Status.Scope)
		}
	}
	for ns, want := range map[string]float64{"shop": 7, "bank": 11} {
		if got := agent.metric(`probectl_count_user_calls_n_total{probeset="` + ns + `/calls"}`); got != want {
			t.Errorf("%s's series on the node's /metrics: %v, want %v", ns, got, want)
		}
	}

	tenantScrapes(t, c.Clientset(), admin, "http://"+tenantAddr)

	// A second pod of shop: admitted once the agent sees it.
	second := tenantPod(t, admin, prefix, "shop", "web-1", "node-a")
	tenantRecord(t, admin, agent, "shop", "calls", "node-a", func(r *v1alpha1.ProbeSetNode) bool { return r.Status.Cgroups != nil && *r.Status.Cgroups == 2 })
	runIn(t, map[string]int{second: 3, pods["bank"]: 3}, work)
	tenantRecord(t, admin, agent, "shop", "calls", "node-a", func(r *v1alpha1.ProbeSetNode) bool { return recordHits(r) == "user.calls=10" })
	tenantRecord(t, admin, agent, "bank", "calls", "node-a", func(r *v1alpha1.ProbeSetNode) bool { return recordHits(r) == "user.calls=14" })

	// Node-wide and raw-address specs of a tenant: refused at plan, each
	// at its line with the reason (the admission policy sees neither).
	refusedSpecs := map[string]string{
		"sched":  "probe \"tracepoint\" \"s\" {\n  event = \"sched:sched_switch\"\n  on_entry {\n    count \"n\" {}\n  }\n}\n",
		"rawptr": fmt.Sprintf("probe \"user\" \"r\" {\n  binary    = %q\n  functions = [\"target\"]\n  on_entry {\n    count \"n\" { by = [kernel_str(arg0)] }\n  }\n}\n", work),
	}
	wants := map[string]string{
		"sched":  "sched.hcl:2:11: Node-wide probe denied: the tracepoint sched:sched_switch may fire for whatever task a CPU runs, or describe another task: a namespaced ProbeSet (namespace shop)",
		"rawptr": "rawptr.hcl:5:34: Raw address denied: kernel_str reads kernel memory at arg0",
	}
	for name, hcl := range refusedSpecs {
		if err := admin.Create(ctx, &v1alpha1.ProbeSet{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name},
			Spec: v1alpha1.ProbeSetSpec{HCL: hcl, Mode: v1alpha1.ModeApply}}); err != nil {
			t.Fatal(err)
		}
		r := tenantRecord(t, admin, agent, "shop", name, "node-a", func(r *v1alpha1.ProbeSetNode) bool { return r.Status.Phase == v1alpha1.PhaseFailed })
		if len(r.Status.Errors) != 1 || !strings.HasPrefix(r.Status.Errors[0], wants[name]) {
			t.Errorf("shop/%s: errors %q, want one beginning %q", name, r.Status.Errors, wants[name])
		}
	}
}

// tenantScrapes reads each namespace's results at the agent's
// -tenant-listen (base) as its readers would: a service account of shop
// bound to view there reads shop's series alone (7 calls), and is
// refused bank's with the API server's reason; no token, no results.
func tenantScrapes(t *testing.T, cs *kubernetes.Clientset, admin client.Client, base string) {
	t.Helper()
	ctx := context.Background()
	if err := admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "reader"}}); err != nil {
		t.Fatal(err)
	}
	if err := admin.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "reader-view"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "probectl-view"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "shop", Name: "reader"}}}); err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts("shop").CreateToken(ctx, "reader", &authv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	get := func(path, token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", base+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := get("/namespaces/shop/metrics", tr.Status.Token)
	if code != 200 || !strings.Contains(body, `probectl_count_user_calls_n_total{applied="1",probeset="shop/calls"} 7`+"\n") || strings.Contains(body, "bank/") {
		t.Errorf("shop's reader scrapes shop: %d\n%s", code, body)
	}
	if code, body := get("/namespaces/bank/metrics", tr.Status.Token); code != 403 ||
		!strings.Contains(body, "system:serviceaccount:shop:reader may not get probesetnodes in namespace bank") {
		t.Errorf("shop's reader scrapes bank: %d %s", code, body)
	}
	if code, body := get("/namespaces/shop/metrics", ""); code != 401 || !strings.Contains(body, "a bearer token is needed") {
		t.Errorf("no token: %d %s", code, body)
	}
	if code, body := get("/namespaces/shop/metrics", "forged"); code != 403 || !strings.Contains(body, "the token is not valid") {
		t.Errorf("a forged token: %d %s", code, body)
	}
}

// freeAddr is a loopback address with a port free now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// tenantPod creates the Pod name in ns (the namespace and its default
// service account too, when new) bound to node, and its cgroups under
// prefix in kubelet's cgroupfs layout; it returns the container's cgroup.
func tenantPod(t *testing.T, admin client.Client, prefix, ns, name, node string) string {
	t.Helper()
	ctx := context.Background()
	if err := admin.Get(ctx, types.NamespacedName{Name: ns}, &corev1.Namespace{}); err != nil {
		for _, o := range []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}}} {
			if err := admin.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{NodeName: node, AutomountServiceAccountToken: new(bool), Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
	if err := admin.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	ctr := filepath.Join(prefix, "kubepods", "burstable", "pod"+string(pod.UID), "c0ffee"+name)
	cgrouptest.Make(t, ctr)
	return ctr
}

// runIn runs work n times in each cgroup ("": the test's own) at once,
// and waits for them all.
func runIn(t *testing.T, runs map[string]int, work string) {
	t.Helper()
	cmds := map[string]*exec.Cmd{}
	for cg, n := range runs {
		cmds[cg] = exec.Command(work, strconv.Itoa(n))
	}
	cgrouptest.RunAll(t, cmds)
}

// recordHits is a record's hits, "ADDRESS=N,...".
func recordHits(r *v1alpha1.ProbeSetNode) string {
	var out []string
	for _, p := range r.Status.Probes {
		h := int64(-1)
		if p.Hits != nil {
			h = *p.Hits
		}
		out = append(out, fmt.Sprintf("%s=%d", p.Address, h))
	}
	return strings.Join(out, ",")
}

// destroyWorkspaces destroys what an agent applied in the workspaces of
// state.
func destroyWorkspaces(state string) {
	for _, ws := range workspacesOf(state) {
		var out strings.Builder
		run([]string{"-state-dir", state, "-workspace", ws, "destroy", "-auto-approve"}, &out, &out)
	}
}

// tenantRecord waits for node's record of ns/name to satisfy ok.
func tenantRecord(t *testing.T, admin client.Client, agent *kubeAgent, ns, name, node string, ok func(*v1alpha1.ProbeSetNode) bool) *v1alpha1.ProbeSetNode {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		var r v1alpha1.ProbeSetNode
		err := admin.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name + "." + node}, &r)
		if err == nil && ok(&r) {
			return &r
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/%s's record: %v %+v\nagent log:\n%s", ns, name, err, r.Status, agent.log)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
