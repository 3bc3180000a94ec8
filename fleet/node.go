package fleet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/fleet/api/v1alpha1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// LabelProbeSet is the label of a ProbeSetNode naming its ProbeSet.
const LabelProbeSet = "probectl.dev/probeset"

// Applier applies spec sets on the node, each atomically into a workspace
// of its own, keeping the previous probes when an apply fails. The node
// agent of "probectl agent -kubernetes" provides it; a plan-only agent has
// none.
type Applier interface {
	// Apply compiles files for the live kernel and applies them into
	// workspace, for the ProbeSet set (set.Namespace "": a
	// ClusterProbeSet, node-wide; else under the tenant policy of
	// set.Namespace, the programs filtered to its pods' tasks). It returns the digest live
	// afterwards (the previous one when it fails), the plan per probe
	// with its counters, and the diagnostics "file:line:col: summary:
	// detail" of a failure.
	Apply(ctx context.Context, workspace string, set types.NamespacedName, files map[string][]byte) (ApplyResult, error)
	// Restrict fills the cgroup maps of every probe applied in
	// workspace: the tenant filter admits exactly the cgroups cgroups
	// (and those below them; nil: no tenant filter, a ClusterProbeSet),
	// the pod maps of when conditions hold the node's cgroups that
	// match them now. It returns how many probes it filled.
	Restrict(ctx context.Context, workspace string, cgroups []uint64) (int, error)
	// Destroy removes everything applied into workspace.
	Destroy(ctx context.Context, workspace string) error
	// Held lists the ProbeSets' workspaces (names IsWorkspace accepts)
	// the applier holds on the node: those in its state directory, and
	// pins naming it whose state is gone.
	Held(ctx context.Context) ([]string, error)
	// RemoveOrphan destroys workspace, which no ProbeSet wants on the
	// node any more (Destroy, or its pins when its state is gone), and
	// counts it.
	RemoveOrphan(ctx context.Context, workspace string) error
	// Probes reads the probes applied in workspace (for set) with their
	// counters (hits, missed hits, dropped keys and events) from the
	// kernel.
	Probes(ctx context.Context, workspace string, set types.NamespacedName) ([]v1alpha1.ProbePlan, error)
}

// ApplyResult is what an Applier reports.
type ApplyResult struct {
	AppliedDigest string
	Probes        []v1alpha1.ProbePlan
	Errors        []string
}

// NodeAgent is the Kubernetes side of a node's agent: it publishes the
// node's facts, plans (and, with an Applier, applies) the ProbeSets that
// select the node, and writes the node's records. Its client has the
// node's own credentials.
type NodeAgent struct {
	Client *Client
	Node   string
	Facts  *bpf.Facts
	// Applier is nil for a plan-only agent: ProbeSets in mode apply are
	// then only planned, and the record says so.
	Applier Applier
	Log     *slog.Logger
	// CgroupRoot is where the node's cgroup v2 hierarchy is (CgroupRoot()).
	CgroupRoot string
	// PublishBinaries are binaries (paths or library names) whose
	// functions NodeFacts publish besides those the node's ProbeSets
	// name: an admin's list for plans of ProbeSets not yet made.
	PublishBinaries []string

	named     map[string]bool // binaries the ProbeSets of this sync name
	published []string        // binaries the NodeFacts hold
}

// Workspace is the workspace a ProbeSet is applied into on a node:
// "k8s-NAMESPACE-NAME" cut to a workspace name's charset and length, with
// a hash of the node and the full name, so that two ProbeSets never share
// one, nor two agents on one host (pretend nodes in tests).
func Workspace(node string, ps *v1alpha1.ProbeSet) string {
	h := sha256.Sum256([]byte(node + "/" + ps.Namespace + "/" + ps.Name))
	ns := ps.Namespace
	if ns == "" {
		ns = "cluster" // a ClusterProbeSet
	}
	readable := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '_'
	}, ns+"-"+ps.Name)
	if len(readable) > 42 {
		readable = readable[:42]
	}
	return "k8s-" + readable + "-" + hex.EncodeToString(h[:])[:12]
}

