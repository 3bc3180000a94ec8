package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"github.com/probectl/probectl/internal/testenv"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/probectl/probectl/fleet/api/v1alpha1"
	"github.com/probectl/probectl/fleet/kubetest"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// agentImage is the DaemonSet's image name (kustomization.yaml's);
// testdata/kubelab's overlay sets the tag only.
const agentImage = "ghcr.io/probectl/probectl"

// daemonSetLab is deploy/kubernetes applied with kubectl -k to a real
// node (kubelet, containerd) of a real control plane.
type daemonSetLab struct {
	t     *testing.T
	c     *kubetest.Cluster
	n     *kubetest.Node
	admin client.Client
	cs    *kubernetes.Clientset
	dir   string
}

// buildAgentImages builds the static probectl (as deploy/kubernetes/
// Dockerfile does) and imports it as agentImage:TAG for each tag; each
// image differs (a file naming its tag), so each tag is a new image.
func (l *daemonSetLab) buildAgentImages(tags ...string) {
	t := l.t
	bin := filepath.Join(l.dir, "probectl")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, tag := range tags {
		stamp := filepath.Join(l.dir, "image-"+tag)
		os.WriteFile(stamp, []byte(tag+"\n"), 0o644)
		archive := filepath.Join(l.dir, "probectl-"+tag+".tar")
		err := kubetest.WriteOCIArchive(archive, agentImage+":"+tag, []string{"/usr/local/bin/probectl"},
			kubetest.ImageFile{Path: "usr/local/bin/probectl", Source: bin, Mode: 0o755},
			kubetest.ImageFile{Path: "etc/probectl-image", Source: stamp, Mode: 0o644})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.n.ImportImage(archive); err != nil {
			t.Fatal(err)
		}
	}
}

