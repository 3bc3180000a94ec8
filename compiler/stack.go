package compiler

import (
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/bpf/symbols"
	"github.com/probectl/probectl/compiler/internal/emit"
	"github.com/probectl/probectl/spec"
)

// Call stacks and profile probes.
//
// A kstack or ustack value is an id in a stack trace map of the probe
// (BPF_MAP_TYPE_STACK_TRACE), one map per kind and depth: the kernel
// hashes the frames and keeps each distinct stack once. A key or record
// holds the id (negative: the errno of bpf_get_stackid, no stack); a user
// stack also holds the process (storeProcess). User stacks are kept as build ids and
// file offsets (BPF_F_STACK_BUILD_ID), so show symbolizes them after the
// process has exited; a frame whose file the kernel could not identify
// keeps its address, symbolized through the process's maps while it runs.

// Stack map limits. Every element is preallocated: a map holds as many
// stacks as fit in stackMapBytes, between 1024 and 16384.
const (
	stackMapBytes = 8 << 20
	flagBuildID   = 1 << 5
	flagUserStack = 1 << 8
)

// stackMapRef names the stack map of a kind and depth.
func stackMapRef(t spec.Type) string {
	if t.Kind == spec.KindUStack {
		return fmt.Sprintf("ustack_%d", t.Size)
	}
	return fmt.Sprintf("kstack_%d", t.Size)
}

// stackMaps adds a stack trace map for every kind and depth of stack the
// probe takes.
func (g *gen) stackMaps() {
	seen := map[string]bool{}
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
			value := t.Size * StackFrameSize(s.User)
			n := min(max(stackMapBytes/value, 1024), 16384)
			m := &Map{Ref: ref, Name: mapName("probectl." + ref[:1] + "stk"), Type: ebpf.StackTrace, KeySize: 4,
				ValueSize: uint32(value), MaxEntries: uint32(n)}
			if s.User {
				m.Flags = flagBuildID
				m.Purpose = fmt.Sprintf("user stacks, %d frames deep at most, as build ids and file offsets", t.Size)
			} else {
				m.Purpose = fmt.Sprintf("kernel stacks, %d frames deep at most", t.Size)
			}
			g.out.Maps = append(g.out.Maps, m)
		})
	}
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

// chooseProfileRoute decides what a profile probe samples: the event it
// names, or for "auto" the CPU's cycle counter where the machine has one
// that samples (samples then count work done, not time), else the
// cpu-clock timer (every kernel and VM has it). A hardware event other
// than cycles is planned on any target: the target's facts say only
// whether cycles sample, so the plan says it needs a PMU, and where the
// machine has none for it the kernel refuses it at apply.
func chooseProfileRoute(p *spec.Probe, f *bpf.Facts) (decision, *bpf.Sampler, error) {
	s := &bpf.Sampler{Event: p.PerfEvent, Frequency: p.Frequency, PeriodNS: p.PeriodNS, Period: p.Period}
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
	return decision{route: RouteProfile, families: []Family{FamilyPerfEvent},
		reason: fmt.Sprintf("perf_event: %s %s on every CPU (%s)", s.Event, s.Rate(), why)}, s, nil
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
