package compiler

import (
	"fmt"
	"sort"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/bpf/symbols"
	"github.com/probectl/probectl/compiler/internal/emit"
	"github.com/probectl/probectl/spec"
	"golang.org/x/sys/unix"
)

// Call stacks and profile probes.
//
// A kstack or ustack value is a key into a stack map of the probe, one
// map per kind and depth, that keeps each distinct stack once. A key or
// record holds that key (negative: an errno, no stack); a user stack also
// holds the process (storeProcess). User stacks are kept as build ids and
// file offsets, so show symbolizes them after the process has exited; a
// frame whose file the kernel could not identify keeps its address,
// symbolized through the process's maps while it runs.
//
// Where the target is Linux 6.1 or later, stacks are stored by content
// (storeStackContent): bpf_get_stack writes the frames into a per-CPU
// scratch buffer, the program hashes the frames it returned (a bounded
// loop, 5.3), and the frames go into a BPF_MAP_TYPE_HASH created with
// BPF_F_NO_PREALLOC keyed by that hash. Memory is then paid per distinct
// stack as it comes, and two stacks never fight over a bucket. Before
// 6.1 a perf_event program may use preallocated hash maps only (the
// kernel's allocator for the others was not safe in NMI): those targets
// keep the kernel's stack trace map (BPF_MAP_TYPE_STACK_TRACE, an id
// from bpf_get_stackid), every entry preallocated, where of D distinct
// stacks in B buckets about D/2B collide and are lost.

// Stack map sizes. A probe other than a profile sizes each stack map to
// about stackMapBytes, 1024 to 16384 stacks. A profile sizes for the
// distinct stacks it can meet: no more than its samples in stackHorizon
// (frequency × CPUs × 600 s), within stackBudget for all its stack maps
// at their worst (every entry taken), each map the same entries (a
// sample takes one of each) but a long map an eighth of them (deep
// stacks are few). stack_entries sets the entries; beyond
// stackLimit for the probe's maps at their worst it is refused.
const (
	stackMapBytes = 8 << 20
	stackBudget   = 128 << 20
	stackLimit    = 512 << 20
	stackHorizon  = 600 // seconds
	flagBuildID   = 1 << 5
	flagUserStack = 1 << 8
	// flagUserBuildID is bpf_get_stack's BPF_F_USER_BUILD_ID.
	flagUserBuildID = 1 << 11
	// flagNoPrealloc is the map flag BPF_F_NO_PREALLOC.
	flagNoPrealloc = 1
	// htabElemHeader is struct htab_elem before its key, and
	// memAllocHeader the bpf_mem_alloc header of each element (an
	// llist_node): a stored stack takes a kmalloc slab of their sum with
	// the key and the value.
	htabElemHeader = 48
	memAllocHeader = 8
)

// stacksByContent says whether the target stores stacks by content, and
// why or why not, for the plan.
func stacksByContent(f *bpf.Facts) (bool, string) {
	if f.Kernel.AtLeast(6, 1) {
		return true, "stored by content (bpf_get_stack, hashed in the program; paid per distinct stack)"
	}
	return false, fmt.Sprintf("kept by the kernel's stack trace map (bpf_get_stackid): the target (%s) predates Linux 6.1, before which profile programs may not use hash maps allocated as they fill", f.Label())
}

// stackMapRef names the stack map of a kind and depth.
func stackMapRef(t spec.Type) string {
	if t.Kind == spec.KindUStack {
		return fmt.Sprintf("ustack_%d", t.Size)
	}
	return fmt.Sprintf("kstack_%d", t.Size)
}

// Stacks stored by content in two maps: those of stackShortFrames or
// fewer in a map whose element fits a 1 KiB slab, deeper ones in the
// long map (stackLongRef), their key marked with stackLongKey. Most
// stacks are short, and a stored stack of 127 user frames takes an
// 8 KiB slab.
const (
	stackShortSlab = 1024
	stackLongKey   = 1 << 62
	// stackLongShare: a profile's long map holds an eighth of the
	// stacks its short map does (at least spec.MinStackEntries).
	stackLongShare = 8
)

