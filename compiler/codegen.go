package compiler

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/hashicorp/hcl/v2"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler/compiled"
	"github.com/probectl/probectl/compiler/internal/emit"
	"github.com/probectl/probectl/spec"
)

// ctxKind is what R1 points at when a program starts (the family
// table's Context).
type ctxKind = compiled.Context

const (
	ctxRegs       = compiled.ContextRegs
	ctxTracing    = compiled.ContextTracing
	ctxTracepoint = compiled.ContextTracepoint
)

// Registers with a fixed job in generated code. R0-R5 are scratch (helper
// calls clobber them); R6 holds the context for the program's whole life.
const (
	regCtx    = asm.R6
	regRecord = asm.R7 // a reserved ring buffer record, while an event is written
)

// Map refs, the names programs use for a probe's maps.
const (
	refStats  = "stats"
	refEntry  = "entry"
	refEvents = "events"
	refJoin   = "join"
)

// Entry-data slots live in an LRU hash keyed by (thread id << 32 | function
// cookie); see README "Entry data".
const entrySlots = 16384

// gen generates the programs of one probe.
type gen struct {
	p     *spec.Probe
	facts *bpf.Facts
	regs  bpf.Regs
	out   *Probe
	diags hcl.Diagnostics
	d     decision
	u     *unit // the compilation: the other probes, the tables
	// tps are the formats of a tracepoint probe's events, in the order of
	// out.Tracepoints.
	tps []*bpf.TracepointFormat
	// unformatted are events whose format the target does not know.
	unformatted []string
	// types memoizes typeOf; typeErrs the expressions already reported.
	types    map[spec.Expr]spec.Type
	typeErrs map[spec.Expr]bool
	// eventIndex holds the index of each event named in event == NAME.
	eventIndex map[string]int
	// access holds kernel paths resolved against the target's BTF;
	// retRead says how ret extends; paths where each built-in value with
	// a path (ppid) is read.
	access  map[spec.Expr]*access
	consts  map[spec.Expr]int64 // enum_value and offsetof, resolved
	retRead *leaf
	retDecl btf.Type
	paths   map[string]*access
	cwd     *cwdLayout // cwd's offsets, resolved once
	// usdtArgs are the specifiers of each USDT argument the probe reads
	// (by N of argN), one per site (checkUSDTArg).
	usdtArgs map[int][]bpf.USDTArg

	// Set per program.
	e   *emit.Emitter
	ctx ctxKind
	// entryArea is the stack offset of the entry data in exit code;
	// entryFields locate each saved value within it.
	entryArea   int16
	entryFields map[string]int
	// storage is where entry data lives (StorageNone/Cookie/Map).
	storage Storage
	// sizes holds the instruction counts of the constructs of the program
	// being generated, for blaming the largest when it is too large.
	sizes []constructSize
	// slotKeyOff is the stack offset of the entry slot key, set by slotKey.
	slotKeyOff int16
	// podRefs are the refs of the probe's pod maps by predicate.
	podRefs map[compiled.PodMatch]string
	// funcIndex holds the index of each function named in func == NAME.
	funcIndex map[string]int
	// codeText is the digest's text of the programs when they are a
	// leader's copies (codecache.go), nil to build it.
	codeText []byte
}

func (g *gen) errorf(rng hcl.Range, summary, detail string, args ...any) {
	g.diags = append(g.diags, diagf(rng, summary, detail, args...))
}