// workspaceName is what Workspace makes.
// Compiled when first used: every command would pay for it at start.
var workspaceName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^k8s-[a-z0-9_-]{1,42}-[0-9a-f]{12}$`) })

// IsWorkspace says whether name is a ProbeSet's workspace, as Workspace
// names them: the node agent removes no other.
func IsWorkspace(name string) bool { return workspaceName().MatchString(name) }

// Publish creates or updates the node's NodeFacts: the facts, the
// kernel's BTF identity, and the binaries PublishBinaries and the
// ProbeSets of the last sync name, read under the facts' root.
func (a *NodeAgent) Publish(ctx context.Context) error {
	nf, err := NodeFactsOf(a.Node, a.Facts)
	if err != nil {
		return err
	}
	names := a.binaryNames()
	nf.Spec.Binaries = DescribeBinaries(a.Facts, names)
	nf.Spec.BTF = BTFOf(a.Facts)
	if err := a.write(ctx, nf); err != nil {
		return err
	}
	a.published = names
	return nil
}

// binaryNames are the binaries the NodeFacts should hold, sorted.
func (a *NodeAgent) binaryNames() []string {
	names := append([]string(nil), a.PublishBinaries...)
	for n := range a.named {
		names = append(names, n)
	}
	return sortedSet(names)
}

// write creates or updates the NodeFacts nf.
func (a *NodeAgent) write(ctx context.Context, nf *v1alpha1.NodeFacts) error {
	var old v1alpha1.NodeFacts
	switch err := a.Client.Get(ctx, types.NamespacedName{Name: a.Node}, &old); {
	case apierrors.IsNotFound(err):
		return a.Client.Create(ctx, nf)
	case err != nil:
		return err
	}
	old.Spec = nf.Spec
	return a.Client.Update(ctx, &old)
}

// Run publishes the facts, then syncs at start, at every change of a
// ProbeSet, and every resync, until ctx ends.
func (a *NodeAgent) Run(ctx context.Context, resync time.Duration) error {
	if err := a.Publish(ctx); err != nil {
		return fmt.Errorf("publish the facts of node %s: %w", a.Node, err)
	}
	for {
		a.syncLogged(ctx)
		if !a.watch(ctx, resync) {
			return nil
		}
	}
}

// syncLogged syncs, logging an error unless ctx ended.
func (a *NodeAgent) syncLogged(ctx context.Context) {
	if err := a.Sync(ctx); err != nil && ctx.Err() == nil {
		a.log().Error("sync", "err", err)
	}
}

// watch watches the ProbeSets, syncing at every change, until resync
// passes or the watch ends (true: sync again) or ctx ends (false). A
// watch that cannot start is retried after a second.
func (a *NodeAgent) watch(ctx context.Context, resync time.Duration) bool {
	w, err := a.Client.Watch(ctx, &v1alpha1.ProbeSetList{}, ListOptions{})
	if err != nil {
		return a.retryWatch(ctx, err)
	}
	defer w.Stop()
	cw, err := a.Client.Watch(ctx, &v1alpha1.ClusterProbeSetList{}, ListOptions{})
	if err != nil {
		return a.retryWatch(ctx, err)
	}
	defer cw.Stop()
	// The pods on the node: a tenant's filter follows its pods.
	pw, err := a.Client.Watch(ctx, &PodList{}, ListOptions{Fields: map[string]string{"spec.nodeName": a.Node}})
	if err != nil {
		return a.retryWatch(ctx, err)
	}
	defer pw.Stop()
	timer := time.NewTimer(resync)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-timer.C:
			return true
		case _, ok := <-w.ResultChan():
			if !ok {
				return true
			}
			settle(w)
			a.syncLogged(ctx)
		case _, ok := <-cw.ResultChan():
			if !ok {
				return true
			}
			settle(cw)
			a.syncLogged(ctx)
		case _, ok := <-pw.ResultChan():
			if !ok {
				return true
			}
			settle(pw)
			a.syncLogged(ctx)
		}
	}
}

// retryWatch logs a watch that did not start and waits a second: true to
// retry, false when ctx ended.
func (a *NodeAgent) retryWatch(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	a.log().Error("watch ProbeSets", "err", err)
	select {
	case <-ctx.Done():
		return false
	case <-time.After(time.Second):
	}
	return true
}

// settle lets a burst of events settle, so that it is synced once.
func settle(w watch.Interface) {
	time.Sleep(100 * time.Millisecond)
	for len(w.ResultChan()) > 0 {
		<-w.ResultChan()
	}
}

func (a *NodeAgent) log() *slog.Logger {
	if a.Log != nil {
		return a.Log
	}
	return slog.Default()
}

// Sync brings the node in line with the ProbeSets, read whole from the
// API (a failed or incomplete list changes nothing): every ProbeSet that
// selects the node gets a record of this generation; with an Applier,
// every workspace the node holds that no ProbeSet in mode apply
// selecting the node wants is destroyed (removeOrphans), whatever order
// the ProbeSets and records were deleted in; the records of ProbeSets
// gone or no longer selecting the node are removed.
func (a *NodeAgent) Sync(ctx context.Context) error {
	var node Node
	if err := a.Client.Get(ctx, types.NamespacedName{Name: a.Node}, &node); err != nil {
		return fmt.Errorf("node %s: %w", a.Node, err)
	}
	sets, err := listSets(ctx, a.Client)
	if err != nil {
		return err
	}
	var errs []error
	keep := map[types.NamespacedName]bool{}
	want := map[string]bool{}
	a.named = map[string]bool{}
	for _, ps := range sets {
		if ps.DeletionTimestamp != nil || !Selects(ps.Spec.NodeSelector, node.Labels) {
			continue
		}
		keep[a.recordKey(ps)] = true
		if a.applies(ps) {
			want[Workspace(a.Node, ps)] = true
		}
		if err := a.syncOne(ctx, ps); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", setName(ps), err))
		}
	}
	errs = append(errs, a.removeOrphans(ctx, &node, want)...)
	errs = append(errs, a.removeUnselected(ctx, keep)...)
	if !slices.Equal(a.binaryNames(), a.published) {
		if err := a.Publish(ctx); err != nil {
			errs = append(errs, fmt.Errorf("publish the facts of node %s: %w", a.Node, err))
		}
	}
	return errors.Join(errs...)
}

// removeUnselected removes the records of this node that are not in keep
// (nothing selects them any more), destroying their workspaces with an
// Applier, and rolls up their ProbeSets.
func (a *NodeAgent) removeUnselected(ctx context.Context, keep map[types.NamespacedName]bool) []error {
	var records v1alpha1.ProbeSetNodeList
	if err := a.Client.List(ctx, &records, ListOptions{}); err != nil {
		return []error{fmt.Errorf("list ProbeSetNodes: %w", err)}
	}
	var errs []error
	for i := range records.Items {
		r := &records.Items[i]
		if r.Spec.NodeName != a.Node || keep[keyOf(r)] {
			continue
		}
		errs = append(errs, a.removeRecord(ctx, r)...)
	}
	return errs
}

// removeRecord removes the record r (removeOrphans destroyed its
// workspace) and rolls up its ProbeSet.
func (a *NodeAgent) removeRecord(ctx context.Context, r *v1alpha1.ProbeSetNode) []error {
	ps := setOfRecord(r)
	var errs []error
	if err := a.Client.Delete(ctx, r); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, err)
	}
	if fresh, err := getSet(ctx, a.Client, keyOf(ps)); err == nil {
		errs = append(errs, a.rollUp(ctx, fresh))
	}
	return errs
}

func equalProbes(a, b []v1alpha1.ProbePlan) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !equality.Semantic.DeepEqual(a[i], b[i]) {
			return false
		}
	}
	return true
}

// syncOne plans (or applies) one ProbeSet and writes the node's record.
func (a *NodeAgent) syncOne(ctx context.Context, ps *v1alpha1.ProbeSet) error {
	rec, err := a.record(ctx, ps)
	if err != nil {
		return err
	}
	files, err := SpecFiles(ctx, a.Client, a.specSource(ps))
	st := v1alpha1.ProbeSetNodeStatus{ObservedGeneration: ps.Generation, Kernel: a.Facts.Label(), Facts: a.Facts.Source + " " + a.Facts.Name,
		AppliedDigest: rec.Status.AppliedDigest, Scope: compiler.ScopeOf(ps.Namespace).String(), Cgroups: rec.Status.Cgroups}
	switch {
	case err != nil:
		st.Phase, st.Errors = v1alpha1.PhaseFailed, []string{err.Error()}
	default:
		for _, b := range BinariesNamed(files) {
			a.named[b] = true
		}
		st.SpecDigest = Digest(files)
		if done, err := a.unchanged(ctx, ps, rec, st.SpecDigest); done {
			return err
		}
		if a.applies(ps) {
			a.apply(ctx, ps, files, &st)
			a.restrict(ctx, ps, &st)
		} else {
			a.plan(files, ps.Namespace, &st)
		}
	}
	return a.writeRecord(ctx, ps, rec, st)
}

// applies says whether ps is applied on this node (not only planned).
func (a *NodeAgent) applies(ps *v1alpha1.ProbeSet) bool {
	return ps.Spec.Mode == v1alpha1.ModeApply && a.Applier != nil
}

// record reads the node's record of ps, creating it when there is none.
func (a *NodeAgent) record(ctx context.Context, ps *v1alpha1.ProbeSet) (*v1alpha1.ProbeSetNode, error) {
	key := a.recordKey(ps)
	var rec v1alpha1.ProbeSetNode
	err := a.Client.Get(ctx, key, &rec)
	if !apierrors.IsNotFound(err) {
		return &rec, err
	}
	rec = v1alpha1.ProbeSetNode{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: map[string]string{LabelProbeSet: ps.Name},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: setKind(ps), Name: ps.Name, UID: ps.UID}}},
		Spec: v1alpha1.ProbeSetNodeSpec{ProbeSet: ps.Name, NodeName: a.Node, Cluster: ps.Namespace == ""},
	}
	return &rec, a.Client.Create(ctx, &rec)
}

// unchanged handles a ProbeSet whose generation and spec the record has
// seen already: it refreshes the record's counters and rolls up (done),
// unless the spec must be planned or applied again (not done).
func (a *NodeAgent) unchanged(ctx context.Context, ps *v1alpha1.ProbeSet, rec *v1alpha1.ProbeSetNode, digest string) (bool, error) {
	if rec.Status.ObservedGeneration != ps.Generation || rec.Status.SpecDigest != digest {
		return false, nil
	}
	if rec.Status.Phase == v1alpha1.PhaseFailed {
		return a.failedBefore(ctx, ps, rec)
	}
	if ps.Spec.Mode == v1alpha1.ModePlan || a.Applier == nil || rec.Status.AppliedDigest == digest {
		return a.settled(ctx, ps, rec)
	}
	return false, nil
}

// failedBefore handles a spec that failed to apply before: it is not
// retried (it would fail again, and count again) until it changes; the
// record keeps its errors, with the counters of the previous probes
// refreshed. A plan that failed is planned again.
func (a *NodeAgent) failedBefore(ctx context.Context, ps *v1alpha1.ProbeSet, rec *v1alpha1.ProbeSetNode) (bool, error) {
	if !a.applies(ps) {
		return false, nil
	}
	probes, err := a.Applier.Probes(ctx, Workspace(a.Node, ps), keyOf(ps))
	if err == nil {
		// The previous probes go on counting: their filter follows the pods.
		if err := a.refresh(ctx, rec, probes, a.restrictChanged(ctx, ps, rec)); err != nil {
			return true, err
		}
	}
	return true, a.rollUp(ctx, ps)
}

// restrictChanged refills the tenant filter of an applied ProbeSet
// (restrict) and reports whether the record's count of cgroups changed.
func (a *NodeAgent) restrictChanged(ctx context.Context, ps *v1alpha1.ProbeSet, rec *v1alpha1.ProbeSetNode) bool {
	before := rec.Status.Cgroups
	a.restrict(ctx, ps, &rec.Status)
	return !equalCount(before, rec.Status.Cgroups)
}

// settled handles a spec planned or applied already: nothing changed but
// the counters of applied probes, unless the workspace lost probes
// (destroyed by hand, a reboot): then it is applied again (not done).
func (a *NodeAgent) settled(ctx context.Context, ps *v1alpha1.ProbeSet, rec *v1alpha1.ProbeSetNode) (bool, error) {
	if !a.applies(ps) {
		return true, a.rollUp(ctx, ps)
	}
	probes, err := a.Applier.Probes(ctx, Workspace(a.Node, ps), keyOf(ps))
	if err != nil {
		return true, err
	}
	if len(probes) != len(rec.Status.Probes) {
		a.log().Warn("the workspace lost probes: applying again", "workspace", Workspace(a.Node, ps), "recorded", len(rec.Status.Probes), "live", len(probes))
		return false, nil
	}
	if err := a.refresh(ctx, rec, probes, a.restrictChanged(ctx, ps, rec)); err != nil {
		return true, err
	}
	return true, a.rollUp(ctx, ps)
}

// refresh writes the live probes' counters into the record when they
// changed (or changed is set: the record's status changed otherwise).
func (a *NodeAgent) refresh(ctx context.Context, rec *v1alpha1.ProbeSetNode, probes []v1alpha1.ProbePlan, changed bool) error {
	if !changed && equalProbes(probes, rec.Status.Probes) {
		return nil
	}
	rec.Status.Probes = probes
	if err := a.Client.UpdateStatus(ctx, rec); err != nil {
		return fmt.Errorf("write the record: %w", err)
	}
	return nil
}

// apply applies files through the Applier, which compiles for the live
// kernel itself (and counts its failures); a failure leaves the previous
// probes, whose counters the record goes on showing.
func (a *NodeAgent) apply(ctx context.Context, ps *v1alpha1.ProbeSet, files map[string][]byte, st *v1alpha1.ProbeSetNodeStatus) {
	res, err := a.Applier.Apply(ctx, Workspace(a.Node, ps), keyOf(ps), files)
	if res.AppliedDigest != "" {
		st.AppliedDigest = res.AppliedDigest
	}
	if res.Probes != nil {
		st.Probes = res.Probes
	}
	st.Errors = res.Errors
	if err != nil && len(st.Errors) == 0 {
		st.Errors = []string{err.Error()}
	}
	st.Phase = v1alpha1.PhaseApplied
	if err != nil {
		st.Phase = v1alpha1.PhaseFailed
		if live, perr := a.Applier.Probes(ctx, Workspace(a.Node, ps), keyOf(ps)); perr == nil {
			st.Probes = live
		}
	}
}

// plan plans files for the node's facts, under the tenant policy of
// tenant ("" for a ClusterProbeSet).
func (a *NodeAgent) plan(files map[string][]byte, tenant string, st *v1alpha1.ProbeSetNodeStatus) {
	np := PlanNode(a.Node, files, a.Facts, tenant)
	st.Probes, st.Errors = np.Probes, np.Errors
	st.Phase = v1alpha1.PhasePlanned
	if !np.OK() {
		st.Phase = v1alpha1.PhaseFailed
	}
}

// writeRecord writes st into the record, keeping its transition time
// while the phase stays, and rolls up the ProbeSet.
func (a *NodeAgent) writeRecord(ctx context.Context, ps *v1alpha1.ProbeSet, rec *v1alpha1.ProbeSetNode, st v1alpha1.ProbeSetNodeStatus) error {
	if rec.Status.Phase != st.Phase || rec.Status.LastTransitionTime == nil {
		now := metav1.Now()
		st.LastTransitionTime = &now
	} else {
		st.LastTransitionTime = rec.Status.LastTransitionTime
	}
	rec.Status = st
	if err := a.Client.UpdateStatus(ctx, rec); err != nil {
		return fmt.Errorf("write the record: %w", err)
	}
	return a.rollUp(ctx, ps)
}

// rollUp recomputes a ProbeSet's status from its records: whichever agent
// writes it last, it is the same function of the same records.
func (a *NodeAgent) rollUp(ctx context.Context, ps *v1alpha1.ProbeSet) error {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if attempt > 0 {
			fresh, err := getSet(ctx, a.Client, keyOf(ps))
			if err != nil {
				if apierrors.IsNotFound(err) {
					return nil
				}
				return err
			}
			ps = fresh
		}
		var st v1alpha1.ProbeSetStatus
		st, err = RollUp(ctx, a.Client, ps)
		if err != nil {
			return err
		}
		ps.Status = st
		err = updateSetStatus(ctx, a.Client, ps)
		if apierrors.IsNotFound(err) {
			return nil // deleted meanwhile: its records go at the next sync
		}
		if !apierrors.IsConflict(err) {
			return err
		}
	}
	return err
}

// RollUp computes a ProbeSet's status from its ProbeSetNode records and
// the nodes it selects that published facts.
func RollUp(ctx context.Context, r *Client, ps *v1alpha1.ProbeSet) (v1alpha1.ProbeSetStatus, error) {
	var nodes NodeList
	if err := r.List(ctx, &nodes, ListOptions{}); err != nil {
		return ps.Status, err
	}
	published, err := publishedKernels(ctx, r)
	if err != nil {
		return ps.Status, err
	}
	byNode, err := recordsByNode(ctx, r, ps, recordNamespace(ps))
	if err != nil {
		return ps.Status, err
	}
	st := v1alpha1.ProbeSetStatus{ObservedGeneration: ps.Generation}
	for _, n := range nodes.Items {
		kernel, ok := published[n.Name]
		if !ok || !Selects(ps.Spec.NodeSelector, n.Labels) {
			continue
		}
		sum := nodeSummary(n.Name, kernel, byNode[n.Name], ps.Generation)
		countPhase(&st, sum.Phase)
		st.Nodes = append(st.Nodes, sum)
	}
	sort.Slice(st.Nodes, func(i, j int) bool { return st.Nodes[i].Node < st.Nodes[j].Node })
	st.Conditions = append([]metav1.Condition(nil), ps.Status.Conditions...)
	setConditions(&st, ps)
	return st, nil
}

// publishedKernels maps each node that published facts to its kernel.
func publishedKernels(ctx context.Context, r *Client) (map[string]string, error) {
	var facts v1alpha1.NodeFactsList
	if err := r.List(ctx, &facts, ListOptions{}); err != nil {
		return nil, err
	}
	published := map[string]string{}
	for _, f := range facts.Items {
		published[f.Name] = "linux " + f.Spec.Kernel + " " + f.Spec.Arch
	}
	return published, nil
}

// recordsByNode maps each node to its record of ps.
func recordsByNode(ctx context.Context, r *Client, ps *v1alpha1.ProbeSet, namespace string) (map[string]*v1alpha1.ProbeSetNode, error) {
	var records v1alpha1.ProbeSetNodeList
	if err := r.List(ctx, &records, ListOptions{Namespace: namespace, Labels: map[string]string{LabelProbeSet: ps.Name}}); err != nil {
		return nil, err
	}
	byNode := map[string]*v1alpha1.ProbeSetNode{}
	for i := range records.Items {
		if records.Items[i].Spec.Cluster == (ps.Namespace == "") {
			byNode[records.Items[i].Spec.NodeName] = &records.Items[i]
		}
	}
	return byNode, nil
}

// nodeSummary sums up a selected node: pending until its record (rec,
// nil when none) observed generation.
func nodeSummary(node, kernel string, rec *v1alpha1.ProbeSetNode, generation int64) v1alpha1.NodeSummary {
	sum := v1alpha1.NodeSummary{Node: node, Kernel: kernel, Phase: v1alpha1.PhasePending}
	if rec != nil && rec.Status.ObservedGeneration == generation {
		sum.Phase, sum.Digest = rec.Status.Phase, rec.Status.AppliedDigest
		if len(rec.Status.Errors) > 0 {
			sum.Message = rec.Status.Errors[0]
		}
	}
	return sum
}

// countPhase counts a selected node in phase.
func countPhase(st *v1alpha1.ProbeSetStatus, phase v1alpha1.Phase) {
	st.Selected++
	switch phase {
	case v1alpha1.PhasePlanned:
		st.Planned++
	case v1alpha1.PhaseApplied:
		st.Planned++
		st.Applied++
	case v1alpha1.PhaseFailed:
		st.Failed++
	}
}

// setConditions sets the Planned, Applied and Degraded conditions from
// the counts.
func setConditions(st *v1alpha1.ProbeSetStatus, ps *v1alpha1.ProbeSet) {
	cond := func(typ string, ok bool, reason, msg string) {
		s := metav1.ConditionFalse
		if ok {
			s = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: typ, Status: s, ObservedGeneration: ps.Generation, Reason: reason, Message: msg})
	}
	all := st.Selected > 0
	cond(v1alpha1.ConditionPlanned, all && st.Planned == st.Selected, "Nodes", fmt.Sprintf("%d of %d selected nodes planned generation %d", st.Planned, st.Selected, ps.Generation))
	cond(v1alpha1.ConditionApplied, all && ps.Spec.Mode == v1alpha1.ModeApply && st.Applied == st.Selected, "Nodes", fmt.Sprintf("%d of %d selected nodes applied generation %d", st.Applied, st.Selected, ps.Generation))
	cond(v1alpha1.ConditionDegraded, st.Failed > 0, "Nodes", fmt.Sprintf("%d of %d selected nodes failed", st.Failed, st.Selected))
}