// stackShortFrames is the most frames of a kind a short stack map holds.
func stackShortFrames(user bool) int {
	return (stackShortSlab - htabElemHeader - memAllocHeader - 8) / StackFrameSize(user)
}

// stackLongRef names the long stack map of stack map ref.
func stackLongRef(ref string) string { return ref + "_long" }

// isLongRef says ref is a long stack map.
func isLongRef(ref string) bool { return len(ref) > 5 && ref[len(ref)-5:] == "_long" }

// stackScratchRef names the per-CPU buffer bpf_get_stack writes a stack
// of stack map ref into.
func stackScratchRef(ref string) string { return ref + "_buf" }

// stackElemBytes is the kernel memory one stored stack of m takes: its
// preallocated element in a stack trace map, or the kmalloc slab of a
// hash map's element.
func stackElemBytes(m *Map) int64 {
	if m.Type == ebpf.StackTrace {
		return int64(m.ValueSize)
	}
	n := int64(htabElemHeader+memAllocHeader) + int64(m.KeySize+7)&^7 + int64(m.ValueSize+7)&^7
	switch {
	case n <= 96:
		return 96
	case n <= 128:
		return 128
	case n <= 192:
		return 192
	}
	slab := int64(256)
	for slab < n {
		slab *= 2
	}
	return slab
}

// stackMapsOf are the stack maps of a kind and depth of stack on the
// target, sized as a probe other than a profile sizes them: one map, or
// with stacks stored by content a short and a long one.
func stackMapsOf(t spec.Type, f *bpf.Facts) []*Map {
	user := t.Kind == spec.KindUStack
	ref := stackMapRef(t)
	byContent, how := stacksByContent(f)
	what := fmt.Sprintf("kernel stacks, %d frames deep at most", t.Size)
	if user {
		what = fmt.Sprintf("user stacks, %d frames deep at most, as build ids and file offsets", t.Size)
	}
	depths := []int{t.Size}
	if short := stackShortFrames(user); byContent && t.Size > short {
		depths = []int{short, t.Size}
	}
	var maps []*Map
	for i, depth := range depths {
		m := &Map{Ref: ref, Name: mapName("probectl." + ref[:1] + "stk"), Type: ebpf.StackTrace, KeySize: 4,
			ValueSize: uint32(depth * StackFrameSize(user)), Purpose: what + ", " + how}
		switch {
		case byContent:
			m.Type, m.KeySize, m.Flags = ebpf.Hash, 8, flagNoPrealloc
		case user:
			m.Flags = flagBuildID
		}
		if len(depths) > 1 {
			if i == 0 {
				m.Purpose += fmt.Sprintf("; those of %d frames or fewer", depth)
			} else {
				m.Ref, m.Name = stackLongRef(ref), mapName("probectl."+ref[:1]+"stkl")
				m.Purpose += fmt.Sprintf("; those of more than %d frames", depths[0])
			}
		}
		m.MaxEntries = uint32(min(max(stackMapBytes/stackElemBytes(m), 1024), 16384))
		maps = append(maps, m)
	}
	return maps
}

// Stacks shared through a table. A stack stored in a table that several
// probes use is read by a probe that did not take it (bpftrace's
// biostacks: @reqstack[$key] = kstack at block_io_start, a histogram by
// @reqstack[$key] at block_rq_issue). Its id or hash then names frames in
// the table's stack map of its kind and depth (tableStackMaps), made and
// kept with the table like its other maps, which every probe using the
// table is given in place of a stack map of its own of that ref: the ids
// of one probe mean the same in all of them, on any kernel.

// tableStackMaps are the stack maps a table keeps for the stacks of
// values, when probes other than one use it.
func tableStackMaps(values []spec.Type, users int, f *bpf.Facts) []*Map {
	if users < 2 {
		return nil
	}
	seen := map[string]bool{}
	var maps []*Map
	for _, t := range values {
		if !t.IsStack() || seen[stackMapRef(t)] {
			continue
		}
		seen[stackMapRef(t)] = true
		for _, m := range stackMapsOf(t, f) {
			m.Purpose += "; shared by the probes that use the table"
			maps = append(maps, m)
		}
	}
	return maps
}

