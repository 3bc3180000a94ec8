package bpf

import (
	"debug/elf"
	"os"
	"strings"
	"testing"
)

func TestParseKallsyms(t *testing.T) {
	k, err := parseKallsyms(strings.NewReader(`ffffffff81000000 T _stext
ffffffff81000100 T do_one
ffffffff81000100 D some_data
ffffffff81000200 t do_two
ffffffffc0201000 t ext4_thing	[ext4]
0000000000000000 T hidden
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		addr uint64
		want string
	}{
		{0xffffffff81000104, "do_one+0x4"},
		{0xffffffff81000200, "do_two"},
		{0xffffffffc0201010, "ext4_thing+0x10 [ext4]"},
		{0xffffffff80000000, "0xffffffff80000000"},
	} {
		if got := k.Frame(c.addr).String(); got != c.want {
			t.Errorf("%#x: %q, want %q", c.addr, got, c.want)
		}
	}
	var none *KernelSymbols
	if got := none.Frame(0x10).String(); got != "0x10" {
		t.Errorf("no symbols: %q", got)
	}
}

func TestParseMaps(t *testing.T) {
	m := parseMaps(`55d0c0a00000-55d0c0a20000 r--p 00000000 fe:01 123 /usr/bin/true
55d0c0a20000-55d0c0a40000 r-xp 00020000 fe:01 123 /usr/bin/true
7f0000000000-7f0000001000 r-xp 00000000 00:00 0 [vdso]
7f0000100000-7f0000200000 r-xp 00010000 fe:01 9 /tmp/a b (deleted)
7f0000300000-7f0000400000 r-xp 00001000 fe:01 10 /opt/with space/lib.so
7f0000500000-7f0000600000 r-xp 00001000 fe:01 11                         /opt/two  spaces/lib.so
`)
	if len(m) != 3 || m[2].path != "/opt/two  spaces/lib.so" || m[0].path != "/usr/bin/true" || m[0].start != 0x55d0c0a20000 || m[0].off != 0x20000 || m[1].path != "/opt/with space/lib.so" {
		t.Errorf("%+v", m)
	}
}

// A function of libc, found by libc's build id and the file offset of its
// code, as the kernel records a user frame.
func TestFrameByBuildID(t *testing.T) {
	var lib string
	for _, p := range []string{"/lib/x86_64-linux-gnu/libc.so.6", "/lib/aarch64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6"} {
		if _, err := os.Stat(p); err == nil {
			lib = p
			break
		}
	}
	if lib == "" {
		t.Skip("no libc.so.6 in the usual places")
	}
	ef, err := elf.Open(lib)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	id := elfBuildID(ef)
	if id == "" || FileBuildID(lib) != id {
		t.Fatalf("%s: build id %q", lib, id)
	}
	syms, err := ef.DynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}
	var addr uint64
	names := map[uint64][]string{}
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Value != 0 {
			names[s.Value] = append(names[s.Value], s.Name)
			if s.Name == "getppid" {
				addr = s.Value
			}
		}
	}
	if addr == 0 {
		t.Fatal("libc has no getppid")
	}
	var off uint64
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD && addr >= p.Vaddr && addr < p.Vaddr+p.Filesz {
			off = addr - p.Vaddr + p.Off
		}
	}
	u := NewUserSymbols("", []string{"/nonexistent"})
	f := u.FrameByBuildID(id, off+2)
	found := false
	for _, n := range names[addr] {
		found = found || n == f.Symbol
	}
	if !found || f.Offset != 2 || f.Module != lib && !strings.HasSuffix(f.Module, "libc.so.6") {
		t.Errorf("frame %+v, want one of %v +2 in %s", f, names[addr], lib)
	}
	if f := u.FrameByBuildID(strings.Repeat("0", 40), 0x10); f.Symbol != "" || !strings.HasPrefix(f.Module, "build-id ") {
		t.Errorf("an unknown build id: %+v", f)
	}
}
