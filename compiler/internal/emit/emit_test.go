package emit

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

func TestEmitterLabels(t *testing.T) {
	var e Emitter
	e.Emit(asm.Mov.Imm(asm.R0, 0), asm.JEq.Imm(asm.R0, 0, "b"))
	e.Mark("a")
	e.Mark("b") // same instruction as a
	e.Emit(asm.Return())
	insns, err := e.Finish()
	if err != nil {
		t.Fatal(err)
	}
	if insns[1].Reference() != "a" {
		t.Errorf("jump to b should resolve to a, got %q", insns[1].Reference())
	}
	if err := insns.Marshal(discard{}, binary.LittleEndian); err != nil {
		t.Fatalf("labels do not encode: %v", err)
	}
}

// The construct that takes the stack past 512 bytes is the one blamed.
func TestEmitterStack(t *testing.T) {
	var e Emitter
	e.At("small", "small")
	e.Alloc(256)
	e.Emit(asm.Mov.Imm(asm.R0, 0))
	e.Origin("big")
	e.Alloc(300)
	e.Emit(asm.Return())
	_, err := e.Finish()
	var se *StackError
	if !errors.As(err, &se) || se.Used != 560 || se.Origin != "big" {
		t.Fatalf("err = %v (%+v), want 560 bytes blamed on big", err, se)
	}
}

func TestOriginAt(t *testing.T) {
	var e Emitter
	e.Emit(asm.Mov.Imm(asm.R0, 0))
	e.Origin("x")
	e.Emit(asm.Mov.Imm(asm.R0, 1), asm.Mov.Imm(asm.R0, 2))
	e.At("y", "y")
	e.Emit(asm.Return())
	insns, err := e.Finish()
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []any{nil, "x", "x", "y"} {
		if got := OriginAt(insns, i); got != want {
			t.Errorf("origin of %d = %v, want %v", i, got, want)
		}
	}
}

const padding = 40000 // instructions between a jump and its label: beyond int16

// farJump is "r1 = 5; if r1 != 5 goto pad; if r1 <op> k goto far; pad:
// r0 += 1 (40000 times); exit; far: r0 = 1000000; exit". It returns 1000000
// when the jump is taken, 40000 when not. (The first jump keeps the
// padding reachable after an unconditional jump, as the verifier wants.)
func farJump(jump asm.Instruction, longJumps bool) (asm.Instructions, error) {
	e := Emitter{LongJumps: longJumps}
	e.Emit(asm.Mov.Imm(asm.R0, 0), asm.Mov.Imm(asm.R1, 5), asm.JNE.Imm(asm.R1, 5, "pad"))
	e.Origin("the jump")
	e.Emit(jump)
	e.Mark("pad")
	for range padding {
		e.Emit(asm.Add.Imm(asm.R0, 1))
	}
	e.Emit(asm.Return())
	e.Mark("far")
	e.Emit(asm.Mov.Imm(asm.R0, 1000000), asm.Return())
	return e.Finish()
}

var farJumps = []struct {
	jump  asm.Instruction
	taken bool
}{
	{asm.Ja.Label("far"), true},
	{asm.JEq.Imm(asm.R1, 5, "far"), true},
	{asm.JEq.Imm(asm.R1, 6, "far"), false},
	{asm.JNE.Imm(asm.R1, 5, "far"), false},
	{asm.JGT.Imm(asm.R1, 4, "far"), true},
	{asm.JGE.Imm(asm.R1, 6, "far"), false},
	{asm.JLT.Imm(asm.R1, 6, "far"), true},
	{asm.JLE.Imm(asm.R1, 4, "far"), false},
	{asm.JSGT.Imm(asm.R1, -1, "far"), true},
	{asm.JSGE.Imm(asm.R1, 5, "far"), true},
	{asm.JSLT.Imm(asm.R1, 5, "far"), false},
	{asm.JSLE.Imm(asm.R1, 5, "far"), true},
	{asm.JSet.Imm(asm.R1, 4, "far"), true}, // no inverse
	{asm.JSet.Imm(asm.R1, 2, "far"), false},
	{asm.JEq.Imm32(asm.R1, 5, "far"), true}, // jmp32 class
	{asm.JEq.Reg(asm.R1, asm.R1, "far"), true},
}

// Without gotol, a jump beyond int16 is an error naming its origin; with
// it, every jump lands where it should (the kernel runs each program when
// the test runs as root).
func TestLongJumps(t *testing.T) {
	for _, tt := range farJumps {
		_, err := farJump(tt.jump, false)
		var je *JumpError
		if !errors.As(err, &je) || je.Origin != "the jump" || je.Distance != padding+1 {
			t.Errorf("%v without gotol: err = %v (%+v)", tt.jump, err, je)
		}
		insns, err := farJump(tt.jump, true)
		if err != nil {
			t.Fatalf("%v: %v", tt.jump, err)
		}
		if err := insns.Marshal(discard{}, binary.LittleEndian); err != nil {
			t.Fatalf("%v: %v", tt.jump, err)
		}
		gotols := 0
		for _, ins := range insns {
			if ins.OpCode == gotol {
				gotols++
			}
			if ins.OpCode.Class().IsJump() && ins.OpCode != gotol && ins.Reference() == "far" {
				t.Errorf("%v: a short jump to far is left: %v", tt.jump, ins)
			}
		}
		if gotols != 1 {
			t.Errorf("%v: %d gotol, want 1:\n%v", tt.jump, gotols, insns[:5])
		}
		if os.Geteuid() != 0 {
			continue
		}
		want := uint32(padding)
		if tt.taken {
			want = 1000000
		}
		if got := run(t, insns); got != want {
			t.Errorf("%v: returned %d, want %d", tt.jump, got, want)
		}
	}
	if os.Geteuid() != 0 {
		t.Log("not root: the programs were checked, not run")
	}
}

// Relaxation iterates: rewriting one jump moves another's label across
// the limit. A spans B and lands 32767 instructions on, in reach until B
// becomes two instructions.
func TestLongJumpsCascade(t *testing.T) {
	e := Emitter{LongJumps: true}
	e.Emit(asm.Mov.Imm(asm.R0, 0), asm.Mov.Imm(asm.R1, 5))
	e.Emit(asm.JEq.Imm(asm.R1, 5, "mid")) // A
	e.Emit(asm.JEq.Imm(asm.R1, 6, "far")) // B
	for range math.MaxInt16 - 1 {
		e.Emit(asm.Add.Imm(asm.R0, 1))
	}
	e.Mark("mid")
	e.Emit(asm.Add.Imm(asm.R0, 1000))
	for range 10 {
		e.Emit(asm.Add.Imm(asm.R0, 1))
	}
	e.Emit(asm.Return())
	e.Mark("far")
	e.Emit(asm.Mov.Imm(asm.R0, 7), asm.Return())
	insns, err := e.Finish()
	if err != nil {
		t.Fatal(err)
	}
	gotols := 0
	for _, ins := range insns {
		if ins.OpCode == gotol {
			gotols++
		}
	}
	if gotols != 2 {
		t.Errorf("%d gotol, want 2 (B, then A)", gotols)
	}
	if err := insns.Marshal(discard{}, binary.LittleEndian); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if got := run(t, insns); got != 1010 {
			t.Errorf("returned %d, want 1010", got)
		}
	}
}

func run(t *testing.T, insns asm.Instructions) uint32 {
	t.Helper()
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SocketFilter, License: "GPL", Instructions: insns})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	defer prog.Close()
	ret, err := prog.Run(&ebpf.RunOptions{Data: make([]byte, 64)})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return ret
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
