package compiler

import (
	"encoding/binary"
	"fmt"

	"github.com/cilium/ebpf/asm"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler/internal/emit"
	"github.com/probectl/probectl/spec"
)

// Values that do not fit a register: strings and byte arrays. They are
// written into a place (the stack, a reserved ring buffer record) by store;
// integers go through R0 (expr). Every place is zeroed before a string is
// read into it: comparisons and keys see the same bytes for the same text.

// place is memory the program writes a value to: base + off, base the
// frame pointer (the stack) or a register holding a pointer that stays
// valid (regRecord: a reserved ring buffer record).
type place struct {
	base asm.Register
	off  int16
}

func stack(off int16) place { return place{asm.RFP, off} }

// addr puts the place's address in reg.
func (g *gen) addr(reg asm.Register, p place) {
	g.e.Emit(asm.Mov.Reg(reg, p.base), asm.Add.Imm(reg, int32(p.off)))
}

// zero clears size bytes (a multiple of 8) at p.
func (g *gen) zero(p place, size int) {
	for off := 0; off < size; off += 8 {
		g.e.Emit(emit.StoreImm64(p.base, p.off+int16(off), 0))
	}
}

// storesWord reports whether store writes all of x's slot as one 8-byte
// word: an integer (or bool) value, evaluated into R0 and stored whole.
func (g *gen) storesWord(x spec.Expr) bool {
	if _, ok := x.(*spec.Display); ok {
		return false
	}
	t := g.typeOf(x)
	return !t.IsStack() && t.Kind != spec.KindString && t.Kind != spec.KindBytes && slotSize(t) == 8
}

// store evaluates x into the slot at p, size bytes (slotSize of its type,
// or larger: a table's or a key's slot for the longest string it holds).
func (g *gen) store(x spec.Expr, p place, size int) {
	if d, ok := x.(*spec.Display); ok && d.Port != nil {
		// inet(addr, port): the address's slot, then the port's.
		addr := slotSize(g.typeOf(d.X))
		g.zero(p, size)
		g.store(d.X, p, addr)
		g.store(d.Port, place{p.base, p.off + int16(addr)}, 8)
		return
	}
	if d, ok := x.(*spec.Display); ok && d.Decoder == spec.DecodeUsym {
		// usym(addr): the address, then the process, as a ustack key
		// keeps it; show finds the address in its maps.
		g.store(d.X, p, 8)
		g.storeProcess(place{p.base, p.off + 8})
		return
	}
	t := g.typeOf(x)
	if t.IsStack() {
		mark := g.e.StackMark()
		g.storeStack(x, p)
		g.e.Release(mark)
		return
	}
	if t.Kind != spec.KindString && t.Kind != spec.KindBytes {
		mark := g.e.StackMark()
		g.expr(x)
		g.e.Emit(asm.StoreMem(p.base, p.off, asm.R0, asm.DWord))
		g.e.Release(mark)
		return
	}
	g.zero(p, size)
	g.text(x, p, min(t.Size, size))
}

// text reads string or byte value x into the zeroed place p, at most n
// bytes.
func (g *gen) text(x spec.Expr, p place, n int) {
	mark := g.e.StackMark()
	defer g.e.Release(mark)
	g.e.Origin(x.Range())
	switch x := x.(type) {
	case *spec.Var: // comm
		builtinCodes[x.Name].text(g, p, n)
	case *spec.EntryRef:
		src := stack(g.entryArea + int16(g.entryFields[x.Name]))
		g.copy(p, src, min(n, slotSize(g.typeOf(x))))
	case *spec.Str:
		g.str(x, p, n)
	case *spec.Join:
		g.join(x, p, n)
	case *spec.Buf:
		g.buf(x, p, n)
	case *spec.ArgsField:
		g.fieldText(x, p, n)
	case *spec.KernelPath:
		// An array of kernel data, read in place: a char array as a
		// string, others as bytes; never beyond the array.
		t := g.typeOf(x)
		fn := asm.FnProbeReadKernelStr
		if t.Kind == spec.KindBytes {
			fn = asm.FnProbeReadKernel
		}
		if x.Space == spec.SpaceUser {
			fn = asm.FnProbeReadUserStr
			if t.Kind == spec.KindBytes {
				fn = asm.FnProbeReadUser
			}
		}
		g.kernelAddr(x)
		g.readInto(p, min(n, t.Size), fn)
	case *spec.TableRead:
		g.tableText(x, p, n)
	case *spec.Display: // inet6(addr): the address's bytes
		g.text(x.X, p, n)
	default:
		panic(fmt.Sprintf("compiler: %T is not text", x))
	}
}