// tableStackRefs are the refs of the stack maps the probe's tables give
// it. Two tables that give the probe stack maps of one ref are refused:
// the probe has one map of a ref, so one table's ids would be read in the
// other's map.
func (g *gen) tableStackRefs() map[string]bool {
	refs := map[string]bool{}
	by := map[string]string{}
	used, _ := g.tablesUsed()
	var names []string
	for t := range used {
		names = append(names, t.Name)
	}
	sort.Strings(names)
	for _, name := range names {
		for t := range used {
			if t.Name != name {
				continue
			}
			l := g.u.layout(t)
			if l == nil {
				continue
			}
			for _, m := range l.Maps {
				if !isStackRef(m.Ref) || refs[m.Ref] && by[m.Ref] == name {
					continue
				}
				if other, ok := by[m.Ref]; ok {
					if isLongRef(m.Ref) {
						continue // said for its short map
					}
					g.errorf(g.p.DeclRange, "Stacks of two tables",
						"This probe uses %q and %q, both keeping stacks of %s that other probes share: a probe reads one map of them. Keep the stacks in one table (an object value: value = { a = kstack, b = ... }), or use one of the tables in this probe.", other, name, m.Ref)
					continue
				}
				refs[m.Ref], by[m.Ref] = true, name
			}
		}
	}
	return refs
}

// isStackRef says ref names a stack map (stackMapRef, stackLongRef).
func isStackRef(ref string) bool {
	return strings.HasPrefix(ref, "kstack_") || strings.HasPrefix(ref, "ustack_")
}

// stackMaps adds a stack map for every kind and depth of stack the probe
// takes, but those its tables give it (tableStackMaps), and with stacks
// stored by content the scratch buffer of each.
func (g *gen) stackMaps() {
	seen := map[string]bool{}
	given := g.tableStackRefs()
	var maps, all []*Map
	for _, x := range g.exprs() {
		spec.Walk(x, func(x spec.Expr) {
			s, ok := x.(*spec.Stack)
			if !ok {
				return
			}
			t := s.Type()
			ref := stackMapRef(t)
			if seen[ref] {
				return
			}
			seen[ref] = true
			for _, m := range stackMapsOf(t, g.facts) {
				all = append(all, m)
				if !given[m.Ref] {
					maps = append(maps, m)
				}
			}
		})
	}
	if len(maps) > 0 && g.p.Addr.Kind == bpf.KindProfile {
		g.sizeProfileStacks(maps)
	}
	for _, m := range all {
		if !given[m.Ref] {
			worst := int64(m.MaxEntries) * stackElemBytes(m)
			if m.Type == ebpf.StackTrace {
				m.Purpose += fmt.Sprintf("; %d stacks, %s preallocated", m.MaxEntries, stackBytes(worst))
			} else {
				m.Purpose += fmt.Sprintf("; %d stacks, %s when all are taken", m.MaxEntries, stackBytes(worst))
			}
			g.out.Maps = append(g.out.Maps, m)
		}
		if m.Type == ebpf.Hash && !isLongRef(m.Ref) {
			size := m.ValueSize // the deepest stack of the kind and depth
			for _, l := range all {
				if l.Ref == stackLongRef(m.Ref) {
					size = l.ValueSize
				}
			}
			g.out.Maps = append(g.out.Maps, &Map{Ref: stackScratchRef(m.Ref), Name: mapName("probectl." + m.Ref[:1] + "buf"), Type: ebpf.PerCPUArray,
				KeySize: 4, ValueSize: size, MaxEntries: 1, Purpose: "the stack bpf_get_stack writes, hashed before it is stored"})
		}
	}
}

