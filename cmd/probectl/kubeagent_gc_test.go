package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"github.com/probectl/probectl/internal/testenv"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/probectl/probectl/fleet"
	"github.com/probectl/probectl/fleet/api/v1alpha1"
	"github.com/probectl/probectl/fleet/kubetest"
	"github.com/probectl/probectl/runtime"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// orphanLab is a real control plane with the garbage collector and the
// namespace controller, one node agent process on the host, and a
// workload on the host (in no pod) whose calls the sets' uprobes count.
// The sets whose counts the test checks are ClusterProbeSets (node-wide,
// key.Namespace ""); a namespaced ProbeSet is a tenant's and counts only
// its pods' calls (README "Tenants: a namespace traces its own pods").
type orphanLab struct {
	t       *testing.T
	ctx     context.Context
	c       *kubetest.Cluster
	admin   client.Client
	node    string
	kc      string
	state   string
	workBin string
	agent   *kubeAgent
	counted map[types.NamespacedName]int64 // calls each live ProbeSet counted
	removed []*victim
}

// victim is what a ProbeSet put on the node: its workspace, pin
// directory and the kernel objects its state recorded.
type victim struct {
	key              types.NamespacedName
	ws, pins         string
	progs, maps      []uint32
	links            []uint32
	stateDirOfVictim string
}

// TestKubeAgentOrphans: whatever order deletions come in — the garbage
// collector deleting the records after a ProbeSet deleted in the
// background or in the foreground, a namespace deleted, a record deleted
// by hand before its ProbeSet, a ProbeSet deleted while the agent was
// down (with its state, or with its state lost and only its pins left) —
// the node agent destroys what no ProbeSet wants: its programs, links,
// maps and pins are gone, while another ProbeSet on the node counts on
// exactly. A list the API refuses (RBAC) destroys nothing. Every
// removal is logged, counted and written as an Event on the node;
// hostile entries in the state directory, and pins of the agent's name
// format that another state directory owns, are left alone.
func TestKubeAgentOrphans(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("applying probes needs root")
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		testenv.Absent(t, "gcc is missing")
	}
	l := newOrphanLab(t)
	outside := l.plantHostile()
	foreign := l.applyForeign()
	l.start()

	keep := l.create(clusterSet("gc-keep-keep"))
	l.runWork(5)

	// (a) The ProbeSet deleted, in the background and in the foreground:
	// the garbage collector deletes its record while the agent is
	// stopped; the agent, continued, finds no record, yet removes all.
	for _, policy := range []metav1.DeletionPropagation{metav1.DeletePropagationBackground, metav1.DeletePropagationForeground} {
		v := l.create(clusterSet("gc-a-" + strings.ToLower(string(policy))))
		l.runWork(3)
		l.whileStopped(v, func() { l.deleteProbeSet(v, policy) })
		l.runWork(2)
	}
	// (b) The namespace deleted: the namespace controller deletes the
	// ProbeSet, the garbage collector its record. A tenant's ProbeSet:
	// gc-ns has no pods on the node, so it counts 0 of the host's calls
	// by design (create waits for its record Applied with 0); what is
	// checked is that its workspace, pins, programs, links and maps exist
	// and then are gone.
	v := l.create(types.NamespacedName{Namespace: "gc-ns", Name: "ns"})
	l.runWork(2) // the workload fails for fewer than 2 calls (they sum to 0)
	l.whileStopped(v, func() {
		if err := l.admin.Delete(l.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gc-ns"}}); err != nil {
			l.t.Fatal(err)
		}
		l.poll("namespace gc-ns deleted", func() string {
			err := l.admin.Get(l.ctx, types.NamespacedName{Name: "gc-ns"}, &corev1.Namespace{})
			return notGone(err)
		})
	})
	// (c) The record deleted by hand first, then the ProbeSet.
	v = l.create(clusterSet("gc-a-hand"))
	l.whileStopped(v, func() {
		rk := l.recordKey(v.key)
		rec := &v1alpha1.ProbeSetNode{ObjectMeta: metav1.ObjectMeta{Namespace: rk.Namespace, Name: rk.Name}}
		if err := l.admin.Delete(l.ctx, rec); err != nil {
			l.t.Fatal(err)
		}
		l.deleteProbeSet(v, metav1.DeletePropagationBackground)
	})
	if got := l.agent.metric("probectl_agent_orphans_removed_total"); got != 4 {
		t.Errorf("orphans removed: %v, want 4", got)
	}

	// (d) Deleted while the agent is down (killed): one with its state,
	// one whose state directory was lost (only its pins are left).
	down, lost := l.create(clusterSet("gc-a-down")), l.create(clusterSet("gc-a-lost"))
	l.runWork(2)
	l.agent.kill()
	if err := os.RemoveAll(lost.stateDirOfVictim); err != nil {
		t.Fatal(err)
	}
	for _, v := range []*victim{down, lost} {
		l.deleteProbeSet(v, metav1.DeletePropagationBackground)
		l.present(v)
	}
	l.start()
	l.gone(down)
	l.gone(lost)
	if got := l.agent.metric("probectl_agent_orphans_removed_total"); got != 2 {
		t.Errorf("orphans removed at start: %v, want 2", got)
	}
	for _, v := range []*victim{down, lost} {
		if !strings.Contains(l.agentLog(), `"msg":"removed an orphaned workspace","node":"`+l.node+`","workspace":"`+v.ws+`"`) {
			t.Errorf("no log line for the removal of %s:\n%s", v.ws, l.agentLog())
		}
	}
	l.runWork(4)

	// (e) The agent may not list ProbeSets: nothing is destroyed, the
	// probes count on; allowed again, the orphan goes.
	denied := l.create(clusterSet("gc-a-denied"))
	l.runWork(2) // the workload fails for fewer than 2 calls (they sum to 0)
	l.setListProbeSets(false)
	l.deleteProbeSet(denied, metav1.DeletePropagationBackground)
	before := strings.Count(l.agent.log.String(), "list ProbeSets")
	l.poll("three failed syncs", func() string {
		if n := strings.Count(l.agent.log.String(), "list ProbeSets") - before; n < 3 {
			return fmt.Sprintf("%d failed syncs", n)
		}
		return ""
	})
	l.present(denied)
	l.work(6)                                                                                                          // the records stay as they were: no sync gets past the list
	series := fmt.Sprintf(`probectl_count_user_%s_calls_total{probeset="%s"}`, probeName(denied.key), denied.key.Name) // a ClusterProbeSet's label
	if got := l.agent.metric(series); got != 8 {
		t.Errorf("%s: %v, want 8", series, got)
	}
	l.setListProbeSets(true)
	l.gone(denied)
	if got := l.agent.metric("probectl_agent_orphans_removed_total"); got != 3 {
		t.Errorf("orphans removed: %v, want 3", got)
	}

	// The ProbeSet that stayed counted every call; each removal was an
	// Event on the node; the hostile entries are untouched.
	l.runWork(3)
	l.waitCounted(keep.key)
	l.checkEvents()
	l.checkHostile(outside)
	l.present(keep)
	l.present(foreign)
}

