package engine

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/probectl/probectl/internal/termtext"
	"github.com/probectl/probectl/spec"
	"github.com/prometheus/client_golang/prometheus"
)

// DirOptions configure a DirAgent.
type DirOptions struct {
	// Config is the directory of specs, absolute (a symlink to one is
	// followed at each read).
	Config string
	// Workspace is where the specs are applied; its Waiting and Repaired
	// are set to log lines.
	Workspace Workspace
	// Debounce is the settle time: a change is applied once two reads
	// this far apart find the same specs, none of them open for writing.
	Debounce time.Duration
	// Resync is how often the directory and the workspace are re-checked
	// without an event.
	Resync time.Duration
	// Insecure reads specs that users other than root own or may write.
	Insecure bool
	// Log is the agent's log.
	Log *slog.Logger
}

// DirAgent applies a directory of specs to a workspace whenever it
// changes and settles: only complete, stable specs are applied, each
// through Workspace.Apply, and a change that fails to read, compile or
// apply leaves the previous probes live. Its status is /status
// (ServeStatus); its metrics are Collectors.
type DirAgent struct {
	o   DirOptions
	log *slog.Logger

	mu     sync.Mutex
	status DirStatus

	// pend is the change being waited on (the loop's alone; /status
	// shows a copy).
	pend *pendingSpecs
	// watch is the directory's watcher, from Watch.
	watch *dirWatch

	applyErrors *prometheus.CounterVec
	applies     *prometheus.CounterVec
	lastSuccess prometheus.Gauge
	lastOK      prometheus.Gauge
}

// NewDir returns the agent of o.Config; it reads nothing yet.
func NewDir(o DirOptions) *DirAgent {
	o.Workspace.Waiting = logWaiting(o.Log, o.Workspace.LockTimeout)
	o.Workspace.Repaired = logRepaired(o.Log)
	a := &DirAgent{
		o: o, log: o.Log,
		status: DirStatus{Config: o.Config, Workspace: o.Workspace.Name},
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

// Collectors are the agent's own metrics: apply errors by stage, applies
// by result, the last success's time and whether the last attempt held.
func (a *DirAgent) Collectors() []prometheus.Collector {
	return []prometheus.Collector{a.applyErrors, a.applies, a.lastSuccess, a.lastOK}
}

// ServeStatus serves the agent's DirStatus as JSON.
func (a *DirAgent) ServeStatus(rw http.ResponseWriter, r *http.Request) { a.serveStatus(rw, r) }

// Watch starts watching the directory. Call Close when done.
func (a *DirAgent) Watch() error {
	w, err := newDirWatch(a.o.Config)
	if err != nil {
		return err
	}
	a.watch = w
	return nil
}

// Close stops the watcher.
func (a *DirAgent) Close() {
	if a.watch != nil {
		a.watch.close()
	}
}

// Run applies the specs at once, then on each settled change, each
// signal on hup (even when nothing changed) and each resync, until ctx is
// done or the watcher stops. It needs Watch first.
func (a *DirAgent) Run(ctx context.Context, hup <-chan os.Signal) {
	// check is armed by a change, or by a read that found the specs not
	// stable yet, and reads them again after the debounce. A change
	// does not re-arm it: a file written on and on in DIR (a log) puts
	// nothing off, as only the specs' content decides when they settle.
	var check <-chan time.Time
	arm := func(wait bool) {
		if wait && check == nil {
			check = time.After(a.o.Debounce)
		}
	}
	arm(a.reconcile("start", true))
	resync := time.NewTicker(a.o.Resync)
	defer resync.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			a.log.Info("SIGHUP: re-reading the specs")
			arm(a.reconcile("SIGHUP", true))
		case ev, ok := <-a.watch.events:
			if !ok {
				return
			}
			a.log.Debug("change", "path", ev)
			arm(true)
		case err := <-a.watch.errors:
			a.log.Warn("watching the specs' directory", "error", err)
		case <-check:
			check = nil
			a.watch.rewatch(a.log)
			arm(a.reconcile("change", false))
		case <-resync.C:
			a.watch.rewatch(a.log)
			arm(a.reconcile("resync", false))
		}
	}
}

// reconcile reads the specs and makes the kernel match them, once they
// are complete and stable (stable); it returns true when it waits on them
// and wants to read them again after the debounce. Until then nothing
// changes: a probe missing from a half-written file is not destroyed.
// Without force, a read whose specs are the ones applied is skipped
// unless the workspace drifted, another command changed it since (its
// state's serial moved: a probectl destroy or apply, another agent), or
// the last attempt failed.
func (a *DirAgent) reconcile(reason string, force bool) bool {
	set, diags := readSpecs(a.o.Config, a.o.Insecure)
	if diags.HasErrors() {
		a.settled()
		a.fail(reason, &Failure{Stage: "read", Message: "the specs' directory could not be read"}, diags, nil)
		return false
	}
	a.mu.Lock()
	live := a.status.Applied
	same := live != nil && live.Digest == set.digest && a.status.LastError == nil && len(set.writing) == 0
	a.mu.Unlock()
	now := time.Now()
	if same && !force {
		a.settled()
		why := changed(a.o.Workspace, live)
		if why == "" {
			return false
		}
		a.log.Warn("the workspace no longer holds what the agent applied; applying the specs again", "why", why)
	} else if ok, why := stable(set, live, a.pend, force, now, a.o.Debounce); !ok {
		a.wait(set, why, now)
		return true
	}
	a.settled()
	res, fail, diags := applyFiles(a.o.Workspace, set.files, spec.Policy{}, a.log)
	if fail != nil {
		fail.Digest = set.digest
		a.fail(reason, fail, diags, set.files)
		return false
	}
	if len(diags) > 0 {
		a.log.Warn("warnings", "digest", short(set.digest), "diagnostics", termtext.DiagnosticsText(diags, set.files))
	}
	att := res.attempt
	att.Reason, att.Digest = reason, set.digest
	applied := &Applied{Digest: set.digest, Files: set.names, Probes: res.probes, Serial: res.serial, Time: att.Time, lineage: res.lineage, real: set.real}
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

// changed tells whether the workspace no longer holds what the agent
// applied: another command wrote its state since (a probectl destroy or
// apply, another agent on the workspace), or it drifted (a pin removed, a
// program replaced). A resync re-applies then.
// It says why, or "" when it holds them.
func changed(ws Workspace, applied *Applied) string {
	w, err := ws.Open()
	if err != nil {
		return err.Error()
	}
	defer w.Close()
	s, err := w.Inspect()
	if err != nil {
		return err.Error()
	}
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

// Destroy removes every probe of the workspace (-destroy-on-exit).
func (a *DirAgent) Destroy() error {
	res, err := a.o.Workspace.Destroy()
	if err != nil || res == nil {
		return err
	}
	a.log.Info("destroyed on exit", "probes", len(res.Deleted))
	return nil
}

// short is a digest as the log shows it.
func short(digest string) string {
	if len(digest) > 12 {
		return digest[:12]
	}
	return digest
}