// sizeProfileStacks sets the entries of a profile's stack maps: as
// stack_entries says, or its samples in stackHorizon within stackBudget.
func (g *gen) sizeProfileStacks(maps []*Map) {
	var elem int64 // the bytes of one stack in every map, at most
	for _, m := range maps {
		if isLongRef(m.Ref) {
			elem += stackElemBytes(m) / stackLongShare
		} else {
			elem += stackElemBytes(m)
		}
	}
	verb := "preallocates"
	if maps[0].Type == ebpf.Hash {
		verb = "takes, once all are stored,"
	}
	n, why := g.p.StackEntries, "as stack_entries says"
	if n != 0 {
		if n*elem > stackLimit {
			g.errorf(g.p.StackEntriesRange, "Stack maps too large",
				"stack_entries = %d %s %s for this probe's stack maps (%d bytes a stack), beyond the %s a probe may take: the kernel charges it to the agent's memory cgroup. Use stack_entries = %d or less, or shallower stacks (ustack(32)).",
				n, verb, stackBytes(n*elem), elem, stackBytes(stackLimit), stackLimit/elem)
			return
		}
	} else {
		rate := g.p.Frequency
		if g.p.PeriodNS > 0 {
			rate = max(1e9/g.p.PeriodNS, 1)
		}
		budget := stackBudget / elem
		n, why = budget, fmt.Sprintf("sized for the %s budget of a profile's stack maps", stackBytes(stackBudget))
		if g.p.Period > 0 {
			// Every N events: how many a second, the spec does not say.
			why += fmt.Sprintf(" (its samples come every %d events, at no rate known before)", g.p.Period)
		} else if cpus := int64(g.facts.CPUs); cpus > 0 && rate > 0 {
			if samples := rate * cpus * stackHorizon; samples < budget {
				n, why = max(samples, 1024), fmt.Sprintf("sized for its samples in %d s (%d Hz × %d CPUs)", stackHorizon, rate, cpus)
			}
		}
	}
	for _, m := range maps {
		m.MaxEntries = uint32(n)
		if isLongRef(m.Ref) {
			m.MaxEntries = uint32(max(n/stackLongShare, spec.MinStackEntries))
		}
		m.Purpose += "; " + why
	}
}

