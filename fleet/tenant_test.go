package fleet_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/probectl/probectl/fleet/api/v1alpha1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// tenantLab is an API server with deploy/kubernetes applied, the built-in
// roles aggregated as kube-controller-manager does it, namespaces
// "tenant" and "other", and users with real client certificates.
type tenantLab struct {
	t     *testing.T
	admin client.Client
	user  func(name string, binding client.Object, role string, can authzv1.ResourceAttributes) client.Client
}

func newTenantLab(t *testing.T) *tenantLab {
	c, admin := setup(t)
	ctx := context.Background()
	if err := c.AggregateRoles(ctx); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"tenant", "other"} {
		if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	l := &tenantLab{t: t, admin: admin}
	// user binds role to name (b: a RoleBinding or ClusterRoleBinding
	// named, its role and subject filled here), connects as name and
	// waits until the API server's authorizer allows name can: it sees
	// new bindings and aggregated rules through its informers, later.
	l.user = func(name string, b client.Object, role string, can authzv1.ResourceAttributes) client.Client {
		t.Helper()
		ref := rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role}
		subj := []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: name}}
		switch b := b.(type) {
		case *rbacv1.RoleBinding:
			b.RoleRef, b.Subjects = ref, subj
		case *rbacv1.ClusterRoleBinding:
			b.RoleRef, b.Subjects = ref, subj
		}
		if err := admin.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
		cfg, err := c.UserConfig(name)
		if err != nil {
			t.Fatal(err)
		}
		cl := newClient(t, cfg)
		waitAllowed(t, cl, name, can)
		return cl
	}
	return l
}

// waitAllowed polls (up to two minutes) until the API server allows cl's
// user the request can describes.
func waitAllowed(t *testing.T, cl client.Client, name string, can authzv1.ResourceAttributes) {
	t.Helper()
	var last error
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		r := &authzv1.SelfSubjectAccessReview{Spec: authzv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &can}}
		if last = cl.Create(context.Background(), r); last == nil && r.Status.Allowed {
			return
		} else if last == nil {
			last = fmt.Errorf("denied (%s)", r.Status.Reason)
		}
	}
	t.Fatalf("%s may %s %s in %q: still not after 2m: %v", name, can.Verb, can.Resource, can.Namespace, last)
}

// may is a request of verb on resource (group/resource) in namespace ns.
func may(verb, group, resource, ns string) authzv1.ResourceAttributes {
	return authzv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource, Namespace: ns}
}

func roleBinding(ns, name string) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

func (l *tenantLab) refused(what string, err error, want string) {
	l.t.Helper()
	if err == nil {
		l.t.Errorf("%s: allowed, want refused with %q", what, want)
	} else if !strings.Contains(err.Error(), want) {
		l.t.Errorf("%s: refused with %q, want %q in it", what, err, want)
	}
}

func (l *tenantLab) ok(what string, err error) {
	l.t.Helper()
	if err != nil {
		l.t.Errorf("%s: %v", what, err)
	}
}

const tenantHCL = `probe "tracepoint" "opens" {
  event = "syscalls:sys_enter_openat"
  on_entry {
    count "n" { by = [comm] }
  }
}`

func probeSet(ns, name string, mode v1alpha1.Mode, hcl string) *v1alpha1.ProbeSet {
	return &v1alpha1.ProbeSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1alpha1.ProbeSetSpec{HCL: hcl, Mode: mode}}
}

func clusterProbeSet(name string, mode v1alpha1.Mode) *v1alpha1.ClusterProbeSet {
	return &v1alpha1.ClusterProbeSet{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.ProbeSetSpec{HCL: `probe "kernel" "k" {}`, Mode: mode}}
}

