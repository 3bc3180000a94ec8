package engine

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/hashicorp/hcl/v2"
	"github.com/probectl/probectl/fleet"
	"github.com/probectl/probectl/fleet/api/v1alpha1"
	"github.com/probectl/probectl/metrics"
	"github.com/probectl/probectl/runtime"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/types"
)

// KubeApplier applies a ProbeSet's specs on this node for
// fleet.NodeAgent, through the agents' apply path (Workspace.Apply): the
// same plan and atomic apply as "probectl apply", into the ProbeSet's own
// workspace. A failure leaves that workspace's previous probes live. It
// serves the metrics of every workspace it met, labelled with its
// ProbeSet.
type KubeApplier struct {
	base      Workspace // StateDir and LockTimeout; Name is each ProbeSet's
	log       *slog.Logger
	maxSeries int

	mu   sync.Mutex
	sets map[string]types.NamespacedName // workspace → ProbeSet

	applyErrors *prometheus.CounterVec
	orphans     prometheus.Counter
}

var _ fleet.Applier = (*KubeApplier)(nil)

// NewKubeApplier applies into workspaces of base.StateDir, waiting up to
// base.LockTimeout for each one's lock; a scrape returns at most
// maxSeries aggregation series per workspace.
func NewKubeApplier(base Workspace, log *slog.Logger, maxSeries int) *KubeApplier {
	k := &KubeApplier{base: base, log: log, maxSeries: maxSeries, sets: map[string]types.NamespacedName{},
		applyErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "probectl_apply_errors_total",
			Help: "ProbeSet changes the agent could not apply on this node, by stage (compile, apply); the previous probes stay live.",
		}, []string{"stage"}),
		orphans: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "probectl_agent_orphans_removed_total",
			Help: "Workspaces the node agent destroyed because no ProbeSet in mode apply selecting the node wants them (deleted, deselected, or deleted while the agent was down).",
		})}
	for _, s := range []string{"compile", "apply"} {
		k.applyErrors.WithLabelValues(s)
	}
	return k
}

// Counters are its own metrics: the changes it could not apply, by
// stage, and the orphaned workspaces it removed.
func (k *KubeApplier) Counters() []prometheus.Collector {
	return []prometheus.Collector{k.applyErrors, k.orphans}
}

func (k *KubeApplier) workspace(name string, set types.NamespacedName, log *slog.Logger) Workspace {
	if set.Name != "" {
		k.mu.Lock()
		k.sets[name] = set
		k.mu.Unlock()
	}
	ws := k.base
	ws.Name = name
	ws.Waiting = logWaiting(log, ws.LockTimeout)
	ws.Repaired = logRepaired(log)
	return ws
}

// Workspaces are those this process met.
func (k *KubeApplier) Workspaces() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for ws := range k.sets {
		out = append(out, ws)
	}
	return out
}

// Apply implements fleet.Applier.
func (k *KubeApplier) Apply(ctx context.Context, workspace string, set types.NamespacedName, files map[string][]byte) (fleet.ApplyResult, error) {
	log := k.log.With("workspace", workspace, "probeset", set.String())
	if removed, err := runtime.RemoveStrayPins(k.base.StateDir, workspace); err != nil {
		return fleet.ApplyResult{}, err
	} else if removed {
		log.Warn("removed the workspace's stray pins: their state was lost")
	}
	_, fail, diags := applyFiles(k.workspace(workspace, set, log), files, fleet.Policy(set.Namespace), log)
	var r fleet.ApplyResult
	for _, d := range diags {
		if d.Severity == hcl.DiagError {
			r.Errors = append(r.Errors, fleet.DiagText(d))
		}
	}
	if fail != nil {
		k.applyErrors.WithLabelValues(fail.Stage).Inc()
		k.log.Error("apply failed; the previous probes stay live", "probeset", set.String(), "stage", fail.Stage, "error", fail.Message, "errors", r.Errors)
		return r, errors.New(fail.Stage + ": " + fail.Message)
	}
	r.AppliedDigest = fleet.Digest(files)
	probes, err := k.Probes(ctx, workspace, set)
	if err != nil {
		return r, err
	}
	r.Probes = probes
	return r, nil
}

// Probes implements fleet.Applier: what "probectl status" reads.
func (k *KubeApplier) Probes(ctx context.Context, workspace string, set types.NamespacedName) ([]v1alpha1.ProbePlan, error) {
	w, err := k.workspace(workspace, set, k.log).Open()
	if err != nil {
		return nil, err
	}
	defer w.Close()
	s, err := w.Inspect()
	if err != nil {
		return nil, err
	}
	var out []v1alpha1.ProbePlan
	for _, st := range w.Status(s) {
		links := int32(len(st.Links))
		hits := st.EntryHits
		if hits == 0 {
			hits = st.ExitHits // a probe with only an exit handler
		}
		h, m, d := int64(hits), int64(st.Missed), int64(st.DroppedKeys+st.DroppedEvents)
		pp := v1alpha1.ProbePlan{Address: st.Address.String(), Route: string(st.Route), Reason: st.Reason,
			Links: &links, Hits: &h, Missed: &m, Drops: &d}
		for _, f := range st.Attach {
			pp.Attach = append(pp.Attach, string(f))
		}
		out = append(out, pp)
	}
	return out, nil
}