// entryStorage decides where a probe's entry data lives, for the code and
// for the target check alike. A session keeps up to 8 bytes in its cookie.
// Otherwise an exit program runs only for calls whose entry wrote a slot,
// so a slot is kept when there is data, or a when that can skip the exit.
func entryStorage(p *spec.Probe, d decision) Storage {
	entry, exit := handlers(p)
	size := p.EntryData()
	switch {
	case !entry || !exit:
		return StorageNone
	case d.fsession:
		// The trampoline runs an fsession's exit half whatever its entry
		// half returned, so the exit must learn whether on_entry's when
		// held: from a cookie of 1 when there is no data, from the slot
		// (present or not) when there is.
		switch {
		case p.Entry.When == nil && size == 0:
			return StorageNone
		case size == 0, p.Entry.When == nil && size <= 8:
			return StorageCookie
		}
		return StorageMap
	case d.session && size == 0:
		return StorageNone
	case d.session && size <= 8:
		return StorageCookie
	case d.session, p.Entry.When != nil || size > 0:
		return StorageMap
	}
	return StorageNone
}

// build lays out the probe's entry data and maps, for its programs.
func (g *gen) build() {
	p := g.p
	size := 0
	if _, exit := handlers(p); exit {
		size = p.EntryData()
	}
	g.out.EntryData = EntryData{Size: size, Storage: g.storage}
	g.entryFields = map[string]int{}
	if p.Entry != nil {
		off := 0
		for _, f := range p.Entry.Save {
			g.entryFields[f.Name] = off
			off += slotSize(g.typeOf(f.Value))
		}
	}

	g.layoutMaps()
}

// programs emits every program of the probe's decision, once its maps
// are laid out (build).
func (g *gen) programs() {
	for _, fam := range g.d.families {
		fi, ok := fam.Info()
		if !ok {
			panic(fmt.Sprintf("compiler: link family %q has no entry in the family table", fam))
		}
		g.program(fi, g.bodyOf(fi))
	}
}

// bodyOf is the code a family's program runs: a session program both
// halves (fsession's on its trampoline), an exit program on_exit, every
// other on_entry.
func (g *gen) bodyOf(fi FamilyInfo) func() {
	switch {
	case fi.Role == RoleSession && fi.Context == ctxTracing:
		return g.fsessionBody
	case fi.Role == RoleSession:
		return g.sessionBody
	case fi.Role == RoleExit:
		return g.exitBody
	}
	return g.entryBody
}

// programName is the kernel's name: the probe name cut to fit, and the role.
func programName(name string, role Role) string {
	suffix := map[Role]string{RoleEntry: "_e", RoleExit: "_x", RoleSession: "_s", RoleEvent: "_t", RoleSample: "_p"}[role]
	if len(name) > 15-len(suffix) {
		name = name[:15-len(suffix)]
	}
	return name + suffix
}

// programComment is the source comment of a program's first instruction.
func programComment(family Family, role Role, g *gen) string {
	return fmt.Sprintf("%s %s program of %s", family, role, g.p.Addr)
}

func (g *gen) program(fi FamilyInfo, body func()) {
	role, family := fi.Role, fi.Family
	g.e, g.ctx, g.sizes = &emit.Emitter{LongJumps: g.facts.ISAv4}, fi.Context, nil
	g.e.At(programComment(family, role, g), g.p.DeclRange)
	g.e.Emit(asm.Mov.Reg(regCtx, asm.R1))
	if g.u.policy.Tenant() != "" {
		g.tenantFilter(role)
	}
	switch role {
	case "entry", "event", "sample":
		g.countStat(g.out.Stats.EntryHits)
	case "exit":
		g.countStat(g.out.Stats.ExitHits)
	}
	body()
	insns, err := g.e.Finish()
	if err != nil {
		g.finishError(role, err)
		return
	}
	prog := &Program{
		Name: programName(g.p.Addr.Name, role), Role: role, Family: family,
		Type: fi.Type, AttachType: fi.AttachType, PerFunction: fi.PerFunction,
		Instructions: insns, StackBytes: g.e.StackUsed(),
	}
	if g.checkLimits(prog) {
		g.out.Programs = append(g.out.Programs, prog)
	}
}

