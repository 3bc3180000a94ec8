package routes

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	goruntime "runtime"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler"
	"golang.org/x/sys/unix"
)

// hitEvent is the tracepoint the tracepoint families are measured on:
// the getppid call of calls enters the system call once, so it fires
// once a call, on a perf event (raw_syscalls:sys_enter) or on the raw
// tracepoint itself (sys_enter), untyped or as tp_btf.
const hitEvent = "raw_syscalls:sys_enter"

// tracepointFamilies are the tracepoint link families the table prices
// (TestMeasuresEveryKernelFamily holds them to the family table's).
var tracepointFamilies = []compiler.Family{compiler.FamilyTracepoint, compiler.FamilyRawTracepoint, compiler.FamilyTPBtf}

// tracepointLoader attaches a trivial program to hitEvent by each
// tracepoint family.
type tracepointLoader map[compiler.Family]*ebpf.Program

func newTracepointLoader(t *testing.T, f *bpf.Facts) (tracepointLoader, []compiler.Family) {
	l := tracepointLoader{}
	var fams []compiler.Family
	for _, fam := range tracepointFamilies {
		fi, _ := fam.Info()
		if !fi.Available(f) {
			continue
		}
		ps := &ebpf.ProgramSpec{Type: fi.Type, AttachType: fi.AttachType, Instructions: trivial, License: "GPL"}
		if fam == compiler.FamilyTPBtf {
			ps.AttachTo = "sys_enter" // btf_trace_sys_enter
		}
		p, err := ebpf.NewProgram(ps)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		l[fam] = p
		fams = append(fams, fam)
	}
	return l, fams
}

func (l tracepointLoader) attach(fam compiler.Family) (link.Link, error) {
	return attachTracepoint(fam, l[fam])
}

func attachTracepoint(fam compiler.Family, p *ebpf.Program) (link.Link, error) {
	switch fam {
	case compiler.FamilyRawTracepoint:
		return link.AttachRawTracepoint(link.RawTracepointOptions{Name: "sys_enter", Program: p})
	case compiler.FamilyTPBtf:
		return link.AttachTracing(link.TracingOptions{Program: p, AttachType: ebpf.AttachTraceRawTp})
	}
	return link.Tracepoint("raw_syscalls", "sys_enter", p, nil)
}

// countHits checks that each family's link on hitEvent fires exactly once
// per getppid call: a program counting the events of this thread whose
// system call number is getppid's (the 8 bytes at ctx+8 are the id in
// all three: the format's first field after the common ones, and the
// second TP_PROTO argument), against n calls made on the thread.
func countHits(t *testing.T, fams []compiler.Family, n int) {
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	tid := unix.Gettid()
	for _, fam := range fams {
		fi, _ := fam.Info()
		m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 1})
		if err != nil {
			t.Fatal(err)
		}
		insns := asm.Instructions{
			asm.Mov.Reg(asm.R6, asm.R1),
			asm.FnGetCurrentPidTgid.Call(),
			asm.LSh.Imm(asm.R0, 32),
			asm.RSh.Imm(asm.R0, 32),
			asm.JNE.Imm(asm.R0, int32(tid), "out"),
			asm.LoadMem(asm.R1, asm.R6, 8, asm.DWord),
			asm.JNE.Imm(asm.R1, int32(unix.SYS_GETPPID), "out"),
			asm.StoreImm(asm.RFP, -4, 0, asm.Word),
			asm.Mov.Reg(asm.R2, asm.RFP),
			asm.Add.Imm(asm.R2, -4),
			asm.LoadMapPtr(asm.R1, m.FD()),
			asm.FnMapLookupElem.Call(),
			asm.JEq.Imm(asm.R0, 0, "out"),
			asm.Mov.Imm(asm.R1, 1),
			asm.StoreXAdd(asm.R0, asm.R1, asm.DWord),
			asm.Mov.Imm(asm.R0, 0).WithSymbol("out"),
			asm.Return(),
		}
		ps := &ebpf.ProgramSpec{Type: fi.Type, AttachType: fi.AttachType, Instructions: insns, License: "GPL"}
		if fam == compiler.FamilyTPBtf {
			ps.AttachTo = "sys_enter"
		}
		p, err := ebpf.NewProgram(ps)
		if err != nil {
			m.Close()
			t.Fatalf("%s: load the counting program: %v", fam, err)
		}
		lk, err := attachTracepoint(fam, p)
		if err != nil {
			p.Close()
			m.Close()
			t.Fatalf("%s on %s: %v", fam, hitEvent, err)
		}
		for range n {
			unix.RawSyscall(unix.SYS_GETPPID, 0, 0, 0)
		}
		lk.Close()
		var got [8]byte
		err = m.Lookup(uint32(0), got[:])
		p.Close()
		m.Close()
		if err != nil {
			t.Fatal(err)
		}
		c := binary.NativeEndian.Uint64(got[:])
		if c != uint64(n) {
			t.Errorf("%s on %s: %d hits counted for %d getppid calls", fam, hitEvent, c, n)
		}
		t.Logf("%-16s %d hits counted for %d getppid calls", fam, c, n)
	}
}

