package fleet_test

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/fleet"
	"github.com/probectl/probectl/fleet/api/v1alpha1"
	"github.com/probectl/probectl/fleet/kubetest"
	appsv1 "k8s.io/api/apps/v1"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const agentNS, agentSA = "probectl-system", "probectl-agent"

// manifests are deploy/kubernetes's files in kustomization.yaml's order.
func manifests(t testing.TB) []string {
	t.Helper()
	objs, err := kubetest.ReadObjects("../deploy/kubernetes/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, r := range objs[0].Object["resources"].([]any) {
		paths = append(paths, filepath.Join("../deploy/kubernetes", r.(string)))
	}
	return paths
}

// setup starts a control plane and applies deploy/kubernetes to it.
func setup(t *testing.T) (*kubetest.Cluster, client.Client) {
	t.Helper()
	c := kubetest.Start(t)
	if _, err := kubetest.Apply(context.Background(), c.Admin, false, manifests(t)...); err != nil {
		t.Fatal(err)
	}
	admin, err := client.New(c.Admin, client.Options{Scheme: kubetest.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c, admin
}

// agentClient is the client of the agent of node: a token bound to a pod
// of the DaemonSet's service account on that node.
func agentClient(t *testing.T, c *kubetest.Cluster, node string) client.Client {
	t.Helper()
	cfg, err := c.PodToken(context.Background(), agentNS, agentSA, node)
	if err != nil {
		t.Fatal(err)
	}
	return newClient(t, cfg)
}

func newClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	cl, err := client.New(cfg, client.Options{Scheme: kubetest.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// TestManifests applies deploy/kubernetes to a real API server (every
// object created for real, the DaemonSet included), then checks the
// CRDs' validation and that the Go types and the schemas agree: an
// object with every field set comes back from the server unchanged
// (a field the schema lacks would be pruned).
func TestManifests(t *testing.T) {
	_, admin := setup(t)
	ctx := context.Background()
	ns := "manifests"
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}

	// CEL and OpenAPI validation.
	bad := []struct {
		spec v1alpha1.ProbeSetSpec
		want string
	}{
		{v1alpha1.ProbeSetSpec{Mode: "apply"}, "set exactly one of hcl"},
		{v1alpha1.ProbeSetSpec{HCL: "x", ConfigMapRef: &v1alpha1.ConfigMapRef{Name: "specs"}, Mode: "apply"}, "set exactly one of hcl"},
		{v1alpha1.ProbeSetSpec{HCL: "x", Mode: "destroy"}, `spec.mode: Unsupported value: "destroy": supported values: "plan", "apply"`},
	}
	for i, b := range bad {
		ps := &v1alpha1.ProbeSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad" + string(rune('a'+i))}, Spec: b.spec}
		err := admin.Create(ctx, ps)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), b.want) {
			t.Errorf("create %+v: %v, want invalid: %q", b.spec, err, b.want)
		}
	}
	// mode defaults to plan.
	def := &v1alpha1.ProbeSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "defaulted"}, Spec: v1alpha1.ProbeSetSpec{HCL: "x"}}
	if err := admin.Create(ctx, def); err != nil {
		t.Fatal(err)
	}
	if def.Spec.Mode != v1alpha1.ModePlan {
		t.Errorf("mode defaulted to %q, want plan", def.Spec.Mode)
	}

	// Round trips, every field set.
	one, links := int64(1), int32(2)
	ps := &v1alpha1.ProbeSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "full"},
		Spec: v1alpha1.ProbeSetSpec{ConfigMapRef: &v1alpha1.ConfigMapRef{Name: "specs"},
			NodeSelector: map[string]string{"pool": "a"}, Mode: v1alpha1.ModeApply},
	}
	if err := admin.Create(ctx, ps); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now().Rfc3339Copy()
	ps.Status = v1alpha1.ProbeSetStatus{ObservedGeneration: 1, Selected: 3, Planned: 1, Applied: 1, Failed: 1,
		Nodes: []v1alpha1.NodeSummary{{Node: "n1", Kernel: "linux 6.12", Phase: v1alpha1.PhaseFailed, Digest: "d", Message: "m"}},
		Conditions: []metav1.Condition{{Type: v1alpha1.ConditionDegraded, Status: metav1.ConditionTrue, ObservedGeneration: 1,
			LastTransitionTime: now, Reason: "NodeFailed", Message: "n1"}}}
	want := ps.Status
	if err := admin.Status().Update(ctx, ps); err != nil {
		t.Fatal(err)
	}
	var got v1alpha1.ProbeSet
	if err := admin.Get(ctx, client.ObjectKeyFromObject(ps), &got); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got.Status); d != "" {
		t.Errorf("ProbeSet status changed by the round trip (-sent +stored):\n%s", d)
	}

	psn := &v1alpha1.ProbeSetNode{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "full.n1"},
		Spec: v1alpha1.ProbeSetNodeSpec{ProbeSet: "full", NodeName: "n1"}}
	if err := admin.Create(ctx, psn); err != nil {
		t.Fatal(err)
	}
	psn.Status = v1alpha1.ProbeSetNodeStatus{ObservedGeneration: 1, Phase: v1alpha1.PhaseApplied, Kernel: "k", Facts: "live",
		Probes: []v1alpha1.ProbePlan{{Address: "kernel.a", Route: "fgraph", Attach: []string{"kprobe.session"}, Reason: "r",
			Links: &links, Hits: &one, Missed: &one, Drops: &one}},
		SpecDigest: "s", AppliedDigest: "a", Errors: []string{"e"}, LastTransitionTime: &now}
	wantN := psn.Status
	if err := admin.Status().Update(ctx, psn); err != nil {
		t.Fatal(err)
	}
	var gotN v1alpha1.ProbeSetNode
	if err := admin.Get(ctx, client.ObjectKeyFromObject(psn), &gotN); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(wantN, gotN.Status); d != "" {
		t.Errorf("ProbeSetNode status changed by the round trip (-sent +stored):\n%s", d)
	}
	// The name rule and the immutable fields.
	wrong := &v1alpha1.ProbeSetNode{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "full.n2"},
		Spec: v1alpha1.ProbeSetNodeSpec{ProbeSet: "full", NodeName: "n1"}}
	if err := admin.Create(ctx, wrong); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "a ProbeSetNode is named <probeSet>.<nodeName>") {
		t.Errorf("create ProbeSetNode full.n2 for n1: %v, want invalid", err)
	}
	gotN.Spec.NodeName = "n2"
	if err := admin.Update(ctx, &gotN); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "nodeName is immutable") {
		t.Errorf("change nodeName: %v, want invalid", err)
	}

	facts, err := bpf.Profile("linux-7.2-arm64")
	if err != nil {
		t.Fatal(err)
	}
	nf, err := fleet.NodeFactsOf("n1", facts)
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.Create(ctx, nf); err != nil {
		t.Fatal(err)
	}
	var gotF v1alpha1.NodeFacts
	if err := admin.Get(ctx, client.ObjectKey{Name: "n1"}, &gotF); err != nil {
		t.Fatal(err)
	}
	back, err := fleet.FactsOf(&gotF)
	if err != nil {
		t.Fatal(err)
	}
	if d := back.Differences(facts); len(d) > 0 || back.Label() != facts.Label() {
		t.Errorf("NodeFacts round trip: %s, differences %v", back.Label(), d)
	}
	if gotF.Spec.Arch != "arm64" || gotF.Spec.Kernel != "7.2" || gotF.Spec.Source != "profile linux-7.2-arm64" {
		t.Errorf("NodeFacts spec %s %s %s", gotF.Spec.Arch, gotF.Spec.Kernel, gotF.Spec.Source)
	}
}