// finishError reports a program the emitter could not finish at the
// construct that caused it.
func (g *gen) finishError(role Role, err error) {
	var stack *emit.StackError
	var jump *emit.JumpError
	switch {
	case errors.As(err, &stack):
		g.errorf(g.rangeOf(stack.Origin), "Too much stack",
			"The %s program of %s needs %d bytes of stack, and BPF allows %d; the code for this takes it past the limit. Keys, values and the left operands of nested operators take stack: use fewer or smaller keys, or write a + (b + c) as a + b + c.",
			role, g.p.Addr, stack.Used, emit.MaxStack)
	case errors.As(err, &jump):
		g.errorf(g.rangeOf(jump.Origin), "Jump too long for the target",
			"The code for this jumps over %d instructions. A BPF jump reaches %d; longer ones need gotol (BPF ISA v4, Linux 6.6), which the target (%s) lacks. Make the expression shorter, or split it across actions.",
			jump.Distance, math.MaxInt16, g.facts.Label())
	default:
		panic(fmt.Sprintf("compiler: %s program of %s: %v", role, g.p.Addr, err))
	}
}

// rangeOf is the spec range of an origin, or the probe's header.
func (g *gen) rangeOf(origin any) hcl.Range {
	if rng, ok := origin.(hcl.Range); ok {
		return rng
	}
	return g.p.DeclRange
}

// Kernel limits on one program.
const (
	// MaxInstructions is BPF_COMPLEXITY_LIMIT_INSNS, the most instructions
	// a privileged loader may load.
	MaxInstructions = 1_000_000
	// MaxMaps is MAX_USED_MAPS, the most maps a program may use.
	MaxMaps = 64
)

// constructSize is the number of instructions a construct took.
type constructSize struct {
	rng hcl.Range
	n   int
}

// measure runs gen, which emits the code of the construct at rng, and
// records its size.
func (g *gen) measure(rng hcl.Range, gen func()) {
	start := g.e.Len()
	gen()
	g.sizes = append(g.sizes, constructSize{rng, g.e.Len() - start})
}

// checkLimits reports a program the kernel would refuse to load for its
// size or its maps, at the construct that takes it past the limit.
func (g *gen) checkLimits(prog *Program) bool {
	ok := true
	if n := prog.InstructionCount(); n > MaxInstructions {
		largest := constructSize{rng: g.p.DeclRange}
		for _, c := range g.sizes {
			if c.n > largest.n {
				largest = c
			}
		}
		g.errorf(largest.rng, "Program too large",
			"The %s program of %s has %d instructions; the kernel loads at most %d. This takes %d of them: make it shorter, or split it across probes.",
			prog.Role, g.p.Addr, n, MaxInstructions, largest.n)
		ok = false
	}
	var maps []string
	for _, ins := range prog.Instructions {
		if ins.IsLoadFromMap() && !slices.Contains(maps, ins.Reference()) {
			maps = append(maps, ins.Reference())
		}
	}
	if len(maps) > MaxMaps {
		rng := g.p.DeclRange
		for _, a := range g.p.Actions() {
			if a.Kind != spec.Event && g.aggregation(a).MapRef == maps[MaxMaps] {
				rng = a.DeclRange
			}
		}
		g.errorf(rng, "Too many maps",
			"The %s program of %s uses %d maps, and the kernel allows %d per program; this aggregation's map is one too many (each aggregation has one, and the probe's stats take one more, the entry data and events one each). Move some aggregations to another probe on the same functions.",
			prog.Role, g.p.Addr, len(maps), MaxMaps)
		ok = false
	}
	return ok
}

// ret emits "return v".
func (g *gen) ret(v int32) {
	g.e.Emit(asm.Mov.Imm(asm.R0, v), asm.Return())
}

// entryBody: when, actions, then the entry slot (for a separate exit program).
func (g *gen) entryBody() {
	h := g.p.Entry
	g.when(h, "filtered")
	g.actions(h)
	if g.storage == StorageMap {
		g.storeSlot()
	}
	g.ret(0)
	if h.When != nil {
		g.e.Mark("filtered")
		g.ret(0)
	}
}

