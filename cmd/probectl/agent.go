package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/fsnotify/fsnotify"
	"github.com/hashicorp/hcl/v2"
	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/metrics"
	"github.com/probectl/probectl/runtime"
	"github.com/probectl/probectl/spec"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
)

func newAgentCmd(g *globals) *cobra.Command {
	var o agentOptions
	var k kubeOptions
	var kube bool
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
			if kube {
				if o.config != "" {
					return errors.New("-config and -kubernetes exclude each other: a node agent takes its specs from ProbeSets")
				}
				if k.resync <= 0 {
					return errors.New("-status-interval must be a positive duration")
				}
				return runKubeAgent(cmd.Context(), g, o, k, cmd.OutOrStdout(), cmd.ErrOrStderr())
			}
			if k.facts != "" || k.kubeconfig != "" {
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
			if _, err := o.events.check(); err != nil {
				return err
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
	f.BoolVar(&kube, "kubernetes", false, "be the node agent of a Kubernetes cluster")
	f.StringVar(&k.node, "node", os.Getenv("NODE_NAME"), "the node's name (node agent)")
	f.StringVar(&k.kubeconfig, "kubeconfig", "", "the kubeconfig file (node agent)")
	f.StringVar(&k.facts, "facts", "", "plan only, for these facts (node agent)")
	f.DurationVar(&k.resync, "status-interval", 15*time.Second, "how often the node agent refreshes its records' counters")
	f.BoolVar(&o.insecureConfig, "insecure-config", false, "read specs that users other than root own or may write")
	o.events = addEventsOutFlags(cmd)
	return cmd
}

type agentOptions struct {
	config           string
	serve            *serveFlags // -listen, -web.config.file
	maxSeries        int
	debounce, resync time.Duration
	logJSON          bool
	destroyOnExit    bool
	insecureConfig   bool
	events           *eventsOutFlags // -events-out (eventsout.go)
}

// agentStatus is /status: what is applied and what went wrong last.
type agentStatus struct {
	Config    string `json:"config"`
	Workspace string `json:"workspace"`
	// Applied is the last set of specs that is live, nil before the first
	// successful apply.
	Applied *appliedSpecs `json:"applied"`
	// LastAttempt is the last read of the directory that was compiled or
	// applied (a read with the digest of the live specs, no drift and no
	// failure before is not an attempt).
	LastAttempt *agentAttempt `json:"last_attempt"`
	// LastError is the last attempt's failure; nil when it succeeded.
	LastError *agentError `json:"last_error"`
	// Pending is a change the agent waits on, not applied yet; nil when
	// the input is stable.
	Pending *agentPending `json:"pending"`
}

// agentPending is a change of the specs that is not yet complete and
// stable: the live probes stay as they are meanwhile.
type agentPending struct {
	// Since is when the agent began to wait.
	Since time.Time `json:"since"`
	// Reason is why it waits: files a process holds open for writing,
	// or specs that changed within the settle time (-debounce).
	Reason string `json:"reason"`
	// Digest is the specs' at the last read, empty while one is written.
	Digest string `json:"digest,omitempty"`
}

type appliedSpecs struct {
	// Digest identifies the specs' text: SHA-256 over the sorted file names
	// and contents.
	Digest string    `json:"digest"`
	Files  []string  `json:"files"`
	Probes []string  `json:"probes"`
	Serial uint64    `json:"serial"`
	Time   time.Time `json:"time"`
	// lineage is the state's lineage: with Serial, it tells whether
	// anything else wrote the workspace since.
	lineage string
	// real is the directory -config resolved to.
	real string
}

type agentAttempt struct {
	Time   time.Time `json:"time"`
	Reason string    `json:"reason"`
	Digest string    `json:"digest,omitempty"`
	// Result: "applied", "unchanged" (the kernel matched) or "failed".
	Result string `json:"result"`
	// Changes counts what the apply did.
	Created   int `json:"created"`
	Replaced  int `json:"replaced"`
	Destroyed int `json:"destroyed"`
	Unchanged int `json:"unchanged"`
}

type agentError struct {
	Time time.Time `json:"time"`
	// Stage is "read", "compile" or "apply".
	Stage       string       `json:"stage"`
	Digest      string       `json:"digest,omitempty"`
	Message     string       `json:"message"`
	Diagnostics []diagRecord `json:"diagnostics,omitempty"`
}

// diagRecord is one diagnostic of a failed attempt, at its spec position.
type diagRecord struct {
	Severity string `json:"severity"`
	File     string `json:"file,omitempty"`
	Line     int    `json:"line,omitempty"`
	Column   int    `json:"column,omitempty"`
	Summary  string `json:"summary"`
	Detail   string `json:"detail,omitempty"`
}

type agent struct {
	g   *globals
	o   agentOptions
	log *slog.Logger

	mu     sync.Mutex
	status agentStatus

	// pend is the change being waited on (the loop's alone; /status
	// shows a copy).
	pend *pendingSpecs

	applyErrors *prometheus.CounterVec
	applies     *prometheus.CounterVec
	lastSuccess prometheus.Gauge
	lastOK      prometheus.Gauge
}

// newLogger is both agents' log: text, or JSON lines with -log-json.
func newLogger(asJSON bool, w io.Writer) *slog.Logger {
	if asJSON {
		return slog.New(slog.NewJSONHandler(w, nil))
	}
	return slog.New(slog.NewTextHandler(w, nil))
}

func newAgent(g *globals, o agentOptions, logw io.Writer) *agent {
	a := &agent{
		g: g, o: o, log: newLogger(o.logJSON, logw).With("workspace", g.workspace),
		status: agentStatus{Config: o.config, Workspace: g.workspace},
		applyErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "probectl_apply_errors_total",
			Help: "Changes of the specs the agent could not apply, by stage (read, compile, apply); the previous probes stay live.",
		}, []string{"stage"}),
		applies: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "probectl_applies_total",
			Help: "Applies the agent made, by result (applied: the kernel changed; unchanged: it already matched).",
		}, []string{"result"}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "probectl_last_apply_success_timestamp_seconds",
			Help: "When the agent last applied the specs successfully (Unix seconds; 0 before the first).",
		}),
		lastOK: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "probectl_last_apply_ok",
			Help: "1 when the agent's last attempt applied the specs of its directory, 0 when it failed (the probes are those of an earlier version).",
		}),
	}
	for _, s := range []string{"read", "compile", "apply"} {
		a.applyErrors.WithLabelValues(s)
	}
	for _, r := range []string{"applied", "unchanged"} {
		a.applies.WithLabelValues(r)
	}
	return a
}

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
	a := newAgent(g, o, stderr)
	ln, err := o.serve.open()
	if err != nil {
		return err
	}
	watch, err := newDirWatch(o.config)
	if err != nil {
		ln.Close()
		return err
	}
	defer watch.close()
	// The events as NDJSON (-events-out), its notices in the log.
	sink, err := startEventSink(ctx, g, o.events, stdout, slogLines{a.log})
	if err != nil {
		ln.Close()
		return err
	}

	mux := http.NewServeMux()
	mux.Handle("/metrics", metricsHandler(g.stateDir, g.workspace, o.maxSeries, a.applyErrors, a.applies, a.lastSuccess, a.lastOK))
	mux.HandleFunc("/status", a.serveStatus)
	mux.HandleFunc("/healthz", func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(rw, "ok")
	})
	srv, served := o.serve.serve(ln, mux, a.log)
	if o.events == nil || o.events.out != "-" { // stdout carries the events alone
		fmt.Fprintf(stdout, "Agent for workspace %q on %s: metrics at %s/metrics, status at /status\n", g.workspace, o.config, o.serve.base(ln))
	}
	a.log.Info("agent started", "config", o.config, "listen", ln.Addr().String())
	// Under systemd (Type=notify): started, and SIGHUP is handled from now
	// on, so systemctl reload waits for this. Without NOTIFY_SOCKET,
	// nothing.
	if _, err := daemon.SdNotify(false, daemon.SdNotifyReady); err != nil {
		a.log.Warn("telling systemd the agent is ready", "error", err)
	}

	// check is armed by a change, or by a read that found the specs not
	// stable yet, and reads them again after the debounce. A change
	// does not re-arm it: a file written on and on in DIR (a log) puts
	// nothing off, as only the specs' content decides when they settle.
	var check <-chan time.Time
	arm := func(wait bool) {
		if wait && check == nil {
			check = time.After(o.debounce)
		}
	}
	arm(a.reconcile("start", true))
	resync := time.NewTicker(o.resync)
	defer resync.Stop()
	sinkFailed := false
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case err := <-served:
			sink.Stop()
			return err
		case <-sink.Done():
			sinkFailed = true
			break loop
		case <-hup:
			a.log.Info("SIGHUP: re-reading the specs")
			arm(a.reconcile("SIGHUP", true))
		case ev, ok := <-watch.events:
			if !ok {
				break loop
			}
			a.log.Debug("change", "path", ev)
			arm(true)
		case err := <-watch.errors:
			a.log.Warn("watching the specs' directory", "error", err)
		case <-check:
			check = nil
			watch.rewatch(a.log)
			arm(a.reconcile("change", false))
		case <-resync.C:
			watch.rewatch(a.log)
			arm(a.reconcile("resync", false))
		}
	}
	a.log.Info("stopping")
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shut); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		a.log.Warn("stopping the server", "error", err)
	}
	// The sink first: it reads what the buffer holds, then the summary.
	if err := sink.Stop(); err != nil {
		a.log.Error("events out", "error", err.Error())
		if sinkFailed {
			return exitError{1}
		}
	}
	if o.destroyOnExit {
		if err := a.destroy(); err != nil {
			a.log.Error("destroy on exit", "error", err)
			return exitError{1}
		}
	}
	return nil
}

