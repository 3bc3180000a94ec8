package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/probectl/probectl/fleet/api/v1alpha1"
	"github.com/probectl/probectl/fleet/kubetest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// podWork waits for /out/go, then opens /nonexistent argv[1] times,
// writes argv[2] (one more openat) and sleeps: a pod's known calls, made when the test says.
const podWork = `#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
	long n = atol(argv[1]);
	while (access("/out/go", F_OK) != 0) usleep(50000);
	for (long i = 0; i < n; i++) { int fd = open("/nonexistent/probectl", O_RDONLY); if (fd >= 0) close(fd); }
	FILE *f = fopen(argv[2], "w");
	if (!f) return 3;
	fputs("done\n", f); fclose(f);
	for (;;) pause();
}
`

// TestRealPodsTenants is TestKubeAgentTenants with real pods: a real node
// (kubelet, containerd, runc; fleet/kubetest's StartNode), a pod each in
// namespaces shop and bank of one image, making the same system calls at
// the same time; the agent binary of that node applies the same
// ProbeSet in both namespaces, and each tenant's series counts exactly
// its own pod's calls.
func TestRealPodsTenants(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a kubelet runs as root")
	}
	ctx := context.Background()
	c, admin := kubeLab(t)
	node := kubetest.StartNode(t, c, kubetest.NodeOptions{})
	dir := t.TempDir()
	bin := buildC(t, dir, "twork", podWork)
	archive := filepath.Join(dir, "twork.tar")
	if err := kubetest.WriteOCIArchive(archive, "probectl.test/twork:1", []string{"/twork"}, kubetest.ImageFile{Path: "twork", Source: bin, Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	if err := node.ImportImage(archive); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg, err := c.PodToken(ctx, "probectl-system", "probectl-agent", node.Name)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "agent.kubeconfig")
	if err := c.WriteKubeconfig(kubeconfig, cfg); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	agent := startKubeAgent(t, node.Name, kubeconfig, state, "")
	t.Cleanup(func() { agent.kill(); destroyWorkspaces(state) })
	const spec = "probe \"tracepoint\" \"opens\" {\n  event = \"syscalls:sys_enter_openat\"\n  on_entry {\n    count \"n\" { when = comm == \"twork\" }\n  }\n}\n"
	calls := map[string]int{"shop": 7, "bank": 11}
	hostDir := corev1.HostPathDirectory
	for ns, n := range calls {
		if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
		// kube-controller-manager makes the default service account; a
		// pod waits for it.
		if err := admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		if err := admin.Create(ctx, &v1alpha1.ProbeSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "opens"},
			Spec: v1alpha1.ProbeSetSpec{HCL: spec, Mode: v1alpha1.ModeApply}}); err != nil {
			t.Fatal(err)
		}
		_, err := node.RunPod(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-0"},
			Spec: corev1.PodSpec{AutomountServiceAccountToken: new(bool),
				Containers: []corev1.Container{{Name: "web", Image: "probectl.test/twork:1", ImagePullPolicy: corev1.PullNever,
					Args:         []string{strconv.Itoa(n), "/out/done-" + ns},
					VolumeMounts: []corev1.VolumeMount{{Name: "out", MountPath: "/out"}}}},
				Volumes: []corev1.Volume{{Name: "out", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: out, Type: &hostDir}}}}}})
		if err != nil {
			t.Fatalf("pod of %s: %v", ns, err)
		}
	}
	for ns := range calls {
		tenantRecord(t, admin, agent, ns, "opens", node.Name, func(r *v1alpha1.ProbeSetNode) bool {
			return r.Status.Phase == v1alpha1.PhaseApplied && r.Status.Cgroups != nil && *r.Status.Cgroups == 1
		})
	}
	if err := os.WriteFile(filepath.Join(out, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(90 * time.Second)
	for ns := range calls {
		for {
			if _, err := os.Stat(filepath.Join(out, "done-"+ns)); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the pod of %s did not finish its calls", ns)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	for ns, n := range calls {
		want := n + 1 // and the fopen of its done file
		series := `probectl_count_tracepoint_opens_n_total{probeset="` + ns + `/opens"}`
		if got := agent.metric(series); got != float64(want) {
			t.Errorf("%s: %v, want %d (its pod's calls only)\nagent log:\n%s", series, got, want, agent.log)
		}
	}
}