func newOrphanLab(t *testing.T) *orphanLab {
	ctx := context.Background()
	c, admin := kubeLab(t)
	c.StartControllerManager(t, "garbagecollector", "namespace")
	dir := t.TempDir()
	b := make([]byte, 4)
	rand.Read(b)
	l := &orphanLab{t: t, ctx: ctx, c: c, admin: admin, node: "gc-" + hex.EncodeToString(b),
		state: filepath.Join(dir, "state"), workBin: buildC(t, dir, "gcwork", serveWork), counted: map[types.NamespacedName]int64{}}
	cfg, err := c.PodToken(ctx, "probectl-system", "probectl-agent", l.node)
	if err != nil {
		t.Fatal(err)
	}
	l.kc = filepath.Join(dir, "agent.kubeconfig")
	if err := c.WriteKubeconfig(l.kc, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, ws := range workspacesOf(l.state) {
			var out strings.Builder
			run([]string{"-state-dir", l.state, "-workspace", ws, "destroy", "-auto-approve"}, &out, &out)
		}
	})
	return l
}

func (l *orphanLab) start() {
	l.agent = startKubeAgent(l.t, l.node, l.kc, l.state, "")
}

// plantHostile puts in the state directory what is no workspace of the
// agent's: a symlink with a workspace's name to a directory outside, and
// a directory of another name. It returns the directory outside.
func (l *orphanLab) plantHostile() string {
	outside := filepath.Join(filepath.Dir(l.state), "outside")
	for _, d := range []string{filepath.Join(outside, "k8s-x-0123456789ab"), filepath.Join(l.state, "mine")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			l.t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "canary"), []byte("x"), 0o600); err != nil {
		l.t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(l.state, "k8s-hostile-0123456789ab")); err != nil {
		l.t.Fatal(err)
	}
	return outside
}