func (a *agent) serveStatus(rw http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	b, err := json.MarshalIndent(a.status, "", "  ")
	a.mu.Unlock()
	if err != nil {
		http.Error(rw, err.Error(), http.StatusInternalServerError)
		return
	}
	rw.Header().Set("Content-Type", "application/json")
	rw.Write(append(b, '\n'))
}

// unsettledWarn is how long, in debounces, the agent waits on specs that
// do not settle before it warns (once per change) that the previous
// probes stay live.
const unsettledWarn = 10

// pendingSpecs is the change the agent waits on.
type pendingSpecs struct {
	since  time.Time // when the wait began
	seen   time.Time // when the specs were last read with this digest first
	digest string    // "" while a file is written
	warned bool
}

// stable tells whether set may be applied: no process holds one of its
// files open for writing, and either a read at least a debounce ago found
// the same specs (the wait on a change), or the read is one to apply at
// once: force (start, SIGHUP) or a symlinked -config swapped to another
// directory (git-sync writes the whole revision before the swap). Else it
// says why not.
func stable(set *specSet, live *appliedSpecs, pend *pendingSpecs, force bool, now time.Time, settle time.Duration) (bool, string) {
	switch {
	case len(set.writing) > 0:
		return false, fmt.Sprintf("%s: %v; the agent applies it once it is closed and unchanged for -debounce", strings.Join(set.writing, ", "), errBeingWritten)
	case force || live != nil && set.real != live.real:
		return true, ""
	case pend != nil && pend.digest == set.digest && now.Sub(pend.seen) >= settle:
		return true, ""
	}
	return false, fmt.Sprintf("the specs changed within the last %s (-debounce); the agent applies them once unchanged for that long", settle)
}

