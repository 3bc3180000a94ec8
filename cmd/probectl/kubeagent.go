package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/fleet"
	"github.com/probectl/probectl/fleet/api/v1alpha1"
	"github.com/probectl/probectl/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
)

// kubeOptions are agent -kubernetes's flags.
type kubeOptions struct {
	node       string
	kubeconfig string
	// facts makes the agent plan-only: it publishes these facts (a facts
	// file or a built-in profile) instead of the live kernel's and never
	// applies.
	facts  string
	resync time.Duration
}

// runKubeAgent is "probectl agent -kubernetes": fleet.NodeAgent does the
// Kubernetes side, kubeApplier applies on this node.
func runKubeAgent(ctx context.Context, g *globals, o agentOptions, k kubeOptions, stdout, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log := newLogger(o.logJSON, stderr).With("node", k.node)
	if k.node == "" {
		return errors.New("agent -kubernetes needs its node's name: -node NAME, or NODE_NAME in the environment (the DaemonSet sets it from spec.nodeName)")
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if k.kubeconfig != "" {
		rules.ExplicitPath = k.kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	c, err := fleet.NewClient(cfg)
	if err != nil {
		return err
	}
	agent := &fleet.NodeAgent{Client: c, Node: k.node, Log: log}
	var applier *kubeApplier
	if k.facts != "" {
		if k.facts == "auto" {
			return errors.New("-facts names a facts file or a built-in profile; without it the agent detects the live kernel")
		}
		if agent.Facts, err = bpf.LoadTarget(k.facts, nil, false); err != nil {
			return err
		}
	} else {
		if err := requireBPF("agent -kubernetes"); err != nil {
			return err
		}
		if agent.Facts, err = bpf.Detect(bpf.DetectOptions{Functions: true}); err != nil {
			return err
		}
		applier = newKubeApplier(g, log, o.maxSeries)
		agent.Applier = applier
	}

	ln, err := o.serve.open()
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	if applier != nil {
		mux.Handle("/metrics", registryHandler(applier, applier.applyErrors))
	} else {
		mux.Handle("/metrics", registryHandler())
	}
	mux.HandleFunc("/healthz", func(rw http.ResponseWriter, r *http.Request) { fmt.Fprintln(rw, "ok") })
	srv, _ := o.serve.serve(ln, mux, log)
	fmt.Fprintf(stdout, "Node agent for %s: metrics at %s/metrics\n", k.node, o.serve.base(ln))
	log.Info("node agent started", "facts", agent.Facts.Label(), "listen", ln.Addr().String(), "plan_only", applier == nil)

	err = agent.Run(ctx, k.resync)
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.Shutdown(shut)
	if err != nil {
		return err
	}
	if !o.destroyOnExit || applier == nil {
		log.Info("stopping; the probes stay applied")
		return nil
	}
	failed := false
	for _, ws := range applier.workspaces() {
		if err := applier.Destroy(context.Background(), ws); err != nil {
			log.Error("destroy on exit", "workspace", ws, "error", err)
			failed = true
		}
	}
	if failed {
		return exitError{1}
	}
	return nil
}

// kubeApplier applies a ProbeSet's specs on this node for fleet.NodeAgent,
// through the agent's applySpecs: the same plan and atomic apply as
// "probectl apply", into the ProbeSet's own workspace. A failure leaves
// that workspace's previous probes live. It serves the metrics of every
// workspace it met, labelled with its ProbeSet.
type kubeApplier struct {
	g         *globals
	log       *slog.Logger
	maxSeries int

	mu   sync.Mutex
	sets map[string]types.NamespacedName // workspace → ProbeSet

	applyErrors *prometheus.CounterVec
}

var _ fleet.Applier = (*kubeApplier)(nil)

func newKubeApplier(g *globals, log *slog.Logger, maxSeries int) *kubeApplier {
	k := &kubeApplier{g: g, log: log, maxSeries: maxSeries, sets: map[string]types.NamespacedName{},
		applyErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "probectl_apply_errors_total",
			Help: "ProbeSet changes the agent could not apply on this node, by stage (compile, apply); the previous probes stay live.",
		}, []string{"stage"})}
	for _, s := range []string{"compile", "apply"} {
		k.applyErrors.WithLabelValues(s)
	}
	return k
}

func (k *kubeApplier) workspace(name string, set types.NamespacedName) *globals {
	if set.Name != "" {
		k.mu.Lock()
		k.sets[name] = set
		k.mu.Unlock()
	}
	g := *k.g
	g.workspace = name
	return &g
}

// workspaces are those this process met.
func (k *kubeApplier) workspaces() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for ws := range k.sets {
		out = append(out, ws)
	}
	return out
}

// Apply implements fleet.Applier.
func (k *kubeApplier) Apply(ctx context.Context, workspace string, set types.NamespacedName, files map[string][]byte) (fleet.ApplyResult, error) {
	_, fail, diags := applySpecs(k.workspace(workspace, set), files, k.log.With("workspace", workspace, "probeset", set.String()))
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
func (k *kubeApplier) Probes(ctx context.Context, workspace string, set types.NamespacedName) ([]v1alpha1.ProbePlan, error) {
	w, err := k.workspace(workspace, set).open()
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

// Destroy implements fleet.Applier.
func (k *kubeApplier) Destroy(ctx context.Context, workspace string) error {
	defer func() {
		k.mu.Lock()
		delete(k.sets, workspace)
		k.mu.Unlock()
	}()
	w, err := k.workspace(workspace, types.NamespacedName{}).open()
	if err != nil {
		return err
	}
	s, _, err := w.Begin()
	if err != nil {
		return err
	}
	if len(s.Probes) > 0 || len(s.Tables) > 0 || s.Events != nil {
		if _, _, err := w.Destroy(s, nil); err != nil {
			w.Unlock()
			return err
		}
	}
	w.Unlock()
	// The workspace is the ProbeSet's alone: its empty state goes too.
	return os.RemoveAll(filepath.Join(k.g.stateDir, workspace))
}

// Describe and Collect serve the metrics of every ProbeSet applied, each
// series labelled probeset="NAMESPACE/NAME".
func (k *kubeApplier) Describe(chan<- *prometheus.Desc) {}

func (k *kubeApplier) Collect(ch chan<- prometheus.Metric) {
	k.mu.Lock()
	sets := make(map[string]types.NamespacedName, len(k.sets))
	for ws, set := range k.sets {
		sets[ws] = set
	}
	k.mu.Unlock()
	for ws, set := range sets {
		c := &metrics.Collector{StateDir: k.g.stateDir, Workspace: ws, MaxSeries: k.maxSeries, Reserved: []string{"probeset"}}
		prometheus.WrapCollectorWith(prometheus.Labels{"probeset": set.String()}, c).Collect(ch)
	}
}
