package engine

import (
	"net/http"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/internal/termtext"
)

// DirStatus is /status: what is applied and what went wrong last.
type DirStatus struct {
	Config    string `json:"config"`
	Workspace string `json:"workspace"`
	// Applied is the last set of specs that is live, nil before the first
	// successful apply.
	Applied *Applied `json:"applied"`
	// LastAttempt is the last read of the directory that was compiled or
	// applied (a read with the digest of the live specs, no drift and no
	// failure before is not an attempt).
	LastAttempt *Attempt `json:"last_attempt"`
	// LastError is the last attempt's failure; nil when it succeeded.
	LastError *Failure `json:"last_error"`
	// Pending is a change the agent waits on, not applied yet; nil when
	// the input is stable.
	Pending *Pending `json:"pending"`
}

// Pending is a change of the specs that is not yet complete and
// stable: the live probes stay as they are meanwhile.
type Pending struct {
	// Since is when the agent began to wait.
	Since time.Time `json:"since"`
	// Reason is why it waits: files a process holds open for writing,
	// or specs that changed within the settle time (-debounce).
	Reason string `json:"reason"`
	// Digest is the specs' at the last read, empty while one is written.
	Digest string `json:"digest,omitempty"`
}

// Applied is a set of specs the agent applied.
type Applied struct {
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

// Attempt is one read of the specs that was compiled or applied.
type Attempt struct {
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

// Failure is a failed attempt: its stage, message and diagnostics.
type Failure struct {
	Time time.Time `json:"time"`
	// Stage is "read", "compile" or "apply".
	Stage       string       `json:"stage"`
	Digest      string       `json:"digest,omitempty"`
	Message     string       `json:"message"`
	Diagnostics []DiagRecord `json:"diagnostics,omitempty"`
}

// DiagRecord is one diagnostic of a failed attempt, at its spec position.
type DiagRecord struct {
	Severity string `json:"severity"`
	File     string `json:"file,omitempty"`
	Line     int    `json:"line,omitempty"`
	Column   int    `json:"column,omitempty"`
	Summary  string `json:"summary"`
	Detail   string `json:"detail,omitempty"`
}

func (a *DirAgent) serveStatus(rw http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	b, err := bpf.JSONIndent(a.status, "  ")
	a.mu.Unlock()
	if err != nil {
		http.Error(rw, err.Error(), http.StatusInternalServerError)
		return
	}
	rw.Header().Set("Content-Type", "application/json")
	rw.Write(append(b, '\n'))
}

// fail records a failed attempt: the previous probes stay as they are.
func (a *DirAgent) fail(reason string, e *Failure, diags hcl.Diagnostics, sources map[string][]byte) {
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	e.Diagnostics = diagRecordsOf(diags)
	a.mu.Lock()
	a.status.LastAttempt = &Attempt{Time: e.Time, Reason: reason, Digest: e.Digest, Result: "failed"}
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
		attrs = append(attrs, "diagnostics", termtext.DiagnosticsText(diags, sources))
	}
	if live != nil {
		attrs = append(attrs, "live_digest", short(live.Digest))
	}
	a.log.Error("apply failed; the previous probes stay live", attrs...)
}

// diagRecordsOf are diagnostics as /status shows them.
func diagRecordsOf(diags hcl.Diagnostics) []DiagRecord {
	var out []DiagRecord
	for _, d := range diags {
		r := DiagRecord{Severity: "error", Summary: d.Summary, Detail: d.Detail}
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
