package bpf

import (
	"strings"
	"testing"
)

// TestParseUSDTArgs reads each operand form sys/sdt.h writes, as found in
// real binaries (gcc -O0 and -O2 on x86-64; arm64's from Debian's arm64
// libraries and bpftrace's and libbpf's tests).
func TestParseUSDTArgs(t *testing.T) {
	for _, c := range []struct {
		arch Arch
		in   string
		want []USDTArg
	}{
		{ArchX86_64, "-4@%edi", []USDTArg{{Text: "-4@%edi", Size: 4, Signed: true, Kind: USDTReg, Reg: 112, RegName: "%edi"}}},
		{ArchX86_64, "8@%rax -2@%cx 1@%sil 1@%dl 4@%r8d", []USDTArg{
			{Text: "8@%rax", Size: 8, Kind: USDTReg, Reg: 80, RegName: "%rax"},
			{Text: "-2@%cx", Size: 2, Signed: true, Kind: USDTReg, Reg: 88, RegName: "%cx"},
			{Text: "1@%sil", Size: 1, Kind: USDTReg, Reg: 104, RegName: "%sil"},
			{Text: "1@%dl", Size: 1, Kind: USDTReg, Reg: 96, RegName: "%dl"},
			{Text: "4@%r8d", Size: 4, Kind: USDTReg, Reg: 72, RegName: "%r8d"},
		}},
		{ArchX86_64, "8@-8(%rbp)", []USDTArg{{Text: "8@-8(%rbp)", Size: 8, Kind: USDTMem, Value: -8, Reg: 32, RegName: "%rbp", HasBase: true}}},
		{ArchX86_64, "-4@112(%rsp)", []USDTArg{{Text: "-4@112(%rsp)", Size: 4, Signed: true, Kind: USDTMem, Value: 112, Reg: 152, RegName: "%rsp", HasBase: true}}},
		{ArchX86_64, "-8@(%rax)", []USDTArg{{Text: "-8@(%rax)", Size: 8, Signed: true, Kind: USDTMem, Reg: 80, RegName: "%rax", HasBase: true}}},
		{ArchX86_64, "4@$5 -4@$-5 8@$0x10", []USDTArg{
			{Text: "4@$5", Size: 4, Kind: USDTConst, Value: 5},
			{Text: "-4@$-5", Size: 4, Signed: true, Kind: USDTConst, Value: -5},
			{Text: "8@$0x10", Size: 8, Kind: USDTConst, Value: 16},
		}},
		{ArchX86_64, "8@8(%rdx,%rax,8)", []USDTArg{{Text: "8@8(%rdx,%rax,8)", Size: 8, Kind: USDTMem, Value: 8,
			Reg: 96, RegName: "%rdx", HasBase: true, Index: 80, IndexName: "%rax", Scale: 8}}},
		{ArchX86_64, "4@(,%r12,4)", []USDTArg{{Text: "4@(,%r12,4)", Size: 4, Kind: USDTMem, Index: 24, IndexName: "%r12", Scale: 4}}},
		{ArchX86_64, "8@(%rdi,%rsi)", []USDTArg{{Text: "8@(%rdi,%rsi)", Size: 8, Kind: USDTMem, Reg: 112, RegName: "%rdi", HasBase: true, Index: 104, IndexName: "%rsi", Scale: 1}}},
		{ArchX86_64, "", nil},
		// arm64's, as aarch64-linux-gnu-gcc 12 writes testdata/usdtforms.c's
		// (-O0: every argument on the stack; -O2: index, base, constants).
		{ArchArm64, "-1@[sp, 15] 2@[sp, 12] -4@[sp, 8] 8@[sp]", []USDTArg{
			{Text: "-1@[sp, 15]", Size: 1, Signed: true, Kind: USDTMem, Value: 15, Reg: 248, RegName: "sp", HasBase: true},
			{Text: "2@[sp, 12]", Size: 2, Kind: USDTMem, Value: 12, Reg: 248, RegName: "sp", HasBase: true},
			{Text: "-4@[sp, 8]", Size: 4, Signed: true, Kind: USDTMem, Value: 8, Reg: 248, RegName: "sp", HasBase: true},
			{Text: "8@[sp]", Size: 8, Kind: USDTMem, Reg: 248, RegName: "sp", HasBase: true},
		}},
		{ArchArm64, "-8@[x1, 8] -8@[x0, 16] -8@[x0] -4@5 -8@-7 -1@x0 2@x1", []USDTArg{
			{Text: "-8@[x1, 8]", Size: 8, Signed: true, Kind: USDTMem, Value: 8, Reg: 8, RegName: "x1", HasBase: true},
			{Text: "-8@[x0, 16]", Size: 8, Signed: true, Kind: USDTMem, Value: 16, Reg: 0, RegName: "x0", HasBase: true},
			{Text: "-8@[x0]", Size: 8, Signed: true, Kind: USDTMem, Reg: 0, RegName: "x0", HasBase: true},
			{Text: "-4@5", Size: 4, Signed: true, Kind: USDTConst, Value: 5},
			{Text: "-8@-7", Size: 8, Signed: true, Kind: USDTConst, Value: -7},
			{Text: "-1@x0", Size: 1, Signed: true, Kind: USDTReg, Reg: 0, RegName: "x0"},
			{Text: "2@x1", Size: 2, Kind: USDTReg, Reg: 8, RegName: "x1"},
		}},
		// x86-64's base, index and scale, as gcc -O2 writes x->v[i].
		{ArchX86_64, "-8@8(%rdi,%rsi,8) -8@16(%rdi) -8@$-7", []USDTArg{
			{Text: "-8@8(%rdi,%rsi,8)", Size: 8, Signed: true, Kind: USDTMem, Value: 8, Reg: 112, RegName: "%rdi", HasBase: true, Index: 104, IndexName: "%rsi", Scale: 8},
			{Text: "-8@16(%rdi)", Size: 8, Signed: true, Kind: USDTMem, Value: 16, Reg: 112, RegName: "%rdi", HasBase: true},
			{Text: "-8@$-7", Size: 8, Signed: true, Kind: USDTConst, Value: -7},
		}},
		{ArchArm64, "8@x0 4@w1 -8@[sp, 16] 8@[x1] 4@5 8@[x1, x2] -4@[x29, -28] 8@x30", []USDTArg{
			{Text: "8@x0", Size: 8, Kind: USDTReg, Reg: 0, RegName: "x0"},
			{Text: "4@w1", Size: 4, Kind: USDTReg, Reg: 8, RegName: "w1"},
			{Text: "-8@[sp, 16]", Size: 8, Signed: true, Kind: USDTMem, Value: 16, Reg: 248, RegName: "sp", HasBase: true},
			{Text: "8@[x1]", Size: 8, Kind: USDTMem, Reg: 8, RegName: "x1", HasBase: true},
			{Text: "4@5", Size: 4, Kind: USDTConst, Value: 5},
			{Text: "8@[x1, x2]", Size: 8, Kind: USDTMem, Reg: 8, RegName: "x1", HasBase: true, Index: 16, IndexName: "x2", Scale: 1},
			{Text: "-4@[x29, -28]", Size: 4, Signed: true, Kind: USDTMem, Value: -28, Reg: 29 * 8, RegName: "x29", HasBase: true},
			{Text: "8@x30", Size: 8, Kind: USDTReg, Reg: 240, RegName: "x30"},
		}},
	} {
		got, err := ParseUSDTArgs(c.arch, c.in)
		if err != nil {
			t.Errorf("%s %q: %v", c.arch, c.in, err)
			continue
		}
		if len(got) != len(c.want) {
			t.Errorf("%s %q: %d arguments, want %d: %+v", c.arch, c.in, len(got), len(c.want), got)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%s %q argument %d:\n got %+v\nwant %+v", c.arch, c.in, i, got[i], c.want[i])
			}
		}
	}
}