// TestAgentOnlyWritesItsOwnNode proves the RBAC and the admission policy
// of deploy/kubernetes: the agent of node-a, with the credentials the
// DaemonSet's pod on node-a gets, may write node-a's NodeFacts and
// ProbeSetNode records, and is refused node-b's, whatever the verb.
func TestAgentOnlyWritesItsOwnNode(t *testing.T) {
	c, admin := setup(t)
	ctx := context.Background()
	a, b := agentClient(t, c, "node-a"), agentClient(t, c, "node-b")

	facts, err := bpf.Profile("linux-6.12-amd64")
	if err != nil {
		t.Fatal(err)
	}
	pub := func(cl client.Client, node string) error {
		nf, err := fleet.NodeFactsOf(node, facts)
		if err != nil {
			t.Fatal(err)
		}
		return cl.Create(ctx, nf)
	}
	if err := pub(a, "node-a"); err != nil {
		t.Fatalf("agent of node-a publishing its facts: %v", err)
	}
	if err := pub(b, "node-b"); err != nil {
		t.Fatalf("agent of node-b publishing its facts: %v", err)
	}
	refused := func(what string, err error, want string) {
		t.Helper()
		if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
			t.Errorf("%s: %v, want refused", what, err)
		} else if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: refused with %q, want %q in it", what, err, want)
		}
	}
	refused("node-a creates node-c's facts", pub(a, "node-c"), "the agent of node node-a may write only the NodeFacts named node-a")
	var nfB v1alpha1.NodeFacts
	if err := a.Get(ctx, client.ObjectKey{Name: "node-b"}, &nfB); err != nil {
		t.Fatalf("node-a reading node-b's facts: %v", err)
	}
	nfB.Spec.Kernel = "1.0.0"
	refused("node-a updates node-b's facts", a.Update(ctx, &nfB), "may write only the NodeFacts named node-a")
	refused("node-a deletes node-b's facts", a.Delete(ctx, &nfB), "may write only the NodeFacts named node-a")

	ps := &v1alpha1.ProbeSet{ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: "vfs"}, Spec: v1alpha1.ProbeSetSpec{HCL: "x", Mode: v1alpha1.ModePlan}}
	if err := admin.Create(ctx, ps); err != nil {
		t.Fatal(err)
	}
	record := func(node string) *v1alpha1.ProbeSetNode {
		return &v1alpha1.ProbeSetNode{ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: "vfs." + node},
			Spec: v1alpha1.ProbeSetNodeSpec{ProbeSet: "vfs", NodeName: node}}
	}
	ra, rb := record("node-a"), record("node-b")
	if err := a.Create(ctx, ra); err != nil {
		t.Fatalf("node-a creating its record: %v", err)
	}
	ra.Status.Phase = v1alpha1.PhasePlanned
	if err := a.Status().Update(ctx, ra); err != nil {
		t.Fatalf("node-a writing its status: %v", err)
	}
	if err := b.Create(ctx, rb); err != nil {
		t.Fatalf("node-b creating its record: %v", err)
	}
	refused("node-a creates node-c's record", a.Create(ctx, record("node-c")), "may write only ProbeSetNodes whose spec.nodeName is node-a")
	if err := a.Get(ctx, client.ObjectKeyFromObject(rb), rb); err != nil {
		t.Fatal(err)
	}
	rb.Status.Phase = v1alpha1.PhaseFailed
	rb.Status.Errors = []string{"forged"}
	refused("node-a writes node-b's status", a.Status().Update(ctx, rb), "may write only ProbeSetNodes whose spec.nodeName is node-a")
	refused("node-a patches node-b's status", a.Status().Patch(ctx, rb, client.MergeFrom(&v1alpha1.ProbeSetNode{})), "may write only ProbeSetNodes whose spec.nodeName is node-a")
	refused("node-a deletes node-b's record", a.Delete(ctx, rb), "may write only ProbeSetNodes whose spec.nodeName is node-a")

	// RBAC: the agent reads ProbeSets, never writes them, and reads no Secrets.
	refused("agent creates a ProbeSet", a.Create(ctx, &v1alpha1.ProbeSet{ObjectMeta: metav1.ObjectMeta{Namespace: agentNS, Name: "x"},
		Spec: v1alpha1.ProbeSetSpec{HCL: "x", Mode: v1alpha1.ModeApply}}), "cannot create resource \"probesets\"")
	refused("agent lists secrets", a.List(ctx, &corev1.SecretList{}), "cannot list resource \"secrets\"")
	refused("agent reads a ConfigMap outside its namespaces", a.Get(ctx, client.ObjectKey{Namespace: "default", Name: "kube-root-ca.crt"}, &corev1.ConfigMap{}), "cannot get resource \"configmaps\" in API group \"\" in the namespace \"default\"")

	// The agent's service account without a pod-bound token names no node:
	// refused, whatever the object.
	exp := int64(600)
	tr, err := c.Clientset().CoreV1().ServiceAccounts(agentNS).CreateToken(ctx, agentSA, &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	unbound := newClient(t, &rest.Config{Host: c.Host, BearerToken: tr.Status.Token, TLSClientConfig: rest.TLSClientConfig{CAData: c.Admin.CAData}})
	refused("an unbound agent token publishes facts", func() error {
		nf, _ := fleet.NodeFactsOf("node-d", facts)
		return unbound.Create(ctx, nf)
	}(), "must be a token bound to its pod")

	// node-b's record is as node-b wrote it.
	var got v1alpha1.ProbeSetNode
	if err := admin.Get(ctx, client.ObjectKeyFromObject(rb), &got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != "" || len(got.Status.Errors) != 0 {
		t.Errorf("node-b's record was changed: %+v", got.Status)
	}
}

// TestNoWriteAggregated checks the mechanism behind TestTenantRBAC for
// every role deploy/kubernetes ships: of probectl.dev, the roles
// aggregated into a built-in one write only namespaced ProbeSets (a
// tenant's, filtered to its pods), never ClusterProbeSets (root on the
// nodes), records or NodeFacts, and read only ProbeSets and records.
func TestNoWriteAggregated(t *testing.T) {
	objs, err := kubetest.ReadObjects(manifests(t)...)
	if err != nil {
		t.Fatal(err)
	}
	read := map[string]bool{"get": true, "list": true, "watch": true}
	roles := 0
	for _, o := range objs {
		if o.GetKind() != "ClusterRole" {
			continue
		}
		roles++
		var aggregated []string
		for k, v := range o.GetLabels() {
			if strings.HasPrefix(k, "rbac.authorization.k8s.io/aggregate-to-") && v == "true" {
				aggregated = append(aggregated, k)
			}
		}
		if len(aggregated) == 0 {
			continue
		}
		var role rbacv1.ClusterRole
		if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &role); err != nil {
			t.Fatal(err)
		}
		for _, r := range role.Rules {
			if !slices.Contains(r.APIGroups, "probectl.dev") && !slices.Contains(r.APIGroups, "*") {
				continue
			}
			for _, res := range r.Resources {
				if !slices.Contains([]string{"probesets", "probesets/status", "probesetnodes", "probesetnodes/status"}, res) {
					t.Errorf("ClusterRole %s (%v) grants %v on %s: node-wide", role.Name, aggregated, r.Verbs, res)
				}
				for _, v := range r.Verbs {
					if !read[v] && res != "probesets" {
						t.Errorf("ClusterRole %s (%v) grants %q on %s: only the agents write it", role.Name, aggregated, v, res)
					}
				}
			}
		}
	}
	if roles < 5 {
		t.Errorf("read %d ClusterRoles from deploy/kubernetes, want at least 5", roles)
	}
}