// wait records that the agent waits on set: why, in /status, and in the
// log when the wait begins and once it is long.
func (a *agent) wait(set *specSet, why string, now time.Time) {
	digest := set.digest
	if len(set.writing) > 0 {
		digest = ""
	}
	p := a.pend
	if p == nil {
		p = &pendingSpecs{since: now}
		a.pend = p
		a.log.Info("waiting for the specs to settle; the previous probes stay live", "why", why)
	}
	if p.digest != digest || digest == "" {
		p.digest, p.seen = digest, now
	}
	if !p.warned && now.Sub(p.since) >= unsettledWarn*a.o.debounce {
		p.warned = true
		a.log.Warn("the specs have not settled; the previous probes stay live", "since", p.since.UTC(), "why", why)
	}
	a.mu.Lock()
	a.status.Pending = &agentPending{Since: p.since.UTC(), Reason: why, Digest: digest}
	a.mu.Unlock()
}

// settled ends a wait.
func (a *agent) settled() {
	a.pend = nil
	a.mu.Lock()
	a.status.Pending = nil
	a.mu.Unlock()
}

// specSet is the directory's specs at one read.
type specSet struct {
	files  map[string][]byte
	names  []string
	digest string
	// real is the directory the read resolved -config to: another one
	// than the live specs' is a symlink swapped (git-sync).
	real string
	// writing are the files a process holds open for writing, not read:
	// such a set is never applied.
	writing []string
}