// TestParseUSDTArgsRefused: what probes cannot read is an error saying
// why, never a wrong value.
func TestParseUSDTArgsRefused(t *testing.T) {
	for _, c := range []struct {
		arch     Arch
		in, want string
	}{
		{ArchX86_64, "8@foo(%rip)", "argument 0 (8@foo(%rip)): a rip-relative operand (a global or static variable)"},
		{ArchX86_64, "4@%edi 8@16(%rip)", "argument 1 (8@16(%rip)): a rip-relative"},
		{ArchX86_64, "1@%ah", "%ah is a high byte register"},
		{ArchX86_64, "3@%eax", "size 3 is not 1, 2, 4 or 8"},
		{ArchX86_64, "%eax", "no SIZE@"},
		{ArchX86_64, "x@%eax", `size "x" is not a number`},
		{ArchX86_64, "4@%xmm0", "%xmm0 is not an x86-64 register"},
		{ArchX86_64, "4@8(%rax,%rbx,3)", `scale "3" is not 1, 2, 4 or 8`},
		{ArchX86_64, "8@0x601040", "0x601040 is an absolute address"},
		{ArchX86_64, "8@(%rax", "not a register, constant or memory operand"},
		{ArchX86_64, "8@$x", "constant"},
		{ArchX86_64, "8@(%a,%b,1,2)", "more than base, index and scale"},
		{ArchArm64, "8@x31", `"x31" is not an arm64 register`},
		{ArchArm64, "8@[sp, 16", "no closing ]"},
		{ArchArm64, "8@[x1, foo]", `offset "foo" is neither a number nor a register`},
		{ArchArm64, "8@%rax", "not an arm64 register"},
		{"riscv64", "8@a0", `USDT arguments of arch "riscv64" are not known`},
	} {
		_, err := ParseUSDTArgs(c.arch, c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %q: error %v, want one with %q", c.arch, c.in, err, c.want)
		}
	}
}

func FuzzParseUSDTArgs(f *testing.F) {
	for _, s := range []string{"-4@%edi 8@-8(%rbp)", "8@8(%rdx,%rax,8) 4@$5", "-8@[sp, 16] 4@w1 4@5", "8@[x1, x2]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, arch := range []Arch{ArchX86_64, ArchArm64} {
			args, err := ParseUSDTArgs(arch, s)
			for _, a := range args {
				if err == nil && (a.Size != 1 && a.Size != 2 && a.Size != 4 && a.Size != 8 || a.Reg < 0 || a.Reg > 248 || a.Index < 0 || a.Index > 248) {
					t.Fatalf("%q: %+v", s, a)
				}
			}
		}
	})
}
