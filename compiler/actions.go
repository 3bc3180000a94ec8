package compiler

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler/internal/emit"
	"github.com/probectl/probectl/spec"
)

// mapName is a kernel map name: at most 15 characters of [A-Za-z0-9_.].
func mapName(s string) string {
	if len(s) > 15 {
		s = s[:15]
	}
	return s
}

// layoutMaps decides every map of the probe and the layouts that decode them.
func (g *gen) layoutMaps() {
	out := g.out
	n := 0
	for _, a := range g.p.Actions() {
		switch {
		case a.Kind == spec.Event:
			out.Events = append(out.Events, g.eventLayout(a))
		case a.IsAggregation():
			g.layoutAggregation(a, n)
			n++
		}
	}
	g.stackMaps()
	out.Stats = Stats{EventsDropped: n, EntryHits: n + 1, ExitHits: n + 2, Size: n + 3}
	out.Maps = append(out.Maps, &Map{
		Ref: refStats, Name: "probectl.stats", Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: uint32(out.Stats.Size),
		Purpose: "dropped keys per aggregation, dropped events, hits",
	})
	if g.storage == StorageMap {
		out.Maps = append(out.Maps, &Map{
			Ref: refEntry, Name: "probectl.entry", Type: ebpf.LRUHash, KeySize: 8, ValueSize: uint32(g.entrySize()), MaxEntries: entrySlots,
			Purpose: "entry data per (thread, function) call",
		})
	}
	g.tenantMap()
	g.podMaps()
	g.sharedMaps()
	if len(out.Events) > 0 {
		if !g.facts.Helpers.Ringbuf {
			g.errorf(g.p.DeclRange, "No ring buffer", "event needs BPF ring buffers (Linux 5.8), which the target (%s) lacks. Use an aggregation.", g.facts.Label())
		}
		// The ring buffer is the spec set's, shared: the runtime gives it.
		out.Buffer = g.u.buffer
	}
}

// eventLayout lays out the records of event action a: the header, then
// its fields.
func (g *gen) eventLayout(a *spec.Action) *EventLayout {
	ev := &EventLayout{Name: a.Name, ID: len(g.out.Events), Size: EventHeaderSize}
	for _, f := range a.Fields {
		kf := g.keyField(f.Value, f.Name, ev.Size)
		ev.Fields = append(ev.Fields, kf)
		g.stackField(&ev.Fields[len(ev.Fields)-1], f.Value)
		ev.Size += kf.Size
	}
	ev.Layout = layoutID(ev, g.out).String()
	return ev
}

// layoutAggregation lays out aggregation a, the probe's nth, and its map.
func (g *gen) layoutAggregation(a *spec.Action, n int) {
	agg := &Aggregation{Name: a.Name, Kind: AggregationKind(a.Kind), MapRef: fmt.Sprintf("agg_%d", n), MaxKeys: a.MaxKeys, DroppedIndex: n,
		Unit: a.Unit, ExportStacks: a.ExportStacks, HistSum: a.IsHistogram()}
	if u, ok := spec.Units[a.Unit]; ok {
		agg.BaseUnit, agg.PerBase = u.Base, u.PerBase
	}
	labels := spec.ByLabels(a)
	for i, b := range a.By {
		name := keyName(b, i)
		if a.ByNames != nil {
			name = a.ByNames[i]
		}
		kf := g.keyField(b, name, agg.KeySize)
		kf.Label = labels[i]
		agg.Key = append(agg.Key, kf)
		g.stackField(&agg.Key[len(agg.Key)-1], b)
		agg.KeySize += kf.Size
	}
	if a.ExportStacks && !slices.ContainsFunc(agg.Key, KeyField.IsStack) {
		g.errorf(a.DeclRange, "No stack to export",
			"export_stacks serves the kstack and ustack columns of by as labels, and %s %q has none. Remove it.", a.Kind, a.Name)
	}
	if a.IsHistogram() {
		agg.KeySize += 8 // the bucket
	}
	if agg.KeySize == 0 {
		agg.KeySize = 8 // one zero key
	}
	if a.Kind == spec.Sum {
		agg.Signed = !g.nonNegative(a.Value, g.guards(a)...)
	}
	if a.Kind == spec.LHist {
		agg.LinearMin, agg.LinearMax, agg.LinearStep = a.Min, a.Max, a.Step
	}
	g.out.Aggregations = append(g.out.Aggregations, agg)
	typ := ebpf.PerCPUHash
	if agg.SharedValue() {
		typ = ebpf.Hash
	}
	g.out.Maps = append(g.out.Maps, &Map{
		Ref: agg.MapRef, Name: mapName(a.Name), Type: typ,
		KeySize: uint32(agg.KeySize), ValueSize: uint32(ValueSize(a.Kind)), MaxEntries: uint32(agg.MapEntries()),
		Purpose: fmt.Sprintf("%s %q", a.Kind, a.Name),
	})
}