// maxAgentFiles bounds the spec files of one directory.
const maxAgentFiles = 4096

// readSpecFile reads a regular file, refusing a symlink at its name (a
// symlinked directory above it, -config itself, is resolved by the caller),
// up to one byte over spec.MaxFileSize: spec.Parse refuses a larger one.
// trust, when not nil, checks the opened file's owner and mode.
func readSpecFile(path string, trust func(os.FileInfo) error) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, errors.New("it is a symlink")
		}
		return nil, errors.Unwrap(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, errors.New("it is not a regular file")
	}
	if trust != nil {
		if err := trust(st); err != nil {
			return nil, err
		}
	}
	if err := noWriters(f); err != nil {
		return nil, err
	}
	return io.ReadAll(io.LimitReader(f, spec.MaxFileSize+1))
}

// errBeingWritten is a spec file that a process holds open for writing:
// it may be half written, whatever it parses to.
var errBeingWritten = errors.New("a process holds it open for writing")

// noWriters returns errBeingWritten when a process holds f's file open
// for writing. It asks the kernel for a read lease, which it refuses
// (EAGAIN) while the file has a writer, and drops it at once (close would
// too; a writer that opens meanwhile waits for that). A file system
// without leases (NFS, FUSE, fs.leases-enable=0) answers nothing: the
// settle time alone tells then.
func noWriters(f *os.File) error {
	_, err := unix.FcntlInt(f.Fd(), unix.F_SETLEASE, unix.F_RDLCK)
	if errors.Is(err, unix.EAGAIN) {
		return errBeingWritten
	}
	if err == nil {
		unix.FcntlInt(f.Fd(), unix.F_SETLEASE, unix.F_UNLCK)
	}
	return nil
}

// trustedByRoot refuses a file or directory that someone other than root
// (or the agent's own user) owns or may write: its writer would decide
// what the agent, as root, attaches. A sticky directory (/tmp) may be
// writable by all when it is an ancestor: nobody can rename another's
// entry in it.
func trustedByRoot(st os.FileInfo, ancestor bool) error {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return errors.New("its owner is unknown")
	}
	if sys.Uid != 0 && int(sys.Uid) != os.Geteuid() {
		return fmt.Errorf("it is owned by uid %d, not root", sys.Uid)
	}
	if st.Mode().Perm()&0o022 != 0 && !(ancestor && st.IsDir() && st.Mode()&os.ModeSticky != 0) {
		return fmt.Errorf("it is writable by its group or by anyone (mode %04o)", st.Mode().Perm())
	}
	return nil
}

