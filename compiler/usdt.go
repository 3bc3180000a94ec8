package compiler

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/cilium/ebpf/asm"
	"github.com/hashicorp/hcl/v2"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/bpf/symbols"
	"github.com/probectl/probectl/compiler/compiled"
	"github.com/probectl/probectl/compiler/internal/emit"
	"github.com/probectl/probectl/spec"
)

// A USDT probe (usdt = "provider:name" on a user probe) is a uprobe at
// each of the probe's sites in the binary (one uprobe.multi link for
// all, or a perf link each: userRoutes.usdt), with the site's semaphore
// as the uprobe's ref_ctr_offset. Its arguments are read as each site's
// note says (bpf.ParseUSDTArgs): a register of pt_regs, user memory at
// an address computed from registers, or a constant; sites whose
// specifiers differ are told apart by the attach cookie, the site's
// index.

// usdtSite is compiled.USDTSite, under the compiler's names.
type usdtSite = compiled.USDTSite

// maxUSDTSites bounds the sites of one USDT probe, each a uprobe link (a
// file descriptor, and a perf event, held by the runtime while it
// attaches).
const maxUSDTSites = 1024

// elfArch is the architecture of each ELF machine probectl targets.
var elfArch = map[elf.Machine]bpf.Arch{elf.EM_X86_64: bpf.ArchX86_64, elf.EM_AARCH64: bpf.ArchArm64}

// resolveUSDT reads the sites of the probe's USDT probe from its binary:
// the ELF file under the target's root. A binary absent from the
// planning host stays unresolved for a profile target (nil sites); one
// published by another node is not checked (its notes are not
// published).
func resolveUSDT(bn binaryName, f *bpf.Facts) ([]usdtSite, hcl.Diagnostics) {
	p := bn.p
	if f.Binaries != nil {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagWarning, Summary: SummaryNotChecked, Subject: p.USDTRange.Ptr(),
			Detail: fmt.Sprintf("A node publishes a binary's functions, not its USDT probes, so %s in %s is not checked on the target: it is read when the node applies the spec.", p.USDT, p.Binary)}}
	}
	file, err := symbols.OpenIn(bn.root, p.Binary)
	if errors.Is(err, os.ErrNotExist) && f.Source != "live" {
		return nil, nil
	}
	if err != nil {
		return nil, hcl.Diagnostics{diagf(p.BinaryRange, "Cannot read binary", "%s. The binary must exist and be an ELF file.", err)}
	}
	defer file.Close()
	path := symbols.InRoot(bn.root, p.Binary)
	ef, err := elf.NewFile(file)
	if err != nil {
		return nil, hcl.Diagnostics{diagf(p.BinaryRange, "Cannot read binary", "%s: %s. The binary must be an ELF file.", path, err)}
	}
	if arch, ok := elfArch[ef.Machine]; !ok || arch != f.Arch {
		return nil, hcl.Diagnostics{diagf(p.BinaryRange, "Binary of another architecture",
			"%s is built for %s; the target (%s) is %s, whose processes cannot run it.", path, ef.Machine, f.Label(), f.Arch)}
	}
	notes, err := symbols.ReadNotes(ef)
	if err != nil {
		return nil, hcl.Diagnostics{diagf(p.BinaryRange, "Cannot read USDT probes", "%s: %s.", path, err)}
	}
	var sites []usdtSite
	others := map[string]bool{}
	for _, u := range notes {
		if u.Key() == p.USDT {
			sites = append(sites, usdtSite{Address: u.Addr, Offset: u.Offset, RefCtrOffset: u.SemaphoreOffset, Args: u.Args})
		} else if spec.Printable(u.Key()) {
			others[u.Key()] = true
		}
	}
	if len(sites) > maxUSDTSites {
		return nil, hcl.Diagnostics{diagf(p.USDTRange, "Too many USDT sites",
			"%s has %d sites of %s; a probe attaches at most %d (one uprobe link each).", path, len(sites), p.USDT, maxUSDTSites)}
	}
	if len(sites) > 0 {
		return sites, nil
	}
	if len(notes) == 0 {
		return nil, hcl.Diagnostics{diagf(p.USDTRange, "USDT probe not found",
			"%s has no USDT probes (no .note.stapsdt notes): it was built without sys/sdt.h's probes (for Python, PostgreSQL and others, configure --with-dtrace or --enable-dtrace).", path)}
	}
	names := make([]string, 0, len(others))
	for n := range others {
		names = append(names, n)
	}
	sort.Strings(names)
	return nil, hcl.Diagnostics{diagf(p.USDTRange, "USDT probe not found",
		"%s has no USDT probe %q. It has %s (readelf -n lists them).", path, p.USDT, abbreviateNames(names, 12))}
}

