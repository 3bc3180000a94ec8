package compiler

import (
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"

	"github.com/hashicorp/hcl/v2"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/bpf/symbols"
	"github.com/probectl/probectl/spec"
)

// userBinary is what the compiler reads of a user binary: its function
// symbols and why the kernel refuses a uprobe on one. It is the ELF file
// on the target (under the target's root), or what another node
// published of it.
type userBinary interface {
	functions() []string
	// refusal says why the kernel refuses uprobes on a function ("its
	// first instruction, ..."), or "".
	refusal(name string) string
}

// binaryName is a user probe's binary resolved on the target: p with its
// Binary a path, the library name it was given as, and the root the path
// is read under.
type binaryName struct {
	p             *spec.Probe
	library, root string
}

// resolveBinaryName resolves a user probe's binary = "libc" through the
// target's ld.so.cache (the host's under its root, or as published), and
// says which root the path is read under: the target's, or a probe with
// pid's process root (symbols.ProcessRoot).
func resolveBinaryName(p *spec.Probe, f *bpf.Facts, fs *files) (binaryName, *hcl.Diagnostic) {
	if p.Addr.Kind != bpf.KindUser || p.Binary == "" {
		return binaryName{p: p}, nil
	}
	bn := binaryName{p: p, root: symbols.ProcessRoot(f.Root, p.PID)}
	if f.Binaries != nil || symbols.IsHostRoot(bn.root) {
		bn.root = ""
	}
	if strings.HasPrefix(p.Binary, "/") {
		return bn, nil
	}
	var path string
	var err error
	if f.Binaries == nil {
		path, err = fs.library(bn.root, p.Binary, f.Arch)
	} else if b := f.Binaries[p.Binary]; b != nil {
		path = b.Path
	}
	if err != nil {
		return bn, diagf(p.BinaryRange, "Library not found",
			"binary = %q names a library, which is looked up in the dynamic linker's cache as ld.so and bpftrace do: %v. Give the library's absolute path, or its name as ldconfig -p lists it.", p.Binary, err)
	}
	if path == "" {
		return bn, nil // not published: resolveUserFunctions says so
	}
	q := *p
	q.Binary, bn.library, bn.p = path, p.Binary, &q
	return bn, nil
}

// openUserBinary opens what the compiler reads of the probe's binary: the
// published one for facts of another node, else the ELF file under root.
// A nil binary and no error: the binary stays unresolved (and the
// diagnostics say why, for published facts).
func openUserBinary(bn binaryName, f *bpf.Facts, fs *files) (userBinary, func(), hcl.Diagnostics) {
	p := bn.p
	if f.Binaries != nil {
		return publishedBinary(bn, f)
	}
	bin, err := fs.binary(bn.root, p.Binary)
	if errors.Is(err, os.ErrNotExist) && f.Source != "live" {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, hcl.Diagnostics{diagf(p.BinaryRange, "Cannot read binary",
			"%s. The binary must exist and be an ELF file with a symbol table.", err)}
	}
	if fs != nil {
		return bin, func() {}, nil // fs closes it at the compile's end
	}
	return bin, func() { bin.Close() }, nil
}

// SummaryNotChecked is the summary of the warning that a probe's binary
// could not be checked on a target whose binaries were published.
const SummaryNotChecked = "Binary not checked"

// publishedBinary is the binary as the target's node published it.
func publishedBinary(bn binaryName, f *bpf.Facts) (userBinary, func(), hcl.Diagnostics) {
	p := bn.p
	name := p.Binary
	if bn.library != "" {
		name = bn.library
	}
	b := f.Binaries[name]
	switch {
	case b == nil:
		return nil, nil, hcl.Diagnostics{{Severity: hcl.DiagWarning, Summary: SummaryNotChecked, Subject: p.BinaryRange.Ptr(),
			Detail: fmt.Sprintf("%s is not in the target's facts, so its functions are not checked there. The node agent publishes the binaries its ProbeSets name, and those of -publish-binary.", name)}}
	case b.Error != "":
		return nil, nil, hcl.Diagnostics{diagf(p.BinaryRange, "Cannot read binary",
			"On the target: %s. The binary must exist and be an ELF file with a symbol table.", b.Error)}
	case b.Functions == nil:
		return nil, nil, hcl.Diagnostics{{Severity: hcl.DiagWarning, Summary: SummaryNotChecked, Subject: p.BinaryRange.Ptr(),
			Detail: fmt.Sprintf("The target published %s without its function list (sha256 %s), too large for its facts, so its functions are not checked there.", name, b.Digest)}}
	}
	return published{b}, func() {}, nil
}

type published struct{ b *bpf.Binary }