// trustedDir checks dir (resolved, without symlinks) and every directory
// above it with trustedByRoot.
func trustedDir(dir string) error {
	for p, ancestor := dir, false; ; p, ancestor = filepath.Dir(p), true {
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if err := trustedByRoot(st, ancestor); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// readSpecs reads DIR's *.hcl files, but hidden ones. A symlinked DIR (git-sync swaps one)
// is resolved once, so the files all come from one revision; they are
// named DIR/NAME in diagnostics.
func readSpecs(dir string, insecure bool) (*specSet, hcl.Diagnostics) {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot read the specs' directory",
			Detail: fmt.Sprintf("%s. -config names a directory of *.hcl files.", err)}}
	}
	var trust func(os.FileInfo) error
	if !insecure {
		trust = func(st os.FileInfo) error { return trustedByRoot(st, false) }
		// The directory, and the one holding -config when it is a
		// symlink (whoever can write there can point it elsewhere).
		for _, d := range []string{real, filepath.Dir(dir)} {
			if rd, err := filepath.EvalSymlinks(d); err == nil {
				d = rd
			}
			if err := trustedDir(d); err != nil {
				return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Untrusted specs' directory",
					Detail: fmt.Sprintf("%s. Whoever can write the specs' directory, or a directory above it, decides what the agent attaches as root: make them root's, writable by no one else (chown root; chmod go-w), or run with -insecure-config when every writer is trusted (a git-sync sidecar in the same pod).", err)}}
			}
		}
	}
	paths, err := spec.ExpandPaths([]string{real})
	if err != nil {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot read the specs' directory",
			Detail: fmt.Sprintf("%s. -config names a directory of *.hcl files; to remove every probe, run probectl destroy.", strings.Replace(err.Error(), real, dir, 1))}}
	}
	if st, err := os.Stat(real); err == nil && !st.IsDir() {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot read the specs' directory",
			Detail: fmt.Sprintf("%s is a file. -config names a directory of *.hcl files.", dir)}}
	}
	// Hidden files are not specs: an editor's lock (Emacs's .#a.hcl, a
	// dangling symlink, there while a buffer is modified), a temporary
	// file renamed into place later.
	visible := paths[:0]
	for _, p := range paths {
		if !strings.HasPrefix(filepath.Base(p), ".") {
			visible = append(visible, p)
		}
	}
	if paths = visible; len(paths) == 0 {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot read the specs' directory",
			Detail: fmt.Sprintf("%s: no *.hcl files in the directory but hidden ones, which the agent skips. -config names a directory of *.hcl files; to remove every probe, run probectl destroy.", dir)}}
	}
	if len(paths) > maxAgentFiles {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Too many spec files",
			Detail: fmt.Sprintf("%s has %d *.hcl files; the agent reads at most %d. Put more probes in each file.", dir, len(paths), maxAgentFiles)}}
	}
	set := &specSet{files: map[string][]byte{}, real: real}
	var diags hcl.Diagnostics
	h := sha256.New()
	for _, p := range paths {
		name := filepath.Join(dir, filepath.Base(p))
		b, err := readSpecFile(p, trust)
		if errors.Is(err, errBeingWritten) {
			set.writing = append(set.writing, name)
			continue
		}
		if err != nil {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Cannot read spec file",
				Detail:  fmt.Sprintf("%s: %v. The agent reads only regular files in -config that root owns and no one else may write (-insecure-config lifts the owner check), never through a symlink: whoever can plant one there would have root read any file into the log and /status.", name, err),
				Subject: &hcl.Range{Filename: name, Start: hcl.InitialPos, End: hcl.InitialPos}})
			continue
		}
		set.files[name] = b
		set.names = append(set.names, name)
		fmt.Fprintf(h, "%d:%s\n%d:", len(name), name, len(b))
		h.Write(b)
	}
	set.digest = hex.EncodeToString(h.Sum(nil))
	return set, diags
}