// usdt is a USDT probe's route: one uprobe.multi link for every site
// where the target has it (attach = "auto" or "uprobe.multi"), else (or
// with attach = "uprobe") a uprobe perf link per site; each with the
// site's semaphore as its ref_ctr_offset.
func (r *userRoutes) usdt() decision {
	const sema = ", with the sites' semaphore as ref_ctr_offset when they have one"
	if r.haveMulti && Family(r.p.Attach) != FamilyUprobe {
		return decision{route: RouteUprobe, families: []Family{FamilyUprobeMulti},
			reason: "usdt: one uprobe.multi link (6.6+) for every site of the USDT probe" + sema}
	}
	why := "no uprobe.multi (6.6): "
	if Family(r.p.Attach) == FamilyUprobe {
		why = "attach = \"uprobe\": "
	}
	return decision{route: RouteUprobe, families: []Family{FamilyUprobe},
		reason: why + "usdt: one uprobe perf link per site of the USDT probe" + sema}
}

// argIndex returns N of argN, or -1.
func argIndex(name string) int {
	digits, ok := strings.CutPrefix(name, "arg")
	n, err := strconv.Atoi(digits)
	if !ok || err != nil || n < 0 || strconv.Itoa(n) != digits {
		return -1
	}
	return n
}

// checkUSDTArg resolves argument x (argN) of a USDT probe at every site,
// as the site's note specifies it, and says whether the sites differ:
// the program then reads the attach cookie to tell them apart.
func (g *gen) checkUSDTArg(x *spec.Var) (*hcl.Diagnostic, bool) {
	n := argIndex(x.Name)
	if n < 0 || g.out.USDT == "" || g.out.Sites == nil {
		return nil, false
	}
	if args, ok := g.usdtArgs[n]; ok {
		return nil, sitesDiffer(args)
	}
	var args []bpf.USDTArg
	for _, s := range g.out.Sites {
		texts := bpf.SplitUSDTArgs(s.Args)
		if n >= len(texts) {
			has := fmt.Sprintf("%d arguments at its site %#x (%q), so there is no %s: its arguments are arg0 to arg%d", len(texts), s.Address, s.Args, x.Name, len(texts)-1)
			switch len(texts) {
			case 0:
				has = fmt.Sprintf("no arguments at its site %#x, so there is no %s", s.Address, x.Name)
			case 1:
				has = fmt.Sprintf("1 argument at its site %#x (%q), so there is no %s: its argument is arg0", s.Address, s.Args, x.Name)
			}
			return diagf(x.Range(), "No such USDT argument", "%s has %s.", g.out.USDT, has), false
		}
		a, err := bpf.ParseUSDTArg(g.facts.Arch, texts[n])
		if err != nil {
			return diagf(x.Range(), "USDT argument cannot be read",
				"%s of %s at its site %#x is %s: %s. The probe's other arguments can be read.", x.Name, g.out.USDT, s.Address, texts[n], err), false
		}
		args = append(args, a)
	}
	if g.usdtArgs == nil {
		g.usdtArgs = map[int][]bpf.USDTArg{}
	}
	g.usdtArgs[n] = args
	return nil, sitesDiffer(args)
}

// sitesDiffer reports whether an argument's specifiers differ between
// sites.
func sitesDiffer(args []bpf.USDTArg) bool {
	for _, a := range args[1:] {
		if a != args[0] {
			return true
		}
	}
	return false
}