// exitBody: fetch the entry slot (or give up), when, actions.
func (g *gen) exitBody() {
	if g.storage == StorageMap {
		g.fetchSlot()
	}
	g.exitHandler()
	g.ret(0)
	if g.storage == StorageMap {
		g.e.Mark("no_entry")
		g.ret(0)
	}
}

func (g *gen) exitHandler() {
	h := g.p.Exit
	g.when(h, "exit_done")
	g.actions(h)
	if h.When != nil {
		g.e.Mark("exit_done")
	}
}

// sessionBody is one kprobe.session or uprobe.session program: bpf_session_is_return picks
// the half. The entry half returns 1 to skip the exit (when false, or no
// on_exit), 0 to run it. Both kfuncs get R1 = ctx (the 7.0 prototype; older
// ones ignore it).
// saveToCookie stores the entry's save area (8 bytes at most) in the
// session cookie; a missing cookie jumps to skip.
func (g *gen) saveToCookie(skip string) {
	area := g.saveArea()
	g.e.Emit(
		asm.Mov.Reg(asm.R1, regCtx),
		bpf.KfuncCall("bpf_session_cookie"),
		asm.JEq.Imm(asm.R0, 0, skip),
		asm.LoadMem(asm.R1, asm.RFP, area, asm.DWord),
		asm.StoreMem(asm.R0, 0, asm.R1, asm.DWord),
	)
}

// branchToExitHalf jumps to "exit_half" when the session program runs at
// the function's exit.
func (g *gen) branchToExitHalf() {
	g.e.Emit(
		asm.Mov.Reg(asm.R1, regCtx),
		bpf.KfuncCall("bpf_session_is_return"),
		asm.And.Imm(asm.R0, 0xff), // bool
		asm.JNE.Imm(asm.R0, 0, "exit_half"),
	)
}

func (g *gen) sessionBody() {
	g.branchToExitHalf()
	g.countStat(g.out.Stats.EntryHits)
	skipExit := int32(0)
	if g.p.Exit == nil {
		skipExit = 1
	}
	if h := g.p.Entry; h != nil {
		g.when(h, "filtered")
		g.actions(h)
		switch g.storage {
		case StorageCookie:
			g.saveToCookie("entry_done")
			g.e.Mark("entry_done")
		case StorageMap:
			g.storeSlot()
		}
		g.ret(skipExit)
		if h.When != nil {
			g.e.Mark("filtered")
			g.ret(1)
		}
	} else {
		g.ret(skipExit)
	}

	g.e.Mark("exit_half")
	g.countStat(g.out.Stats.ExitHits)
	if g.p.Exit == nil {
		g.ret(0)
		return
	}
	switch g.storage {
	case StorageCookie:
		g.e.Origin(g.p.Exit.DeclRange)
		g.entryArea = g.e.Alloc(8)
		g.e.At("entry data: the session cookie", g.p.Exit.DeclRange)
		g.e.Emit(
			asm.Mov.Reg(asm.R1, regCtx),
			bpf.KfuncCall("bpf_session_cookie"),
			asm.JEq.Imm(asm.R0, 0, "no_entry"), // never: the entry half ran
			asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
			asm.StoreMem(asm.RFP, g.entryArea, asm.R1, asm.DWord),
		)
	case StorageMap:
		g.fetchSlot()
	}
	g.exitHandler()
	g.ret(0)
	if g.storage != StorageNone {
		g.e.Mark("no_entry")
		g.ret(0)
	}
}