// sharedMaps adds join's work area when the probe joins (or walks cwd), and the tables
// the probe uses: their maps are the tables', shared.
func (g *gen) sharedMaps() {
	used, joins := g.tablesUsed()
	if joins {
		g.out.Maps = append(g.out.Maps, &Map{
			Ref: refJoin, Name: "probectl.join", Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 2 * spec.JoinSize, MaxEntries: 1,
			Purpose: "join's work area: the strings read at a variable offset",
		})
	}
	for t := range used {
		g.out.Tables = append(g.out.Tables, t.Name)
	}
	sort.Strings(g.out.Tables)
	for _, name := range g.out.Tables {
		for t := range used {
			if t.Name == name {
				g.out.Shared = append(g.out.Shared, g.u.layout(t))
			}
		}
	}
}

// tablesUsed returns the tables the probe reads or stores, and whether
// it joins strings.
func (g *gen) tablesUsed() (used map[*spec.Table]bool, joins bool) {
	used = map[*spec.Table]bool{}
	for _, x := range g.exprs() {
		spec.Walk(x, func(x spec.Expr) {
			switch x := x.(type) {
			case *spec.TableRead:
				used[x.Table] = true
			case *spec.Has:
				used[x.Table] = true
			case *spec.Join:
				joins = true
			}
			if usesCwd(x) {
				joins = true
			}
		})
	}
	for _, a := range g.p.Actions() {
		if a.Table != nil {
			used[a.Table] = true
		}
	}
	return used, joins
}

// ValueSize is the size of an aggregation's value (per CPU for min and
// max, compiled.Aggregation.SharedValue): min and max keep
// a "seen" word after the value, because inserting a key zeroes the other
// CPUs' values and 0 must not win a min; a histogram's bucket keeps the
// sum of its observations after its count.
func ValueSize(kind spec.ActionKind) int {
	if kind == spec.Min || kind == spec.Max || kind == spec.Hist || kind == spec.LHist {
		return 16
	}
	return 8
}

// keyField lays out a key field or an event field at off: its slot, how
// it decodes, and the decoder it shows through.
func (g *gen) keyField(x spec.Expr, name string, off int) KeyField {
	kf := KeyField{Name: name, Kind: g.keyKind(x), Offset: off, Size: slotSize(g.typeOf(x))}
	if v, ok := x.(*spec.Var); ok {
		kf.Decode = builtinCodes[v.Name].decode
	}
	if d, ok := x.(*spec.Display); ok {
		kf.Decode = string(d.Decoder)
		switch d.Decoder {
		case spec.DecodeLabels:
			kf.Labels = map[string]string{}
			for n, text := range d.Labels.Values {
				kf.Labels[strconv.FormatInt(n, 10)] = text
			}
		case spec.DecodeSyscall:
			kf.Labels = bpf.SyscallNames(g.facts.Arch)
		}
	}
	return kf
}

// keyKind is how show decodes a key field or event field.
func (g *gen) keyKind(x spec.Expr) KeyKind {
	if d, ok := x.(*spec.Display); ok {
		if d.Port == nil && d.Decoder != spec.DecodeUsym {
			return g.keyKind(d.X)
		}
		return KeyBytes
	}
	if g.unsigned64(x) {
		return KeyUint
	}
	if _, ok := x.(*spec.Join); ok {
		return KeyArgv
	}
	if _, ok := x.(*spec.Buf); ok {
		return KeyBuf
	}
	if v, ok := x.(*spec.Var); ok && builtinCodes[v.Name].key != "" {
		return builtinCodes[v.Name].key
	}
	return kindOf(g.typeOf(x))
}

func keyName(x spec.Expr, i int) string {
	switch v := x.(type) {
	case *spec.Var:
		return v.Name
	case *spec.EntryRef:
		return "entry." + v.Name
	case *spec.ArgsField:
		return "args." + v.Name
	case *spec.Stack:
		return v.Text()
	}
	text := strings.Join(strings.Fields(x.Text()), " ")
	if text == "" {
		return fmt.Sprintf("key%d", i)
	}
	return text
}

