package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/probectl/probectl/internal/engine"
	"github.com/probectl/probectl/internal/eventfile"
	"github.com/probectl/probectl/metrics"
	"github.com/spf13/cobra"
)

func newAgentCmd(g *globals) *cobra.Command {
	var o agentOptions
	k := &o.k
	cmd := &cobra.Command{
		Use:   "agent (-config DIR | -kubernetes [-node NAME] [-facts FILE|PROFILE]) [-listen ADDR|unix:PATH] [-web.config.file FILE] [-log-json] [-destroy-on-exit]",
		Short: "Apply the specs of a directory whenever it changes, and serve their metrics",
		Long: `Agent applies every *.hcl file of DIR at start, and again whenever DIR
changes: a file written in place or renamed into place, a git checkout or
pull, a git-sync symlink swap. Only complete, stable specs are applied
(-debounce); until then the probes stay as they are. Each change goes
through the same plan and atomic apply as "probectl apply": all of it
lands, or nothing does. A change that fails to read, compile or apply
leaves the previous probes live and counting; the failure is logged with
its diagnostics, shown in /status and counted in
probectl_apply_errors_total (README, "Agent").

It serves GET /metrics (as "probectl serve" does, plus the agent's own
metrics), /status (JSON) and /healthz. SIGHUP re-reads DIR and applies
it even when nothing changed; SIGINT and SIGTERM stop it, leaving the
probes applied unless -destroy-on-exit.

  -config DIR        the directory of specs (a symlink to one is followed
                     at each read)
` + serveFlagsHelp + `  -max-series N      the most aggregation series one scrape returns
  -debounce D        settle time: a change is applied once two reads this
                     far apart find the same specs, none of them open for
                     writing; a symlink swapped at once (default 1s)
  -resync D          how often to re-check DIR and the workspace without an
                     event: a failed apply is retried, drifted probes are
                     re-applied, and so are probes another command
                     destroyed or replaced (default 5m)
  -lock-timeout D    how long an apply waits for another probectl (default 1m)
  -log-json          log JSON lines (default: text), on stderr
  -destroy-on-exit   destroy the workspace's probes on SIGINT/SIGTERM
  -insecure-config   read DIR even when someone other than root owns or may
                     write it, a directory above it, or a spec in it
                     (default: refused, as a read error: whoever writes
                     DIR decides what the agent attaches as root)
` + eventsOutHelp + `

With -kubernetes it is a cluster's node agent (README, "Kubernetes"):
it publishes its node's kernel facts (NodeFacts), applies each ProbeSet
that selects its node into a workspace of its own, writes the node's
record of each (ProbeSetNode) and rolls them up into the ProbeSet's
status, destroys what a ProbeSet no longer asks for, and serves every
ProbeSet's metrics labelled probeset="NAMESPACE/NAME".

  -kubernetes          be a node agent (kubeconfig from -kubeconfig,
                       KUBECONFIG, ~/.kube/config, or the pod's service account)
  -node NAME           the node (default: $NODE_NAME)
  -facts FILE|PROFILE  plan only, for the facts of a file or a built-in
                       profile instead of the live kernel: never applies
  -status-interval D   how often the records' counters are refreshed (15s)

Exit status: 0 stopped by a signal, 1 errors at start.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.check(); err != nil {
				return err
			}
			if o.kube {
				return runKubeAgent(cmd.Context(), g, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
			}
			if err := requireBPF("agent"); err != nil {
				return err
			}
			w, err := g.open()
			if err != nil {
				return err
			}
			w.Close()
			return runAgent(cmd.Context(), g, o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.config, "config", "", "the directory of specs to apply")
	o.serve = addServeFlags(f)
	f.IntVar(&o.maxSeries, "max-series", metrics.DefaultMaxSeries, "the most aggregation series one scrape returns")
	f.DurationVar(&o.debounce, "debounce", time.Second, "how long the specs must stay unchanged before they are applied")
	f.DurationVar(&o.resync, "resync", 5*time.Minute, "how often to re-check without an event")
	f.DurationVar(&g.lockTimeout, "lock-timeout", time.Minute, "how long an apply waits for another probectl")
	f.BoolVar(&o.logJSON, "log-json", false, "log JSON lines")
	f.BoolVar(&o.destroyOnExit, "destroy-on-exit", false, "destroy the probes on SIGINT/SIGTERM")
	f.BoolVar(&o.kube, "kubernetes", false, "be the node agent of a Kubernetes cluster")
	f.StringVar(&k.node, "node", os.Getenv("NODE_NAME"), "the node's name (node agent)")
	f.StringVar(&k.kubeconfig, "kubeconfig", "", "the kubeconfig file (node agent)")
	f.StringVar(&k.facts, "facts", "", "plan only, for these facts (node agent)")
	f.StringVar(&k.tenantListen, "tenant-listen", "", "serve each namespace's results at /namespaces/NS/metrics to whom may read its records (node agent)")
	f.StringVar(&k.cgroupRoot, "cgroup-root", "", "the node's cgroup v2 hierarchy, where tenants' pods are found (node agent; default: from /proc/self/mountinfo)")
	f.DurationVar(&k.resync, "status-interval", 15*time.Second, "how often the node agent refreshes its records' counters")
	f.BoolVar(&o.insecureConfig, "insecure-config", false, "read specs that users other than root own or may write")
	o.events = addEventsOutFlags(cmd)
	return cmd
}

// agentOptions are agent's flags: the directory agent's, and the node
// agent's with -kubernetes.
type agentOptions struct {
	config           string
	serve            *serveFlags // -listen, -web.config.file
	maxSeries        int
	debounce, resync time.Duration
	logJSON          bool
	destroyOnExit    bool
	insecureConfig   bool
	events           *eventsOutFlags // -events-out (eventsout.go)

	kube bool // -kubernetes
	k    kubeOptions
}

// check refuses flags that exclude each other or are out of range.
func (o *agentOptions) check() error {
	if o.kube {
		if o.config != "" {
			return errors.New("-config and -kubernetes exclude each other: a node agent takes its specs from ProbeSets")
		}
		if o.k.resync <= 0 {
			return errors.New("-status-interval must be a positive duration")
		}
		return nil
	}
	if o.k.facts != "" || o.k.kubeconfig != "" {
		return errors.New("-facts and -kubeconfig are for -kubernetes")
	}
	if o.config == "" {
		return errors.New("agent needs -config DIR: the directory of specs to apply")
	}
	if o.maxSeries < 1 {
		return fmt.Errorf("-max-series %d: it must be at least 1", o.maxSeries)
	}
	if o.debounce <= 0 || o.resync <= 0 {
		return errors.New("-debounce and -resync must be positive durations")
	}
	_, err := o.events.check()
	return err
}

// newLogger is both agents' log: text, or JSON lines with -log-json.
func newLogger(asJSON bool, w io.Writer) *slog.Logger {
	if asJSON {
		return slog.New(slog.NewJSONHandler(w, nil))
	}
	return slog.New(slog.NewTextHandler(w, nil))
}

// errServed is the server's failure that stopped the directory agent.
type errServed struct{ err error }

func (e errServed) Error() string { return e.err.Error() }

// errSinkDone is -events-out's sink ending by itself.
var errSinkDone = errors.New("the events' sink stopped")

// runAgent is "probectl agent -config DIR": engine.DirAgent applies,
// this serves its metrics and /status, tells systemd, and stops it.
func runAgent(ctx context.Context, g *globals, o agentOptions, stdout, stderr io.Writer) error {
	// Signals first: a SIGHUP (systemctl reload) or SIGTERM that comes
	// while the agent starts must not kill it by the default action.
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	abs, err := filepath.Abs(o.config)
	if err != nil {
		return fmt.Errorf("-config %s: %w", o.config, err)
	}
	o.config = abs
	log := newLogger(o.logJSON, stderr).With("workspace", g.workspace)
	a := engine.NewDir(engine.DirOptions{Config: o.config, Workspace: g.engineWorkspace(), Debounce: o.debounce,
		Resync: o.resync, Insecure: o.insecureConfig, Log: log})
	ln, err := o.serve.open()
	if err != nil {
		return err
	}
	if err := a.Watch(); err != nil {
		ln.Close()
		return err
	}
	defer a.Close()
	// The events as NDJSON (-events-out), its notices in the log.
	sink, err := startEventSink(ctx, g, o.events, stdout, slogLines{log})
	if err != nil {
		ln.Close()
		return err
	}

	srv, served := serveAgent(g, o, a, ln, log, stdout)

	// The server failing or the sink ending stops the agent too.
	run, cancelRun := context.WithCancelCause(ctx)
	defer cancelRun(nil)
	go func() {
		select {
		case err := <-served:
			cancelRun(errServed{err})
		case <-sink.Done():
			cancelRun(errSinkDone)
		case <-run.Done():
		}
	}()
	a.Run(run, hup)
	cancelRun(nil) // the watcher stopped: as a signal would
	var se errServed
	if errors.As(context.Cause(run), &se) {
		sink.Stop()
		return se.err
	}
	return stopAgent(a, o, srv, sink, context.Cause(run) == errSinkDone, log)
}

// serveAgent serves the directory agent's /metrics, /status and /healthz
// on ln, says where, and tells systemd it is ready.
func serveAgent(g *globals, o agentOptions, a *engine.DirAgent, ln net.Listener, log *slog.Logger, stdout io.Writer) (*http.Server, <-chan error) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", metricsHandler(g.stateDir, g.workspace, o.maxSeries, a.Collectors()...))
	mux.HandleFunc("/status", a.ServeStatus)
	mux.HandleFunc("/healthz", func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(rw, "ok")
	})
	srv, served := o.serve.serve(ln, mux, log)
	if o.events == nil || o.events.out != "-" { // stdout carries the events alone
		fmt.Fprintf(stdout, "Agent for workspace %q on %s: metrics at %s/metrics, status at /status\n", g.workspace, o.config, o.serve.base(ln))
	}
	log.Info("agent started", "config", o.config, "listen", ln.Addr().String())
	// Under systemd (Type=notify): started, and SIGHUP is handled from now
	// on, so systemctl reload waits for this. Without NOTIFY_SOCKET,
	// nothing.
	if _, err := daemon.SdNotify(false, daemon.SdNotifyReady); err != nil {
		log.Warn("telling systemd the agent is ready", "error", err)
	}
	return srv, served
}

// stopAgent stops the server, then the events' sink (failing when it
// ended by itself with an error), then destroys the probes with
// -destroy-on-exit.
func stopAgent(a *engine.DirAgent, o agentOptions, srv *http.Server, sink *eventfile.Sink, sinkFailed bool, log *slog.Logger) error {
	log.Info("stopping")
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shut); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		log.Warn("stopping the server", "error", err)
	}
	// The sink first: it reads what the buffer holds, then the summary.
	if err := sink.Stop(); err != nil {
		log.Error("events out", "error", err.Error())
		if sinkFailed {
			return exitError{1}
		}
	}
	if o.destroyOnExit {
		if err := a.Destroy(); err != nil {
			log.Error("destroy on exit", "error", err)
			return exitError{1}
		}
	}
	return nil
}