func (l *orphanLab) checkHostile(outside string) {
	for _, p := range []string{filepath.Join(outside, "canary"), filepath.Join(outside, "k8s-x-0123456789ab"), filepath.Join(l.state, "mine"), filepath.Join(l.state, "k8s-hostile-0123456789ab")} {
		if _, err := os.Lstat(p); err != nil {
			l.t.Errorf("hostile entry: %v", err)
		}
	}
}

func probeName(k types.NamespacedName) string {
	return strings.NewReplacer("-", "", "/", "").Replace(k.Namespace + k.Name)
}

// clusterSet is the key of ClusterProbeSet name.
func clusterSet(name string) types.NamespacedName {
	return types.NamespacedName{Name: name}
}

// setObject is the set key names: a ClusterProbeSet when key.Namespace
// is "", else a ProbeSet.
func setObject(key types.NamespacedName) client.Object {
	if key.Namespace == "" {
		return &v1alpha1.ClusterProbeSet{ObjectMeta: metav1.ObjectMeta{Name: key.Name}}
	}
	return &v1alpha1.ProbeSet{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
}

// recordKey is the key of the node's record of the set key: a
// ClusterProbeSet's is in probectl-system, named cluster.NAME.NODE.
func (l *orphanLab) recordKey(key types.NamespacedName) types.NamespacedName {
	if key.Namespace == "" {
		return types.NamespacedName{Namespace: fleet.ClusterNamespace, Name: "cluster." + key.Name + "." + l.node}
	}
	return types.NamespacedName{Namespace: key.Namespace, Name: key.Name + "." + l.node}
}

// create creates the set key (a ProbeSet also its namespace), counting
// the workload's calls, waits until the node applied it, and returns what
// it put on the node. A ClusterProbeSet counts every call from now on; a
// tenant's ProbeSet, whose namespace has no pods here, counts none.
func (l *orphanLab) create(key types.NamespacedName) *victim {
	l.t.Helper()
	if key.Namespace != "" {
		err := l.admin.Create(l.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: key.Namespace}})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			l.t.Fatal(err)
		}
	}
	hcl := fmt.Sprintf("probe \"user\" %q {\n  binary    = %q\n  functions = [\"target\"]\n  on_entry {\n    count \"calls\" {}\n  }\n}\n", probeName(key), l.workBin)
	spec := v1alpha1.ProbeSetSpec{HCL: hcl, Mode: v1alpha1.ModeApply}
	obj := setObject(key)
	switch o := obj.(type) {
	case *v1alpha1.ClusterProbeSet:
		o.Spec = spec
	case *v1alpha1.ProbeSet:
		o.Spec = spec
	}
	if err := l.admin.Create(l.ctx, obj); err != nil {
		l.t.Fatal(err)
	}
	if key.Namespace == "" {
		l.counted[key] = 0
	}
	l.waitCountedN(key, 0)
	return l.objects(key)
}

// runWork calls target n times and waits until every live ProbeSet's
// record counted them.
func (l *orphanLab) runWork(n int) {
	l.t.Helper()
	l.work(n)
	for k := range l.counted {
		l.waitCounted(k)
	}
}

// work calls target n times: every live ProbeSet counts them.
func (l *orphanLab) work(n int) {
	l.t.Helper()
	if out, err := exec.Command(l.workBin, strconv.Itoa(n)).CombinedOutput(); err != nil {
		l.t.Fatalf("workload: %v\n%s", err, out)
	}
	for k := range l.counted {
		l.counted[k] += int64(n)
	}
}

// waitCounted waits until key's record on the node is applied with
// exactly the calls counted.
func (l *orphanLab) waitCounted(key types.NamespacedName) {
	l.t.Helper()
	l.waitCountedN(key, l.counted[key])
}

// waitCountedN waits until key's record on the node is applied with
// exactly n calls counted.
func (l *orphanLab) waitCountedN(key types.NamespacedName, n int64) {
	l.t.Helper()
	want := fmt.Sprintf("Applied user.%s=%d", probeName(key), n)
	l.poll(key.String()+" "+want, func() string {
		var r v1alpha1.ProbeSetNode
		if err := l.admin.Get(l.ctx, l.recordKey(key), &r); err != nil {
			return err.Error()
		}
		got := string(r.Status.Phase)
		for _, p := range r.Status.Probes {
			if p.Hits != nil {
				got += fmt.Sprintf(" %s=%d", p.Address, *p.Hits)
			}
		}
		if got != want {
			return fmt.Sprintf("%s %v", got, r.Status.Errors)
		}
		return ""
	})
}

