package compiler

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/hashicorp/hcl/v2"
	"github.com/probectl/probectl/compiler/internal/emit"
	"github.com/probectl/probectl/spec"
)

// verifierInsn matches a verifier log line about one instruction: "42: (79) r1 = ...".
// Compiled when a rejection is first read, not at every command's start.
var verifierInsn = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(\d+): \(`) })

// VerifierLines is how many of the verifier's last lines a diagnostic quotes.
const VerifierLines = 8

// VerifierDiagnostic turns a load error of prog into a diagnostic at the
// spec expression that generated the instruction the verifier stopped at
// (or, when none did, at the probe's declaration in cfg, which may be
// nil), quoting the verifier's last lines. It returns nil for other
// errors.
func VerifierDiagnostic(cfg *spec.Config, p *Probe, prog *Program, err error) *hcl.Diagnostic {
	var ve *ebpf.VerifierError
	if !errors.As(err, &ve) {
		return nil
	}
	log := ve.Log
	for len(log) > 0 && strings.TrimSpace(log[len(log)-1]) == "" {
		log = log[:len(log)-1]
	}
	insn := -1
	for i := len(log) - 1; i >= 0; i-- {
		if m := verifierInsn().FindStringSubmatch(log[i]); m != nil {
			insn, _ = strconv.Atoi(m[1])
			break
		}
	}
	tail := log
	if len(tail) > VerifierLines {
		tail = tail[len(tail)-VerifierLines:]
	}
	rng, text := originOf(prog.Instructions, insn)
	if rng == nil {
		rng = declRange(cfg, p)
	}
	where := ""
	if text != "" {
		where = fmt.Sprintf(", in the code for %s", text)
	}
	d := &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Verifier rejected program",
		Detail: fmt.Sprintf("The kernel's verifier rejected the %s program of %s at instruction %d%s: %v.\nIts last lines:\n  %s\nThis is a probectl bug unless the kernel lacks something the plan assumed; please report it with the spec.",
			prog.Role, p.Address, insn, where, ve.Cause, strings.Join(tail, "\n  ")),
		Subject: rng,
	}
	return d
}

// declRange is the declaration of p in cfg, or nil.
func declRange(cfg *spec.Config, p *Probe) *hcl.Range {
	if cfg == nil {
		return nil
	}
	for _, sp := range cfg.Probes {
		if sp.Addr == p.Address {
			return sp.DeclRange.Ptr()
		}
	}
	return nil
}

// originOf finds the spec range and source text of the construct that
// emitted the instruction at raw offset insn: the nearest tagged
// instruction at or before it.
func originOf(insns asm.Instructions, insn int) (*hcl.Range, string) {
	var rng *hcl.Range
	text := ""
	iter := insns.Iterate()
	for iter.Next() {
		if int(iter.Offset) > insn && insn >= 0 {
			break
		}
		if r, ok := emit.Origin(iter.Ins).(hcl.Range); ok {
			r := r
			rng = &r
			if src := iter.Ins.Source(); src != nil {
				text = src.String()
			}
		}
	}
	return rng, text
}
