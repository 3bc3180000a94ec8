package bpf

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

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
