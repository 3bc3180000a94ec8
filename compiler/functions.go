package compiler

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/spec"
)

// kernelMatch is a kernel probe's patterns matched against the target's
// function list, before the route is chosen (the route may depend on how
// many functions there are).
type kernelMatch struct {
	names, missing []string
	from           map[string]hcl.Range
	diags          hcl.Diagnostics
	// resolved: the target has a function list; without one (a profile)
	// names is nil and named counts the exact names among the patterns.
	resolved bool
	named    int
	globs    bool
}

func matchKernelFunctions(p *spec.Probe, f *bpf.Facts) kernelMatch {
	var m kernelMatch
	for _, pat := range p.Functions {
		if isGlob(pat.Text) {
			m.globs = true
		} else {
			m.named++
		}
	}
	if len(f.Functions) == 0 {
		return m
	}
	m.resolved = true
	m.names, m.from, m.missing, m.diags = matchPatterns(p, f.Functions, "the target kernel ("+f.Label()+")")
	return m
}

// count is the number of functions the route is for, and whether globs
// were left unresolved.
func (m kernelMatch) count() (int, bool) {
	if m.resolved {
		return len(m.names), false
	}
	return m.named, m.globs
}

// copies counts the resolved functions that are compiler copies
// (name.isra.0), which have no BTF and so no trampoline.
func (m kernelMatch) copies() int {
	n := 0
	for _, name := range m.names {
		if strings.Contains(name, ".") {
			n++
		}
	}
	return n
}

// resolveKernelFunctions finishes the match for route d: with no list (a
// profile), the patterns stay unresolved: nil, no error.
func resolveKernelFunctions(p *spec.Probe, f *bpf.Facts, m kernelMatch, d decision) ([]string, []string, hcl.Diagnostics) {
	if !m.resolved {
		return nil, nil, nil
	}
	diags := m.diags
	if d.route == RouteTrampoline {
		diags = append(diags, withoutBTF(p, f, m.names, m.from)...)
	}
	return m.names, m.missing, diags
}

// withoutBTF refuses, on the trampoline route, the functions fentry and
// fexit cannot attach: they attach through the function's BTF, and
// compiler copies (vfs_statfs.part.0.isra.0, lookup_fast.constprop.0,
// .cold parts) never have any. The error is at the pattern that chose them.
func withoutBTF(p *spec.Probe, f *bpf.Facts, names []string, from map[string]hcl.Range) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, pat := range p.Functions {
		var copies []string
		for _, name := range names {
			if strings.Contains(name, ".") && from[name] == pat.Range {
				copies = append(copies, name)
			}
		}
		if len(copies) == 0 {
			continue
		}
		list := strings.Join(copies, ", ")
		if len(copies) > 3 {
			list = fmt.Sprintf("%s and %d more", strings.Join(copies[:3], ", "), len(copies)-3)
		}
		alt := "exclude them (exclude = [\"*.*\"])"
		if f.Links.Kprobe {
			alt += ", or attach = \"kprobe\", which the target has"
		}
		diags = append(diags, diagf(pat.Range, "Function has no BTF",
			"On the target (%s) kernel functions are attached with fentry/fexit, through each function's BTF, and compiler copies have none: %q matches %s. To probe the others, %s.",
			f.Label(), pat.Text, list, alt))
	}
	return diags
}

// matchPatterns matches p's patterns against available, a sorted list,
// and says which pattern chose each name (the first that matched it).
// Each pattern must match something; an exact name that is missing gets the
// nearest names as a hint. An optional("...") pattern may match nothing:
// missing says so, for the plan.
func matchPatterns(p *spec.Probe, available []string, where string) ([]string, map[string]hcl.Range, []string, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	var missing []string
	chosen := make(map[string]hcl.Range, chosenSize(p, available))
	for _, pat := range p.Functions {
		m, d := matchPattern(pat, available, where, chosen)
		if m != "" {
			missing = append(missing, m)
		}
		if d != nil {
			diags = append(diags, d)
		}
	}
	excludeFunctions(chosen, p.Exclude)
	if len(chosen) == 0 && !diags.HasErrors() && len(missing) < len(p.Functions) {
		diags = append(diags, diagf(p.DeclRange, "Every function excluded", "exclude removes every function that functions matched. Narrow exclude."))
	}
	out := make([]string, 0, len(chosen))
	for name := range chosen {
		out = append(out, name)
	}
	sort.Strings(out)
	return out, chosen, missing, diags
}