// measureTracepoints adds to kc the tracepoint families f has: per hit,
// the added time of calls with a trivial program on hitEvent, against
// the same calls unprobed, in rounds whose order rotates; to attach, the
// link create + close for the one event, the median of 3.
func measureTracepoints(t *testing.T, f *bpf.Facts, kc *compiler.KernelCost) {
	l, fams := newTracepointLoader(t, f)
	countHits(t, fams, kc.Calls)
	kc.HitEvent = hitEvent
	configs := append([]compiler.Family{""}, fams...)
	deltas := map[compiler.Family][]float64{}
	for r := range kc.Rounds {
		var base float64
		probed := map[compiler.Family]float64{}
		for i := range configs {
			fam := configs[(i+r)%len(configs)]
			if fam == "" {
				base = calls(kc.Calls)
				continue
			}
			lk, err := l.attach(fam)
			if err != nil {
				t.Fatalf("%s on %s: %v", fam, hitEvent, err)
			}
			probed[fam] = calls(kc.Calls)
			lk.Close()
		}
		for fam, ns := range probed {
			deltas[fam] = append(deltas[fam], ns-base)
		}
	}
	for _, fam := range fams {
		var times []float64
		for range 3 {
			start := time.Now()
			lk, err := l.attach(fam)
			if err != nil {
				t.Fatal(err)
			}
			lk.Close()
			times = append(times, float64(time.Since(start).Microseconds())/1000)
		}
		lo, hi := minMax(deltas[fam])
		kc.Families[fam] = compiler.FamilyCost{HitNS: median(deltas[fam]), HitMinNS: lo, HitMaxNS: hi,
			Attach: []compiler.AttachCost{{Functions: 1, MS: median(times), Rounds: len(times)}}}
		t.Logf("%-16s per hit %6.0f ns (%.0f..%.0f) on %s, attach %.1f ms", fam, median(deltas[fam]), lo, hi, hitEvent, median(times))
	}
}

// TestTracepointRouteCost takes the tracepoint part of TestRouteCost
// alone, on a kernel that need not attach to kernel functions: in the VM
// matrix (make routes-table ROUTES_TEST=tracepoints) it prints the
// kernel's tracepoint entries for mktable, which merges them into the
// table keeping the function families' entries; elsewhere, when asked
// (PROBECTL_TEST_ROUTES=1 as root), it logs them.
func TestTracepointRouteCost(t *testing.T) {
	if os.Getenv("PROBECTL_TEST_ROUTES") == "" && !inVM() {
		t.Skip("a measurement: TestRouteCost takes it in the VM matrix (make routes-table); PROBECTL_TEST_ROUTES=1 as root runs it here")
	}
	if os.Geteuid() != 0 {
		t.Fatal("needs root")
	}
	f, err := bpf.Detect(bpf.DetectOptions{Fresh: true})
	if err != nil {
		t.Fatal(err)
	}
	kc := newKernelCost(f)
	calls(kc.Calls) // warm up
	measureTracepoints(t, f, &kc)
	var want int
	for _, fam := range tracepointFamilies {
		if fi, _ := fam.Info(); fi.Available(f) {
			want++
		}
	}
	if len(kc.Families) != want || want == 0 {
		t.Errorf("measured %d tracepoint families on %s, it has %d", len(kc.Families), f.Label(), want)
	}
	if inVM() {
		b, err := json.Marshal(kc)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("\nPROBECTL-ROUTECOST %s\n", b)
	}
}
