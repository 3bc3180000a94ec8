package compiler

import (
	"debug/elf"
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/probectl/probectl/spec"
)

// The footguns of user probes that a binary's own file tells: IFUNC
// symbols, and uretprobes on Go programs.

// explainIFuncs turns the "Function not found" of a pattern that names
// an IFUNC of the binary into what it is: the symbol is the resolver the
// dynamic linker runs once at load time to pick the implementation for
// the CPU, so probing it would count loads, never calls. It names the
// implementations the binary's symbols list, when it lists them.
func (b *elfBinary) explainIFuncs(p *spec.Probe, diags hcl.Diagnostics) {
	for _, pat := range p.Functions {
		if !b.ifuncs[pat.Text] {
			continue
		}
		for _, d := range diags {
			if d.Summary == "Function not found" && d.Subject != nil && *d.Subject == pat.Range {
				d.Summary = "Function is an IFUNC"
				d.Detail = ifuncDetail(pat.Text, p.Binary, b.implementations(pat.Text))
			}
		}
	}
}

func ifuncDetail(name, binary string, impls []string) string {
	what := fmt.Sprintf("%q in %s is an IFUNC (STT_GNU_IFUNC): the symbol is its resolver, which the dynamic linker calls once, at load time, to pick the implementation for this CPU; a probe on it would fire once per process, never per call of %s.", name, binary, name)
	if len(impls) == 0 {
		return what + fmt.Sprintf(" Its implementations (__%s_*) are local symbols, which this file's symbol table leaves out (it is stripped): probe the callers of %s instead, or a binary whose symbol table lists them (a static build, or one with its debug symbols).", name, name)
	}
	q := make([]string, len(impls))
	for i, s := range impls {
		q[i] = fmt.Sprintf("%q", s)
	}
	return what + fmt.Sprintf(" Probe the implementations it picks among instead (which one runs depends on the CPU): functions = [%s].", strings.Join(q, ", "))
}

// implementations lists the functions of the binary that implement the
// IFUNC name as glibc names them (__strlen_avx2, __strlen_evex, ...),
// sorted.
func (b *elfBinary) implementations(name string) []string {
	var out []string
	for fn := range b.funcs {
		if strings.HasPrefix(fn, "__"+name+"_") {
			out = append(out, fn)
		}
	}
	sort.Strings(out)
	return out
}

// isGo says whether the binary is a Go program: the linker writes the
// .go.buildinfo section (and a "Go" build-id note), which strip keeps.
func isGo(ef *elf.File) bool {
	if ef.Section(".go.buildinfo") != nil || ef.Section(".note.go.buildid") != nil {
		return true
	}
	for _, prog := range ef.Progs {
		if prog.Type == elf.PT_NOTE && prog.Filesz < 1<<16 {
			buf := make([]byte, prog.Filesz)
			if _, err := prog.ReadAt(buf, 0); err == nil && strings.Contains(string(buf), "Go\x00\x00") {
				return true
			}
		}
	}
	return false
}

// goExitWarning warns of an exit handler on a Go program's functions: a
// uretprobe swaps the return address on the goroutine's stack for the
// kernel's trampoline, and the Go runtime copies and moves goroutine
// stacks as they grow, and unwinds them (the garbage collector, panics,
// tracebacks) expecting its own return addresses: the program can crash
// ("unexpected return pc") or return to the wrong place.
func goExitWarning(p *spec.Probe, names []string) *hcl.Diagnostic {
	if p.Exit == nil || len(names) == 0 {
		return nil
	}
	return &hcl.Diagnostic{
		Severity: hcl.DiagWarning,
		Summary:  "Exit handler on a Go program",
		Detail: fmt.Sprintf("%s is a Go program: on_exit puts a uretprobe on %s, which replaces the return address on the goroutine's stack; the Go runtime moves goroutine stacks when they grow and unwinds them expecting its own return addresses, so the program can crash (\"unexpected return pc\") or return to the wrong place. Use on_entry only, or entry probes on the places the function returns to (the functions its callers run next).",
			p.Binary, abbreviateNames(names, 3)),
		Subject: &p.Exit.DeclRange,
	}
}

// abbreviateNames writes the first n of names, and how many more.
func abbreviateNames(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}