// Restrict implements fleet.Applier: the tenant maps of the workspace's
// probes hold cgroups (nil: left alone), their pod maps the node's
// cgroups that match. It takes no lock: an apply that replaces a probe
// meanwhile leaves the new one empty (it counts nothing) until the next
// Restrict, which the node agent makes after every apply.
func (k *KubeApplier) Restrict(ctx context.Context, workspace string, cgroups []uint64) (int, error) {
	w, err := k.workspace(workspace, types.NamespacedName{}, k.log).Open()
	if err != nil {
		return 0, err
	}
	defer w.Close()
	s, err := w.Inspect()
	if err != nil {
		return 0, err
	}
	return w.SetCgroups(s, cgroups)
}

// Held implements fleet.Applier: the workspaces in the state directory
// that fleet.IsWorkspace accepts (directories, not followed: a symlink
// or a file planted there is no workspace), and those whose stray pins
// name it (runtime.StrayPins).
func (k *KubeApplier) Held(ctx context.Context) ([]string, error) {
	entries, err := os.ReadDir(k.base.StateDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	var held []string
	for _, e := range entries {
		if e.Type().IsDir() && fleet.IsWorkspace(e.Name()) {
			held = append(held, e.Name())
		}
	}
	stray, err := runtime.StrayPins(k.base.StateDir, fleet.IsWorkspace)
	return append(held, stray...), err
}

// RemoveOrphan implements fleet.Applier.
func (k *KubeApplier) RemoveOrphan(ctx context.Context, workspace string) error {
	if err := k.Destroy(ctx, workspace); err != nil {
		return err
	}
	k.orphans.Inc()
	return nil
}

// Destroy implements fleet.Applier: the workspace's probes and state, or
// its stray pins when its state is gone.
func (k *KubeApplier) Destroy(ctx context.Context, workspace string) error {
	if removed, err := runtime.RemoveStrayPins(k.base.StateDir, workspace); removed || err != nil {
		return err
	}
	defer func() {
		k.mu.Lock()
		delete(k.sets, workspace)
		k.mu.Unlock()
	}()
	if _, err := k.workspace(workspace, types.NamespacedName{}, k.log.With("workspace", workspace)).Destroy(); err != nil {
		return err
	}
	// The workspace is the ProbeSet's alone: its empty state goes too.
	return os.RemoveAll(filepath.Join(k.base.StateDir, workspace))
}

// setLabel is a set's probeset label: NAMESPACE/NAME for a ProbeSet,
// NAME for a ClusterProbeSet.
func setLabel(set types.NamespacedName) string {
	if set.Namespace == "" {
		return set.Name
	}
	return set.String()
}

// Describe and Collect serve the metrics of every ProbeSet applied, each
// series labelled probeset="NAMESPACE/NAME" (a ClusterProbeSet's "NAME").
func (k *KubeApplier) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector.
func (k *KubeApplier) Collect(ch chan<- prometheus.Metric) {
	k.collect(ch, func(types.NamespacedName) bool { return true })
}

// collect collects the series of the sets keep keeps.
func (k *KubeApplier) collect(ch chan<- prometheus.Metric, keep func(types.NamespacedName) bool) {
	k.mu.Lock()
	sets := make(map[string]types.NamespacedName, len(k.sets))
	for ws, set := range k.sets {
		if keep(set) {
			sets[ws] = set
		}
	}
	k.mu.Unlock()
	for ws, set := range sets {
		c := &metrics.Collector{StateDir: k.base.StateDir, Workspace: ws, MaxSeries: k.maxSeries, Reserved: []string{"probeset"}}
		prometheus.WrapCollectorWith(prometheus.Labels{"probeset": setLabel(set)}, c).Collect(ch)
	}
}

// namespaceCollector is the series of one namespace's ProbeSets.
type namespaceCollector struct {
	k  *KubeApplier
	ns string
}

func (c namespaceCollector) Describe(chan<- *prometheus.Desc) {}

func (c namespaceCollector) Collect(ch chan<- prometheus.Metric) {
	c.k.collect(ch, func(set types.NamespacedName) bool { return set.Namespace == c.ns })
}

// TenantMetrics serves /namespaces/NS/metrics: the series of namespace
// NS's ProbeSets alone, to a bearer token whose user the API server
// allows to read that namespace's records (fleet.Client.MayReadResults):
// 401 without a token, 403 with the API server's reason otherwise.
func (k *KubeApplier) TenantMetrics(c *fleet.Client, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest, _ := strings.CutPrefix(r.URL.Path, "/namespaces/")
		ns, tail, _ := strings.Cut(rest, "/")
		if tail != "metrics" || ns == "" {
			http.Error(w, "the results of a namespace's ProbeSets are at /namespaces/NAMESPACE/metrics", http.StatusNotFound)
			return
		}
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || token == "" {
			http.Error(w, "a bearer token is needed (Authorization: Bearer TOKEN), of a user who may get probesetnodes in namespace "+ns, http.StatusUnauthorized)
			return
		}
		allowed, why, err := c.MayReadResults(r.Context(), token, ns)
		if err != nil {
			log.Error("authorize a tenant's scrape", "namespace", ns, "err", err)
			http.Error(w, "cannot ask the API server: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		if !allowed {
			http.Error(w, why, http.StatusForbidden)
			return
		}
		reg := prometheus.NewRegistry()
		reg.MustRegister(namespaceCollector{k, ns})
		promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}).ServeHTTP(w, r)
	})
}
