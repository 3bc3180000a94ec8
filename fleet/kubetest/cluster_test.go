package kubetest

import (
	"context"
	"testing"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestCluster starts the lab's control plane and checks what the fleet
// tests rely on: the version built, RBAC refusing a user with no role,
// and a pod-bound token that names its node.
func TestCluster(t *testing.T) {
	c := Start(t)
	ctx := context.Background()
	cs := c.Clientset()
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.GitVersion != "v1.37.2" {
		t.Errorf("server version %s, want v1.37.2 (lab.sh's -X version.gitVersion)", v.GitVersion)
	}

	// A user with no role binding is refused.
	cfg, err := c.UserConfig("nobody")
	if err != nil {
		t.Fatal(err)
	}
	_, err = kubernetes.NewForConfigOrDie(cfg).CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("list configmaps as nobody: %v, want forbidden", err)
	}

	// A token bound to a pod on node-a authenticates as the service
	// account, with the node in its extra.
	if _, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "agent"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tok, err := c.PodToken(ctx, "default", "agent", "node-a")
	if err != nil {
		t.Fatal(err)
	}
	r, err := kubernetes.NewForConfigOrDie(tok).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u := r.Status.UserInfo
	if u.Username != "system:serviceaccount:default:agent" {
		t.Errorf("username %q", u.Username)
	}
	if got := u.Extra["authentication.kubernetes.io/node-name"]; len(got) != 1 || got[0] != "node-a" {
		t.Errorf("extra node-name %v, want [node-a] (extra: %v)", got, u.Extra)
	}
}