// readInto calls a probe_read helper: n bytes into p from the address in R0.
func (g *gen) readInto(p place, n int, fn asm.BuiltinFunc) {
	g.e.Emit(asm.Mov.Reg(asm.R3, asm.R0))
	g.addr(asm.R1, p)
	g.e.Emit(asm.Mov.Imm(asm.R2, int32(n)), fn.Call())
}

// copy copies size bytes (a multiple of 8) from src to dst.
func (g *gen) copy(dst, src place, size int) {
	for off := 0; off < size; off += 8 {
		g.e.Emit(
			asm.LoadMem(asm.R1, src.base, src.off+int16(off), asm.DWord),
			asm.StoreMem(dst.base, dst.off+int16(off), asm.R1, asm.DWord),
		)
	}
}

// space is the memory str() reads from: user memory for user probes and
// syscall tracepoints (their pointer arguments are the process's), kernel
// memory for the rest, unless the spec says.
func (g *gen) space(x *spec.Str) spec.Space {
	if x.Space != spec.SpaceAuto {
		return x.Space
	}
	if _, ok := x.X.(*spec.KernelPath); ok {
		return spec.SpaceKernel
	}
	switch g.p.Addr.Kind {
	case bpf.KindUser:
		return spec.SpaceUser
	case bpf.KindTracepoint:
		for _, ev := range g.out.Tracepoints {
			if len(ev) < 9 || ev[:9] != "syscalls:" {
				return spec.SpaceKernel
			}
		}
		return spec.SpaceUser
	}
	return spec.SpaceKernel
}

// str reads the string x points at, or the char array x is, into p.
func (g *gen) str(x *spec.Str, p place, n int) {
	if g.typeOf(x.X).IsString() {
		// A char array (a tracepoint's char[N] or __data_loc, kernel
		// data): it is read in place, up to the str's size.
		g.text(x.X, p, n)
		return
	}
	g.expr(x.X)
	g.e.Origin(x.Range())
	fn := asm.FnProbeReadKernelStr
	if g.space(x) == spec.SpaceUser {
		fn = asm.FnProbeReadUserStr
	}
	g.readInto(p, n, fn)
}

// join reads up to x.Args strings of a NULL-terminated array of string
// pointers in user memory (argv) into p, one after the other, each ended by
// a NUL: the decoder joins them with spaces. Each string takes what it
// needs, so the place holds as much as fits.
//
// The strings are read into the probe's join area first (a per-CPU array
// value of 2*spec.JoinSize bytes), then copied into p: a string read at the
// variable offset pos, with room n-pos, ends by n, but the verifier tracks
// the offset and the size apart, and only a buffer of 2n bytes holds their
// largest values together.
func (g *gen) join(x *spec.Join, p place, n int) {
	arr, pos, buf, ptr := g.e.Alloc(8), g.e.Alloc(8), g.e.Alloc(8), g.e.Alloc(8)
	g.expr(x.X)
	g.e.Origin(x.Range())
	done, copyOut := g.e.NewLabel("join"), g.e.NewLabel("join_copy")
	g.e.Emit(
		asm.StoreMem(asm.RFP, arr, asm.R0, asm.DWord),
		emit.StoreImm64(asm.RFP, pos, 0),
		asm.StoreImm(asm.RFP, ptr, 0, asm.Word),
		asm.LoadMapPtr(asm.R1, 0).WithReference(refJoin),
		asm.Mov.Reg(asm.R2, asm.RFP), asm.Add.Imm(asm.R2, int32(ptr)),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, done),
		asm.StoreMem(asm.RFP, buf, asm.R0, asm.DWord),
	)
	for i := 0; i < x.Args; i++ {
		// ptr = argv[i], from user memory; a NULL ends the array.
		g.e.Emit(
			emit.StoreImm64(asm.RFP, ptr, 0),
			asm.Mov.Reg(asm.R1, asm.RFP), asm.Add.Imm(asm.R1, int32(ptr)),
			asm.Mov.Imm(asm.R2, 8),
			asm.LoadMem(asm.R3, asm.RFP, arr, asm.DWord), asm.Add.Imm(asm.R3, int32(8*i)),
			asm.FnProbeReadUser.Call(),
			asm.LoadMem(asm.R3, asm.RFP, ptr, asm.DWord),
			asm.JEq.Imm(asm.R3, 0, copyOut),
			// At least two bytes of room (a character and the NUL): pos is
			// then at most n-2 and the room, n-pos, from 2 to n.
			asm.LoadMem(asm.R4, asm.RFP, pos, asm.DWord),
			asm.JGE.Imm(asm.R4, int32(n-1), copyOut),
			asm.Mov.Imm(asm.R2, int32(n)),
			asm.Sub.Reg(asm.R2, asm.R4),
			asm.LoadMem(asm.R1, asm.RFP, buf, asm.DWord),
			asm.Add.Reg(asm.R1, asm.R4),
			asm.FnProbeReadUserStr.Call(),
			asm.JSLE.Imm(asm.R0, 0, copyOut),
			asm.LoadMem(asm.R4, asm.RFP, pos, asm.DWord),
			asm.Add.Reg(asm.R4, asm.R0),
			asm.StoreMem(asm.RFP, pos, asm.R4, asm.DWord),
		)
	}
	// Copy what was read, pos bytes (at most n), into the zeroed place.
	fits := g.e.NewLabel("join_fits")
	g.e.Mark(copyOut)
	g.e.Emit(
		asm.LoadMem(asm.R2, asm.RFP, pos, asm.DWord),
		asm.JLE.Imm(asm.R2, int32(n), fits),
		asm.Mov.Imm(asm.R2, int32(n)),
	)
	g.e.Mark(fits)
	g.addr(asm.R1, p)
	g.e.Emit(
		asm.LoadMem(asm.R3, asm.RFP, buf, asm.DWord),
		asm.FnProbeReadKernel.Call(),
	)
	g.e.Mark(done)
	g.e.Emit(asm.Mov.Imm(asm.R0, 0))
}

