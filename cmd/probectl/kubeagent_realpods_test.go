package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/fleet"
	"github.com/probectl/probectl/fleet/api/v1alpha1"
	"github.com/probectl/probectl/fleet/kubetest"
	"github.com/probectl/probectl/internal/pods/podstest"
	"github.com/probectl/probectl/runtime"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// realPods is a real node (kubelet, containerd, runc; fleet/kubetest's
// StartNode) with the twork image, and the agent binary of that node.
type realPods struct {
	admin client.Client
	node  *kubetest.Node
	out   string // the pods' /out
	state string // the agent's state dir
	agent *kubeAgent
}

func startRealPods(t *testing.T) *realPods {
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
	r := &realPods{admin: admin, node: node, out: filepath.Join(dir, "out"), state: filepath.Join(dir, "state")}
	if err := os.Mkdir(r.out, 0o755); err != nil {
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
	r.agent = startKubeAgent(t, node.Name, kubeconfig, r.state, "")
	t.Cleanup(func() { r.agent.kill(); destroyWorkspaces(r.state) })
	return r
}

// namespace makes ns with its default service account (which
// kube-controller-manager would make; a pod waits for it).
func (r *realPods) namespace(t *testing.T, ns string) {
	ctx := context.Background()
	if err := r.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	if err := r.admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// run runs pod ns/name of twork: n opens after /out/go, then its done
// file "done-ns-name".
func (r *realPods) run(t *testing.T, ns, name string, n int) *corev1.Pod {
	hostDir := corev1.HostPathDirectory
	p, err := r.node.RunPod(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{AutomountServiceAccountToken: new(bool),
			Containers: []corev1.Container{{Name: "web", Image: "probectl.test/twork:1", ImagePullPolicy: corev1.PullNever,
				Args:         []string{strconv.Itoa(n), "/out/done-" + ns + "-" + name},
				VolumeMounts: []corev1.VolumeMount{{Name: "out", MountPath: "/out"}}}},
			Volumes: []corev1.Volume{{Name: "out", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: r.out, Type: &hostDir}}}}}})
	if err != nil {
		t.Fatalf("pod %s/%s: %v", ns, name, err)
	}
	return p
}

// goAndWait lets the pods make their calls and waits for their done
// files ("ns-name").
func (r *realPods) goAndWait(t *testing.T, pods ...string) {
	if err := os.WriteFile(filepath.Join(r.out, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(90 * time.Second)
	for _, p := range pods {
		for {
			if _, err := os.Stat(filepath.Join(r.out, "done-"+p)); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("pod %s did not finish its calls", p)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// TestRealPodsTenants is TestKubeAgentTenants with real pods: a pod each
// in namespaces shop and bank of one image, making the same system calls
// at the same time; the agent binary of that node applies the same
// ProbeSet in both namespaces, and each tenant's series counts exactly
// its own pod's calls.
func TestRealPodsTenants(t *testing.T) {
	r := startRealPods(t)
	const spec = "probe \"tracepoint\" \"opens\" {\n  event = \"syscalls:sys_enter_openat\"\n  on_entry {\n    count \"n\" { when = comm == \"twork\" }\n  }\n}\n"
	calls := map[string]int{"shop": 7, "bank": 11}
	for ns, n := range calls {
		r.namespace(t, ns)
		if err := r.admin.Create(context.Background(), &v1alpha1.ProbeSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "opens"},
			Spec: v1alpha1.ProbeSetSpec{HCL: spec, Mode: v1alpha1.ModeApply}}); err != nil {
			t.Fatal(err)
		}
		r.run(t, ns, "web-0", n)
	}
	for ns := range calls {
		tenantRecord(t, r.admin, r.agent, ns, "opens", r.node.Name, func(rec *v1alpha1.ProbeSetNode) bool {
			return rec.Status.Phase == v1alpha1.PhaseApplied && rec.Status.Cgroups != nil && *rec.Status.Cgroups == 1
		})
	}
	r.goAndWait(t, "shop-web-0", "bank-web-0")
	for ns, n := range calls {
		want := n + 1 // and the fopen of its done file
		series := `probectl_count_tracepoint_opens_n_total{probeset="` + ns + `/opens"}`
		if got := r.agent.metric(series); got != float64(want) {
			t.Errorf("%s: %v, want %d (its pod's calls only)\nagent log:\n%s", series, got, want, r.agent.log)
		}
	}
}

// TestRealPodsWhenPodName: a ClusterProbeSet (node-wide) counts with
// when = pod == "web-0"; two real pods of one image in shop, web-0 and
// web-1, make their calls at the same time. Once the agent's pod map
// holds web-0's cgroups alone (the pod's, its sandbox's and container's) (filled from the node's pods it
// watches), the series counts exactly web-0's calls.
func TestRealPodsWhenPodName(t *testing.T) {
	r := startRealPods(t)
	const spec = "probe \"tracepoint\" \"opens\" {\n  event = \"syscalls:sys_enter_openat\"\n  on_entry {\n    count \"n\" { when = comm == \"twork\" && pod == \"web-0\" }\n  }\n}\n"
	r.namespace(t, "shop")
	if err := r.admin.Create(context.Background(), &v1alpha1.ClusterProbeSet{ObjectMeta: metav1.ObjectMeta{Name: "opens"},
		Spec: v1alpha1.ProbeSetSpec{HCL: spec, Mode: v1alpha1.ModeApply}}); err != nil {
		t.Fatal(err)
	}
	web0 := r.run(t, "shop", "web-0", 7)
	r.run(t, "shop", "web-1", 11)
	// The pods run (their containers wait for /out/go): their cgroups
	// are made.
	cgroups := podCgroups(t, r.node, web0)
	ws := fleet.Workspace(r.node.Name, &v1alpha1.ProbeSet{ObjectMeta: metav1.ObjectMeta{Name: "opens"}})
	waitPodMap(t, r, ws, fmt.Sprint(cgroups))
	r.goAndWait(t, "shop-web-0", "shop-web-1")
	series := `probectl_count_tracepoint_opens_n_total{probeset="opens"}`
	if got := r.agent.metric(series); got != 7+1 {
		t.Errorf("%s: %v, want 8 (web-0's calls and its done file's open only)\nagent log:\n%s", series, got, r.agent.log)
	}
}

// podCgroups are the ids of pod p's cgroup and those below it (its
// sandbox's and containers'; cgroupfs layout, besteffort, under the
// node's cgroup root in the unified hierarchy), sorted.
func podCgroups(t *testing.T, n *kubetest.Node, p *corev1.Pod) []uint64 {
	dir := filepath.Join(podstest.Root(t), n.CgroupRoot, "kubepods", "besteffort", "pod"+string(p.UID))
	var ids []uint64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		ids = append(ids, info.Sys().(*syscall.Stat_t).Ino)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ids)
	return ids
}

// waitPodMap waits until the pod map of tracepoint.opens in workspace ws
// of the agent holds want.
func waitPodMap(t *testing.T, r *realPods, ws, want string) {
	addr, _ := bpf.ParseAddress("tracepoint.opens")
	got := ""
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		w, err := runtime.Open(r.state, ws)
		if err != nil {
			continue
		}
		s, err := w.Inspect()
		if err == nil && s.Probe(addr) != nil {
			ids, err := w.CgroupMap(s.Probe(addr), "pods_0")
			got = fmt.Sprint(ids, err)
			if err == nil && fmt.Sprint(ids) == want {
				w.Close()
				return
			}
		}
		w.Close()
	}
	t.Fatalf("pod map: %s, want %s\nagent log:\n%s", got, want, r.agent.log)
}
