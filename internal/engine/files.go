package engine

import (
	"errors"
	"log/slog"
	"sort"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/probectl/probectl/spec"
)

// applied is what a successful applyFiles did.
type applied struct {
	attempt Attempt  // Time, Result and the counts
	probes  []string // the probes now applied, sorted
	serial  uint64   // the state's serial after it
	lineage string   // and its lineage
}

// applyFiles is the agents' apply: files parsed, compiled for the running
// kernel (TargetFacts, Compile, no policy) and applied to ws
// (Workspace.Apply). On failure the kernel and the state are as they
// were, and the failure says its stage ("compile" or "apply") with the
// diagnostics at their spec ranges. It returns the warnings on success.
func applyFiles(ws Workspace, files map[string][]byte, policy spec.Policy, log *slog.Logger) (*applied, *Failure, hcl.Diagnostics) {
	now := time.Now().UTC()
	failed := func(stage, msg string) *Failure { return &Failure{Time: now, Stage: stage, Message: msg} }
	cfg, diags := spec.Parse(files)
	if diags.HasErrors() {
		return nil, failed("compile", "the specs do not compile"), diags
	}
	facts, err := TargetFacts("auto", cfg)
	if err != nil {
		return nil, failed("compile", err.Error()), nil
	}
	facts.Root = ws.HostRoot
	out, more := Compile(cfg, facts, policy)
	diags = append(diags, more...)
	if diags.HasErrors() {
		return nil, failed("compile", "the specs do not compile for this kernel"), diags
	}
	o, err := ws.Apply(cfg, out, nil)
	var ae *ApplyError
	switch {
	case errors.As(err, &ae) && ae.Diagnostic != nil:
		return nil, failed("apply", "the kernel refused a program; nothing was changed"), hcl.Diagnostics{ae.Diagnostic}
	case ae != nil:
		return nil, failed("apply", err.Error()+"; nothing was changed"), nil
	case err != nil:
		return nil, failed("apply", err.Error()), nil
	}
	res := &applied{attempt: Attempt{Time: now}, serial: o.State.Serial, lineage: o.State.Lineage}
	if r := o.Result; r == nil {
		res.attempt.Result = "unchanged"
		res.attempt.Unchanged = len(o.State.Probes)
	} else {
		for _, l := range r.Leftovers {
			log.Warn("could not remove old pins; the next apply removes them", "path", l)
		}
		res.attempt.Result = "applied"
		res.attempt.Created, res.attempt.Replaced, res.attempt.Destroyed, res.attempt.Unchanged = len(r.Created), len(r.Replaced), len(r.Deleted), len(r.Unchanged)
	}
	for _, p := range o.State.Probes {
		res.probes = append(res.probes, p.Address.String())
	}
	sort.Strings(res.probes)
	return res, nil, diags
}

// logWaiting logs a wait for the workspace's lock, where a command would
// print it on stderr: an agent's stderr is its log (JSON lines with
// -log-json).
func logWaiting(log *slog.Logger, timeout time.Duration) func(string) {
	return func(holder string) {
		log.Info("waiting for the workspace", "holder", holder, "timeout", timeout.String())
	}
}

// logRepaired logs what Begin removed, left by an interrupted command.
func logRepaired(log *slog.Logger) func(string) {
	return func(path string) {
		log.Warn("repaired: removed what an interrupted command left", "path", path)
	}
}