func (g *gen) aggregation(a *spec.Action) *Aggregation {
	for _, agg := range g.out.Aggregations {
		if agg.Name == a.Name {
			return agg
		}
	}
	panic("no aggregation " + a.Name)
}

func (g *gen) event(a *spec.Action) *EventLayout {
	for _, ev := range g.out.Events {
		if ev.Name == a.Name {
			return ev
		}
	}
	panic("no event " + a.Name)
}

func (g *gen) actions(h *spec.Handler) {
	for _, a := range h.Actions {
		g.measure(a.DeclRange, func() {
			mark := g.e.StackMark()
			skip := g.e.NewLabel(a.Name + "_done")
			g.e.At(fmt.Sprintf("%s %q", a.Kind, a.Name), a.DeclRange)
			if a.When != nil {
				g.cond(a.When, skip)
				g.e.Origin(a.DeclRange)
			}
			switch a.Kind {
			case spec.Event:
				g.emitEvent(a, skip)
			case spec.Store:
				g.tableStore(a)
			case spec.Delete:
				g.tableDelete(a)
			default:
				g.update(a, g.aggregation(a), skip)
			}
			g.e.Mark(skip)
			g.e.Release(mark)
		})
	}
}

// update adds one observation to an aggregation: build the key, compute the
// value, then lookup-and-modify, or insert; a full map counts a dropped key.
func (g *gen) update(a *spec.Action, agg *Aggregation, skip string) {
	key := g.e.Alloc(agg.KeySize)
	if len(a.By) == 0 && !a.IsHistogram() {
		g.e.Emit(emit.StoreImm64(asm.RFP, key, 0))
	}
	for i, b := range a.By {
		g.e.At("by "+b.Text(), b.Range())
		g.store(b, stack(key+int16(agg.Key[i].Offset)), agg.Key[i].Size)
	}
	g.e.Origin(a.DeclRange)
	val := g.e.Alloc(ValueSize(a.Kind))
	if a.Kind == spec.Min || a.Kind == spec.Max {
		g.e.Emit(emit.StoreImm64(asm.RFP, val+8, 1)) // seen
	}
	switch a.Kind {
	case spec.Count:
		g.e.Emit(emit.StoreImm64(asm.RFP, val, 1))
	case spec.Hist, spec.LHist:
		g.e.At("value "+a.Value.Text(), a.Value.Range())
		g.expr(a.Value)
		g.e.Origin(a.DeclRange)
		g.e.Emit(asm.StoreMem(asm.RFP, val+8, asm.R0, asm.DWord)) // the sum
		if a.Kind == spec.Hist {
			g.log2Bucket()
		} else {
			g.linearBucket(a)
		}
		g.e.Emit(
			asm.StoreMem(asm.RFP, key+int16(agg.KeySize-8), asm.R0, asm.DWord),
			emit.StoreImm64(asm.RFP, val, 1),
		)
	default:
		g.e.At("value "+a.Value.Text(), a.Value.Range())
		g.expr(a.Value)
		g.e.Emit(asm.StoreMem(asm.RFP, val, asm.R0, asm.DWord))
	}
	g.e.Origin(a.DeclRange)

	found, insert, retry := g.e.NewLabel("found"), g.e.NewLabel("insert"), g.e.NewLabel("dropped")
	lookup := func(miss string) {
		g.e.Emit(
			asm.LoadMapPtr(asm.R1, 0).WithReference(agg.MapRef),
			asm.Mov.Reg(asm.R2, asm.RFP), asm.Add.Imm(asm.R2, int32(key)),
			asm.FnMapLookupElem.Call(),
			asm.JEq.Imm(asm.R0, 0, miss),
		)
	}
	lookup(insert)
	g.e.Mark(found)
	if agg.SharedValue() {
		g.addShared(a, val)
	} else {
		g.modify(a, val, skip)
	}
	g.e.Emit(asm.Ja.Label(skip))

	g.e.Mark(insert)
	g.e.Emit(
		asm.LoadMapPtr(asm.R1, 0).WithReference(agg.MapRef),
		asm.Mov.Reg(asm.R2, asm.RFP), asm.Add.Imm(asm.R2, int32(key)),
		asm.Mov.Reg(asm.R3, asm.RFP), asm.Add.Imm(asm.R3, int32(val)),
		asm.Mov.Imm(asm.R4, 1), // BPF_NOEXIST
		asm.FnMapUpdateElem.Call(),
		asm.JEq.Imm(asm.R0, 0, skip),
	)
	// Another CPU may have inserted the key first: look again. Still
	// missing means the map is full.
	lookup(retry)
	g.e.Emit(asm.Ja.Label(found))
	g.e.Mark(retry)
	g.countStat(agg.DroppedIndex)
}

