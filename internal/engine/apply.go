package engine

import (
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/runtime"
	"github.com/probectl/probectl/spec"
)

// Workspace names the workspace an apply changes and how it waits for
// the workspace's lock.
type Workspace struct {
	StateDir, Name string
	// LockTimeout is how long to wait for another probectl holding the
	// workspace (0: fail at once).
	LockTimeout time.Duration
	// Waiting, when not nil, is told who holds the lock when a wait begins.
	Waiting func(holder string)
	// Repaired, when not nil, is told each path Begin removed, left by an
	// interrupted command.
	Repaired func(path string)
	// HostRoot is where the host's "/" is seen, "" or "/" for this
	// machine's: user probes' binaries are resolved and attached under it
	// (the node agent's -host-root).
	HostRoot string
	// Replace are the probes Apply replaces even if unchanged (-replace).
	Replace []bpf.Address
}

// Open opens the workspace with the lock timeout and waiting report set.
func (ws Workspace) Open() (*runtime.Workspace, error) {
	if ws.LockTimeout < 0 {
		return nil, fmt.Errorf("-lock-timeout %s: a duration cannot be negative", ws.LockTimeout)
	}
	w, err := runtime.Open(ws.StateDir, ws.Name)
	if err != nil {
		return nil, err
	}
	w.LockTimeout = ws.LockTimeout
	w.Waiting = ws.Waiting
	return w, nil
}

// Begin opens and locks the workspace, reads its state, checks that the
// state owns the workspace's pins and repairs what an interrupted command
// left. The caller must Unlock.
func (ws Workspace) Begin() (*runtime.Workspace, *runtime.State, error) {
	w, err := ws.Open()
	if err != nil {
		return nil, nil, err
	}
	s, removed, err := w.Begin()
	if err != nil {
		return nil, nil, err
	}
	if ws.Repaired != nil {
		for _, r := range removed {
			ws.Repaired(r)
		}
	}
	return w, s, nil
}

// TargetFacts are the facts of target ("auto": the live kernel; a facts
// file; a built-in profile), with what cfg's probes need of them: the
// formats of its tracepoints, and kernel functions when a probe has one.
func TargetFacts(target string, cfg *spec.Config) (*bpf.Facts, error) {
	var events []string
	functions := false
	for _, p := range cfg.Probes {
		for _, e := range p.Events {
			events = append(events, e.Text)
		}
		functions = functions || p.Addr.Kind == bpf.KindKernel
	}
	return bpf.LoadTarget(target, events, functions)
}

// Compile refuses cfg's constructs that policy denies, and compiles what
// passes for facts. The diagnostics are the policy's when it refuses, else
// the compiler's (warnings included).
func Compile(cfg *spec.Config, facts *bpf.Facts, policy spec.Policy) (*compiler.Output, hcl.Diagnostics) {
	if diags := cfg.Enforce(policy); diags.HasErrors() {
		return nil, diags
	}
	return compiler.Compile(cfg, facts)
}

// Review sees the plan against the locked state before anything changes:
// an error (a saved plan made for another state, a user who did not
// confirm) stops the apply and is returned as it is. A plan without
// changes is never applied, whatever Review returns.
type Review func(s *runtime.State, plan *compiler.Plan) error

// Outcome is what Workspace.Apply did.
type Outcome struct {
	Plan *compiler.Plan
	// Result is nil when the plan had no changes.
	Result *runtime.Result
	// State is the workspace's state after.
	State *runtime.State
}

// ApplyError is a failed runtime apply: the kernel and the state are as
// they were.
type ApplyError struct {
	Err error
	// Diagnostic is the kernel's refusal of a program at the spec range
	// that produced it; nil when the failure is not the verifier's.
	Diagnostic *hcl.Diagnostic
}

func (e *ApplyError) Error() string { return e.Err.Error() }
func (e *ApplyError) Unwrap() error { return e.Err }

// Apply makes the workspace hold out (compiled from cfg), under the package's locking rule:
// lock (waiting up to LockTimeout), repair, diff against the state and its
// drift, review (nil: none), apply. It returns the errors of the lock, the
// state and review as they are, and a failed apply as *ApplyError.
func (ws Workspace) Apply(cfg *spec.Config, out *compiler.Output, review Review) (*Outcome, error) {
	w, s, err := ws.Begin()
	if err != nil {
		return nil, err
	}
	defer w.Unlock()
	plan := runtime.Diff(s, out, w.Drift(s))
	if err := runtime.RequestReplace(plan, ws.Replace); err != nil {
		return nil, err
	}
	if review != nil {
		if err := review(s, plan); err != nil {
			return nil, err
		}
	}
	if !HasChanges(plan) {
		return &Outcome{Plan: plan, State: s}, nil
	}
	next, res, err := w.Apply(s, out, plan)
	if err != nil {
		return nil, &ApplyError{Err: err, Diagnostic: Refusal(cfg, err)}
	}
	return &Outcome{Plan: plan, Result: res, State: next}, nil
}

// Refusal is the kernel's refusal of a program in err (a
// *runtime.LoadError from the verifier) as a diagnostic at the spec range
// that produced it; nil when err is another failure.
func Refusal(cfg *spec.Config, err error) *hcl.Diagnostic {
	var le *runtime.LoadError
	if errors.As(err, &le) && le.Program != nil {
		return compiler.VerifierDiagnostic(cfg, le.Probe, le.Program, le.Err)
	}
	return nil
}

// HasChanges tells whether plan creates, replaces or deletes anything.
func HasChanges(plan *compiler.Plan) bool {
	return plan.Summary.Create+plan.Summary.Replace+plan.Summary.Delete > 0
}

// Destroy removes every probe, table and event stream of the workspace,
// under the same lock. It returns what was deleted, nil for a workspace
// that was empty.
func (ws Workspace) Destroy() (*runtime.Result, error) {
	w, s, err := ws.Begin()
	if err != nil {
		return nil, err
	}
	defer w.Unlock()
	if len(s.Probes) == 0 && len(s.Tables) == 0 && s.Events == nil {
		return nil, nil
	}
	_, res, err := w.Destroy(s, nil)
	return res, err
}