func (p published) functions() []string        { return p.b.Functions }
func (p published) refusal(name string) string { return p.b.Refused[name] }

// resolveUserFunctions reads the binary's symbol tables when the binary is
// there to read. A binary absent from the planning host stays unresolved
// for a profile target, and is an error for a live one. Functions the
// kernel cannot put a uprobe on are refused at the pattern that chose them.
func resolveUserFunctions(bn binaryName, f *bpf.Facts, fs *files) ([]string, []string, hcl.Diagnostics) {
	p := bn.p
	bin, done, diags := openUserBinary(bn, f, fs)
	if bin == nil {
		return nil, nil, diags
	}
	defer done()
	names, chosen, missing, diags := matchPatterns(p, bin.functions(), p.Binary)
	if eb, ok := bin.(*elfBinary); ok {
		eb.explainIFuncs(p, diags)
		if w := goExitWarning(p, names); w != nil && eb.isGo {
			diags = append(diags, w)
		}
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
	if diags.HasErrors() || f.Arch != bpf.ArchX86_64 {
		return names, missing, diags
	}
	for _, name := range names {
		if why := bin.refusal(name); why != "" {
			diags = append(diags, diagf(chosen[name], "Function cannot be probed",
				"The kernel refuses uprobes on %s in %s: %s (arch/x86/kernel/uprobes.c). Leave it out, with exclude = [%q].",
				name, p.Binary, why, name))
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
	// sorted is functions(), sorted once: a binary read once per compile
	// serves every probe of it.
	sorted     []string
	sortedOnce sync.Once
	// refusals memoizes refusal by function, so that the probes of one
	// binary read each function's first bytes once per compile; codeReads
	// counts the reads (what tests count).
	refusalsMu sync.Mutex
	refusals   map[string]string
	codeReads  int
}

// openBinary reads the function symbols of an ELF file at path under
// root (symbols.OpenIn), which must be a regular file: it never blocks on
// a named pipe.
func openBinary(root, path string) (*elfBinary, error) {
	f, err := symbols.OpenIn(root, path)
	if err != nil {
		return nil, err
	}
	return readBinary(f, symbols.InRoot(root, path))
}

// readBinary reads the function symbols of the open ELF file f, which
// path names in errors. It closes f on an error.
func readBinary(f *os.File, path string) (*elfBinary, error) {
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

// functions lists the function names, sorted. The list is shared: it is
// not to be changed.
func (b *elfBinary) functions() []string {
	b.sortedOnce.Do(func() {
		b.sorted = make([]string, 0, len(b.funcs))
		for n := range b.funcs {
			b.sorted = append(b.sorted, n)
		}
		sort.Strings(b.sorted)
	})
	return b.sorted
}

// refusal implements userBinary for x86-64 files (the only ones whose
// first instructions the compiler checks).
func (b *elfBinary) refusal(name string) string {
	if b.Machine != elf.EM_X86_64 {
		return ""
	}
	b.refusalsMu.Lock()
	defer b.refusalsMu.Unlock()
	if why, ok := b.refusals[name]; ok {
		return why
	}
	code := b.code(name)
	b.codeReads++
	why := ""
	if refused := x86UprobeRefusal(code); refused != "" {
		why = fmt.Sprintf("its first instruction, %s, %s", x86Instruction(code), refused)
	}
	if b.refusals == nil {
		b.refusals = map[string]string{}
	}
	b.refusals[name] = why
	return why
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
	b, err := openBinary("", file)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	return b.functions(), nil
}

// DescribeBinary is what a node publishes of the binary a spec names
// (a path or a library name), read under the facts' root as the compiler
// reads it: the path, build id, function list and its digest, and the
// functions the kernel refuses uprobes on. What cannot be read is in its
// Error.
func DescribeBinary(f *bpf.Facts, name string) *bpf.Binary {
	out := &bpf.Binary{Name: name}
	path := name
	if !strings.HasPrefix(name, "/") {
		var err error
		if path, err = symbols.ResolveLibraryIn(f.Root, name, f.Arch); err != nil {
			out.Error = err.Error()
			return out
		}
	}
	bin, err := openBinary(f.Root, path)
	if err != nil {
		out.Error = err.Error()
		return out
	}
	defer bin.Close()
	out.Path, out.BuildID, out.Functions = path, symbols.BuildID(bin.File), bin.functions()
	h := sha256.Sum256([]byte(strings.Join(out.Functions, "\n")))
	out.Digest = hex.EncodeToString(h[:])
	if f.Arch == bpf.ArchX86_64 {
		for _, fn := range out.Functions {
			if why := bin.refusal(fn); why != "" {
				if out.Refused == nil {
					out.Refused = map[string]string{}
				}
				out.Refused[fn] = why
			}
		}
	}
	return out
}