// modify folds the observation at val into this CPU's value, which R0
// points at (per-CPU maps need no atomics): min and max keep the least or
// greatest, a histogram's bucket adds its count and its sum, the others add.
func (g *gen) modify(a *spec.Action, val int16, skip string) {
	g.e.Emit(
		asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
		asm.LoadMem(asm.R2, asm.RFP, val, asm.DWord),
	)
	switch a.Kind {
	case spec.Min, spec.Max:
		set := g.e.NewLabel("set")
		g.e.Emit(
			asm.LoadMem(asm.R3, asm.R0, 8, asm.DWord),
			asm.JEq.Imm(asm.R3, 0, set), // this CPU has not seen the key yet
		)
		if a.Kind == spec.Min {
			g.e.Emit(asm.JSLE.Reg(asm.R1, asm.R2, skip))
		} else {
			g.e.Emit(asm.JSGE.Reg(asm.R1, asm.R2, skip))
		}
		g.e.Mark(set)
		g.e.Emit(
			asm.StoreMem(asm.R0, 0, asm.R2, asm.DWord),
			emit.StoreImm64(asm.R0, 8, 1),
		)
	case spec.Hist, spec.LHist:
		g.e.Emit(
			asm.Add.Reg(asm.R1, asm.R2), asm.StoreMem(asm.R0, 0, asm.R1, asm.DWord),
			asm.LoadMem(asm.R1, asm.R0, 8, asm.DWord),
			asm.LoadMem(asm.R2, asm.RFP, val+8, asm.DWord),
			asm.Add.Reg(asm.R1, asm.R2), asm.StoreMem(asm.R0, 8, asm.R1, asm.DWord),
		)
	default:
		g.e.Emit(asm.Add.Reg(asm.R1, asm.R2), asm.StoreMem(asm.R0, 0, asm.R1, asm.DWord))
	}
}

// addShared adds the observation at val to the value R0 points at, one
// that every CPU adds to (compiled.Aggregation.SharedValue): a 64-bit
// atomic add of each word, BPF_STX|BPF_ATOMIC|BPF_DW with imm BPF_ADD,
// which is BPF_XADD (every kernel, JITed on amd64 and arm64); no fetch
// form (5.12+). A histogram's bucket adds its count and its sum.
func (g *gen) addShared(a *spec.Action, val int16) {
	if a.Kind == spec.Count {
		g.e.Emit(asm.Mov.Imm(asm.R1, 1))
	} else {
		g.e.Emit(asm.LoadMem(asm.R1, asm.RFP, val, asm.DWord))
	}
	g.e.Emit(asm.AddAtomic.Mem(asm.R0, asm.R1, asm.DWord, 0))
	if a.IsHistogram() {
		g.e.Emit(
			asm.LoadMem(asm.R1, asm.RFP, val+8, asm.DWord),
			asm.AddAtomic.Mem(asm.R0, asm.R1, asm.DWord, 8),
		)
	}
}

// countStat adds one to a counter of the probe's stats map.
func (g *gen) countStat(index int) { g.countIn(refStats, index) }

// countIn adds one to a counter of a per-CPU array map.
func (g *gen) countIn(ref string, index int) {
	mark := g.e.StackMark()
	slot := g.e.Alloc(8)
	done := g.e.NewLabel("stat_done")
	g.e.Emit(
		asm.StoreImm(asm.RFP, slot, int64(index), asm.Word),
		asm.LoadMapPtr(asm.R1, 0).WithReference(ref),
		asm.Mov.Reg(asm.R2, asm.RFP), asm.Add.Imm(asm.R2, int32(slot)),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, done),
		asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
		asm.Add.Imm(asm.R1, 1),
		asm.StoreMem(asm.R0, 0, asm.R1, asm.DWord),
	)
	g.e.Mark(done)
	g.e.Release(mark)
}