// reconcile reads the specs and makes the kernel match them, once they
// are complete and stable (stable); it returns true when it waits on them
// and wants to read them again after the debounce. Until then nothing
// changes: a probe missing from a half-written file is not destroyed.
// Without force, a read whose specs are the ones applied is skipped
// unless the workspace drifted, another command changed it since (its
// state's serial moved: a probectl destroy or apply, another agent), or
// the last attempt failed.
func (a *agent) reconcile(reason string, force bool) bool {
	set, diags := readSpecs(a.o.config, a.o.insecureConfig)
	if diags.HasErrors() {
		a.settled()
		a.fail(reason, &agentError{Stage: "read", Message: "the specs' directory could not be read"}, diags, nil)
		return false
	}
	a.mu.Lock()
	live := a.status.Applied
	same := live != nil && live.Digest == set.digest && a.status.LastError == nil && len(set.writing) == 0
	a.mu.Unlock()
	now := time.Now()
	if same && !force {
		a.settled()
		why := changed(a.g, live)
		if why == "" {
			return false
		}
		a.log.Warn("the workspace no longer holds what the agent applied; applying the specs again", "why", why)
	} else if ok, why := stable(set, live, a.pend, force, now, a.o.debounce); !ok {
		a.wait(set, why, now)
		return true
	}
	a.settled()
	res, fail, diags := applySpecs(a.g, set.files, a.log)
	if fail != nil {
		fail.Digest = set.digest
		a.fail(reason, fail, diags, set.files)
		return false
	}
	if len(diags) > 0 {
		a.log.Warn("warnings", "digest", short(set.digest), "diagnostics", diagText(diags, set.files))
	}
	att := res.attempt
	att.Reason, att.Digest = reason, set.digest
	applied := &appliedSpecs{Digest: set.digest, Files: set.names, Probes: res.probes, Serial: res.serial, Time: att.Time, lineage: res.lineage, real: set.real}
	a.mu.Lock()
	a.status.Applied, a.status.LastAttempt, a.status.LastError = applied, &att, nil
	a.mu.Unlock()
	a.applies.WithLabelValues(att.Result).Inc()
	a.lastSuccess.Set(float64(att.Time.UnixNano()) / 1e9)
	a.lastOK.Set(1)
	a.log.Info("applied", "reason", reason, "result", att.Result, "digest", short(set.digest), "serial", res.serial,
		"created", att.Created, "replaced", att.Replaced, "destroyed", att.Destroyed, "unchanged", att.Unchanged)
	return false
}

// applyResult is what a successful applySpecs did.
type applyResult struct {
	attempt agentAttempt // Time, Result and the counts
	probes  []string     // the probes now applied, sorted
	serial  uint64       // the state's serial after it
	lineage string       // and its lineage
}

// applySpecs compiles files for the running kernel and applies them to
// g's workspace through the same plan and atomic apply as "probectl
// apply": on failure the kernel and the state are as they were, and the
// failure says its stage ("compile" or "apply") with the diagnostics at
// their spec ranges. The workspace's lock is waited for up to
// g.lockTimeout. It returns the warnings on success.
func applySpecs(g *globals, files map[string][]byte, log *slog.Logger) (*applyResult, *agentError, hcl.Diagnostics) {
	now := time.Now().UTC()
	failed := func(stage, msg string) *agentError { return &agentError{Time: now, Stage: stage, Message: msg} }
	cfg, diags := spec.Parse(files)
	if diags.HasErrors() {
		return nil, failed("compile", "the specs do not compile"), diags
	}
	facts, err := loadTarget("auto", cfg)
	if err != nil {
		return nil, failed("compile", err.Error()), nil
	}
	out, more := compiler.Compile(cfg, facts)
	diags = append(diags, more...)
	if diags.HasErrors() {
		return nil, failed("compile", "the specs do not compile for this kernel"), diags
	}
	w, err := g.open()
	if err != nil {
		return nil, failed("apply", err.Error()), nil
	}
	w.Waiting = logWaiting(log, g)
	s, removed, err := w.Begin()
	if err != nil {
		return nil, failed("apply", err.Error()), nil
	}
	defer w.Unlock()
	for _, r := range removed {
		log.Warn("repaired: removed what an interrupted command left", "path", r)
	}
	plan := runtime.Diff(s, out, w.Drift(s))
	res := &applyResult{attempt: agentAttempt{Time: now}}
	next := s
	if plan.Summary.Create+plan.Summary.Replace+plan.Summary.Delete == 0 {
		res.attempt.Result = "unchanged"
		res.attempt.Unchanged = len(s.Probes)
	} else {
		var r *runtime.Result
		next, r, err = w.Apply(s, out, plan)
		if err != nil {
			var le *runtime.LoadError
			if errors.As(err, &le) && le.Program != nil {
				if d := compiler.VerifierDiagnostic(cfg, le.Probe, le.Program, le.Err); d != nil {
					return nil, failed("apply", "the kernel refused a program; nothing was changed"), hcl.Diagnostics{d}
				}
			}
			return nil, failed("apply", err.Error()+"; nothing was changed"), nil
		}
		for _, l := range r.Leftovers {
			log.Warn("could not remove old pins; the next apply removes them", "path", l)
		}
		res.attempt.Result = "applied"
		res.attempt.Created, res.attempt.Replaced, res.attempt.Destroyed, res.attempt.Unchanged = len(r.Created), len(r.Replaced), len(r.Deleted), len(r.Unchanged)
	}
	res.serial, res.lineage = next.Serial, next.Lineage
	for _, p := range next.Probes {
		res.probes = append(res.probes, p.Address.String())
	}
	sort.Strings(res.probes)
	return res, nil, diags
}