// applyForeign applies, with probectl apply into a state directory of
// its own, a workspace named as the agent would name ProbeSet
// gc-a/foreign's: its pins are in bpffs beside the agent's, with the
// agent's name format, but another state's. It returns them.
func (l *orphanLab) applyForeign() *victim {
	l.t.Helper()
	key := types.NamespacedName{Namespace: "gc-a", Name: "foreign"}
	ws := fleet.Workspace(l.node, &v1alpha1.ProbeSet{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}})
	state := filepath.Join(filepath.Dir(l.state), "foreign-state")
	spec := filepath.Join(filepath.Dir(l.state), "foreign.hcl")
	hcl := fmt.Sprintf("probe \"user\" \"foreign\" {\n  binary    = %q\n  functions = [\"target\"]\n  on_entry {\n    count \"calls\" {}\n  }\n}\n", l.workBin)
	if err := os.WriteFile(spec, []byte(hcl), 0o600); err != nil {
		l.t.Fatal(err)
	}
	args := []string{"-state-dir", state, "-workspace", ws}
	var out strings.Builder
	if code := run(append(args, "apply", "-auto-approve", spec), &out, &out); code != 0 {
		l.t.Fatalf("apply: %d\n%s", code, out.String())
	}
	l.t.Cleanup(func() { run(append(args, "destroy", "-auto-approve"), &out, &out) })
	return l.objectsIn(state, ws, key)
}

// objects reads key's workspace's state: its pin directory and the IDs
// of its programs, links and maps.
func (l *orphanLab) objects(key types.NamespacedName) *victim {
	l.t.Helper()
	ws := fleet.Workspace(l.node, &v1alpha1.ProbeSet{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}) // no namespace: a ClusterProbeSet's
	return l.objectsIn(l.state, ws, key)
}

// objectsIn reads the state of workspace ws in state.
func (l *orphanLab) objectsIn(state, ws string, key types.NamespacedName) *victim {
	l.t.Helper()
	w, err := runtime.Open(state, ws)
	if err != nil {
		l.t.Fatal(err)
	}
	defer w.Close()
	s, err := w.Inspect()
	if err != nil {
		l.t.Fatal(err)
	}
	v := &victim{key: key, ws: ws, pins: w.PinDir(), stateDirOfVictim: filepath.Join(state, ws)}
	for _, p := range s.Probes {
		for _, m := range p.Maps {
			v.maps = append(v.maps, uint32(m.ID))
		}
		for _, k := range p.Links {
			v.links = append(v.links, uint32(k.ID))
			v.progs = append(v.progs, uint32(k.ProgramID))
		}
	}
	if len(v.maps) == 0 || len(v.links) == 0 {
		l.t.Fatalf("%s: no maps or links recorded: %+v", ws, v)
	}
	l.present(v)
	return v
}

// missing lists v's objects that are gone: pin directory, programs,
// links, maps.
func (v *victim) missing() []string {
	var out []string
	if _, err := os.Lstat(v.pins); err != nil {
		out = append(out, "pins "+v.pins)
	}
	for _, id := range v.progs {
		if p, err := ebpf.NewProgramFromID(ebpf.ProgramID(id)); err != nil {
			out = append(out, fmt.Sprintf("program %d", id))
		} else {
			p.Close()
		}
	}
	for _, id := range v.links {
		if k, err := link.NewFromID(link.ID(id)); err != nil {
			out = append(out, fmt.Sprintf("link %d", id))
		} else {
			k.Close()
		}
	}
	for _, id := range v.maps {
		if m, err := ebpf.NewMapFromID(ebpf.MapID(id)); err != nil {
			out = append(out, fmt.Sprintf("map %d", id))
		} else {
			m.Close()
		}
	}
	return out
}

// present fails unless every object of v is live.
func (l *orphanLab) present(v *victim) {
	l.t.Helper()
	if m := v.missing(); len(m) > 0 {
		l.t.Fatalf("%s: gone too early: %v\nagent log:\n%s", v.ws, m, l.agentLog())
	}
}