// log2Bucket turns the value in R0 into its log2 bucket: 0 for negative
// values, 1 for zero, 2+floor(log2(v)) for positive ones (1 → 2, 2..3 → 3, ...).
func (g *gen) log2Bucket() {
	done, pos := g.e.NewLabel("bucket"), g.e.NewLabel("positive")
	g.e.Emit(
		asm.JSGT.Imm(asm.R0, 0, pos),
		asm.Mov.Imm(asm.R1, 1),
		asm.JEq.Imm(asm.R0, 0, done),
		asm.Mov.Imm(asm.R1, 0),
		asm.Ja.Label(done),
	)
	g.e.Mark(pos)
	g.e.Emit(asm.Mov.Imm(asm.R1, 2))
	for _, shift := range []int32{32, 16, 8, 4, 2, 1} {
		next := g.e.NewLabel("shift")
		g.e.Emit(
			asm.Mov.Reg(asm.R2, asm.R0),
			asm.RSh.Imm(asm.R2, shift),
			asm.JEq.Imm(asm.R2, 0, next),
			asm.Mov.Reg(asm.R0, asm.R2),
			asm.Add.Imm(asm.R1, shift),
		)
		g.e.Mark(next)
	}
	g.e.Mark(done)
	g.e.Emit(asm.Mov.Reg(asm.R0, asm.R1))
}

// linearBucket turns the value in R0 into its lhist bucket: 0 below min,
// 1..n in range, n+1 at or above max. In range, value - min is below
// max - min, at most 2^63 (spec bounds min and max to ±2^62), and is
// divided unsigned: it never overflows.
func (g *gen) linearBucket(a *spec.Action) {
	n := LinearBuckets(a.Min, a.Max, a.Step)
	done := g.e.NewLabel("bucket")
	g.e.Emit(
		asm.LoadImm(asm.R1, a.Min, asm.DWord),
		asm.Mov.Reg(asm.R2, asm.R0),
		asm.Mov.Imm(asm.R0, 0),
		asm.JSLT.Reg(asm.R2, asm.R1, done),
		asm.LoadImm(asm.R3, a.Max, asm.DWord),
		asm.Mov.Imm(asm.R0, int32(n+1)),
		asm.JSGE.Reg(asm.R2, asm.R3, done),
		asm.Mov.Reg(asm.R0, asm.R2),
		asm.Sub.Reg(asm.R0, asm.R1),
		asm.LoadImm(asm.R3, a.Step, asm.DWord),
		asm.Div.Reg(asm.R0, asm.R3),
		asm.Add.Imm(asm.R0, 1),
	)
	g.e.Mark(done) // on the caller's next instruction
}

// emitEvent reserves a record in the spec set's event buffer, writes its
// header (the layout id, then the time, read after the reserve so that
// one thread's records are in time order), fills the fields in place and
// submits it; a full buffer counts a dropped event. Between the reserve
// and the submit nothing jumps out: the record is submitted on every path.
func (g *gen) emitEvent(a *spec.Action, skip string) {
	ev := g.event(a)
	reserved := g.e.NewLabel("reserved")
	g.e.Emit(
		asm.LoadMapPtr(asm.R1, 0).WithReference(refEvents),
		asm.Mov.Imm(asm.R2, int32(ev.Size)),
		asm.Mov.Imm(asm.R3, 0),
		asm.FnRingbufReserve.Call(),
		asm.JNE.Imm(asm.R0, 0, reserved),
	)
	g.countStat(g.out.Stats.EventsDropped)
	g.e.Emit(asm.Ja.Label(skip))
	g.e.Mark(reserved)
	g.e.Emit(
		asm.Mov.Reg(regRecord, asm.R0),
		asm.LoadImm(asm.R1, int64(ev.LayoutID()), asm.DWord),
		asm.StoreMem(regRecord, EventLayoutOffset, asm.R1, asm.DWord),
		asm.FnKtimeGetNs.Call(),
		asm.StoreMem(regRecord, EventTimeOffset, asm.R0, asm.DWord),
	)
	for i, f := range a.Fields {
		g.e.At(fmt.Sprintf("field %s = %s", f.Name, f.Value.Text()), f.Range)
		g.store(f.Value, place{regRecord, int16(ev.Fields[i].Offset)}, ev.Fields[i].Size)
	}
	g.e.Origin(a.DeclRange)
	g.e.Emit(
		asm.Mov.Reg(asm.R1, regRecord),
		asm.Mov.Imm(asm.R2, 0),
		asm.FnRingbufSubmit.Call(),
	)
}