// chosenSize is the room to make for the names p's patterns choose: all
// of available when a glob may choose them all (no rehashing).
func chosenSize(p *spec.Probe, available []string) int {
	for _, pat := range p.Functions {
		if isGlob(pat.Text) {
			return len(available)
		}
	}
	return len(p.Functions)
}

// matchPattern adds the names of available that pat matches to chosen
// (unless an earlier pattern chose them), and returns what the plan says
// of an optional pattern that matches nothing, or the diagnostic of a
// pattern that must match and does not.
func matchPattern(pat spec.Pattern, available []string, where string, chosen map[string]hcl.Range) (string, *hcl.Diagnostic) {
	choose := func(name string) {
		if _, ok := chosen[name]; !ok {
			chosen[name] = pat.Range
		}
	}
	if !isGlob(pat.Text) {
		i := sort.SearchStrings(available, pat.Text)
		switch {
		case i < len(available) && available[i] == pat.Text:
			choose(pat.Text)
			return "", nil
		case pat.Optional:
			return fmt.Sprintf("optional(%q): not a probe-able function in %s", pat.Text, where), nil
		}
		return "", diagf(pat.Range, "Function not found",
			"%q is not a probe-able function in %s.%s", pat.Text, where, nearest(pat.Text, available))
	}
	n := 0
	for _, name := range available {
		if ok, _ := path.Match(pat.Text, name); ok {
			choose(name)
			n++
		}
	}
	switch {
	case n > 0:
		return "", nil
	case pat.Optional:
		return fmt.Sprintf("optional(%q): matches no function in %s", pat.Text, where), nil
	}
	return "", diagf(pat.Range, "Pattern matches nothing",
		"No function in %s matches %q. Check the spelling, or list the functions with probectl target -o FILE.", where, pat.Text)
}

// excludeFunctions removes from chosen the names an exclude pattern
// matches.
func excludeFunctions(chosen map[string]hcl.Range, exclude []spec.Pattern) {
	for name := range chosen {
		for _, ex := range exclude {
			if ok, _ := path.Match(ex.Text, name); ok {
				delete(chosen, name)
			}
		}
	}
}

func isGlob(s string) bool { return strings.ContainsAny(s, "*?[") }

