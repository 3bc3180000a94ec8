package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os/signal"
	"syscall"
	"time"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/fleet"
	"github.com/probectl/probectl/fleet/podwatch"
	"github.com/probectl/probectl/internal/engine"
	"github.com/probectl/probectl/internal/pods"
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
	// cgroupRoot is where the node's cgroup v2 hierarchy is, as the
	// agent sees it (the DaemonSet mounts the host's): a tenant's filter
	// holds the cgroups of its pods found there. "": found from
	// /proc/self/mountinfo.
	cgroupRoot string
	// tenantListen is where /namespaces/NS/metrics is served (each
	// namespace's results to whom may read them there); "" for nowhere.
	tenantListen string
}

// runKubeAgent is "probectl agent -kubernetes": fleet.NodeAgent does the
// Kubernetes side, engine.KubeApplier applies on this node.
func runKubeAgent(ctx context.Context, g *globals, o agentOptions, stdout, stderr io.Writer) error {
	k := o.k
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log := newLogger(o.logJSON, stderr).With("node", k.node)
	if k.node == "" {
		return errors.New("agent -kubernetes needs its node's name: -node NAME, or NODE_NAME in the environment (the DaemonSet sets it from spec.nodeName)")
	}
	c, _, err := kubeClient(k.kubeconfig, "")
	if err != nil {
		return err
	}
	agent := &fleet.NodeAgent{Client: c, Node: k.node, Log: log, CgroupRoot: k.cgroupRoot}
	applier, err := kubeTarget(g, o, agent)
	if err != nil {
		return err
	}

	ln, err := o.serve.open()
	if err != nil {
		return err
	}
	if applier != nil {
		// The pod, namespace and container values name by the node's pods.
		pods.SetNodeName(k.node)
		go (&podwatch.Watcher{Client: c.Dynamic(), Node: k.node, Table: pods.Default, Log: log}).Run(ctx)
	}
	mux := http.NewServeMux()
	if applier != nil {
		mux.Handle("/metrics", registryHandler(applier, applier.ApplyErrors()))
	} else {
		mux.Handle("/metrics", registryHandler())
	}
	mux.HandleFunc("/healthz", func(rw http.ResponseWriter, r *http.Request) { fmt.Fprintln(rw, "ok") })
	srv, _ := o.serve.serve(ln, mux, log)
	if k.tenantListen != "" && applier != nil {
		tsrv, err := serveTenants(o, c, applier, log)
		if err != nil {
			srv.Close()
			return err
		}
		defer tsrv.Close()
	}
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
	return destroyKubeWorkspaces(applier, log)
}

// serveTenants serves each namespace's results at -tenant-listen, with
// -listen's TLS configuration.
func serveTenants(o agentOptions, c *fleet.Client, applier *engine.KubeApplier, log *slog.Logger) (*http.Server, error) {
	ts := *o.serve
	ts.listen = o.k.tenantListen
	ln, err := ts.open()
	if err != nil {
		return nil, fmt.Errorf("-tenant-listen: %w", err)
	}
	srv, _ := ts.serve(ln, applier.TenantMetrics(c, log), log)
	log.Info("tenants' metrics", "listen", ln.Addr().String())
	return srv, nil
}

// kubeTarget gives agent its facts: -facts's, for a plan-only agent
// (no applier), or the live kernel's with the applier of this node.
func kubeTarget(g *globals, o agentOptions, agent *fleet.NodeAgent) (*engine.KubeApplier, error) {
	var err error
	if f := o.k.facts; f != "" {
		if f == "auto" {
			return nil, errors.New("-facts names a facts file or a built-in profile; without it the agent detects the live kernel")
		}
		agent.Facts, err = bpf.LoadTarget(f, nil, false)
		return nil, err
	}
	if err := requireBPF("agent -kubernetes"); err != nil {
		return nil, err
	}
	if agent.Facts, err = bpf.Detect(bpf.DetectOptions{Functions: true}); err != nil {
		return nil, err
	}
	applier := engine.NewKubeApplier(g.engineWorkspace(), agent.Log, o.maxSeries)
	agent.Applier = applier
	return applier, nil
}

// destroyKubeWorkspaces destroys every ProbeSet's workspace the applier
// met (-destroy-on-exit), each failure logged.
func destroyKubeWorkspaces(applier *engine.KubeApplier, log *slog.Logger) error {
	failed := false
	for _, ws := range applier.Workspaces() {
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