// kubectl runs the lab's kubectl as the admin.
func (l *daemonSetLab) kubectl(args ...string) string {
	l.t.Helper()
	assets, err := kubetest.Assets()
	if err != nil {
		l.t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(assets, "kubectl"), append([]string{"--kubeconfig", l.c.Kubeconfig}, args...)...).CombinedOutput()
	if err != nil {
		l.t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// agentPod waits until the DaemonSet's one pod runs image tag and is
// Ready, and returns it.
func (l *daemonSetLab) agentPod(tag string) *corev1.Pod {
	l.t.Helper()
	deadline := time.Now().Add(4 * time.Minute)
	last := "no pod"
	for time.Now().Before(deadline) {
		pods, err := l.cs.CoreV1().Pods("probectl-system").List(context.Background(),
			metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=agent"})
		if err != nil {
			l.t.Fatal(err)
		}
		if len(pods.Items) == 1 {
			p := &pods.Items[0]
			last = kubetest.PodSummary(p)
			if p.DeletionTimestamp == nil && p.Spec.Containers[0].Image == agentImage+":"+tag && podReady(p) {
				return p
			}
		} else {
			last = fmt.Sprintf("%d pods", len(pods.Items))
		}
		time.Sleep(time.Second)
	}
	l.t.Fatalf("the agent pod of %s is not Ready: %s\nkubelet: %s", tag, last, tailFile(filepath.Join(l.n.Dir, "kubelet.log")))
	return nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func tailFile(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// podMetric reads series from the pod's /metrics (-1: absent).
func podMetric(t *testing.T, p *corev1.Pod, series string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + p.Status.PodIP + ":9479/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return seriesValue(b, series)
}

// podToken reads the projected service account token the kubelet wrote
// for the pod.
func (l *daemonSetLab) podToken(p *corev1.Pod) string {
	l.t.Helper()
	files, _ := filepath.Glob(filepath.Join(l.n.KubeletRoot, "pods", string(p.UID), "volumes", "kubernetes.io~projected", "*", "token"))
	if len(files) != 1 {
		l.t.Fatalf("pod %s: projected tokens %v, want one", p.Name, files)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		l.t.Fatal(err)
	}
	return string(b)
}

// tokenValid asks the API server (TokenReview) whether token
// authenticates, and as whom.
func (l *daemonSetLab) tokenValid(token string) (bool, string) {
	l.t.Helper()
	tr, err := l.cs.AuthenticationV1().TokenReviews().Create(context.Background(),
		&authv1.TokenReview{Spec: authv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		l.t.Fatal(err)
	}
	return tr.Status.Authenticated, tr.Status.User.Username + " " + fmt.Sprint(tr.Status.User.Extra["authentication.kubernetes.io/node-name"]) + " " + tr.Status.Error
}

// counted waits until the ProbeSet's record on the node is Applied and
// the pod's /metrics has series at want, and returns the record. (The
// record's hits count every time the probe ran, before its when filter:
// the metric is the exact count.)
func (l *daemonSetLab) counted(p *corev1.Pod, ns, name, series string, want float64) *v1alpha1.ProbeSetNode {
	l.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	got := "no record"
	for time.Now().Before(deadline) {
		var r v1alpha1.ProbeSetNode
		if err := l.admin.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name + "." + l.n.Name}, &r); err == nil {
			m := podMetric(l.t, p, series)
			got = fmt.Sprintf("phase %s errors %v, metric %v", r.Status.Phase, r.Status.Errors, m)
			if r.Status.Phase == v1alpha1.PhaseApplied && m == want {
				return &r
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	l.t.Fatalf("record %s.%s and %s on pod %s: %s, want Applied and %v", name, l.n.Name, series, p.Name, got, want)
	return nil
}

func randomName(prefix string) string {
	b := make([]byte, 4)
	rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// getppidWork calls getppid(2) argv[1] times.
const getppidWork = `#include <stdlib.h>
#include <unistd.h>
#include <sys/syscall.h>
int main(int argc, char **argv) {
	long n = argc > 1 ? atol(argv[1]) : 0;
	for (long i = 0; i < n; i++) syscall(SYS_getppid);
	return 0;
}
`

// TestDaemonSetOnKubelet applies deploy/kubernetes, unmodified (the
// testdata/kubelab overlay sets the image tag only), to a real node: the
// agent's pod starts and becomes Ready under its securityContext, mounts
// and probes; a ProbeSet counts a workload on the node exactly, in the
// record and the pod's /metrics; a rolling update to a new image keeps the
// probe counting with no gap and no double count (the new agent adopts
// the pins); the pod's projected token stops authenticating once the pod
// is deleted.
func TestDaemonSetOnKubelet(t *testing.T) {
	l := newDaemonSetLab(t)
	ctx := context.Background()
	comm := randomName("kl")
	work := buildC(t, l.dir, comm, getppidWork)
	runWork := func(n int) {
		t.Helper()
		if out, err := exec.Command(work, strconv.Itoa(n)).CombinedOutput(); err != nil {
			t.Fatalf("workload: %v\n%s", err, out)
		}
	}

	l.kubectl("apply", "-k", "testdata/kubelab")
	pod := l.agentPod("lab1")
	if rc := pod.Status.ContainerStatuses[0].RestartCount; rc != 0 {
		t.Errorf("agent pod restarts: %d, want 0", rc)
	}
	token := l.podToken(pod)
	if ok, who := l.tokenValid(token); !ok || !strings.Contains(who, "system:serviceaccount:probectl-system:probectl-agent ["+l.n.Name+"]") {
		t.Fatalf("the pod's token: authenticated %v as %s, want the agent's service account on %s", ok, who, l.n.Name)
	}
	ns, series := l.applyCalls(comm)
	runWork(7)
	before := l.counted(pod, clusterNS, "cluster."+ns+"-calls", series, 7)

	l.memoryHolds(ns, pod)
	l.counted(pod, clusterNS, "cluster."+ns+"-calls", series, 7)

	// Rolling update: 5 calls once the old agent is gone and before the
	// new one runs, 4 after; the probe never stopped counting.
	l.kubectl("-n", "probectl-system", "set", "image", "daemonset/probectl-agent", "agent="+agentImage+":lab2")
	l.waitPodGone(pod)
	runWork(5)
	newPod := l.agentPod("lab2")
	runWork(4)
	after := l.counted(newPod, clusterNS, "cluster."+ns+"-calls", series, 7+5+4)
	if before.Status.AppliedDigest != after.Status.AppliedDigest {
		t.Errorf("applied digest %s after the update, want %s (adopted, not re-applied)", after.Status.AppliedDigest, before.Status.AppliedDigest)
	}
	l.tokenRefused(token, pod.Name)

	// Deleting the pod by hand: its token dies with it.
	newToken := l.podToken(newPod)
	if err := l.cs.CoreV1().Pods("probectl-system").Delete(ctx, newPod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	l.waitPodGone(newPod)
	l.tokenRefused(newToken, newPod.Name)
}

// newDaemonSetLab starts a control plane and a node and imports the
// agent's images lab1 and lab2.
func newDaemonSetLab(t *testing.T) *daemonSetLab {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a kubelet runs as root")
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		testenv.Absent(t, "gcc is missing")
	}
	l := &daemonSetLab{t: t, c: kubetest.Start(t), dir: t.TempDir()}
	l.n = kubetest.StartNode(t, l.c, kubetest.NodeOptions{})
	l.cs = l.c.Clientset()
	var err error
	if l.admin, err = client.New(l.c.Admin, client.Options{Scheme: kubetest.Scheme()}); err != nil {
		t.Fatal(err)
	}
	l.buildAgentImages("lab1", "lab2")
	return l
}

// clusterNS holds the records of ClusterProbeSets.
const clusterNS = "probectl-system"

// applyCalls creates the ClusterProbeSet PREFIX-calls in apply mode
// (node-wide: the workload runs on the host, in no pod):
// getppid(2) calls of comm, counted. It returns PREFIX and the count's
// series, once the set is applied.
func (l *daemonSetLab) applyCalls(comm string) (prefix, series string) {
	l.t.Helper()
	ctx := context.Background()
	prefix = randomName("team-")
	spec := fmt.Sprintf("probe \"tracepoint\" \"getppid\" {\n  event = \"syscalls:sys_enter_getppid\"\n  on_entry {\n    when = comm == %q\n    count \"calls\" {}\n  }\n}\n", comm)
	ps := &v1alpha1.ClusterProbeSet{ObjectMeta: metav1.ObjectMeta{Name: prefix + "-calls"},
		Spec: v1alpha1.ProbeSetSpec{HCL: spec, Mode: v1alpha1.ModeApply}}
	if err := l.admin.Create(ctx, ps); err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(func() { l.destroyWorkspaces("k8s-cluster-" + prefix + "-") })
	l.waitApplied(clusterNS, "cluster."+prefix+"-calls") // the series appears with the first call
	return prefix, fmt.Sprintf(`probectl_count_tracepoint_getppid_calls_total{probeset="%s-calls"}`, prefix)
}

// tokenRefused waits until the API server refuses the deleted pod's
// token: at once but for its authentication cache (10 s).
func (l *daemonSetLab) tokenRefused(token, pod string) {
	l.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ok, who := l.tokenValid(token)
		if !ok {
			l.t.Logf("pod %s's token refused after the pod was deleted: %s", pod, who)
			return
		}
		if time.Now().After(deadline) {
			l.t.Fatalf("the token of pod %s, deleted, still authenticates (as %s) after 60 s", pod, who)
		}
		time.Sleep(time.Second)
	}
}

// waitPodGone waits until the pod object is gone.
func (l *daemonSetLab) waitPodGone(p *corev1.Pod) {
	l.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		cur, err := l.cs.CoreV1().Pods(p.Namespace).Get(context.Background(), p.Name, metav1.GetOptions{})
		if err != nil || cur.UID != p.UID {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	l.t.Fatalf("pod %s not deleted", p.Name)
}

// destroyWorkspaces destroys the test's workspaces in the DaemonSet's
// host state directory (/var/lib/probectl), where the agent left them.
func (l *daemonSetLab) destroyWorkspaces(prefix string) {
	for _, ws := range workspacesOf("/var/lib/probectl") {
		if !strings.HasPrefix(ws, prefix) {
			continue
		}
		var out strings.Builder
		if run([]string{"-state-dir", "/var/lib/probectl", "-workspace", ws, "destroy", "-auto-approve"}, &out, &out) != 0 {
			l.t.Errorf("destroy %s: %s", ws, out.String())
			continue
		}
		os.RemoveAll(filepath.Join("/var/lib/probectl", ws)) // the test's alone

	}
}

// loadSpec keeps the agent busy: a CPU profile by process, user and
// kernel stack (symbolized at every scrape) and every system call counted
// by process, each map at its largest.
const loadSpec = `probe "profile" "cpu" {
  frequency = 999
  on_entry {
    count "samples" {
      by       = [pid, comm, ustack, kstack]
      max_keys = 65536
    }
  }
}
probe "tracepoint" "sys" {
  event = "raw_syscalls:sys_enter"
  on_entry {
    count "calls" {
      by       = [pid, comm, args.id]
      max_keys = 65536
    }
  }
}
`

// memoryHolds applies loadSpec beside the test's ProbeSet, scrapes the
// pod's /metrics 8 at a time for 40 s while processes come and go, and
// checks the agent's container was never at its memory limit (the memory
// cgroup's failcnt), was not OOM-killed and did not restart.
func (l *daemonSetLab) memoryHolds(ns string, pod *corev1.Pod) {
	t := l.t
	t.Helper()
	ctx := context.Background()
	ps := &v1alpha1.ClusterProbeSet{ObjectMeta: metav1.ObjectMeta{Name: ns + "-load"},
		Spec: v1alpha1.ProbeSetSpec{HCL: loadSpec, Mode: v1alpha1.ModeApply}}
	if err := l.admin.Create(ctx, ps); err != nil {
		t.Fatal(err)
	}
	l.waitApplied(clusterNS, "cluster."+ns+"-load")
	stop := time.Now().Add(40 * time.Second)
	done := make(chan int)
	for i := 0; i < 8; i++ {
		go func() {
			n := 0
			client := &http.Client{Timeout: 30 * time.Second}
			for time.Now().Before(stop) {
				if resp, err := client.Get("http://" + pod.Status.PodIP + ":9479/metrics"); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					n++
				}
			}
			done <- n
		}()
	}
	for time.Now().Before(stop) {
		exec.Command("sh", "-c", "for i in 1 2 3 4 5 6 7 8 9 10; do /bin/true; done").Run()
	}
	scrapes := 0
	for i := 0; i < 8; i++ {
		scrapes += <-done
	}
	cg := l.containerCgroup(pod, "memory")
	read := func(f string) int64 {
		b, err := os.ReadFile(filepath.Join(cg, f))
		if err != nil {
			t.Fatal(err)
		}
		v, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return v
	}
	limit, peak, failcnt := read("memory.limit_in_bytes"), read("memory.max_usage_in_bytes"), read("memory.failcnt")
	stat, _ := os.ReadFile(filepath.Join(cg, "memory.stat"))
	t.Logf("memory under load: %d scrapes, peak %d MiB of a %d MiB limit, failcnt %d; now %s", scrapes, peak>>20, limit>>20, failcnt, statLines(stat, "total_rss", "total_cache"))
	if limit != 512<<20 || failcnt != 0 || peak >= limit {
		t.Errorf("agent memory: limit %d, peak %d, failcnt %d: want the 512Mi limit never reached", limit, peak, failcnt)
	}
	cur, err := l.cs.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st := cur.Status.ContainerStatuses[0]; st.RestartCount != 0 || st.LastTerminationState.Terminated != nil {
		t.Errorf("agent after the load: %s", kubetest.PodSummary(cur))
	}
	if err := l.admin.Delete(ctx, ps); err != nil {
		t.Fatal(err)
	}
}

// waitApplied waits until the ProbeSet's record on the node is Applied.
func (l *daemonSetLab) waitApplied(ns, name string) {
	l.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	var r v1alpha1.ProbeSetNode
	for time.Now().Before(deadline) {
		err := l.admin.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name + "." + l.n.Name}, &r)
		if err == nil && r.Status.Phase == v1alpha1.PhaseApplied {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	l.t.Fatalf("record %s.%s: phase %s errors %v, want Applied", name, l.n.Name, r.Status.Phase, r.Status.Errors)
}

// containerCgroup is the pod's container's cgroup in hierarchy (v1)
// under the node's cgroup root.
func (l *daemonSetLab) containerCgroup(p *corev1.Pod, hierarchy string) string {
	l.t.Helper()
	id := p.Status.ContainerStatuses[0].ContainerID
	id = id[strings.Index(id, "://")+3:]
	matches, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", hierarchy, l.n.CgroupRoot, "kubepods*", "*", "pod"+string(p.UID), id))
	if len(matches) == 0 {
		matches, _ = filepath.Glob(filepath.Join("/sys/fs/cgroup", hierarchy, l.n.CgroupRoot, "kubepods*", "pod"+string(p.UID), id))
	}
	if len(matches) != 1 {
		l.t.Fatalf("the cgroup of container %s: %v", id, matches)
	}
	return matches[0]
}

// statLines picks keys from a memory.stat, in MiB.
func statLines(stat []byte, keys ...string) string {
	var out []string
	for _, line := range strings.Split(string(stat), "\n") {
		f := strings.Fields(line)
		for _, k := range keys {
			if len(f) == 2 && f[0] == k {
				v, _ := strconv.ParseInt(f[1], 10, 64)
				out = append(out, fmt.Sprintf("%s %d MiB", k, v>>20))
			}
		}
	}
	return strings.Join(out, ", ")
}
