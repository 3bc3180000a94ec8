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
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/hashicorp/hcl/v2"
	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/metrics"
	"github.com/probectl/probectl/runtime"
	"github.com/probectl/probectl/spec"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
)

func newAgentCmd(g *globals) *cobra.Command {
	var o agentOptions
	cmd := &cobra.Command{
		Use:   "agent -config DIR [-listen ADDR] [-log-json] [-destroy-on-exit]",
		Short: "Apply the specs of a directory whenever it changes, and serve their metrics",
		Long: `Agent applies every *.hcl file of DIR at start, and again whenever DIR
changes: a file written in place or renamed into place, a git checkout or
pull, a git-sync symlink swap. Edits are debounced. Each change goes
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
  -listen ADDR       where to listen (default ` + defaultListen + `)
  -max-series N      the most aggregation series one scrape returns
  -debounce D        quiet time after the last change before applying (default 1s)
  -resync D          how often to re-check DIR and the workspace without an
                     event: a failed apply is retried, drifted probes are
                     re-applied (default 5m)
  -lock-timeout D    how long an apply waits for another probectl (default 1m)
  -log-json          log JSON lines (default: text), on stderr
  -destroy-on-exit   destroy the workspace's probes on SIGINT/SIGTERM
` + eventsOutHelp + `

Exit status: 0 stopped by a signal, 1 errors at start.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
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
	f.StringVar(&o.listen, "listen", defaultListen, "the address to listen on")
	f.IntVar(&o.maxSeries, "max-series", metrics.DefaultMaxSeries, "the most aggregation series one scrape returns")
	f.DurationVar(&o.debounce, "debounce", time.Second, "quiet time after the last change before applying")
	f.DurationVar(&o.resync, "resync", 5*time.Minute, "how often to re-check without an event")
	f.DurationVar(&g.lockTimeout, "lock-timeout", time.Minute, "how long an apply waits for another probectl")
	f.BoolVar(&o.logJSON, "log-json", false, "log JSON lines")
	f.BoolVar(&o.destroyOnExit, "destroy-on-exit", false, "destroy the probes on SIGINT/SIGTERM")
	o.events = addEventsOutFlags(cmd)
	return cmd
}

type agentOptions struct {
	config, listen   string
	maxSeries        int
	debounce, resync time.Duration
	logJSON          bool
	destroyOnExit    bool
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
}

type appliedSpecs struct {
	// Digest identifies the specs' text: SHA-256 over the sorted file names
	// and contents.
	Digest string    `json:"digest"`
	Files  []string  `json:"files"`
	Probes []string  `json:"probes"`
	Serial uint64    `json:"serial"`
	Time   time.Time `json:"time"`
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

	applyErrors *prometheus.CounterVec
	applies     *prometheus.CounterVec
	lastSuccess prometheus.Gauge
	lastOK      prometheus.Gauge
}

func newAgent(g *globals, o agentOptions, logw io.Writer) *agent {
	var h slog.Handler
	if o.logJSON {
		h = slog.NewJSONHandler(logw, nil)
	} else {
		h = slog.NewTextHandler(logw, nil)
	}
	a := &agent{
		g: g, o: o, log: slog.New(h).With("workspace", g.workspace),
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
	abs, err := filepath.Abs(o.config)
	if err != nil {
		return fmt.Errorf("-config %s: %w", o.config, err)
	}
	o.config = abs
	a := newAgent(g, o, stderr)
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("-listen %s: %w", o.listen, err)
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
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: time.Minute}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	if o.events == nil || o.events.out != "-" { // stdout carries the events alone
		fmt.Fprintf(stdout, "Agent for workspace %q on %s: metrics at http://%s/metrics, status at /status\n", g.workspace, o.config, ln.Addr())
	}
	a.log.Info("agent started", "config", o.config, "listen", ln.Addr().String())

	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	a.reconcile("start", true)
	resync := time.NewTicker(o.resync)
	defer resync.Stop()
	var quiet <-chan time.Time // armed by a change, fires after the debounce
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
			a.reconcile("SIGHUP", true)
		case ev, ok := <-watch.events:
			if !ok {
				break loop
			}
			a.log.Debug("change", "path", ev)
			quiet = time.After(o.debounce)
		case err := <-watch.errors:
			a.log.Warn("watching the specs' directory", "error", err)
		case <-quiet:
			quiet = nil
			watch.rewatch(a.log)
			a.reconcile("change", false)
		case <-resync.C:
			watch.rewatch(a.log)
			a.reconcile("resync", false)
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

// specSet is the directory's specs at one read.
type specSet struct {
	files  map[string][]byte
	names  []string
	digest string
}

// maxAgentFiles bounds the spec files of one directory.
const maxAgentFiles = 4096

// readSpecFile reads a regular file, refusing a symlink at its name (a
// symlinked directory above it, -config itself, is resolved by the caller),
// up to one byte over spec.MaxFileSize: spec.Parse refuses a larger one.
func readSpecFile(path string) ([]byte, error) {
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
	return io.ReadAll(io.LimitReader(f, spec.MaxFileSize+1))
}

// readSpecs reads DIR's *.hcl files. A symlinked DIR (git-sync swaps one)
// is resolved once, so the files all come from one revision; they are
// named DIR/NAME in diagnostics.
func readSpecs(dir string) (*specSet, hcl.Diagnostics) {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot read the specs' directory",
			Detail: fmt.Sprintf("%s. -config names a directory of *.hcl files.", err)}}
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
	if len(paths) > maxAgentFiles {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Too many spec files",
			Detail: fmt.Sprintf("%s has %d *.hcl files; the agent reads at most %d. Put more probes in each file.", dir, len(paths), maxAgentFiles)}}
	}
	set := &specSet{files: map[string][]byte{}}
	var diags hcl.Diagnostics
	h := sha256.New()
	for _, p := range paths {
		name := filepath.Join(dir, filepath.Base(p))
		b, err := readSpecFile(p)
		if err != nil {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Cannot read spec file",
				Detail:  fmt.Sprintf("%s: %v. The agent reads only regular files in -config, never through a symlink: whoever can plant one there would have root read any file into the log and /status.", name, err),
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

// reconcile reads the specs and makes the kernel match them. Without
// force, a read whose specs are the ones applied is skipped unless the
// workspace drifted or the last attempt failed.
func (a *agent) reconcile(reason string, force bool) {
	set, diags := readSpecs(a.o.config)
	if diags.HasErrors() {
		a.fail(reason, &agentError{Stage: "read", Message: "the specs' directory could not be read"}, diags, nil)
		return
	}
	a.mu.Lock()
	same := a.status.Applied != nil && a.status.Applied.Digest == set.digest && a.status.LastError == nil
	a.mu.Unlock()
	if same && !force && !drifted(a.g) {
		return
	}
	res, fail, diags := applySpecs(a.g, set.files, a.log)
	if fail != nil {
		fail.Digest = set.digest
		a.fail(reason, fail, diags, set.files)
		return
	}
	if len(diags) > 0 {
		a.log.Warn("warnings", "digest", short(set.digest), "diagnostics", diagText(diags, set.files))
	}
	att := res.attempt
	att.Reason, att.Digest = reason, set.digest
	applied := &appliedSpecs{Digest: set.digest, Files: set.names, Probes: res.probes, Serial: res.serial, Time: att.Time}
	a.mu.Lock()
	a.status.Applied, a.status.LastAttempt, a.status.LastError = applied, &att, nil
	a.mu.Unlock()
	a.applies.WithLabelValues(att.Result).Inc()
	a.lastSuccess.Set(float64(att.Time.UnixNano()) / 1e9)
	a.lastOK.Set(1)
	a.log.Info("applied", "reason", reason, "result", att.Result, "digest", short(set.digest), "serial", res.serial,
		"created", att.Created, "replaced", att.Replaced, "destroyed", att.Destroyed, "unchanged", att.Unchanged)
}

// applyResult is what a successful applySpecs did.
type applyResult struct {
	attempt agentAttempt // Time, Result and the counts
	probes  []string     // the probes now applied, sorted
	serial  uint64       // the state's serial after it
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
	w.Waiting = func(holder string) {
		log.Info("waiting for the workspace", "holder", holder, "timeout", g.lockTimeout.String())
	}
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
				if d := compiler.VerifierDiagnostic(le.Probe, le.Program, le.Err); d != nil {
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
	res.serial = next.Serial
	for _, p := range next.Probes {
		res.probes = append(res.probes, p.Address.String())
	}
	sort.Strings(res.probes)
	return res, nil, diags
}

// drifted reports whether the workspace no longer holds what was applied
// (a pin removed, a program replaced): a resync re-applies then.
func drifted(g *globals) bool {
	w, s, err := g.inspect()
	if err != nil {
		return true
	}
	defer w.Close()
	return len(w.Drift(s)) > 0
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

// destroy removes every probe of the workspace.
func (a *agent) destroy() error {
	w, err := a.g.open()
	if err != nil {
		return err
	}
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
// parent.
type dirWatch struct {
	path    string
	w       *fsnotify.Watcher
	watched map[string]bool
	events  chan string
	errors  <-chan error
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
// started), and drops the one it resolved to before.
func (d *dirWatch) rewatch(log *slog.Logger) {
	parent := filepath.Dir(filepath.Clean(d.path))
	real, err := filepath.EvalSymlinks(d.path)
	for p := range d.watched {
		if p != parent && p != real {
			d.w.Remove(p)
			delete(d.watched, p)
		}
	}
	if err != nil {
		return
	}
	if err := d.add(real); err != nil && log != nil {
		log.Warn("watching the specs' directory", "path", real, "error", err)
	}
}

// forward passes on the events that can change the specs: anything in
// the directory, and in the parent only the entry -config names.
func (d *dirWatch) forward() {
	parent := filepath.Dir(filepath.Clean(d.path))
	base := filepath.Base(filepath.Clean(d.path))
	for ev := range d.w.Events {
		if filepath.Dir(ev.Name) == parent && filepath.Base(ev.Name) != base {
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