// TestTenantRBAC tries, as a namespace's editor would (a real user
// certificate, the built-in edit role bound in namespace tenant, with
// probectl-tenant aggregated into it), everything a tenant may and may
// not do, each refusal with the API's reason: it applies ProbeSets in its
// namespace and reads their records; it may not create one in another
// namespace, create a ClusterProbeSet, write or patch a record or
// NodeFacts, read another namespace's records, bind itself node-wide
// roles, or name a kernel function or profile probe inline (the admission
// policy, at the request). Node-wide tracing is for the holders of
// probectl-edit (plan mode) and probectl-apply (apply mode) cluster-wide.
func TestTenantRBAC(t *testing.T) {
	l := newTenantLab(t)
	ctx := context.Background()
	rec := &v1alpha1.ProbeSetNode{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "opens.n1"},
		Spec: v1alpha1.ProbeSetNodeSpec{ProbeSet: "opens", NodeName: "n1"}}
	otherRec := &v1alpha1.ProbeSetNode{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "opens.n1"},
		Spec: v1alpha1.ProbeSetNodeSpec{ProbeSet: "opens", NodeName: "n1"}}
	for _, r := range []*v1alpha1.ProbeSetNode{rec, otherRec} {
		if err := l.admin.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	editor := l.user("alice", roleBinding("tenant", "alice-edit"), "edit", may("create", "probectl.dev", "probesets", "tenant"))

	l.ok("editor creates an apply-mode ProbeSet in its namespace", editor.Create(ctx, probeSet("tenant", "opens", v1alpha1.ModeApply, tenantHCL)))
	l.ok("editor reads its namespace's records", editor.List(ctx, &v1alpha1.ProbeSetNodeList{}, client.InNamespace("tenant")))
	l.refused("editor creates a ProbeSet in another namespace", editor.Create(ctx, probeSet("other", "opens", v1alpha1.ModeApply, tenantHCL)),
		`User "alice" cannot create resource "probesets" in API group "probectl.dev" in the namespace "other"`)
	l.refused("editor creates a ClusterProbeSet", editor.Create(ctx, clusterProbeSet("node-wide", v1alpha1.ModePlan)),
		`User "alice" cannot create resource "clusterprobesets" in API group "probectl.dev" at the cluster scope`)
	l.refused("editor reads another namespace's records", editor.List(ctx, &v1alpha1.ProbeSetNodeList{}, client.InNamespace("other")),
		`User "alice" cannot list resource "probesetnodes" in API group "probectl.dev" in the namespace "other"`)
	l.refused("editor reads the nodes' facts", editor.List(ctx, &v1alpha1.NodeFactsList{}),
		`User "alice" cannot list resource "nodefacts" in API group "probectl.dev" at the cluster scope`)
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"status":{"phase":"Applied","probes":[]}}`))
	l.refused("editor patches its namespace's record", editor.Patch(ctx, rec.DeepCopy(), patch),
		`User "alice" cannot patch resource "probesetnodes" in API group "probectl.dev" in the namespace "tenant"`)
	l.refused("editor patches its record's status", editor.Status().Patch(ctx, rec.DeepCopy(), patch),
		`User "alice" cannot patch resource "probesetnodes/status" in API group "probectl.dev" in the namespace "tenant"`)
	l.refused("editor creates a record", editor.Create(ctx, &v1alpha1.ProbeSetNode{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "opens.n2"},
		Spec: v1alpha1.ProbeSetNodeSpec{ProbeSet: "opens", NodeName: "n2"}}),
		`User "alice" cannot create resource "probesetnodes" in API group "probectl.dev" in the namespace "tenant"`)
	l.refused("editor deletes a record", editor.Delete(ctx, rec.DeepCopy()),
		`User "alice" cannot delete resource "probesetnodes" in API group "probectl.dev" in the namespace "tenant"`)
	l.refused("editor writes NodeFacts", editor.Create(ctx, &v1alpha1.NodeFacts{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Spec: v1alpha1.NodeFactsSpec{Arch: "x86_64", Kernel: "6.1", Source: "live"}}),
		`User "alice" cannot create resource "nodefacts" in API group "probectl.dev" at the cluster scope`)
	l.refused("editor creates an inline kernel probe", editor.Create(ctx, probeSet("tenant", "kernel", v1alpha1.ModePlan, `probe  "kernel" "k" { functions = ["vfs_read"] }`)),
		`ValidatingAdmissionPolicy 'probectl-tenant' with binding 'probectl-tenant' denied request: a ProbeSet is kept to the tasks of namespace tenant's pods: kernel function and profile probes run for whatever task a CPU runs`)
	l.refused("editor names a ProbeSet as a ClusterProbeSet's record", editor.Create(ctx, probeSet("tenant", "cluster.x", v1alpha1.ModePlan, tenantHCL)),
		`a ProbeSet's name may not begin with "cluster."`)
	nsAdmin := l.user("dave", roleBinding("tenant", "dave-admin"), "admin", may("create", "rbac.authorization.k8s.io", "rolebindings", "tenant"))
	l.refused("namespace admin binds itself probectl-apply", nsAdmin.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "dave-apply"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "probectl-apply"},
		Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "dave"}}}),
		"is attempting to grant RBAC permissions not currently held")
	// A viewer of the namespace reads records there, writes nothing.
	viewer := l.user("erin", roleBinding("tenant", "erin-view"), "view", may("list", "probectl.dev", "probesetnodes", "tenant"))
	l.ok("viewer reads the records", viewer.List(ctx, &v1alpha1.ProbeSetNodeList{}, client.InNamespace("tenant")))
	l.refused("viewer creates a ProbeSet", viewer.Create(ctx, probeSet("tenant", "v", v1alpha1.ModePlan, tenantHCL)),
		`User "erin" cannot create resource "probesets" in API group "probectl.dev" in the namespace "tenant"`)

	// Node-wide: probectl-edit plans, probectl-apply applies.
	planner := l.user("bob", &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bob-probectl-edit"}}, "probectl-edit", may("create", "probectl.dev", "clusterprobesets", ""))
	l.ok("planner creates a plan-mode ClusterProbeSet", planner.Create(ctx, clusterProbeSet("plan", v1alpha1.ModePlan)))
	const byPolicy = "an apply-mode ClusterProbeSet runs its probes as root on every node it selects: bob may not apply clusterprobesets"
	l.refused("planner creates an apply-mode ClusterProbeSet", planner.Create(ctx, clusterProbeSet("root", v1alpha1.ModeApply)), byPolicy)
	var cps v1alpha1.ClusterProbeSet
	if err := planner.Get(ctx, client.ObjectKey{Name: "plan"}, &cps); err != nil {
		t.Fatal(err)
	}
	cps.Spec.Mode = v1alpha1.ModeApply
	l.refused("planner switches a ClusterProbeSet to apply mode", planner.Update(ctx, &cps), byPolicy)
	applier := l.user("carol", &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "carol-probectl-apply"}}, "probectl-apply", may("apply", "probectl.dev", "clusterprobesets", ""))
	l.ok("applier creates an apply-mode ClusterProbeSet", applier.Create(ctx, clusterProbeSet("root", v1alpha1.ModeApply)))
	if !apierrors.IsForbidden(editor.Get(ctx, client.ObjectKey{Name: "root"}, &cps)) {
		t.Error("the editor reads a ClusterProbeSet")
	}
}
