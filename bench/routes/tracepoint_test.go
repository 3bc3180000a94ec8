package routes

import (
	"os"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler"
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
	switch fam {
	case compiler.FamilyRawTracepoint:
		return link.AttachRawTracepoint(link.RawTracepointOptions{Name: "sys_enter", Program: l[fam]})
	case compiler.FamilyTPBtf:
		return link.AttachTracing(link.TracingOptions{Program: l[fam], AttachType: ebpf.AttachTraceRawTp})
	}
	return link.Tracepoint("raw_syscalls", "sys_enter", l[fam], nil)
}

// measureTracepoints adds to kc the tracepoint families f has: per hit,
// the added time of calls with a trivial program on hitEvent, against
// the same calls unprobed, in rounds whose order rotates; to attach, the
// link create + close for the one event, the median of 3.
func measureTracepoints(t *testing.T, f *bpf.Facts, kc *compiler.KernelCost) {
	l, fams := newTracepointLoader(t, f)
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

// TestTracepointRouteCost runs the tracepoint part of TestRouteCost alone,
// on a kernel that need not attach to kernel functions, when asked
// (PROBECTL_TEST_ROUTES=1 as root): its figures are logged, not written.
func TestTracepointRouteCost(t *testing.T) {
	if os.Getenv("PROBECTL_TEST_ROUTES") == "" || inVM() {
		t.Skip("a measurement: TestRouteCost takes it in the VM matrix (make routes-table); PROBECTL_TEST_ROUTES=1 as root runs it here")
	}
	if os.Geteuid() != 0 {
		t.Fatal("needs root")
	}
	f, err := bpf.Detect(bpf.DetectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kc := compiler.KernelCost{Calls: envInt("PROBECTL_TEST_ROUTES_CALLS", 20000), Rounds: envInt("PROBECTL_TEST_ROUTES_ROUNDS", 11),
		Families: map[compiler.Family]compiler.FamilyCost{}}
	calls(kc.Calls) // warm up
	measureTracepoints(t, f, &kc)
	if len(kc.Families) != len(tracepointFamilies) {
		t.Errorf("measured %d tracepoint families on %s, want all %d", len(kc.Families), f.Label(), len(tracepointFamilies))
	}
}