// TestMetricsNetworkPolicy checks, on the server that stored it, that the
// NetworkPolicy deploy/kubernetes ships selects the agents' pods and
// admits to their metrics port only peers chosen by namespace (a bare
// podSelector would admit any pod of probectl-system that carries the
// label; an empty "from" everyone).
func TestMetricsNetworkPolicy(t *testing.T) {
	_, admin := setup(t)
	ctx := context.Background()
	var ds appsv1.DaemonSet
	if err := admin.Get(ctx, client.ObjectKey{Namespace: agentNS, Name: "probectl-agent"}, &ds); err != nil {
		t.Fatal(err)
	}
	var np networkingv1.NetworkPolicy
	if err := admin.Get(ctx, client.ObjectKey{Namespace: agentNS, Name: "probectl-agent-metrics"}, &np); err != nil {
		t.Fatal(err)
	}
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil {
		t.Fatal(err)
	}
	if sel.Empty() || !sel.Matches(labels.Set(ds.Spec.Template.Labels)) {
		t.Errorf("the policy's pod selector %q does not select the agent's pods %v", sel, ds.Spec.Template.Labels)
	}
	if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
		t.Errorf("policy types %v, want Ingress", np.Spec.PolicyTypes)
	}
	ports := map[string]bool{}
	for _, p := range ds.Spec.Template.Spec.Containers[0].Ports {
		ports[p.Name], ports[strconv.Itoa(int(p.ContainerPort))] = true, true
	}
	if len(np.Spec.Ingress) == 0 {
		t.Fatal("the policy admits nothing: the scraper cannot reach /metrics")
	}
	for i, in := range np.Spec.Ingress {
		if len(in.From) == 0 {
			t.Errorf("ingress %d admits every peer", i)
		}
		for _, f := range in.From {
			if f.IPBlock != nil || f.NamespaceSelector == nil || len(f.NamespaceSelector.MatchLabels)+len(f.NamespaceSelector.MatchExpressions) == 0 {
				t.Errorf("ingress %d peer %+v is not chosen by a namespace label", i, f)
			}
		}
		if len(in.Ports) == 0 {
			t.Errorf("ingress %d admits every port", i)
		}
		for _, p := range in.Ports {
			if p.Port == nil || !ports[p.Port.String()] {
				t.Errorf("ingress %d port %v is not the agent's metrics port %v", i, p.Port, ports)
			}
		}
	}
}
