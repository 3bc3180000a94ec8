package compiler

import (
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	goruntime "runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler/internal/emit"
	"github.com/probectl/probectl/spec"
	"golang.org/x/sys/unix"
)

// These tests run generated expression code in the kernel (a socket filter
// through BPF_PROG_RUN) and compare every result with a Go evaluator of
// the same expression.

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("running BPF programs needs root (CAP_BPF)")
	}
}

// action parses one tracepoint action and returns it with its probe.
func action(t testing.TB, body string) (*spec.Probe, *spec.Action) {
	t.Helper()
	src := "probe \"tracepoint\" \"t\" {\n  event = \"syscalls:sys_enter_read\"\n  on_entry {\n" + body + "\n  }\n}\n"
	cfg, diags := spec.Parse(map[string][]byte{"t.hcl": []byte(src)})
	if diags.HasErrors() {
		t.Fatalf("%s: %v", body, diags)
	}
	p := cfg.Probes[0]
	return p, p.Entry.Actions[0]
}

// runValue generates code for x (then, if bucket is set, the action's
// bucket function), runs it and returns R0.
func runValue(t testing.TB, p *spec.Probe, a *spec.Action, bucket bool) int64 {
	t.Helper()
	regs, _ := bpf.RegsFor(bpf.ArchX86_64)
	facts, _ := bpf.Profile("linux-7.2-amd64")
	g := &gen{p: p, facts: facts, regs: regs, out: &Probe{}, e: &emit.Emitter{}, ctx: ctxTracepoint}
	g.e.Emit(asm.Mov.Reg(regCtx, asm.R1))
	g.expr(a.Value)
	if bucket {
		if a.Kind == spec.Hist {
			g.log2Bucket()
		} else {
			g.linearBucket(a)
		}
	}
	key, val := g.e.Alloc(8), g.e.Alloc(8)
	g.e.Emit(
		asm.StoreMem(asm.RFP, val, asm.R0, asm.DWord),
		emit.StoreImm64(asm.RFP, key, 0),
		asm.LoadMapPtr(asm.R1, 0).WithReference("out"),
		asm.Mov.Reg(asm.R2, asm.RFP), asm.Add.Imm(asm.R2, int32(key)),
		asm.Mov.Reg(asm.R3, asm.RFP), asm.Add.Imm(asm.R3, int32(val)),
		asm.Mov.Imm(asm.R4, 0),
		asm.FnMapUpdateElem.Call(),
		asm.Mov.Imm(asm.R0, 0),
		asm.Return(),
	)
	insns, err := g.e.Finish()
	if err != nil {
		t.Fatal(err)
	}
	coll, err := ebpf.NewCollection(&ebpf.CollectionSpec{
		Maps: map[string]*ebpf.MapSpec{"out": {Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 1}},
		Programs: map[string]*ebpf.ProgramSpec{"p": {
			Type: ebpf.SocketFilter, License: License, Instructions: insns,
		}},
	})
	if err != nil {
		t.Fatalf("%s: load: %v", a.Value.Text(), err)
	}
	defer coll.Close()
	if _, err := coll.Programs["p"].Run(&ebpf.RunOptions{Data: make([]byte, 64)}); err != nil {
		t.Fatalf("run: %v", err)
	}
	var out int64
	if err := coll.Maps["out"].Lookup(uint32(0), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// env is what the built-in values hold when the reference evaluates.
type env struct {
	pid  int64
	comm string
}

// eval is the reference for expressions of constants.
var eval = env{}.eval

// eval is the reference: what an expression means.
func (v env) eval(x spec.Expr) int64 {
	b := func(v bool) int64 {
		if v {
			return 1
		}
		return 0
	}
	switch x := x.(type) {
	case *spec.IntLit:
		return x.Value
	case *spec.Var:
		if x.Name == "pid" {
			return v.pid
		}
	case *spec.BoolLit:
		return b(x.Value)
	case *spec.IntCast:
		shift := 64 - x.Bits
		if x.Signed {
			return v.eval(x.X) << shift >> shift
		}
		return int64(uint64(v.eval(x.X)) << shift >> shift)
	case *spec.Unary:
		v := v.eval(x.X)
		switch x.Op {
		case spec.OpNot:
			return v ^ 1
		case spec.OpNeg:
			return -v
		case spec.OpBNot:
			return ^v
		}
	case *spec.Cond:
		if v.eval(x.If) != 0 {
			return v.eval(x.Then)
		}
		return v.eval(x.Else)
	case *spec.Binary:
		if x.L.Type().IsString() { // comm against a literal
			eq := v.comm == x.R.(*spec.StringLit).Value
			return b(eq == (x.Op == spec.OpEq))
		}
		if x.Op == spec.OpAnd || x.Op == spec.OpOr { // short-circuit
			l := v.eval(x.L)
			if (l != 0) == (x.Op == spec.OpOr) {
				return l
			}
			return v.eval(x.R)
		}
		l, r := v.eval(x.L), v.eval(x.R)
		switch x.Op {
		case spec.OpAdd:
			return l + r
		case spec.OpSub:
			return l - r
		case spec.OpMul:
			return l * r
		case spec.OpDiv:
			if r == 0 {
				return 0
			}
			if l == math.MinInt64 && r == -1 {
				return l
			}
			return l / r
		case spec.OpMod:
			if r == 0 {
				return l
			}
			if r == -1 {
				return 0
			}
			return l % r
		case spec.OpEq:
			return b(l == r)
		case spec.OpNe:
			return b(l != r)
		case spec.OpLt:
			return b(l < r)
		case spec.OpLe:
			return b(l <= r)
		case spec.OpGt:
			return b(l > r)
		case spec.OpGe:
			return b(l >= r)
		case spec.OpAnd:
			return b(l != 0 && r != 0)
		case spec.OpOr:
			return b(l != 0 || r != 0)
		case spec.OpBAnd:
			return l & r
		case spec.OpBOr:
			return l | r
		case spec.OpBXor:
			return l ^ r
		case spec.OpShl:
			return l << (uint64(r) & 63)
		case spec.OpShr:
			return int64(uint64(l) >> (uint64(r) & 63))
		}
	}
	panic(fmt.Sprintf("eval %T", x))
}

func TestExpressionSemantics(t *testing.T) {
	requireRoot(t)
	exprs := []string{
		"7 / 2", "-7 / 2", "7 / -2", "-7 / -2", "7 % 3", "-7 % 3", "7 % -3", "5 / 0", "5 % 0",
		"-9223372036854775807 - 1", "(-9223372036854775807 - 1) / -1",
		"3 - 10", "6 * -7", "1 + 2 * 3", "(1 + 2) * 3",
		"band(12, 10)", "bor(12, 10)", "bxor(12, 10)", "bnot(0)", "shl(1, 40)", "shr(-1, 60)", "shl(3, 64)",
		"1 < 2 ? 10 : 20", "2 < 1 ? 10 : 20", "!(1 == 1) ? 1 : 0", "1 != 1 || 2 >= 2 ? 5 : 6",
		"1 == 1 && 2 <= 1 ? 5 : 6", "-5 < 3 ? 1 : 0", "4294967296 * 4294967296", "9223372036854775807 + 1",
		"-9223372036854775808", "-(-9223372036854775808)", "-9223372036854775808 - 1",
		"s32(4294967295)", "s32(2147483648)", "u32(-1)", "s16(65535)", "u16(-2)", "s8(128)", "s8(127)", "u8(-1)",
		"u64(-1)", "s64(5)", "s32(4294967296 + 7)", "u32(-4294967296 - 1)", "s32(-1) - u32(-1)",
		`hex("0x40")`, `hex("0xffffffffffffffff")`, `hex("-0x10")`, `band(hex("0xFF00"), 4660)`,
	}
	for _, src := range exprs {
		p, a := action(t, fmt.Sprintf("    sum \"v\" { value = %s }", src))
		if got, want := runValue(t, p, a, false), eval(a.Value); got != want {
			t.Errorf("%s = %d in BPF, want %d", src, got, want)
		}
	}
}

// randomExpr builds a random integer expression of constants.
func randomExpr(r *rand.Rand, depth int) string {
	if depth == 0 || r.Intn(4) == 0 {
		n := []int64{0, 1, -1, 2, 3, 7, -13, 64, 1000, -65536, 1 << 40, math.MaxInt64, math.MinInt64 + 1}[r.Intn(13)]
		if n < 0 {
			return fmt.Sprintf("(%d)", n)
		}
		return fmt.Sprint(n)
	}
	a, b := randomExpr(r, depth-1), randomExpr(r, depth-1)
	switch r.Intn(12) {
	case 0, 1:
		return fmt.Sprintf("(%s %s %s)", a, []string{"+", "-", "*"}[r.Intn(3)], b)
	case 2:
		return fmt.Sprintf("(%s %s %s)", a, []string{"/", "%"}[r.Intn(2)], b)
	case 3:
		return fmt.Sprintf("%s(%s, %s)", []string{"band", "bor", "bxor", "shl", "shr"}[r.Intn(5)], a, b)
	case 4:
		return fmt.Sprintf("bnot(%s)", a)
	case 5:
		return fmt.Sprintf("(-%s)", a)
	case 6:
		return fmt.Sprintf("%s(%s)", []string{"u8", "u16", "u32", "s8", "s16", "s32"}[r.Intn(6)], a)
	default:
		c := randomBool(r, depth-1)
		return fmt.Sprintf("(%s ? %s : %s)", c, a, b)
	}
}

func randomBool(r *rand.Rand, depth int) string {
	a, b := randomExpr(r, max(depth-1, 0)), randomExpr(r, max(depth-1, 0))
	switch r.Intn(4) {
	case 0:
		return fmt.Sprintf("(%s && %s)", fmt.Sprintf("%s < %s", a, b), fmt.Sprintf("%s != 0", b))
	case 1:
		return fmt.Sprintf("(%s || !(%s >= %s))", fmt.Sprintf("%s == %s", a, b), a, b)
	}
	return fmt.Sprintf("(%s %s %s)", a, []string{"==", "!=", "<", "<=", ">", ">="}[r.Intn(6)], b)
}

// TestRandomExpressions compares BPF and Go on random expressions.
func TestRandomExpressions(t *testing.T) {
	requireRoot(t)
	r := rand.New(rand.NewSource(1))
	n := 150
	if testing.Short() {
		n = 30
	}
	for i := 0; i < n; i++ {
		src := randomExpr(r, 3)
		p, a := action(t, fmt.Sprintf("    sum \"v\" { value = %s }", src))
		if got, want := runValue(t, p, a, false), eval(a.Value); got != want {
			t.Errorf("%s = %d in BPF, want %d", src, got, want)
		}
	}
}

// log2 buckets: 0 for negatives, 1 for zero, 2+floor(log2 v) above.
func log2Bucket(v int64) int64 {
	switch {
	case v < 0:
		return 0
	case v == 0:
		return 1
	}
	n := int64(2)
	for v > 1 {
		v >>= 1
		n++
	}
	return n
}

func TestHistogramBuckets(t *testing.T) {
	requireRoot(t)
	for _, v := range []int64{-5, 0, 1, 2, 3, 4, 7, 8, 1023, 1024, 1 << 40, math.MaxInt64} {
		p, a := action(t, fmt.Sprintf("    hist \"h\" { value = %d }", v))
		if got, want := runValue(t, p, a, true), log2Bucket(v); got != want {
			t.Errorf("hist bucket of %d = %d, want %d", v, got, want)
		}
	}
	for _, v := range []int64{-100, -1, 0, 9, 10, 55, 99, 100, 1000} {
		p, a := action(t, fmt.Sprintf("    lhist \"l\" {\n value = %d\n min = 0\n max = 100\n step = 10\n }", v))
		want := int64(0)
		switch {
		case v < 0:
		case v >= 100:
			want = 11
		default:
			want = 1 + v/10
		}
		if got := runValue(t, p, a, true); got != want {
			t.Errorf("lhist bucket of %d = %d, want %d", v, got, want)
		}
	}
}

// runProbe compiles a tracepoint probe for facts, loads its program as a
// raw tracepoint program (the same helpers; it reads no record field) and
// runs it n times on this thread through BPF_PROG_RUN, with comm set to
// comm. It returns the program and the total of its first aggregation.
func runProbe(t *testing.T, facts *bpf.Facts, src, comm string, n int) (*Program, int64) {
	t.Helper()
	cfg, diags := spec.Parse(map[string][]byte{"t.hcl": []byte(src)})
	if diags.HasErrors() {
		t.Fatal(diags)
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
	prog := cs.Programs["event"]
	prog.Type, prog.AttachType = ebpf.RawTracepoint, ebpf.AttachNone
	coll, err := ebpf.NewCollection(cs)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	defer coll.Close()

	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	var saved [16]byte
	if err := unix.Prctl(unix.PR_GET_NAME, uintptr(unsafe.Pointer(&saved[0])), 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	name := append([]byte(comm), 0)
	if err := unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&name[0])), 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	defer unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&saved[0])), 0, 0, 0)
	for range n {
		if _, err := coll.Programs["event"].Run(&ebpf.RunOptions{Context: make([]byte, 8)}); err != nil {
			t.Fatalf("run: %v", err)
		}
	}
	total, err := aggTotal(coll.Maps[p.Aggregations[0].MapRef], uint64(0))
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return p.Programs[0], 0
	} else if err != nil {
		t.Fatal(err)
	}
	return p.Programs[0], total
}