// changed tells whether the workspace no longer holds what the agent
// applied: another command wrote its state since (a probectl destroy or
// apply, another agent on the workspace), or it drifted (a pin removed, a
// program replaced). A resync re-applies then.
// It says why, or "" when it holds them.
func changed(g *globals, applied *appliedSpecs) string {
	w, s, err := g.inspect()
	if err != nil {
		return err.Error()
	}
	defer w.Close()
	switch {
	case s.Lineage != applied.lineage:
		return "its state was made anew (lineage " + s.Lineage + ")"
	case s.Serial != applied.Serial:
		return fmt.Sprintf("another command changed it (serial %d, the agent's %d: probectl apply or destroy, or another agent on the workspace)", s.Serial, applied.Serial)
	}
	drift := w.Drift(s)
	var why []string
	for addr, d := range drift {
		why = append(why, fmt.Sprintf("%s drifted: %s", addr, strings.Join(d, "; ")))
	}
	sort.Strings(why)
	return strings.Join(why, "; ")
}

// fail records a failed attempt: the previous probes stay as they are.
func (a *agent) fail(reason string, e *agentError, diags hcl.Diagnostics, sources map[string][]byte) {
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	e.Diagnostics = diagRecords(diags)
	a.mu.Lock()
	a.status.LastAttempt = &agentAttempt{Time: e.Time, Reason: reason, Digest: e.Digest, Result: "failed"}
	a.status.LastError = e
	live := a.status.Applied
	a.mu.Unlock()
	a.applyErrors.WithLabelValues(e.Stage).Inc()
	a.lastOK.Set(0)
	attrs := []any{"reason", reason, "stage", e.Stage, "error", e.Message}
	if e.Digest != "" {
		attrs = append(attrs, "digest", short(e.Digest))
	}
	if len(diags) > 0 {
		attrs = append(attrs, "diagnostics", diagText(diags, sources))
	}
	if live != nil {
		attrs = append(attrs, "live_digest", short(live.Digest))
	}
	a.log.Error("apply failed; the previous probes stay live", attrs...)
}

// diagRecords are diagnostics as /status shows them.
func diagRecords(diags hcl.Diagnostics) []diagRecord {
	var out []diagRecord
	for _, d := range diags {
		r := diagRecord{Severity: "error", Summary: d.Summary, Detail: d.Detail}
		if d.Severity == hcl.DiagWarning {
			r.Severity = "warning"
		}
		if d.Subject != nil {
			r.File, r.Line, r.Column = d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column
		}
		out = append(out, r)
	}
	return out
}

// logWaiting logs a wait for the workspace's lock, where a command would
// print it on stderr: the agent's stderr is its log (JSON lines with
// -log-json).
func logWaiting(log *slog.Logger, g *globals) func(string) {
	return func(holder string) {
		log.Info("waiting for the workspace", "holder", holder, "timeout", g.lockTimeout.String())
	}
}

