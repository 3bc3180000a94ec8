package fleet

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/fleet/api/v1alpha1"
	"github.com/probectl/probectl/spec"
)

// NodePlan is one node's plan of a spec set.
type NodePlan struct {
	Node string `json:"node"`
	// Kernel is the facts' label ("linux 6.12.0 x86_64 (profile ...)").
	Kernel string `json:"kernel"`
	// Probes has route, link families and reason per probe; empty when
	// Errors is not.
	Probes []v1alpha1.ProbePlan `json:"probes,omitempty"`
	// Skipped are the optional probes the node will not attach, and why.
	Skipped []string `json:"skipped,omitempty"`
	// Errors are the diagnostics that stop the node from running the
	// spec set: "file:line:col: summary: detail".
	Errors []string `json:"errors,omitempty"`
	// Warnings are the other diagnostics, in the same form.
	Warnings []string `json:"warnings,omitempty"`
	// Unchecked say what the node's facts lack to check the spec set (a
	// binary it did not publish, BTF reads on a kernel whose BTF is not
	// the planner's), "file:line:col: summary: detail" or "probe ADDR:
	// ...": the node may yet refuse it when it applies.
	Unchecked []string `json:"unchecked,omitempty"`
	// Status is "ok" (the node can run it), "unchecked" (nothing stops
	// it, but Unchecked lists what could not be checked) or "cannot".
	Status string `json:"status"`
	// Scope is whose tasks the probes see ("node", "namespace NS (...)").
	Scope string `json:"scope"`
}

// Policy is the policy the specs of a set are planned and applied
// under: a tenant's (a namespaced ProbeSet of namespace tenant), or none
// (tenant "": a ClusterProbeSet).
func Policy(tenant string) spec.Policy {
	if tenant == "" {
		return spec.Policy{}
	}
	return spec.TenantPolicy(tenant)
}

// OK reports whether nothing found stops the node from running the spec
// set (Unchecked may still list what could not be checked).
func (p *NodePlan) OK() bool { return len(p.Errors) == 0 }

// The NodePlan statuses.
const (
	StatusOK        = "ok"
	StatusUnchecked = "unchecked"
	StatusCannot    = "cannot"
)

func (p *NodePlan) setStatus() {
	switch {
	case len(p.Errors) > 0:
		p.Status = StatusCannot
	case len(p.Unchecked) > 0:
		p.Status = StatusUnchecked
	default:
		p.Status = StatusOK
	}
}

// Digest identifies a spec set: its file names and contents.
func Digest(files map[string][]byte) string {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		fmt.Fprintf(h, "%d:%s\n%d:", len(n), n, len(files[n]))
		h.Write(files[n])
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// PlanNode compiles the spec files against a node's facts, as
// "probectl plan -target FILE" does, and keeps what the node's record
// shows. Nothing is loaded into a kernel; live facts read the formats of
// the tracepoints the specs name from tracefs. A tenant's specs (tenant,
// a namespaced ProbeSet's namespace; "" for a ClusterProbeSet) are
// planned under its policy (spec.TenantPolicy).
func PlanNode(node string, files map[string][]byte, facts *bpf.Facts, tenant string) *NodePlan {
	np := &NodePlan{Node: node, Kernel: facts.Label(), Scope: compiler.ScopeOf(tenant).String()}
	cfg, diags := spec.Parse(files)
	if !diags.HasErrors() {
		diags = append(diags, cfg.Enforce(Policy(tenant))...)
	}
	if !diags.HasErrors() && facts.Source == "live" {
		if err := loadTracepoints(cfg, facts); err != nil {
			np.Errors = append(np.Errors, "read the tracepoint formats: "+err.Error())
			np.setStatus()
			return np
		}
	}
	if !diags.HasErrors() {
		out, more := compiler.Compile(cfg, facts)
		diags = append(diags, more...)
		if !diags.HasErrors() {
			np.record(out)
		}
	}
	for _, d := range diags {
		switch {
		case d.Severity == hcl.DiagError:
			np.Errors = append(np.Errors, DiagText(d))
		case d.Summary == compiler.SummaryNotChecked:
			np.Unchecked = append(np.Unchecked, DiagText(d))
		default:
			np.Warnings = append(np.Warnings, DiagText(d))
		}
	}
	np.setStatus()
	return np
}

// loadTracepoints reads the live kernel's tracepoint formats from tracefs
// for the events the specs name, as "probectl plan" does.
func loadTracepoints(cfg *spec.Config, facts *bpf.Facts) error {
	var events []string
	for _, p := range cfg.Probes {
		for _, e := range p.Events {
			events = append(events, e.Text)
		}
	}
	return facts.LoadTracepoints(events)
}

// record keeps what the node's record shows of a compiled plan: each
// probe's route, families and link count, and the probes skipped.
func (np *NodePlan) record(out *compiler.Output) {
	for _, p := range out.Probes {
		pp := v1alpha1.ProbePlan{Address: p.Address.String(), Route: string(p.Route), Reason: p.Reason}
		for _, fam := range p.Attach {
			pp.Attach = append(pp.Attach, string(fam))
		}
		if n := p.LinkCount(); n != nil {
			links := int32(*n)
			pp.Links = &links
		}
		np.Probes = append(np.Probes, pp)
		if len(p.Deferred) > 0 {
			np.Unchecked = append(np.Unchecked, fmt.Sprintf("probe %s: reads through BTF not checked (%s): the plan has no BTF of the node's kernel (a node whose NodeFacts' btf hash is the planner's own kernel's is checked with it), so they are resolved when the node applies",
				p.Address, strings.Join(p.Deferred, ", ")))
		}
	}
	for _, s := range out.Skipped {
		np.Skipped = append(np.Skipped, s.Address.String()+": "+s.Why)
	}
}

// DiagText is a diagnostic on one line: "file:line:col: summary: detail".
func DiagText(d *hcl.Diagnostic) string {
	var b strings.Builder
	if d.Subject != nil {
		fmt.Fprintf(&b, "%s:%d:%d: ", d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column)
	}
	b.WriteString(d.Summary)
	if d.Detail != "" {
		b.WriteString(": ")
		b.WriteString(strings.Join(strings.Fields(d.Detail), " "))
	}
	return b.String()
}
