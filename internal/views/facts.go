package views

import (
	"fmt"
	"io"
	"strings"

	"github.com/probectl/probectl/bpf"
)

// Facts shows a kernel's facts (target): the human view as a list, the
// JSON view as the facts file's form.
type Facts interface {
	Facts(f *bpf.Facts) error
}

// NewFacts is the facts view -json selects, writing to w.
func NewFacts(asJSON bool, w io.Writer) Facts {
	if asJSON {
		return FactsJSON{w}
	}
	return FactsHuman{w}
}

// FactsHuman is the facts as text.
type FactsHuman struct{ W io.Writer }

// FactsJSON is the facts as indented JSON.
type FactsJSON struct{ W io.Writer }

// Facts writes f as JSON.
func (v FactsJSON) Facts(f *bpf.Facts) error { return writeJSON(v.W, f) }

// Facts writes f as text.
func (v FactsHuman) Facts(f *bpf.Facts) error {
	renderFacts(v.W, f)
	return nil
}

// FactsWritten says what a facts file holds.
func FactsWritten(w io.Writer, facts *bpf.Facts, path string) {
	btf := "no BTF"
	if len(facts.KernelBTF) > 0 {
		btf = fmt.Sprintf("its BTF (%d KiB gzipped)", len(facts.KernelBTF)/1024)
	}
	fmt.Fprintf(w, "Wrote the facts of %s, with %d functions, the formats of its tracepoints (%d KiB gzipped) and %s, to %s.\n",
		facts.Label(), len(facts.Functions), len(facts.TracepointFormats)/1024, btf, path)
}

// renderFacts shows the facts: the link types as every display names them
// (bpf.LinkFacts), the ones the kernel has, then the ones it lacks.
func renderFacts(w io.Writer, f *bpf.Facts) {
	yes := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	fmt.Fprintf(w, "Kernel:   linux %s (%s), %s\n", f.Kernel, f.Name, f.Arch)
	fmt.Fprintf(w, "BTF:      %s\n", yes(f.BTF))
	fmt.Fprintf(w, "ISA:      %s\n", map[bool]string{true: "v4 (gotol: jumps beyond 32767 instructions)", false: "before v4 (no gotol)"}[f.ISAv4])
	fmt.Fprintf(w, "fprobe:   %s", f.Fprobe)
	if f.FprobeEntryFastPath {
		fmt.Fprint(w, ", entry-only ftrace_ops fast path")
	}
	fmt.Fprintf(w, " (ftrace WITH_REGS %s, WITH_ARGS %s)\n", yes(f.FtraceWithRegs), yes(f.FtraceWithArgs))
	have, lack := f.Links.Split()
	fmt.Fprintf(w, "Links:    %s\n", strings.Join(have, ", "))
	if len(lack) > 0 {
		fmt.Fprintf(w, "Missing:  %s\n", strings.Join(lack, ", "))
	}
	h := f.Helpers
	fmt.Fprintf(w, "Helpers:  attach cookies %s (fentry %s), func arg/ret %s, ring buffer %s, session kfuncs %s (ctx prototype %s)\n",
		yes(h.AttachCookie), yes(h.TracingAttachCookie), yes(h.FuncArg), yes(h.Ringbuf), yes(h.SessionKfuncs), yes(h.SessionKfuncsCtxArg))
	if f.CPUs > 0 {
		fmt.Fprintf(w, "CPUs:     %d\n", f.CPUs)
	}
}