// usdtArgValue leaves argument n of the USDT probe in R0: as every site
// specifies it, or, where sites differ, as the site the attach cookie
// (its index) names specifies it. Unresolved sites (a binary not on the
// planning host) read 0: such a probe is never loaded.
func (g *gen) usdtArgValue(n int) {
	args := g.usdtArgs[n]
	if len(args) == 0 {
		g.e.Emit(asm.Mov.Imm(asm.R0, 0))
		return
	}
	if !sitesDiffer(args) {
		g.usdtRead(args[0])
		return
	}
	// Group the sites by specifier, in the order they first appear.
	var specs []bpf.USDTArg
	sites := map[bpf.USDTArg][]int{}
	for i, a := range args {
		if _, ok := sites[a]; !ok {
			specs = append(specs, a)
		}
		sites[a] = append(sites[a], i)
	}
	done := g.e.NewLabel("usdt_arg_done")
	labels := make([]string, len(specs))
	g.e.Emit(asm.Mov.Reg(asm.R1, regCtx), asm.FnGetAttachCookie.Call())
	for i, a := range specs[:len(specs)-1] {
		labels[i] = g.e.NewLabel("usdt_arg")
		for _, site := range sites[a] {
			g.e.Emit(asm.JEq.Imm(asm.R0, int32(site), labels[i]))
		}
	}
	g.usdtRead(specs[len(specs)-1])
	g.e.Emit(asm.Ja.Label(done))
	for i, a := range specs[:len(specs)-1] {
		g.e.Mark(labels[i])
		g.usdtRead(a)
		g.e.Emit(asm.Ja.Label(done))
	}
	g.e.Mark(done)
}

// usdtRead leaves the value argument specifier a gives in R0, extended
// from its size by its sign. A memory operand is read from user memory
// (bpf_probe_read_user); an address that cannot be read gives 0.
func (g *gen) usdtRead(a bpf.USDTArg) {
	switch a.Kind {
	case bpf.USDTConst:
		g.e.Emit(asm.LoadImm(asm.R0, a.Value, asm.DWord))
	case bpf.USDTReg:
		g.e.Emit(asm.LoadMem(asm.R0, regCtx, a.Reg, asm.DWord))
	case bpf.USDTMem:
		mark := g.e.StackMark()
		slot := g.e.Alloc(8)
		g.e.Emit(asm.Mov.Imm(asm.R3, 0))
		if a.HasBase {
			g.e.Emit(asm.LoadMem(asm.R3, regCtx, a.Reg, asm.DWord))
		}
		if a.Scale > 0 {
			g.e.Emit(asm.LoadMem(asm.R1, regCtx, a.Index, asm.DWord), asm.Mul.Imm(asm.R1, int32(a.Scale)), asm.Add.Reg(asm.R3, asm.R1))
		}
		if a.Value != 0 {
			g.e.Emit(asm.LoadImm(asm.R1, a.Value, asm.DWord), asm.Add.Reg(asm.R3, asm.R1))
		}
		g.e.Emit(
			emit.StoreImm64(asm.RFP, slot, 0),
			asm.Mov.Reg(asm.R1, asm.RFP), asm.Add.Imm(asm.R1, int32(slot)),
			asm.Mov.Imm(asm.R2, int32(a.Size)),
			asm.FnProbeReadUser.Call(),
			asm.LoadMem(asm.R0, asm.RFP, slot, asm.DWord),
		)
		g.e.Release(mark)
	}
	if a.Size == 8 {
		return
	}
	bits := int32(64 - 8*a.Size)
	switch {
	case a.Signed:
		g.e.Emit(asm.LSh.Imm(asm.R0, bits), asm.ArSh.Imm(asm.R0, bits))
	case a.Size == 4:
		g.e.Emit(asm.Mov.Reg32(asm.R0, asm.R0))
	default:
		g.e.Emit(asm.And.Imm(asm.R0, int32(1)<<(8*a.Size)-1))
	}
}