// destroy removes every probe of the workspace.
func (a *agent) destroy() error {
	w, err := a.g.open()
	if err != nil {
		return err
	}
	w.Waiting = logWaiting(a.log, a.g)
	s, _, err := w.Begin()
	if err != nil {
		return err
	}
	defer w.Unlock()
	if len(s.Probes) == 0 && len(s.Tables) == 0 && s.Events == nil {
		return nil
	}
	_, res, err := w.Destroy(s, nil)
	if err != nil {
		return err
	}
	a.log.Info("destroyed on exit", "probes", len(res.Deleted))
	return nil
}

// diagText renders diagnostics as probectl prints them, for a log line.
func diagText(diags hcl.Diagnostics, sources map[string][]byte) string {
	var b bytes.Buffer
	printDiags(&b, diags, sources)
	return strings.TrimRight(b.String(), "\n")
}

func short(digest string) string {
	if len(digest) > 12 {
		return digest[:12]
	}
	return digest
}

// dirWatch reports changes of the specs' directory: its entries, and,
// when -config is a symlink (git-sync), the link itself, watched in its
// parent, and the directory it resolves to, watched in its own parent
// (that directory renamed away or replaced is a change too).
type dirWatch struct {
	path    string
	w       *fsnotify.Watcher
	watched map[string]bool
	events  chan string
	errors  <-chan error

	mu     sync.Mutex
	target string // the directory path resolved to at the last rewatch
}

func newDirWatch(path string) (*dirWatch, error) {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watching %s: %w", path, err)
	}
	d := &dirWatch{path: path, w: fw, watched: map[string]bool{}, events: make(chan string, 1), errors: fw.Errors}
	if err := d.add(filepath.Dir(filepath.Clean(path))); err != nil {
		fw.Close()
		return nil, fmt.Errorf("watching %s: %w", filepath.Dir(path), err)
	}
	d.rewatch(nil)
	go d.forward()
	return d, nil
}

func (d *dirWatch) add(p string) error {
	if d.watched[p] {
		return nil
	}
	if err := d.w.Add(p); err != nil {
		return err
	}
	d.watched[p] = true
	return nil
}

// rewatch watches the directory -config resolves to now (it moves when a
// symlink is swapped, or when the directory is made after the agent
// started) and its parent, and drops the ones it resolved to before.
// While -config resolves to nothing, the last target's parent stays
// watched, to see the directory come back.
func (d *dirWatch) rewatch(log *slog.Logger) {
	parent := filepath.Dir(filepath.Clean(d.path))
	real, err := filepath.EvalSymlinks(d.path)
	d.mu.Lock()
	if err == nil {
		d.target = real
	}
	target := d.target
	d.mu.Unlock()
	keep := map[string]bool{parent: true}
	if target != "" {
		keep[filepath.Dir(target)] = true
	}
	if err == nil {
		keep[real] = true
	}
	for p := range d.watched {
		if !keep[p] {
			d.w.Remove(p)
			delete(d.watched, p)
		}
	}
	if err == nil {
		// Added again each time: the path may name another directory
		// than the one watched (renamed into place), and fsnotify drops
		// its watch of a directory renamed away.
		delete(d.watched, real)
	}
	for p := range keep {
		if err := d.add(p); err != nil && log != nil && p != parent {
			log.Warn("watching the specs' directory", "path", p, "error", err)
		}
	}
}

// forward passes on the events that can change the specs: anything in
// the directory, and in the parents only the entries -config and the
// directory it resolves to are.
func (d *dirWatch) forward() {
	parent := filepath.Dir(filepath.Clean(d.path))
	for ev := range d.w.Events {
		d.mu.Lock()
		target := d.target
		d.mu.Unlock()
		dir := filepath.Dir(ev.Name)
		if (dir == parent || target != "" && dir == filepath.Dir(target)) &&
			ev.Name != filepath.Clean(d.path) && ev.Name != target {
			continue
		}
		select {
		case d.events <- ev.Name:
		default: // one pending change is enough: the read sees them all
		}
	}
	close(d.events)
}

func (d *dirWatch) close() { d.w.Close() }
