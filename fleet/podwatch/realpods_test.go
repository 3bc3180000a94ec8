package podwatch_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/probectl/probectl/fleet/kubetest"
	"github.com/probectl/probectl/fleet/podwatch"
	"github.com/probectl/probectl/internal/pods"
	"github.com/probectl/probectl/internal/pods/podstest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// Real pods under a real kubelet (containerd, runc): two pods of one
// image each count exactly under their own names; a pod deleted keeps
// its name and counts; a pod whose container exits and is restarted
// (same pod, a new container ID) counts on under the pod and container.
func TestRealPodsCountedByName(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a kubelet runs as root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cl, cs := startShop(ctx, t)
	n := kubetest.StartNode(t, cl, kubetest.NodeOptions{})
	comm := podImage(t, n)
	dyn, err := dynamic.NewForConfig(cl.Admin)
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	go (&podwatch.Watcher{Client: dyn, Node: n.Name, Table: pods.Default, Log: slog.Default(), Retry: time.Second}).Run(wctx)
	w, s := applySpec(t, comm)

	state := t.TempDir()
	for _, p := range []*corev1.Pod{workPod("web-0", comm, state, "40"), workPod("web-1", comm, state, "15"), workPod("flaky-0", comm, state, "8", "restart")} {
		if _, err := n.RunPod(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	// flaky-0 runs once (8 opens), exits 1 after 6 s and runs again.
	flaky := waitRestarted(ctx, t, cl, "flaky-0")
	waitWalked(t, runningCgroups(ctx, t, n, cs, "web-0", "web-1", "flaky-0")...)
	want := map[string]int64{"web-0,shop,work": 40, "web-1,shop,work": 15, "flaky-0,shop,work": 16}
	wantCounts(t, "three pods, flaky-0 restarted", w, s, want)
	t.Logf("flaky-0: %s", kubetest.PodSummary(flaky))

	zero := int64(0)
	if err := cs.CoreV1().Pods("shop").Delete(ctx, "web-1", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	waitPodGone(ctx, t, cl, "web-1")
	wantCounts(t, "after web-1 was deleted", w, s, want)
}

// podImage builds the workload into an image the node has, named for this
// process, and returns its comm.
func podImage(t *testing.T, n *kubetest.Node) string {
	t.Helper()
	dir := t.TempDir()
	comm := fmt.Sprintf("pod%d", os.Getpid())
	bin := filepath.Join(dir, comm)
	if out, err := exec.Command("gcc", "-O0", "-static", "-o", bin, "testdata/podwork.c").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	archive := filepath.Join(dir, "work.tar")
	if err := kubetest.WriteOCIArchive(archive, "probectl.test/"+comm+":1", []string{"/" + comm}, kubetest.ImageFile{Path: comm, Source: bin, Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	if err := n.ImportImage(archive); err != nil {
		t.Fatal(err)
	}
	return comm
}

// workPod is a pod of the workload's image in shop, its one container
// "work" run with args; state is its /state (per pod: a subdirectory).
func workPod(name, comm, state string, args ...string) *corev1.Pod {
	dir := filepath.Join(state, name)
	os.Mkdir(dir, 0o755)
	hostDir := corev1.HostPathDirectory
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop"},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyAlways, AutomountServiceAccountToken: new(bool),
			Containers: []corev1.Container{{Name: "work", Image: "probectl.test/" + comm + ":1", ImagePullPolicy: corev1.PullNever,
				Args: args, VolumeMounts: []corev1.VolumeMount{{Name: "state", MountPath: "/state"}}}},
			Volumes: []corev1.Volume{{Name: "state", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: &hostDir}}}}},
	}
}

// waitRestarted waits until the pod's container was restarted once and
// runs again.
func waitRestarted(ctx context.Context, t *testing.T, cl *kubetest.Cluster, name string) *corev1.Pod {
	t.Helper()
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(300 * time.Millisecond) {
		p, err := cl.Clientset().CoreV1().Pods("shop").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if c := p.Status.ContainerStatuses; len(c) == 1 && c[0].RestartCount == 1 && c[0].State.Running != nil {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not restarted after 3 minutes: %s", name, kubetest.PodSummary(p))
		}
	}
}

// waitPodGone waits until the pod's object is gone (its containers
// stopped, its cgroups removed).
func waitPodGone(ctx context.Context, t *testing.T, cl *kubetest.Cluster, name string) {
	t.Helper()
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(300 * time.Millisecond) {
		if _, err := cl.Clientset().CoreV1().Pods("shop").Get(ctx, name, metav1.GetOptions{}); err != nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s still there 3 minutes after its deletion", name)
		}
	}
}

// runningCgroups are the ids of the pods' running containers' cgroups
// (the kubelet's cgroupfs layout under the node's cgroup root, in the
// unified hierarchy).
func runningCgroups(ctx context.Context, t *testing.T, n *kubetest.Node, cs *kubernetes.Clientset, names ...string) []uint64 {
	t.Helper()
	root := podstest.Root(t)
	var ids []uint64
	for _, name := range names {
		p, err := cs.CoreV1().Pods("shop").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range p.Status.ContainerStatuses {
			dir := filepath.Join(root, n.CgroupRoot, "kubepods", "besteffort", "pod"+string(p.UID), pods.ContainerID(c.ContainerID))
			var st syscall.Stat_t
			if err := syscall.Stat(dir, &st); err != nil {
				t.Fatalf("pod %s container %s: %v", name, c.Name, err)
			}
			ids = append(ids, st.Ino)
		}
	}
	return ids
}
