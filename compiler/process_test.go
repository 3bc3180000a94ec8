package compiler

import (
	"encoding/binary"
	"fmt"
	"os"
	goruntime "runtime"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/bpf/symbols"
	"github.com/probectl/probectl/spec"
)

// The process a usym key keeps, run in the kernel: compiled against the
// host's BTF, the program records this process's tgid and, above it, its
// start time as /proc/PID/stat's field 22 gives it (marked with
// symbols.ProcessStarted), from a thread that is not the process's first (the
// group leader's time, as /proc shows). Against a profile (no BTF) the
// slot holds the tgid alone.
func TestUsymKeepsStartTime(t *testing.T) {
	facts := hostFacts(t)
	src := "probe \"kernel\" \"k\" {\n  functions = [\"vfs_read\"]\n  on_entry {\n    count \"v\" {\n      by = { f = usym(arg0) }\n    }\n  }\n}\n"
	cfg, diags := spec.Parse(map[string][]byte{"k.hcl": []byte(src)})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	profile, _ := bpf.Profile("linux-7.2-amd64")
	if out, diags := Compile(cfg, profile); diags.HasErrors() {
		t.Fatal(diags)
	} else if listing := fmt.Sprint(out.Probes[0].Programs[0].Instructions); strings.Contains(listing, "FnGetCurrentTask") {
		t.Errorf("against a profile (no BTF) the program reads the task:\n%s", listing)
	}
	out, diags := Compile(cfg, facts)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	p := out.Probes[0]
	cs, err := p.CollectionSpec(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var key string
	var prog *ebpf.ProgramSpec
	for k, ps := range cs.Programs {
		key, prog = k, ps
	}
	prog.Type, prog.AttachType = ebpf.RawTracepoint, ebpf.AttachNone
	regs, _ := bpf.RegsFor(facts.Arch)
	for i := range prog.Instructions {
		if ins := &prog.Instructions[i]; ins.OpCode.Class() == asm.LdXClass && ins.Src == regCtx && ins.Offset == regs.Args[0] {
			ins.Offset = 0 // arg0: the context's first u64
		}
	}
	coll, err := ebpf.NewCollection(cs)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	defer coll.Close()
	const addr = 0x401234
	done := make(chan error)
	go func() {
		// A thread of its own: not the group leader, most likely.
		goruntime.LockOSThread()
		_, err := coll.Programs[key].Run(&ebpf.RunOptions{Context: []uint64{addr, 0, 0, 0, 0, 0}})
		done <- err
	}()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	n := 0
	err = aggEach(coll.Maps[p.Aggregations[0].MapRef], func(k []byte, _ [][]byte) {
		n++
		if len(k) < 16 {
			t.Fatalf("key %x: want 16 bytes at least", k)
		}
		slot := binary.LittleEndian.Uint64(k[8:16])
		start := uint64(procStat(t, "self", 22))
		want := uint64(os.Getpid()) | uint64(symbols.ProcessStarted|uint32(start)&(symbols.ProcessStarted-1))<<32
		if got := binary.LittleEndian.Uint64(k); got != addr || slot != want {
			t.Errorf("key: address %#x process %#x, want %#x and %#x (tgid %d, start %d ticks)", got, slot, uint64(addr), want, os.Getpid(), start)
		}
		if got := symbols.ProcessOf(slot); got.PID != os.Getpid() {
			t.Errorf("ProcessOf(%#x) = %+v", slot, got)
		}
		if _, ok := symbols.ProcessOf(slot).Running(); !ok {
			t.Errorf("this process, as recorded, is not running")
		}
	})
	if err != nil || n != 1 {
		t.Errorf("%d keys (%v), want 1", n, err)
	}
}
