package sys

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
)

// ReadPinnedObject reads the ids cilium/ebpf reads, for a map and a link.
func TestReadPinnedObject(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("pinning needs root")
	}
	dir := filepath.Join("/sys/fs/bpf", fmt.Sprintf("probectl-objinfo-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Skipf("no bpffs: %v", err)
	}
	defer os.RemoveAll(dir)
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.Pin(filepath.Join(dir, "map")); err != nil {
		t.Fatal(err)
	}
	mi, err := m.Info()
	if err != nil {
		t.Fatal(err)
	}
	wantID, _ := mi.ID()
	got, err := ReadPinnedObject(filepath.Join(dir, "map"))
	if err != nil || ebpf.MapID(got.ID) != wantID || got.Type != uint32(ebpf.Array) {
		t.Errorf("map: %+v %v, want id %d type %d", got, err, wantID, ebpf.Array)
	}

	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.TracePoint, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}})
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	l, err := link.Tracepoint("syscalls", "sys_enter_getppid", prog, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Pin(filepath.Join(dir, "link")); err != nil {
		t.Skipf("this kernel cannot pin a tracepoint link: %v", err)
	}
	li, err := l.Info()
	if err != nil {
		t.Fatal(err)
	}
	got, err = ReadPinnedObject(filepath.Join(dir, "link"))
	if err != nil || link.ID(got.ID) != li.ID || ebpf.ProgramID(got.ProgramID) != li.Program || got.Type != uint32(li.Type) {
		t.Errorf("link: %+v %v, want id %d program %d type %d", got, err, li.ID, li.Program, li.Type)
	}
	if _, err := ReadPinnedObject(filepath.Join(dir, "nothing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing pin: %v, want ENOENT", err)
	}
}

// progInfo mirrors struct bpf_prog_info as cilium/ebpf's generated types
// lay it out.
func TestProgInfoLayout(t *testing.T) {
	var i progInfo
	if off := unsafe.Offsetof(i.RecMisses); off != 208 {
		t.Errorf("recursion_misses at %d, the kernel has it at 208", off)
	}
}

// ReadPinnedProgram and SumPinnedCounters read what cilium/ebpf reads: a
// program's id and recursion misses, and per-CPU counters summed.
func TestReadPinnedProgramAndCounters(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("pinning needs root")
	}
	dir := filepath.Join("/sys/fs/bpf", fmt.Sprintf("probectl-objinfo2-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Skipf("no bpffs: %v", err)
	}
	defer os.RemoveAll(dir)
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.TracePoint, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}})
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	if err := prog.Pin(filepath.Join(dir, "prog")); err != nil {
		t.Fatal(err)
	}
	info, err := prog.Info()
	if err != nil {
		t.Fatal(err)
	}
	wantID, _ := info.ID()
	stats, err := prog.Stats()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadPinnedProgram(filepath.Join(dir, "prog"))
	if err != nil || ebpf.ProgramID(got.ID) != wantID || got.RecursionMisses != stats.RecursionMisses {
		t.Errorf("program: %+v %v, want id %d, %d misses", got, err, wantID, stats.RecursionMisses)
	}

	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		t.Fatal(err)
	}
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	want := make([]uint64, 4)
	for k := range want {
		per := make([]uint64, cpus)
		for c := range per {
			per[c] = uint64(1000*k + c + 1)
			want[k] += per[c]
		}
		if err := m.Put(uint32(k), per); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Pin(filepath.Join(dir, "counters")); err != nil {
		t.Fatal(err)
	}
	mi, _ := m.Info()
	mid, _ := mi.ID()
	id, sums, err := SumPinnedCounters(filepath.Join(dir, "counters"), 3)
	if err != nil || ebpf.MapID(id) != mid || fmt.Sprint(sums) != fmt.Sprint(want[:3]) {
		t.Errorf("counters: id %d %v %v, want id %d %v", id, sums, err, mid, want[:3])
	}
	// All of them, in the one batch this kernel (5.6+) reads them in.
	if _, sums, err := SumPinnedCounters(filepath.Join(dir, "counters"), 4); err != nil || fmt.Sprint(sums) != fmt.Sprint(want) {
		t.Errorf("all counters: %v %v, want %v", sums, err, want)
	}
	batch := make([]uint64, 4)
	if !batchSumCounters(m.FD(), cpus, batch) || fmt.Sprint(batch) != fmt.Sprint(want) {
		t.Errorf("counters in one batch: %v, want %v", batch, want)
	}
	if _, _, err := SumPinnedCounters(filepath.Join(dir, "counters"), 5); err == nil {
		t.Error("5 counters read from an array of 4")
	}
	if _, _, err := SumPinnedCounters(filepath.Join(dir, "prog"), 1); err == nil {
		t.Error("a program read as counters")
	}
}

// ObjectID reads the ids cilium/ebpf's Info reads, for a map, a program
// and a link, and fails on an fd that is no BPF object.
func TestObjectID(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("creating maps needs root")
	}
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Hash, KeySize: 4, ValueSize: 8, MaxEntries: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	mi, err := m.Info()
	if err != nil {
		t.Fatal(err)
	}
	wantMap, _ := mi.ID()
	if got, err := ObjectID(m.FD()); err != nil || ebpf.MapID(got) != wantMap {
		t.Errorf("map: %d %v, want %d", got, err, wantMap)
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.TracePoint, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}})
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	pi, err := prog.Info()
	if err != nil {
		t.Fatal(err)
	}
	wantProg, _ := pi.ID()
	if got, err := ObjectID(prog.FD()); err != nil || ebpf.ProgramID(got) != wantProg {
		t.Errorf("program: %d %v, want %d", got, err, wantProg)
	}
	l, err := link.Tracepoint("syscalls", "sys_enter_getppid", prog, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	li, err := l.Info()
	if err != nil {
		t.Fatal(err)
	}
	fl, ok := l.(interface{ FD() int })
	if !ok {
		t.Fatalf("%T has no FD", l)
	}
	if got, err := ObjectID(fl.FD()); err != nil || link.ID(got) != li.ID {
		t.Errorf("link: %d %v, want %d", got, err, li.ID)
	}
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got, err := ObjectID(int(f.Fd())); err == nil {
		t.Errorf("/dev/null: id %d, want an error", got)
	}
}
