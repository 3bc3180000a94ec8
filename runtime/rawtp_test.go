package runtime_test

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/probectl/probectl/compiler"
	"golang.org/x/sys/unix"
)

// rawtpFacts are the live facts, which must have raw tracepoints: every
// kernel probectl runs on (4.17+) has them.
func rawtpFacts(t *testing.T) {
	t.Helper()
	requireRoot(t)
	if f := liveFacts(t); !f.Links.RawTracepoint {
		t.Fatalf("%s has no raw tracepoints, which every kernel since 4.17 has", f.Label())
	}
}

// wantRoute fails unless the probe at addr of out takes route via family.
func wantRoute(t *testing.T, out *compiler.Output, addr string, route compiler.Route, family compiler.Family) {
	t.Helper()
	for _, p := range out.Probes {
		if p.Address.String() != addr {
			continue
		}
		if p.Route != route || compiler.JoinFamilies(p.Attach) != string(family) {
			t.Fatalf("%s: route %s via %s (%s), want %s via %s", addr, p.Route, compiler.JoinFamilies(p.Attach), p.Reason, route, family)
		}
		t.Logf("%s: %s: %s", addr, p.Route, p.Reason)
		return
	}
	t.Fatalf("%s not compiled", addr)
}

// A tracepoint probe that reads no args takes the raw tracepoint and
// counts exactly: n renames of a thread (prctl PR_SET_NAME, the event
// task:task_rename) count n. One that reads a field keeps the perf event,
// and reads the format's field as ever.
func TestRawTracepointExact(t *testing.T) {
	rawtpFacts(t)
	const n = 37
	wk := newWorker(t)
	src := fmt.Sprintf(`probe "tracepoint" "renames" {
  event = "task:task_rename"
  on_entry {
    count "n" { when = tid == %d }
  }
}

probe "tracepoint" "renames_by_pid" {
  event = "task:task_rename"
  on_entry {
    count "n" { by = [args.pid] }
  }
}`, wk.tid)
	out := compile(t, src)
	wantRoute(t, out, "tracepoint.renames", compiler.RouteRawTracepoint, compiler.FamilyRawTracepoint)
	wantRoute(t, out, "tracepoint.renames_by_pid", compiler.RouteTracepoint, compiler.FamilyTracepoint)
	w := namedWorkspace(t, "rawtp")
	s, err := kapply(t, w, out)
	if err != nil {
		t.Fatal(err)
	}
	renames(t, wk, n)
	if got := values(aggregation(t, w, s, "tracepoint.renames", "n")); got[""] != n || len(got) != 1 {
		t.Errorf("raw tracepoint: n = %v, want %d", got, n)
	}
	if got := values(aggregation(t, w, s, "tracepoint.renames_by_pid", "n"))[fmt.Sprint(wk.tid)]; got != n {
		t.Errorf("perf-event tracepoint: n for pid %d = %d, want %d", wk.tid, got, n)
	}
	if _, _, err := w.Destroy(s, nil); err != nil {
		t.Fatal(err)
	}
	leakFree(t, w, nil)
}

// renames renames the worker's thread n times (back to its name each
// time, so the test binary's comm ends as it began).
func renames(t *testing.T, wk *worker, n int) {
	t.Helper()
	done := make(chan error)
	wk.jobs <- func() {
		var name [16]byte
		if err := unix.Prctl(unix.PR_GET_NAME, uintptr(unsafe.Pointer(&name)), 0, 0, 0); err != nil {
			done <- err
			return
		}
		for i := 0; i < n; i++ {
			if err := unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&name)), 0, 0, 0); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A perf-event tracepoint's program does not run when its event fires
