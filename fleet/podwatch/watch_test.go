package podwatch_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/fleet/kubetest"
	"github.com/probectl/probectl/fleet/podwatch"
	"github.com/probectl/probectl/internal/pods"
	"github.com/probectl/probectl/internal/pods/podstest"
	"github.com/probectl/probectl/runtime"
	"github.com/probectl/probectl/spec"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// The test's node, and another: a pod there is not this node's.
var (
	node  = fmt.Sprintf("podwatch-%d", os.Getpid())
	other = node + "-other"
)

// Containers' IDs: web-0's, web-0's after its restart, web-1's, and the
// other node's pod's.
const (
	cid0  = "c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0"
	cid0r = "c0ffc0ffc0ffc0ffc0ffc0ffc0ffc0ffc0ffc0ffc0ffc0ffc0ffc0ffc0ffc0ff"
	cid1  = "c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1"
	cidX  = "cececececececececececececececececececececececececececececececece"
)

// Pods of a real API server, and real cgroups in the kubelet's systemd
// layout (under a --cgroup-root of the test's own) with the workload run
// in them: two pods of one workload each count exactly under their own
// names; a container that restarts (a new ID, the old one in lastState)
// counts on under its pod and container; a pod deleted, its cgroups
// removed, keeps its name and counts; a pod of another node, which the
// node-scoped watch never sees, shows as its UID.
func TestPodsNamedFromAPIServer(t *testing.T) {
	tree := podstest.NewTree(t)
	work := workload(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl, cs := startShop(ctx, t)
	web0 := createPod(ctx, t, cs, "web-0", node, cid0)
	web1 := createPod(ctx, t, cs, "web-1", node, cid1)
	far := createPod(ctx, t, cs, "far-0", other, cidX)

	dyn, err := dynamic.NewForConfig(cl.Admin)
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	go (&podwatch.Watcher{Client: dyn, Node: node, Table: pods.Default, Log: slog.Default(), Retry: time.Second}).Run(wctx)
	waitNames(t, string(web0.UID), cid0, pods.Names{Pod: "web-0", Namespace: "shop", Container: "web"})
	waitNames(t, string(web1.UID), cid1, pods.Names{Pod: "web-1", Namespace: "shop", Container: "web"})

	slice := func(p *corev1.Pod) string {
		return "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + strings.ReplaceAll(string(p.UID), "-", "_") + ".slice"
	}
	scope := func(p *corev1.Pod, cid string) string { return slice(p) + "/cri-containerd-" + cid + ".scope" }
	var ids []uint64
	for _, c := range []string{scope(web0, cid0), scope(web0, cid0r), scope(web1, cid1), scope(far, cidX)} {
		_, id := tree.Make(c)
		ids = append(ids, id)
	}
	waitWalked(t, ids...)
	w, s := applySpec(t, filepath.Base(work))
	tree.Run(scope(web0, cid0), work, "25")
	tree.Run(scope(web1, cid1), work, "9")
	tree.Run(scope(far, cidX), work, "4")
	wantCounts(t, "two pods", w, s, map[string]int64{
		"web-0,shop,web": 25, "web-1,shop,web": 9, string(far.UID) + ",," + cidX: 4})

	// web-0's container restarts: the kubelet reports its new ID, the
	// old one as the last state's.
	web0.Status.ContainerStatuses[0].ContainerID = "containerd://" + cid0r
	web0.Status.ContainerStatuses[0].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ContainerID: "containerd://" + cid0, ExitCode: 1}
	web0.Status.ContainerStatuses[0].RestartCount = 1
	if web0, err = cs.CoreV1().Pods("shop").UpdateStatus(ctx, web0, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitNames(t, string(web0.UID), cid0r, pods.Names{Pod: "web-0", Namespace: "shop", Container: "web"})
	tree.Remove(scope(web0, cid0))
	tree.Run(scope(web0, cid0r), work, "6")
	wantCounts(t, "after web-0's restart", w, s, map[string]int64{
		"web-0,shop,web": 31, "web-1,shop,web": 9, string(far.UID) + ",," + cidX: 4})

	// web-1 exits: its object goes, then its cgroups.
	if err := cs.CoreV1().Pods("shop").Delete(ctx, "web-1", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	tree.Remove(scope(web1, cid1))
	tree.Remove(slice(web1))
	waitGone(t, ids[2])
	wantCounts(t, "after web-1 exited", w, s, map[string]int64{
		"web-0,shop,web": 31, "web-1,shop,web": 9, string(far.UID) + ",," + cidX: 4})
}

// startShop starts the API server with the namespace shop and its
// default service account (no controller manager makes it).
func startShop(ctx context.Context, t *testing.T) (*kubetest.Cluster, *kubernetes.Clientset) {
	t.Helper()
	cl := kubetest.Start(t)
	cs := cl.Clientset()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "shop"}}
	if _, err := cs.CoreV1().ServiceAccounts("shop").Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return cl, cs
}

