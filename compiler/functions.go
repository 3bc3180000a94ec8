package compiler

import (
	"debug/elf"
	"errors"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/spec"
)

// resolveKernelFunctions matches the patterns against the target's function
// list. With no list (a profile), the patterns stay unresolved: nil, no error.
func resolveKernelFunctions(p *spec.Probe, f *bpf.Facts) ([]string, hcl.Diagnostics) {
	if len(f.Functions) == 0 {
		return nil, nil
	}
	return matchPatterns(p, f.Functions, "the target kernel ("+f.Label()+")")
}

// ResolveFunctions matches p's patterns against available, a sorted list.
// Each pattern must match something; an exact name that is missing gets the
// nearest names as a hint.
func matchPatterns(p *spec.Probe, available []string, where string) ([]string, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	chosen := map[string]bool{}
	for _, pat := range p.Functions {
		n := 0
		if !isGlob(pat.Text) {
			i := sort.SearchStrings(available, pat.Text)
			if i < len(available) && available[i] == pat.Text {
				chosen[pat.Text] = true
				continue
			}
			diags = append(diags, diagf(pat.Range, "Function not found",
				"%q is not a probe-able function in %s.%s", pat.Text, where, nearest(pat.Text, available)))
			continue
		}
		for _, name := range available {
			if ok, _ := path.Match(pat.Text, name); ok {
				chosen[name] = true
				n++
			}
		}
		if n == 0 {
			diags = append(diags, diagf(pat.Range, "Pattern matches nothing",
				"No function in %s matches %q. Check the spelling, or list the functions with probectl target -o FILE.", where, pat.Text))
		}
	}
	for name := range chosen {
		for _, ex := range p.Exclude {
			if ok, _ := path.Match(ex.Text, name); ok {
				delete(chosen, name)
			}
		}
	}
	if len(chosen) == 0 && !diags.HasErrors() {
		diags = append(diags, diagf(p.DeclRange, "Every function excluded", "exclude removes every function that functions matched. Narrow exclude."))
	}
	out := make([]string, 0, len(chosen))
	for name := range chosen {
		out = append(out, name)
	}
	sort.Strings(out)
	return out, diags
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
// for a profile target, and is an error for a live one.
func resolveUserFunctions(p *spec.Probe, f *bpf.Facts) ([]string, hcl.Diagnostics) {
	syms, err := BinaryFunctions(p.Binary)
	if errors.Is(err, os.ErrNotExist) && f.Source != "live" {
		return nil, nil
	}
	if err != nil {
		return nil, hcl.Diagnostics{diagf(p.BinaryRange, "Cannot read binary",
			"%s. The binary must exist and be an ELF file with a symbol table.", err)}
	}
	return matchPatterns(p, syms, p.Binary)
}

// BinaryFunctions lists the function symbols of an ELF file, sorted.
func BinaryFunctions(file string) ([]string, error) {
	ef, err := elf.Open(file)
	if err != nil {
		return nil, err
	}
	defer ef.Close()
	seen := map[string]bool{}
	for _, read := range []func() ([]elf.Symbol, error){ef.Symbols, ef.DynamicSymbols} {
		syms, err := read()
		if err != nil {
			continue
		}
		for _, s := range syms {
			if elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Value == 0 || s.Section == elf.SHN_UNDEF {
				continue
			}
			name, _, _ := strings.Cut(s.Name, "@") // versioned: malloc@@GLIBC_2.2.5
			seen[name] = true
		}
	}
	if len(seen) == 0 {
		return nil, errors.New(file + ": no function symbols")
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}