// fieldText reads a string or byte-array field of a tracepoint's record:
// char[N] and u8[N] in place, __data_loc after the record (its field holds
// length << 16 | offset).
func (g *gen) fieldText(x *spec.ArgsField, p place, n int) {
	g.perEvent(x.Name, func(f *bpf.TracepointField) {
		if f.Class == bpf.FieldDataLoc {
			g.ctxLoad(f.Offset, 4)
			g.e.Emit(
				asm.Mov.Reg(asm.R1, asm.R0),
				asm.And.Imm(asm.R1, 0xffff),
				asm.Mov.Reg(asm.R0, regCtx),
				asm.Add.Reg(asm.R0, asm.R1),
			)
			g.readInto(p, n, asm.FnProbeReadKernelStr)
			return
		}
		g.e.Emit(asm.Mov.Reg(asm.R0, regCtx), asm.Add.Imm(asm.R0, int32(f.Offset)))
		g.readInto(p, min(n, f.Size), asm.FnProbeReadKernel)
	})
}

// stringEquals compares string x with a literal, the literal's bytes and
// its NUL: x's place is zeroed after its text, so the words compared hold
// zeros after both.
func (g *gen) stringEquals(x spec.Expr, lit string, eq bool) {
	size := slotSize(g.typeOf(x))
	area := g.e.Alloc(size)
	g.store(x, stack(area), size)
	g.e.Origin(x.Range())
	match, miss := int32(1), int32(0)
	if !eq {
		match, miss = 0, 1
	}
	words := make([]byte, (len(lit)+1+7)&^7)
	copy(words, lit)
	done := g.e.NewLabel("streq")
	g.e.Emit(asm.Mov.Imm(asm.R0, miss))
	for off := 0; off < len(words); off += 8 {
		g.e.Emit(
			asm.LoadMem(asm.R1, asm.RFP, area+int16(off), asm.DWord),
			asm.LoadImm(asm.R2, int64(binary.LittleEndian.Uint64(words[off:])), asm.DWord),
			asm.JNE.Reg(asm.R1, asm.R2, done),
		)
	}
	g.e.Emit(asm.Mov.Imm(asm.R0, match))
	g.e.Mark(done)
}