// createPod creates a pod of one container "web" bound to node, and its
// status as the kubelet writes it: running, with container ID cid.
func createPod(ctx context.Context, t *testing.T, cs *kubernetes.Clientset, name, node, cid string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop"},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "web", Image: "example.invalid/web"}}},
	}
	p, err := cs.CoreV1().Pods("shop").Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "web", ContainerID: "containerd://" + cid, Ready: true,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	if p, err = cs.CoreV1().Pods("shop").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return p
}

// waitNames polls the table until the pod's container has names.
func waitNames(t *testing.T, uid, cid string, want pods.Names) {
	t.Helper()
	ref := pods.Ref{PodUID: uid, ContainerID: cid}
	for deadline := time.Now().Add(2 * time.Minute); pods.Default.Names(ref) != want; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("pod %s container %s: %+v after 2 minutes, want %+v", uid, cid[:8], pods.Default.Names(ref), want)
		}
	}
}

// waitWalked polls until the cgroup walk (the watch's, every 5 s, or a
// read's) finds the cgroups.
func waitWalked(t *testing.T, ids ...uint64) {
	t.Helper()
	for _, id := range ids {
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
			if _, live := pods.CgroupPath(id); live {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("cgroup %d not walked 2 minutes after it was made", id)
			}
		}
	}
}

// waitGone polls until the cgroup walk no longer finds the cgroup id
// (removed: the watch walks the tree at least every 5 s).
func waitGone(t *testing.T, id uint64) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if _, live := pods.CgroupPath(id); !live {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("cgroup %d still walked 2 minutes after its removal", id)
		}
	}
}

// spec counts the workload's opens (one per iteration) by pod, namespace
// and container.
const podSpec = `probe "tracepoint" "opens" {
  event = "syscalls:sys_enter_openat"
  on_entry {
    when = comm == "COMM"
    count "opens" { by = { pod = pod, namespace = namespace, container = container } }
  }
}`

// applySpec applies the spec, counting comm's opens, in a workspace of the test's own, destroyed
// when it ends.
func applySpec(t *testing.T, comm string) (*runtime.Workspace, *runtime.State) {
	t.Helper()
	cfg, diags := spec.Parse(map[string][]byte{"pods.hcl": []byte(strings.Replace(podSpec, "COMM", comm, 1))})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	f, err := bpf.Detect(bpf.DetectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.LoadTracepoints([]string{"syscalls:sys_enter_openat"}); err != nil {
		t.Fatal(err)
	}
	out, diags := compiler.Compile(cfg, f)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	w, err := runtime.Open(t.TempDir(), fmt.Sprintf("podwatch-%d-%s", os.Getpid(), t.Name()))
	if err != nil {
		t.Fatal(err)
	}
	s, _, err := w.Begin()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if s, err := w.State(); err == nil && len(s.Probes) > 0 {
			if _, _, err := w.Destroy(s, nil); err != nil {
				t.Errorf("destroy: %v", err)
			}
		}
		w.Unlock()
		if err := os.RemoveAll(w.PinDir()); err != nil {
			t.Error(err)
		}
	})
	next, _, err := w.Apply(s, out, runtime.Diff(s, out, nil))
	if err != nil {
		t.Fatal(err)
	}
	return w, next
}

// wantCounts reads the counts, keyed "pod,namespace,container".
func wantCounts(t *testing.T, what string, w *runtime.Workspace, s *runtime.State, want map[string]int64) {
	t.Helper()
	res := w.Read(s.Probes)
	if len(res) != 1 || res[0].Error != "" || len(res[0].Aggregations) != 1 {
		t.Fatalf("%s: read %+v", what, res)
	}
	got := map[string]int64{}
	for _, e := range res[0].Aggregations[0].Entries {
		var parts []string
		for _, f := range e.Key {
			parts = append(parts, f.Text())
		}
		got[strings.Join(parts, ",")] = *e.Value
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s: %v, want %v", what, got, want)
	}
}

// workload builds the runtime tests' workload, named for this process.
func workload(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), fmt.Sprintf("pw%d", os.Getpid()))
	out, err := exec.Command("gcc", "-O0", "-static", "-o", path, "../../runtime/testdata/work.c").CombinedOutput()
	if err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	return path
}