// fsessionBody is one fsession program: the function's trampoline runs it
// at entry and again at exit, and bpf_session_is_return picks the half.
// Unlike kprobe.session, the entry's return value does not skip the exit
// (the series dropped that in v4; both halves must return 0), so when
// on_entry has a when, the exit runs only if the entry left a mark: a
// cookie of 1 (no entry data) or its slot (entryStorage).
func (g *gen) fsessionBody() {
	g.branchToExitHalf()
	g.countStat(g.out.Stats.EntryHits)
	if h := g.p.Entry; h != nil {
		g.when(h, "filtered")
		g.actions(h)
		switch {
		case g.storage == StorageCookie && g.out.EntryData.Size == 0:
			g.e.Emit(
				asm.Mov.Reg(asm.R1, regCtx),
				bpf.KfuncCall("bpf_session_cookie"),
				asm.JEq.Imm(asm.R0, 0, "filtered"),
				emit.StoreImm64(asm.R0, 0, 1),
			)
		case g.storage == StorageCookie:
			g.saveToCookie("filtered")
		case g.storage == StorageMap:
			g.storeSlot()
		}
		g.e.Mark("filtered")
	}
	g.ret(0)

	g.e.Mark("exit_half")
	g.countStat(g.out.Stats.ExitHits)
	switch {
	case g.storage == StorageCookie:
		g.e.Origin(g.p.Exit.DeclRange)
		g.entryArea = g.e.Alloc(8)
		g.e.At("entry data: the session cookie", g.p.Exit.DeclRange)
		g.e.Emit(
			asm.Mov.Reg(asm.R1, regCtx),
			bpf.KfuncCall("bpf_session_cookie"),
			asm.JEq.Imm(asm.R0, 0, "no_entry"),
			asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
		)
		if g.out.EntryData.Size == 0 {
			g.e.Emit(asm.JEq.Imm(asm.R1, 0, "no_entry")) // on_entry's when was false
		}
		g.e.Emit(asm.StoreMem(asm.RFP, g.entryArea, asm.R1, asm.DWord))
	case g.storage == StorageMap:
		g.fetchSlot()
	}
	g.exitHandler()
	g.ret(0)
	if g.storage != StorageNone {
		g.e.Mark("no_entry")
		g.ret(0)
	}
}

// storeSlot evaluates on_entry's save and writes it to this call's slot.
func (g *gen) storeSlot() {
	area := g.saveArea()
	g.slotKey()
	g.e.Emit(
		asm.LoadMapPtr(asm.R1, 0).WithReference(refEntry),
		asm.Mov.Reg(asm.R2, asm.RFP), asm.Add.Imm(asm.R2, int32(g.slotKeyOff)),
		asm.Mov.Reg(asm.R3, asm.RFP), asm.Add.Imm(asm.R3, int32(area)),
		asm.Mov.Imm(asm.R4, 0), // BPF_ANY: a recursive call takes the slot over
		asm.FnMapUpdateElem.Call(),
	)
}

// fetchSlot copies this call's slot to the stack and deletes it; with no
// slot (on_entry's when was false, or recursion took it) it jumps to
// "no_entry", which the caller marks.
func (g *gen) fetchSlot() {
	g.e.Origin(g.p.Exit.DeclRange)
	g.entryArea = g.e.Alloc(g.entrySize())
	g.slotKey()
	g.e.At("entry data: the (thread, function) slot", g.p.Exit.DeclRange)
	g.e.Emit(
		asm.LoadMapPtr(asm.R1, 0).WithReference(refEntry),
		asm.Mov.Reg(asm.R2, asm.RFP), asm.Add.Imm(asm.R2, int32(g.slotKeyOff)),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "no_entry"),
	)
	g.copyFrom(asm.R0, g.entryArea, g.entrySize())
	g.e.Emit(
		asm.LoadMapPtr(asm.R1, 0).WithReference(refEntry),
		asm.Mov.Reg(asm.R2, asm.RFP), asm.Add.Imm(asm.R2, int32(g.slotKeyOff)),
		asm.FnMapDeleteElem.Call(),
	)
}

// entrySize is the entry data rounded up to whole 8-byte words (at least one).
func (g *gen) entrySize() int {
	n := (g.out.EntryData.Size + 7) &^ 7
	if n == 0 {
		n = 8
	}
	return n
}