// startsWith tests whether string x begins with the prefix: whole words
// compared, the last one under a mask of the prefix's bytes.
func (g *gen) startsWith(x *spec.StartsWith) {
	size := slotSize(g.typeOf(x.X))
	area := g.e.Alloc(size)
	g.store(x.X, stack(area), size)
	g.e.Origin(x.Range())
	pre := []byte(x.Prefix)
	done := g.e.NewLabel("prefix")
	g.e.Emit(asm.Mov.Imm(asm.R0, 0))
	for off := 0; off < len(pre); off += 8 {
		var w, mask [8]byte
		k := copy(w[:], pre[off:])
		for i := 0; i < k; i++ {
			mask[i] = 0xff
		}
		g.e.Emit(asm.LoadMem(asm.R1, asm.RFP, area+int16(off), asm.DWord))
		if k < 8 {
			g.e.Emit(asm.LoadImm(asm.R3, int64(binary.LittleEndian.Uint64(mask[:])), asm.DWord), asm.And.Reg(asm.R1, asm.R3))
		}
		g.e.Emit(
			asm.LoadImm(asm.R2, int64(binary.LittleEndian.Uint64(w[:])), asm.DWord),
			asm.JNE.Reg(asm.R1, asm.R2, done),
		)
	}
	g.e.Emit(asm.Mov.Imm(asm.R0, 1))
	g.e.Mark(done)
}

// Tables: a key is built on the stack, slot by slot as the table's layout
// says; the map is the table's, which the runtime shares between probes.

// tableKey builds t's key from exprs and returns its stack offset.
func (g *gen) tableKey(l *Table, exprs []spec.Expr) int16 {
	key := g.e.Alloc(l.KeySize)
	for i, k := range exprs {
		g.store(k, stack(key+int16(l.Key[i].Offset)), l.Key[i].Size)
	}
	return key
}

// lookup looks up the key at key in t's map: R0 is the value or NULL.
func (g *gen) lookup(name string, key int16) {
	g.e.Emit(
		asm.LoadMapPtr(asm.R1, 0).WithReference(tableRef(name)),
		asm.Mov.Reg(asm.R2, asm.RFP), asm.Add.Imm(asm.R2, int32(key)),
		asm.FnMapLookupElem.Call(),
	)
}

// tableField finds a field of a table's value.
func tableField(l *Table, name string) KeyField {
	if name == "" {
		name = "value"
	}
	for _, f := range l.Value {
		if f.Name == name {
			return f
		}
	}
	panic("compiler: no table field " + name)
}

// tableValue reads an integer a table holds for a key into R0: 0 when it
// holds nothing.
func (g *gen) tableValue(x *spec.TableRead) {
	l := g.u.layout(x.Table)
	key := g.tableKey(l, x.Key)
	g.e.Origin(x.Range())
	g.lookup(x.Table.Name, key)
	done := g.e.NewLabel("tread")
	g.e.Emit(
		asm.JEq.Imm(asm.R0, 0, done),
		asm.LoadMem(asm.R0, asm.R0, int16(tableField(l, x.Field).Offset), asm.DWord),
	)
	g.e.Mark(done)
}

// tableText copies a string a table holds into p: empty when it holds
// nothing.
func (g *gen) tableText(x *spec.TableRead, p place, n int) {
	l := g.u.layout(x.Table)
	f := tableField(l, x.Field)
	// p is zeroed; the key is built before the value pointer is held.
	key := g.tableKey(l, x.Key)
	g.e.Origin(x.Range())
	g.lookup(x.Table.Name, key)
	done := g.e.NewLabel("ttext")
	g.e.Emit(asm.JEq.Imm(asm.R0, 0, done))
	for off := 0; off < min(n, f.Size); off += 8 {
		g.e.Emit(
			asm.LoadMem(asm.R1, asm.R0, int16(f.Offset+off), asm.DWord),
			asm.StoreMem(p.base, p.off+int16(off), asm.R1, asm.DWord),
		)
	}
	g.e.Mark(done)
	g.e.Emit(asm.Mov.Imm(asm.R0, 0))
}

// has tests whether a table holds a key.
func (g *gen) has(x *spec.Has) {
	l := g.u.layout(x.Table)
	key := g.tableKey(l, x.Key)
	g.e.Origin(x.Range())
	g.lookup(x.Table.Name, key)
	done := g.e.NewLabel("has")
	g.e.Emit(asm.JEq.Imm(asm.R0, 0, done), asm.Mov.Imm(asm.R0, 1))
	g.e.Mark(done)
}