// longJumps counts the gotol instructions of a program.
func longJumps(prog *Program) int {
	n := 0
	for _, ins := range prog.Instructions {
		if ins.OpCode == asm.LongJump("").OpCode {
			n++
		}
	}
	return n
}

// Issue 7's replays, compiled for a target with gotol and run in the
// kernel: jumps beyond 32767 instructions used to wrap silently.
func TestLongJumpsRun(t *testing.T) {
	requireRoot(t)
	facts, _ := bpf.Profile("linux-7.2-amd64")
	me := int64(os.Getpid())
	const runs = 3

	// A filter: && jumps over 7000 comparisons. The list holds this
	// process's pid last, or not at all.
	for _, listed := range []bool{true, false} {
		var pids []string
		for i := int64(1); len(pids) < 6999; i++ {
			if i != me {
				pids = append(pids, fmt.Sprint("pid == ", i))
			}
		}
		last := me + 1
		if listed {
			last = me
		}
		pids = append(pids, fmt.Sprint("pid == ", last))
		src := `probe "tracepoint" "calls" {
  event = "syscalls:sys_enter_getppid"
  on_entry {
    when = comm == "x" && (` + strings.Join(pids, " || ") + `)
    count "n" {}
  }
}`
		cfg, _ := spec.Parse(map[string][]byte{"t.hcl": []byte(src)})
		when := cfg.Probes[0].Entry.When
		for _, comm := range []string{"x", "y"} {
			prog, got := runProbe(t, facts, src, comm, runs)
			want := runs * env{pid: me, comm: comm}.eval(when)
			t.Logf("filter, pid listed %v, comm %s: %d instructions, %d gotol, count %d", listed, comm, prog.InstructionCount(), longJumps(prog), got)
			if got != want {
				t.Errorf("filter, pid listed %v, comm %s: counted %d, want %d", listed, comm, got, want)
			}
			if prog.InstructionCount() <= math.MaxInt16 || longJumps(prog) == 0 {
				t.Errorf("the filter should need a long jump: %d instructions, %d gotol", prog.InstructionCount(), longJumps(prog))
			}
		}
	}

	// A conditional: the true branch jumps over the 11000-term false one.
	// With pid != 1 the sum is 7 a run (it was 30442401 after 3 runs);
	// with this process's pid the far branch runs.
	terms := strings.TrimSuffix(strings.Repeat("pid + ", 11000), " + ")
	for _, other := range []int64{1, me} {
		src := fmt.Sprintf(`probe "tracepoint" "sums" {
  event = "syscalls:sys_enter_getppid"
  on_entry {
    sum "s" {
      value = pid != %d ? 7 : %s
    }
  }
}`, other, terms)
		cfg, _ := spec.Parse(map[string][]byte{"t.hcl": []byte(src)})
		prog, got := runProbe(t, facts, src, "y", runs)
		want := runs * env{pid: me}.eval(cfg.Probes[0].Entry.Actions[0].Value)
		t.Logf("conditional, pid != %d: %d instructions, %d gotol, sum %d", other, prog.InstructionCount(), longJumps(prog), got)
		if got != want {
			t.Errorf("conditional, pid != %d: sum %d, want %d", other, got, want)
		}
	}
}