// stackBytes prints a size in MiB, or KiB below one.
func stackBytes(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%d KiB", (n+1023)>>10)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// stackField completes the layout of a key or record field holding a
// stack: its kind and its map.
func (g *gen) stackField(f *KeyField, x spec.Expr) {
	t := g.typeOf(x)
	if !t.IsStack() {
		return
	}
	f.Kind, f.StackMap = KeyKStack, stackMapRef(t)
	if t.Kind == spec.KindUStack {
		f.Kind = KeyUStack
	}
}

// storeStack stores stack value x (taken here, or saved at entry) at p.
func (g *gen) storeStack(x spec.Expr, p place) {
	t := g.typeOf(x)
	switch x := x.(type) {
	case *spec.Stack:
		g.e.Origin(x.Range())
		if ok, _ := stacksByContent(g.facts); ok {
			g.storeStackContent(x, p)
			return
		}
		flags := int32(0)
		if x.User {
			flags = flagUserStack
		}
		g.e.Emit(
			asm.Mov.Reg(asm.R1, regCtx),
			asm.LoadMapPtr(asm.R2, 0).WithReference(stackMapRef(t)),
			asm.Mov.Imm(asm.R3, flags),
			asm.FnGetStackid.Call(),
			asm.LSh.Imm(asm.R0, 32), asm.ArSh.Imm(asm.R0, 32), // the int it returns, sign-extended
			asm.StoreMem(p.base, p.off, asm.R0, asm.DWord),
		)
		if x.User {
			g.storeProcess(place{p.base, p.off + 8})
		}
	case *spec.EntryRef:
		g.copy(p, stack(g.entryArea+int16(g.entryFields[x.Name])), slotSize(t))
	case *spec.TableRead:
		// A key the table does not hold reads as -ENOENT: no stack
		// (0 is a stack id like any other).
		g.zero(p, slotSize(t))
		g.e.Emit(emit.StoreImm64(p.base, p.off, -2))
		g.tableText(x, p, slotSize(t))
	default:
		panic(fmt.Sprintf("compiler: a stack from %T", x))
	}
}

// Stack hashing: FNV-1a over 64-bit words, each product folded by its
// high half. Bit 63 is cleared, so a stored key is never negative (an
// errno), and bit 62 says which map holds the frames (stackLongKey).
const (
	stackHashSeed  = -3750763034362895579 // 0xcbf29ce484222325, FNV's offset basis
	stackHashPrime = 0x100000001b3
)

// storeStackContent takes stack x by content and stores its key, the
// hash of its frames, at p: bpf_get_stack into the per-CPU scratch
// buffer, the hash of the words it wrote (a bounded loop over those
// only), and the frames into the stack map under that hash unless there
// already. A stack the kernel has none of stores -EFAULT, like
// bpf_get_stackid; one the map refuses (full: -E2BIG, or -ENOMEM) stores
// the error. R8 holds the buffer and R9 the offset in it: no other code
// uses them.
func (g *gen) storeStackContent(x *spec.Stack, p place) {
	t := x.Type()
	ref := stackMapRef(t)
	size := int32(t.Size * StackFrameSize(x.User))
	flags := int32(0)
	if x.User {
		flags = flagUserStack | flagUserBuildID
	}
	mark := g.e.StackMark()
	defer g.e.Release(mark)
	key := g.e.Alloc(8)
	start, loop, hashed := g.e.NewLabel("stack_start"), g.e.NewLabel("stack_hash"), g.e.NewLabel("stack_hashed")
	store, done := g.e.NewLabel("stack_store"), g.e.NewLabel("stack_done")
	g.e.Emit(
		emit.StoreImm64(asm.RFP, key, 0),
		asm.LoadMapPtr(asm.R1, 0).WithReference(stackScratchRef(ref)),
		asm.Mov.Reg(asm.R2, asm.RFP), asm.Add.Imm(asm.R2, int32(key)),
		asm.FnMapLookupElem.Call(),
		asm.Mov.Imm(asm.R1, -int32(unix.ENOMEM)),
		asm.JEq.Imm(asm.R0, 0, store),
		asm.Mov.Reg(asm.R8, asm.R0),
		asm.Mov.Reg(asm.R1, regCtx),
		asm.Mov.Reg(asm.R2, asm.R8),
		asm.Mov.Imm(asm.R3, size),
		asm.Mov.Imm(asm.R4, flags),
		asm.FnGetStack.Call(),
		asm.Mov.Reg(asm.R1, asm.R0),
		asm.JSGT.Imm(asm.R0, 0, start),
		asm.JSLT.Imm(asm.R0, 0, store),
		asm.Mov.Imm(asm.R1, -int32(unix.EFAULT)), // no frames: no stack
		asm.Ja.Label(store),
	)
	// R0: the bytes written; R1: the hash; R9: the offset of the next word.
	g.e.Mark(start)
	g.e.Emit(
		asm.LoadImm(asm.R1, stackHashSeed, asm.DWord),
		asm.Xor.Reg(asm.R1, asm.R0),
		asm.Mov.Imm(asm.R9, 0),
	)
	g.e.Mark(loop)
	g.e.Emit(
		asm.JGE.Reg(asm.R9, asm.R0, hashed),
		asm.JGE.Imm(asm.R9, size, hashed),
		asm.Mov.Reg(asm.R2, asm.R8), asm.Add.Reg(asm.R2, asm.R9),
		asm.LoadMem(asm.R2, asm.R2, 0, asm.DWord),
		asm.Xor.Reg(asm.R1, asm.R2),
		asm.LoadImm(asm.R2, stackHashPrime, asm.DWord),
		asm.Mul.Reg(asm.R1, asm.R2),
		asm.Mov.Reg(asm.R2, asm.R1), asm.RSh.Imm(asm.R2, 32),
		asm.Xor.Reg(asm.R1, asm.R2),
		asm.Add.Imm(asm.R9, 8),
		asm.Ja.Label(loop),
	)
	g.e.Mark(hashed)
	g.e.Emit(asm.LSh.Imm(asm.R1, 2), asm.RSh.Imm(asm.R1, 2))
	if short := stackShortFrames(x.User); t.Size > short {
		// R9 is the bytes written: a stack of more frames than the short
		// map holds goes to the long one, its key marked.
		long := g.e.NewLabel("stack_long")
		g.e.Emit(asm.JGT.Imm(asm.R9, int32(short*StackFrameSize(x.User)), long))
		g.storeStackFrames(ref, key, p, store, done)
		g.e.Mark(long)
		g.e.Emit(asm.LoadImm(asm.R2, stackLongKey, asm.DWord), asm.Or.Reg(asm.R1, asm.R2))
		g.storeStackFrames(stackLongRef(ref), key, p, store, done)
	} else {
		g.storeStackFrames(ref, key, p, store, done)
	}
	g.e.Mark(store)
	g.e.Emit(asm.StoreMem(p.base, p.off, asm.R1, asm.DWord))
	g.e.Mark(done)
	if x.User {
		g.storeProcess(place{p.base, p.off + 8})
	}
}

// storeStackFrames stores the key in R1 at p and at key, and the frames
// in the scratch buffer (R8) into stack map ref unless it holds them;
// it goes to done, or to store with the map's error in R1.
func (g *gen) storeStackFrames(ref string, key int16, p place, store, done string) {
	g.e.Emit(
		asm.StoreMem(asm.RFP, key, asm.R1, asm.DWord),
		asm.StoreMem(p.base, p.off, asm.R1, asm.DWord),
		asm.LoadMapPtr(asm.R1, 0).WithReference(ref),
		asm.Mov.Reg(asm.R2, asm.RFP), asm.Add.Imm(asm.R2, int32(key)),
		asm.FnMapLookupElem.Call(),
		asm.JNE.Imm(asm.R0, 0, done),
		asm.LoadMapPtr(asm.R1, 0).WithReference(ref),
		asm.Mov.Reg(asm.R2, asm.RFP), asm.Add.Imm(asm.R2, int32(key)),
		asm.Mov.Reg(asm.R3, asm.R8),
		asm.Mov.Imm(asm.R4, bpfNoExist),
		asm.FnMapUpdateElem.Call(),
		asm.Mov.Reg(asm.R1, asm.R0),
		asm.JEq.Imm(asm.R0, 0, done),
		asm.JEq.Imm(asm.R0, -int32(unix.EEXIST), done), // another CPU stored it meanwhile
		asm.Ja.Label(store),
	)
}

// bpfNoExist is BPF_NOEXIST: store only a key the map does not hold.
const bpfNoExist = 1

// chooseProfileRoute decides what a profile probe samples: the event it
// names, or for "auto" the CPU's cycle counter where the machine has one
// that samples (samples then count work done, not time), else the
// cpu-clock timer (every kernel and VM has it). A hardware event other
// than cycles is planned on any target: the target's facts say only
// whether cycles sample, so the plan says it needs a PMU, and where the
// machine has none for it the kernel refuses it at apply.
func chooseProfileRoute(p *spec.Probe, f *bpf.Facts) (decision, *bpf.Sampler, error) {
	s := &bpf.Sampler{Event: p.PerfEvent, Frequency: p.Frequency, PeriodNS: p.PeriodNS, Period: p.Period, OneCPU: p.OneCPU}
	why := ""
	switch ev, _ := bpf.LookupPerfEvent(p.PerfEvent); {
	case p.PerfEvent == "auto":
		if f.Perf.Cycles && p.PeriodNS == 0 {
			s.Event, why = bpf.EventCycles, "auto: the machine has a hardware cycle counter, which counts work done"
		} else {
			s.Event = bpf.EventCPUClock
			switch {
			case p.PeriodNS != 0:
				why = "auto: period_ns is time"
			case f.Perf.CyclesWhy != "":
				why = "auto: no hardware cycle counter; " + f.Perf.CyclesWhy
			default:
				why = "auto: no hardware cycle counter"
			}
		}
	case p.PerfEvent == bpf.EventCycles:
		if !f.Perf.Cycles && f.Source != "profile" {
			msg := "event = \"cycles\" needs a hardware cycle counter that samples, which the target (" + f.Label() + ") lacks"
			if f.Perf.CyclesWhy != "" {
				msg += ": " + f.Perf.CyclesWhy
			}
			return decision{}, nil, fmt.Errorf("%s. Use event = \"cpu-clock\" or \"auto\"", msg)
		}
		why = "as written"
	case ev.Hardware:
		why = "as written; a hardware event: needs the machine's PMU"
		if !f.Perf.Cycles && f.Source != "profile" {
			why += ", and the target (" + f.Label() + ") has no hardware counter that samples"
			if f.Perf.CyclesWhy != "" {
				why += " (" + f.Perf.CyclesWhy + ")"
			}
			why += ": the kernel will refuse it"
		}
	default:
		why = "as written"
	}
	if !f.Perf.Link {
		return decision{}, nil, fmt.Errorf("profile probes attach with BPF links on perf events (Linux 5.15), which the target (%s) lacks", f.Label())
	}
	where := "every CPU"
	if s.OneCPU {
		where = "one CPU"
	}
	return decision{route: RouteProfile, families: []Family{FamilyPerfEvent},
		reason: fmt.Sprintf("perf_event: %s %s on %s (%s)", s.Event, s.Rate(), where, why)}, s, nil
}

// storeProcess stores at p the process an address of user memory belongs
// to: its tgid, and above it its start time (task.group_leader's
// start_boottime, as /proc/PID/stat shows it) marked with
// symbols.ProcessStarted, where the target's BTF says where that is. A pid alone
// names whichever process has it when show reads: the start time tells
// the process that recorded the address from one that got its pid since.
func (g *gen) storeProcess(p place) {
	mark := g.e.StackMark()
	defer g.e.Release(mark)
	leader, start, ok := g.startTimeField()
	if !ok {
		g.e.Emit(
			asm.FnGetCurrentPidTgid.Call(), asm.RSh.Imm(asm.R0, 32),
			asm.StoreMem(p.base, p.off, asm.R0, asm.DWord),
		)
		return
	}
	g.e.Emit(asm.FnGetCurrentTask.Call())
	g.readKernel(leader, 8)
	g.readKernel(start, 8)
	g.e.Emit(
		asm.Div.Imm(asm.R0, symbols.ClockTickNS),
		asm.And.Imm32(asm.R0, symbols.ProcessStarted-1),
		asm.Or.Imm32(asm.R0, -symbols.ProcessStarted),
		asm.LSh.Imm(asm.R0, 32),
		asm.StoreMem(p.base, p.off, asm.R0, asm.DWord),
		asm.FnGetCurrentPidTgid.Call(), asm.RSh.Imm(asm.R0, 32),
		asm.LoadMem(asm.R1, p.base, p.off, asm.DWord),
		asm.Or.Reg(asm.R0, asm.R1),
		asm.StoreMem(p.base, p.off, asm.R0, asm.DWord),
	)
}

// startTimeField finds in the target's BTF the offsets of
// task_struct.group_leader and of the leader's start time since boot
// (start_boottime; real_start_time before Linux 5.5). A target without
// BTF (a profile) has none: the slot then holds the pid alone.
func (g *gen) startTimeField() (leader, start int32, ok bool) {
	types, err := g.facts.Types()
	if err != nil {
		return 0, 0, false
	}
	r := &resolver{g: g, types: types}
	task, found := r.lookupComposite("task_struct", false)
	if !found {
		return 0, 0, false
	}
	lm, loff, found := member(task, "group_leader")
	if _, ptr := btf.UnderlyingType(lm.Type).(*btf.Pointer); !found || !ptr || loff%8 != 0 {
		return 0, 0, false
	}
	for _, name := range []string{"start_boottime", "real_start_time"} {
		m, off, found := member(task, name)
		if sz, err := btf.Sizeof(m.Type); found && err == nil && sz == 8 && off%8 == 0 && m.BitfieldSize == 0 {
			return int32(loff / 8), int32(off / 8), true
		}
	}
	return 0, 0, false
}