// nearest suggests up to three names close to name.
func nearest(name string, available []string) string {
	type cand struct {
		s string
		d int
	}
	var best []cand
	limit := len(name)/3 + 2
	for _, a := range available {
		if abs(len(a)-len(name)) > limit {
			continue
		}
		if d := distance(name, a, limit); d <= limit {
			best = append(best, cand{a, d})
		}
	}
	sort.Slice(best, func(i, j int) bool {
		if best[i].d != best[j].d {
			return best[i].d < best[j].d
		}
		return best[i].s < best[j].s
	})
	if len(best) == 0 {
		return ""
	}
	if len(best) > 3 {
		best = best[:3]
	}
	names := make([]string, len(best))
	for i, c := range best {
		names[i] = `"` + c.s + `"`
	}
	return " Nearest: " + strings.Join(names, ", ") + "."
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// distance is the Levenshtein distance, cut short above limit.
func distance(a, b string, limit int) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			rowMin = min(rowMin, cur[j])
		}
		if rowMin > limit {
			return limit + 1
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// resolveUserFunctions reads the binary's symbol tables when the binary is
// there to read. A binary absent from the planning host stays unresolved
// for a profile target, and is an error for a live one. Functions the
// kernel cannot put a uprobe on are refused at the pattern that chose them.
func resolveUserFunctions(p *spec.Probe, f *bpf.Facts) ([]string, []string, hcl.Diagnostics) {
	bin, err := openBinary(p.Binary)
	if errors.Is(err, os.ErrNotExist) && f.Source != "live" {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, hcl.Diagnostics{diagf(p.BinaryRange, "Cannot read binary",
			"%s. The binary must exist and be an ELF file with a symbol table.", err)}
	}
	defer bin.Close()
	names, chosen, missing, diags := matchPatterns(p, bin.functions(), p.Binary)
	bin.explainIFuncs(p, diags)
	if w := goExitWarning(p, names); w != nil && bin.isGo {
		diags = append(diags, w)
	}
	for _, name := range names {
		// A symbol is whatever bytes the binary's author chose: one that
		// would not print as it is (escape sequences, newlines, bytes that
		// are not UTF-8) never reaches plans, state or a terminal.
		if !spec.Printable(name) {
			diags = append(diags, diagf(chosen[name], "Function name not printable",
				"%s has a function whose name holds control characters or bytes that are not UTF-8: %q. Leave it out with exclude = [...] (a glob that matches it).",
				p.Binary, name))
		}
	}
	if diags.HasErrors() || f.Arch != bpf.ArchX86_64 || bin.Machine != elf.EM_X86_64 {
		return names, missing, diags
	}
	for _, name := range names {
		code := bin.code(name)
		if why := x86UprobeRefusal(code); why != "" {
			diags = append(diags, diagf(chosen[name], "Function cannot be probed",
				"The kernel refuses uprobes on %s in %s: its first instruction, %s, %s (arch/x86/kernel/uprobes.c). Leave it out, with exclude = [%q].",
				name, p.Binary, x86Instruction(code), why, name))
		}
	}
	return names, missing, diags
}

// elfBinary is a user binary: its ELF file and function symbols.
type elfBinary struct {
	*elf.File
	file  *os.File
	funcs map[string]uint64 // name → address
	// ifuncs are the IFUNC symbols (STT_GNU_IFUNC), which are not
	// functions to probe: see explainIFuncs.
	ifuncs map[string]bool
	isGo   bool // a Go program: see goExitWarning
}

// openBinary reads the function symbols of an ELF file, which must be a
// regular file: it never blocks on a named pipe.
func openBinary(path string) (*elfBinary, error) {
	f, err := bpf.OpenRegular(path)
	if err != nil {
		return nil, err
	}
	ef, err := elf.NewFile(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	b := &elfBinary{File: ef, file: f, funcs: map[string]uint64{}, ifuncs: map[string]bool{}, isGo: isGo(ef)}
	for _, read := range []func() ([]elf.Symbol, error){ef.Symbols, ef.DynamicSymbols} {
		syms, err := read()
		if err != nil {
			continue
		}
		b.addSymbols(syms)
	}
	if len(b.funcs) == 0 {
		b.Close()
		return nil, errors.New(path + ": no function symbols")
	}
	return b, nil
}

// addSymbols adds the defined functions (and IFUNCs) of syms.
func (b *elfBinary) addSymbols(syms []elf.Symbol) {
	for _, s := range syms {
		typ := elf.ST_TYPE(s.Info)
		if typ != elf.STT_FUNC && typ != elf.STT_GNU_IFUNC || s.Value == 0 || s.Section == elf.SHN_UNDEF {
			continue
		}
		name, _, _ := strings.Cut(s.Name, "@") // versioned: malloc@@GLIBC_2.2.5
		if typ == elf.STT_GNU_IFUNC {
			b.ifuncs[name] = true
		} else if _, ok := b.funcs[name]; !ok {
			b.funcs[name] = s.Value
		}
	}
}

func (b *elfBinary) Close() error { return b.file.Close() }

// functions lists the function names, sorted.
func (b *elfBinary) functions() []string {
	names := make([]string, 0, len(b.funcs))
	for n := range b.funcs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// code returns the bytes a function starts with: as many as an x86
// instruction can take, fewer at the end of its section.
func (b *elfBinary) code(name string) []byte {
	addr := b.funcs[name]
	for _, s := range b.Sections {
		if s.Type != elf.SHT_PROGBITS || s.Flags&elf.SHF_EXECINSTR == 0 || addr < s.Addr || addr >= s.Addr+s.Size {
			continue
		}
		buf := make([]byte, min(maxX86Instruction, s.Addr+s.Size-addr))
		n, _ := s.ReadAt(buf, int64(addr-s.Addr))
		return buf[:n]
	}
	return nil
}

// BinaryFunctions lists the function symbols of an ELF file, sorted.
func BinaryFunctions(file string) ([]string, error) {
	b, err := openBinary(file)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	return b.functions(), nil
}