// inside another BPF program; a raw tracepoint's does. The other program
// here calls bpf_trace_printk on the worker's getppid calls, which fires
// bpf_trace:bpf_trace_printk from inside it. Run from a raw tracepoint
// (sys_enter), both probes count every call; run from a perf-event
// tracepoint (syscalls:sys_enter_getppid), the perf-event probe counts
// none of them, and the raw one every one. Perf's recursion guard drops
// those events before trace_call_bpf, so the kernel counts no miss (6.18):
// what status says the perf-event probe missed is logged, not held to a
// number; the raw one must have missed none.
func TestRawTracepointRunsUnderAnotherProgram(t *testing.T) {
	rawtpFacts(t)
	const n = 41
	wk := newWorker(t)
	src := fmt.Sprintf(`probe "tracepoint" "printk_raw" {
  event = "bpf_trace:bpf_trace_printk"
  on_entry {
    count "n" { when = tid == %[1]d }
  }
}

probe "tracepoint" "printk_perf" {
  event = "bpf_trace:bpf_trace_printk"
  on_entry {
    count "n" { when = tid == %[1]d && starts_with(args.bpf_string, "rawtp") }
  }
}`, wk.tid)
	out := compile(t, src)
	wantRoute(t, out, "tracepoint.printk_raw", compiler.RouteRawTracepoint, compiler.FamilyRawTracepoint)
	wantRoute(t, out, "tracepoint.printk_perf", compiler.RouteTracepoint, compiler.FamilyTracepoint)
	w := namedWorkspace(t, "rawtp")
	s, err := kapply(t, w, out)
	if err != nil {
		t.Fatal(err)
	}
	counts := func() (raw, perf int64) {
		return values(aggregation(t, w, s, "tracepoint.printk_raw", "n"))[""],
			values(aggregation(t, w, s, "tracepoint.printk_perf", "n"))[""]
	}
	for _, from := range []struct {
		name     string
		perf     bool
		raw, per int64 // the counts after the calls
	}{
		{"a raw tracepoint", false, n, n},
		{"a perf-event tracepoint", true, 2 * n, n},
	} {
		printer := printkOnGetppid(t, wk.tid, from.perf)
		getppids(t, wk, n)
		if err := printer.Close(); err != nil {
			t.Fatal(err)
		}
		raw, perf := counts()
		t.Logf("printk from %s: raw tracepoint %d, perf-event tracepoint %d", from.name, raw, perf)
		if raw != from.raw || perf != from.per {
			t.Errorf("after %d printks from %s: raw tracepoint counts %d, perf-event tracepoint %d; want %d and %d",
				n, from.name, raw, perf, from.raw, from.per)
		}
		for _, st := range w.Status(s) {
			switch addr := st.Address.String(); {
			case addr == "tracepoint.printk_raw" && st.Missed != 0:
				t.Errorf("status says the raw tracepoint missed %d", st.Missed)
			case addr == "tracepoint.printk_perf":
				t.Logf("status says the perf-event tracepoint missed %d", st.Missed)
			}
		}
	}
	if _, _, err := w.Destroy(s, nil); err != nil {
		t.Fatal(err)
	}
	leakFree(t, w, nil)
}

// printkOnGetppid loads and attaches the other BPF program: on thread
// tid's getppid, bpf_trace_printk("rawtp\n"). From a perf-event
// tracepoint (syscalls:sys_enter_getppid), or from the raw tracepoint
// sys_enter, whose second argument is the system call's number.
func printkOnGetppid(t *testing.T, tid int, perf bool) link.Link {
	t.Helper()
	insns := asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.FnGetCurrentPidTgid.Call(),
		asm.Mov.Reg32(asm.R0, asm.R0), // the thread id, the low half
		asm.JNE.Imm(asm.R0, int32(tid), "out"),
	}
	if !perf {
		insns = append(insns,
			asm.LoadMem(asm.R1, asm.R6, 8, asm.DWord), // args[1]: the number
			asm.JNE.Imm(asm.R1, int32(unix.SYS_GETPPID), "out"))
	}
	insns = append(insns,
		asm.LoadImm(asm.R1, 0x0a7074776172, asm.DWord), // "rawtp\n\0"
		asm.StoreMem(asm.RFP, -8, asm.R1, asm.DWord),
		asm.Mov.Reg(asm.R1, asm.RFP), asm.Add.Imm(asm.R1, -8),
		asm.Mov.Imm(asm.R2, 7),
		asm.FnTracePrintk.Call(),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("out"),
		asm.Return(),
	)
	typ := ebpf.RawTracepoint
	if perf {
		typ = ebpf.TracePoint
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "rawtp_printk", Type: typ, License: "GPL", Instructions: insns})
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	var l link.Link
	if perf {
		l, err = link.Tracepoint("syscalls", "sys_enter_getppid", prog, nil)
	} else {
		l, err = link.AttachRawTracepoint(link.RawTracepointOptions{Name: "sys_enter", Program: prog})
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// getppids calls getppid n times on the worker's thread.
func getppids(t *testing.T, wk *worker, n int) {
	t.Helper()
	done := make(chan struct{})
	wk.jobs <- func() {
		for i := 0; i < n; i++ {
			unix.Getppid()
		}
		close(done)
	}
	<-done
}