// saveArea zeroes a stack area, evaluates on_entry's save into it, and
// returns its offset. A word that a save field's store writes whole (an
// integer's) is not zeroed first.
func (g *gen) saveArea() int16 {
	size := g.entrySize()
	g.e.Origin(g.p.Entry.DeclRange)
	area := g.e.Alloc(size)
	whole := map[int]bool{}
	for _, f := range g.p.Entry.Save {
		if g.storesWord(f.Value) {
			whole[g.entryFields[f.Name]] = true
		}
	}
	for off := 0; off < size; off += 8 {
		if !whole[off] {
			g.e.Emit(emit.StoreImm64(asm.RFP, area+int16(off), 0))
		}
	}
	for _, f := range g.p.Entry.Save {
		g.measure(f.Range, func() {
			g.e.At(fmt.Sprintf("save %s = %s", f.Name, f.Value.Text()), f.Range)
			g.store(f.Value, stack(area+int16(g.entryFields[f.Name])), slotSize(g.typeOf(f.Value)))
		})
	}
	g.e.Origin(g.p.Entry.DeclRange)
	return area
}

// slotKey builds the entry slot key: tid << 32 | function cookie.
func (g *gen) slotKey() {
	off := g.e.Alloc(8)
	g.slotKeyOff = off
	g.e.Emit(asm.FnGetCurrentPidTgid.Call(), asm.LSh.Imm(asm.R0, 32))
	if g.oneFunction() { // the cookie is 0
		g.e.Emit(asm.StoreMem(asm.RFP, off, asm.R0, asm.DWord))
		return
	}
	spill := g.e.Alloc(8)
	g.e.Emit(asm.StoreMem(asm.RFP, spill, asm.R0, asm.DWord))
	g.funcCookie()
	g.e.Emit(
		asm.Mov.Reg32(asm.R0, asm.R0),
		asm.LoadMem(asm.R1, asm.RFP, spill, asm.DWord),
		asm.Or.Reg(asm.R0, asm.R1),
		asm.StoreMem(asm.RFP, off, asm.R0, asm.DWord),
	)
}

// copyFrom copies size bytes (a multiple of 8) from the pointer in src to the stack.
func (g *gen) copyFrom(src asm.Register, dst int16, size int) {
	for off := 0; off < size; off += 8 {
		g.e.Emit(
			asm.LoadMem(asm.R1, src, int16(off), asm.DWord),
			asm.StoreMem(asm.RFP, dst+int16(off), asm.R1, asm.DWord),
		)
	}
}

// funcCookie puts the attach cookie, the index of the probed function, in R0.
func (g *gen) funcCookie() {
	if g.oneFunction() {
		g.e.Emit(asm.Mov.Imm(asm.R0, 0))
		return
	}
	g.e.Emit(asm.Mov.Reg(asm.R1, regCtx), asm.FnGetAttachCookie.Call())
}

// oneFunction reports whether the probe attaches exactly one function,
// known now: the runtime attaches the compiled list (runtime/attach.go), so
// that function's cookie, its index, is 0, and the programs need not ask
// the kernel for it (bpf_get_attach_cookie: a helper call per use, a
// binary search of the link's cookies on kprobe.multi). A list resolved
// only at apply keeps the call.
func (g *gen) oneFunction() bool {
	return len(g.out.Functions) == 1 && len(g.out.Tracepoints) == 0 && g.out.Event == ""
}

// when emits a handler's when: a jump to label when it is false.
func (g *gen) when(h *spec.Handler, label string) {
	if h.When == nil {
		return
	}
	g.measure(h.When.Range(), func() {
		g.e.At("when "+h.When.Text(), h.When.Range())
		g.cond(h.When, label)
	})
}

// cond evaluates a bool and jumps to label when it is false.
func (g *gen) cond(x spec.Expr, label string) {
	mark := g.e.StackMark()
	g.expr(x)
	g.e.Origin(x.Range())
	g.e.Emit(asm.JEq.Imm(asm.R0, 0, label))
	g.e.Release(mark)
}