// tableStore stores a value (or an object) for a key. A table that is full
// takes no new key: the store is counted in the table's stats, never lost
// silently.
func (g *gen) tableStore(a *spec.Action) {
	l := g.u.layout(a.Table)
	key := g.tableKey(l, a.Key)
	val := g.e.Alloc(l.ValueSize)
	if a.Value != nil {
		f := tableField(l, "")
		g.store(a.Value, stack(val+int16(f.Offset)), f.Size)
	}
	for _, fl := range a.Fields {
		f := tableField(l, fl.Name)
		g.store(fl.Value, stack(val+int16(f.Offset)), f.Size)
	}
	g.e.Origin(a.DeclRange)
	stored := g.e.NewLabel("stored")
	g.e.Emit(
		asm.LoadMapPtr(asm.R1, 0).WithReference(tableRef(a.Table.Name)),
		asm.Mov.Reg(asm.R2, asm.RFP), asm.Add.Imm(asm.R2, int32(key)),
		asm.Mov.Reg(asm.R3, asm.RFP), asm.Add.Imm(asm.R3, int32(val)),
		asm.Mov.Imm(asm.R4, 0), // BPF_ANY
		asm.FnMapUpdateElem.Call(),
		asm.JEq.Imm(asm.R0, 0, stored),
	)
	g.countIn(tableStatsRef(a.Table.Name), 0)
	g.e.Mark(stored)
	g.e.Emit(asm.Mov.Imm(asm.R0, 0))
}

// tableDelete removes a key from a table.
func (g *gen) tableDelete(a *spec.Action) {
	l := g.u.layout(a.Table)
	key := g.tableKey(l, a.Key)
	g.e.Origin(a.DeclRange)
	g.e.Emit(
		asm.LoadMapPtr(asm.R1, 0).WithReference(tableRef(a.Table.Name)),
		asm.Mov.Reg(asm.R2, asm.RFP), asm.Add.Imm(asm.R2, int32(key)),
		asm.FnMapDeleteElem.Call(),
	)
}

// resolveBuf checks buf(X, LEN): X a pointer, LEN an integer, and under
// the raw-address policy no kernel read at a number from the record.
func (g *gen) resolveBuf(x *spec.Buf) spec.Type {
	pt, lt := g.typeOf(x.X), g.typeOf(x.Len)
	if pt.Kind == 0 || lt.Kind == 0 || !g.numeric(x.X, pt) || !g.numeric(x.Len, lt) {
		return spec.Type{}
	}
	if what, notPtr := g.notPointer(x.X); notPtr {
		return g.typeErrorf(x, x.X.Range(), "buf needs a pointer",
			"%s is %s on the target, not a pointer: there are no bytes to read.", x.X.Text(), what)
	}
	if f, ok := x.X.(*spec.ArgsField); ok && g.u.policy.Denies(spec.RawAddress) && g.bufSpace(x) == spec.SpaceKernel {
		g.u.diags = append(g.u.diags, spec.DenyRawAddress("buf", f, "a number in the event's record"))
		return spec.Type{}
	}
	return x.Type()
}

// bufSpace is the memory buf() reads: str()'s rule.
func (g *gen) bufSpace(x *spec.Buf) spec.Space {
	return g.space(&spec.Str{X: x.X, Space: x.Space})
}

// buf reads buf(X, LEN) into the zeroed place p: the length, clamped to
// what the slot holds (an unsigned compare: a negative length is the
// most), then that many bytes from X. A read that fails leaves zeros.
func (g *gen) buf(x *spec.Buf, p place, n int) {
	room := int32(min(n-8, spec.BufSize))
	ptr := g.e.Alloc(8)
	g.expr(x.X)
	g.e.Emit(asm.StoreMem(asm.RFP, ptr, asm.R0, asm.DWord))
	g.expr(x.Len)
	g.e.Origin(x.Range())
	fits := g.e.NewLabel("buf_fits")
	g.e.Emit(
		asm.JLE.Imm(asm.R0, room, fits),
		asm.Mov.Imm(asm.R0, room),
	)
	g.e.Mark(fits)
	g.e.Emit(
		asm.StoreMem(p.base, p.off, asm.R0, asm.DWord),
		asm.Mov.Reg(asm.R2, asm.R0),
		asm.LoadMem(asm.R3, asm.RFP, ptr, asm.DWord),
	)
	g.addr(asm.R1, place{p.base, p.off + 8})
	fn := asm.FnProbeReadKernel
	if g.bufSpace(x) == spec.SpaceUser {
		fn = asm.FnProbeReadUser
	}
	g.e.Emit(fn.Call())
}