// gone waits until every object of v and its state are gone.
func (l *orphanLab) gone(v *victim) {
	l.t.Helper()
	total := len(v.progs) + len(v.links) + len(v.maps) + 1
	l.poll(v.ws+" removed", func() string {
		m := v.missing()
		if _, err := os.Lstat(filepath.Join(l.state, v.ws)); err == nil {
			return "state left"
		}
		if len(m) != total {
			return fmt.Sprintf("gone only %v", m)
		}
		return ""
	})
	delete(l.counted, v.key)
	l.removed = append(l.removed, v)
}

// whileStopped stops the agent (SIGSTOP), runs del, checks that the
// garbage collector removed v's record and that v's probes are still
// attached (no agent saw it), continues the agent and waits until v is
// gone from the node.
func (l *orphanLab) whileStopped(v *victim, del func()) {
	l.t.Helper()
	p := l.agent.cmd.Process
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		l.t.Fatal(err)
	}
	del()
	l.poll(v.key.String()+"'s record deleted", func() string {
		return notGone(l.admin.Get(l.ctx, l.recordKey(v.key), &v1alpha1.ProbeSetNode{}))
	})
	l.present(v)
	if err := p.Signal(syscall.SIGCONT); err != nil {
		l.t.Fatal(err)
	}
	l.gone(v)
}

// deleteProbeSet deletes v's set with policy and waits until it and
// its record are gone (the garbage collector deletes the record).
func (l *orphanLab) deleteProbeSet(v *victim, policy metav1.DeletionPropagation) {
	l.t.Helper()
	if err := l.admin.Delete(l.ctx, setObject(v.key), client.PropagationPolicy(policy)); err != nil {
		l.t.Fatal(err)
	}
	l.poll(v.key.String()+" and its record deleted ("+string(policy)+")", func() string {
		if s := notGone(l.admin.Get(l.ctx, v.key, setObject(v.key))); s != "" {
			return "set " + s
		}
		return notGone(l.admin.Get(l.ctx, l.recordKey(v.key), &v1alpha1.ProbeSetNode{}))
	})
}

// setListProbeSets gives the agents' role the list verb on ProbeSets and
// ClusterProbeSets (one rule), or takes it away.
func (l *orphanLab) setListProbeSets(allow bool) {
	l.t.Helper()
	var role rbacv1.ClusterRole
	if err := l.admin.Get(l.ctx, types.NamespacedName{Name: "probectl-agent"}, &role); err != nil {
		l.t.Fatal(err)
	}
	for i, r := range role.Rules {
		if slices.Contains(r.Resources, "probesets") {
			role.Rules[i].Verbs = []string{"get", "watch"}
			if allow {
				role.Rules[i].Verbs = append(role.Rules[i].Verbs, "list")
			}
		}
	}
	if err := l.admin.Update(l.ctx, &role); err != nil {
		l.t.Fatal(err)
	}
}

// checkEvents checks that the node's Events name each removal once.
func (l *orphanLab) checkEvents() {
	some := l.removed
	l.t.Helper()
	var evs corev1.EventList
	if err := l.admin.List(l.ctx, &evs, client.InNamespace("default")); err != nil {
		l.t.Fatal(err)
	}
	seen := map[string]int{}
	for _, e := range evs.Items {
		if e.InvolvedObject.Kind == "Node" && e.InvolvedObject.Name == l.node && e.Reason == fleet.ReasonOrphanRemoved {
			for _, v := range some {
				if strings.Contains(e.Message, v.ws+" ") {
					seen[v.ws]++
				}
			}
		}
	}
	for _, v := range some {
		if seen[v.ws] != 1 {
			l.t.Errorf("events naming %s: %d, want 1", v.ws, seen[v.ws])
		}
	}
}

// poll waits up to 90 s until cond returns "" (else what it is waiting for).
func (l *orphanLab) poll(what string, cond func() string) {
	l.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		s := cond()
		if s == "" {
			return
		}
		if time.Now().After(deadline) {
			l.t.Fatalf("waiting for %s: %s\nagent log:\n%s", what, s, l.agentLog())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (l *orphanLab) agentLog() string {
	if l.agent == nil {
		return "(not started)"
	}
	return l.agent.log.String()
}

// notGone is "" when err says the object is gone.
func notGone(err error) string {
	switch {
	case apierrors.IsNotFound(err):
		return ""
	case err == nil:
		return "still there"
	}
	return err.Error()
}
