package main

import (
	"context"
	"errors"
	"log/slog"

	"github.com/hashicorp/hcl/v2"
	"github.com/probectl/probectl/fleet"
	"github.com/probectl/probectl/fleet/api/v1alpha1"
)

// kubeApplier applies a ProbeSet's specs on this node for fleet.NodeAgent,
// through the agent's applySpecs: the same plan and atomic apply as
// "probectl apply", into the ProbeSet's own workspace. A failure leaves
// that workspace's previous probes live.
//
// "probectl agent -kubernetes" is to run a fleet.NodeAgent with it (the
// flag is not wired yet).
type kubeApplier struct {
	g   *globals
	log *slog.Logger
}

var _ fleet.Applier = kubeApplier{}

func (k kubeApplier) workspace(name string) *globals {
	g := *k.g
	g.workspace = name
	return &g
}

// Apply implements fleet.Applier.
func (k kubeApplier) Apply(ctx context.Context, workspace string, files map[string][]byte) (fleet.ApplyResult, error) {
	_, fail, diags := applySpecs(k.workspace(workspace), files, k.log.With("workspace", workspace))
	var r fleet.ApplyResult
	for _, d := range diags {
		if d.Severity == hcl.DiagError {
			r.Errors = append(r.Errors, fleet.DiagText(d))
		}
	}
	if fail != nil {
		return r, errors.New(fail.Stage + ": " + fail.Message)
	}
	r.AppliedDigest = fleet.Digest(files)
	probes, err := k.Probes(ctx, workspace)
	if err != nil {
		return r, err
	}
	r.Probes = probes
	return r, nil
}

// Probes implements fleet.Applier: what "probectl status" reads.
func (k kubeApplier) Probes(ctx context.Context, workspace string) ([]v1alpha1.ProbePlan, error) {
	w, err := k.workspace(workspace).open()
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
func (k kubeApplier) Destroy(ctx context.Context, workspace string) error {
	w, err := k.workspace(workspace).open()
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
	_, _, err = w.Destroy(s, nil)
	return err
}
