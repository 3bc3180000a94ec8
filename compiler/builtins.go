package compiler

import (
	"github.com/cilium/ebpf/asm"
	"github.com/hashicorp/hcl/v2"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler/compiled"
	"github.com/probectl/probectl/spec"
)

// The compiler's half of the built-in values (spec.Builtin): the code that
// reads each one. A value with a spec.Builtin.Path has none here: it is
// kernel data, resolved against the target's BTF and read as task.PATH is.

// builtinCode is how the compiler reads one built-in value.
type builtinCode struct {
	// emit leaves an integer value in R0.
	emit func(g *gen, v *spec.Var)
	// text writes a string value, at most n bytes, into a zeroed place.
	text func(g *gen, p place, n int)
	// key is how show decodes a key of the value, when not by its type.
	key KeyKind
	// decode is the display decoder a key or event field of the value
	// shows through (compiled.KeyField.Decode): pod, namespace, container
	// and node name a cgroup ID when read.
	decode string
	// cookie says whether emit reads the attach cookie
	// (bpf_get_attach_cookie), which the target must have.
	cookie func(g *gen) bool
}

// helper reads a value a BPF helper returns, then runs then on R0.
func helper(fn asm.BuiltinFunc, then ...asm.Instruction) func(*gen, *spec.Var) {
	return func(g *gen, _ *spec.Var) { g.e.Emit(append([]asm.Instruction{fn.Call()}, then...)...) }
}

// Halves of a helper's u64 in R0.
var (
	high32 = asm.RSh.Imm(asm.R0, 32)
	low32  = asm.Mov.Reg32(asm.R0, asm.R0)
)

// builtinCodes holds the code of every built-in value that has no path,
// by name.
var builtinCodes = map[string]builtinCode{
	"pid":     {emit: helper(asm.FnGetCurrentPidTgid, high32)},
	"tid":     {emit: helper(asm.FnGetCurrentPidTgid, low32)},
	"uid":     {emit: helper(asm.FnGetCurrentUidGid, low32)},
	"gid":     {emit: helper(asm.FnGetCurrentUidGid, high32)},
	"cpu":     {emit: helper(asm.FnGetSmpProcessorId)},
	"numaid":  {emit: helper(asm.FnGetNumaNodeId)},
	"ktime":   {emit: helper(asm.FnKtimeGetNs)},
	"elapsed": {emit: (*gen).elapsed},
	"jiffies": {emit: helper(asm.FnJiffies64)},
	"cgroup":  {emit: helper(asm.FnGetCurrentCgroupId)},
	// The pod's names are the cgroup's, named in user space.
	"pod":       {emit: helper(asm.FnGetCurrentCgroupId), decode: compiled.DecodePod},
	"namespace": {emit: helper(asm.FnGetCurrentCgroupId), decode: compiled.DecodeNamespace},
	"container": {emit: helper(asm.FnGetCurrentCgroupId), decode: compiled.DecodeContainer},
	"node":      {emit: helper(asm.FnGetCurrentCgroupId), decode: compiled.DecodeNode},
	"comm":      {text: (*gen).comm, key: KeyComm},
	"cwd":       {text: (*gen).cwdText, key: KeyPath},
	"func":      {emit: func(g *gen, _ *spec.Var) { g.funcCookie() }, key: KeyFunc, cookie: func(g *gen) bool { return !g.oneFunction() }},
	"event":     {emit: (*gen).eventValue, key: KeyEvent, cookie: (*gen).eventsByCookie},
	"ret":       {emit: (*gen).retValue},
	"arg0":      {emit: (*gen).argValue},
	"arg1":      {emit: (*gen).argValue},
	"arg2":      {emit: (*gen).argValue},
	"arg3":      {emit: (*gen).argValue},
	"arg4":      {emit: (*gen).argValue},
	"arg5":      {emit: (*gen).argValue},
	// arg6 to arg11: USDT probes only (spec.Builtin.USDTOnly).
	"arg6":  {emit: (*gen).argValue},
	"arg7":  {emit: (*gen).argValue},
	"arg8":  {emit: (*gen).argValue},
	"arg9":  {emit: (*gen).argValue},
	"arg10": {emit: (*gen).argValue},
	"arg11": {emit: (*gen).argValue},
}

// variable emits the code that leaves built-in value v in R0.
func (g *gen) variable(v *spec.Var) {
	if b := spec.LookupBuiltin(v.Name); b != nil && b.Path != nil {
		g.readAccess(g.paths[v.Name])
		return
	}
	c, ok := builtinCodes[v.Name]
	if !ok || c.emit == nil {
		panic("compiler: no code for built-in value " + v.Name)
	}
	c.emit(g, v)
}

func (g *gen) comm(p place, n int) {
	g.addr(asm.R1, p)
	g.e.Emit(asm.Mov.Imm(asm.R2, int32(min(n, spec.CommSize))), asm.FnGetCurrentComm.Call())
}

func (g *gen) eventValue(_ *spec.Var) {
	if g.eventsByCookie() {
		g.funcCookie()
		return
	}
	g.e.Emit(asm.Mov.Imm(asm.R0, 0))
}

// eventsByCookie: a probe over several events tells them by the attach
// cookie, the event's index.
func (g *gen) eventsByCookie() bool { return len(g.out.Tracepoints) > 1 }

// usesCookie reports whether reading built-in value v reads the attach
// cookie.
func (g *gen) usesCookie(v *spec.Var) bool {
	c := builtinCodes[v.Name]
	return c.cookie != nil && c.cookie(g)
}

func (g *gen) retValue(_ *spec.Var) {
	if g.ctx == ctxTracing {
		g.tracingValue(asm.FnGetFuncRet, -1)
	} else {
		g.e.Emit(asm.LoadMem(asm.R0, regCtx, g.regs.Ret, asm.DWord))
	}
	g.extendRet()
}

func (g *gen) argValue(v *spec.Var) {
	n := argIndex(v.Name)
	if g.out.USDT != "" {
		g.usdtArgValue(n)
		return
	}
	if g.ctx == ctxTracing {
		g.tracingValue(asm.FnGetFuncArg, n)
		return
	}
	g.e.Emit(asm.LoadMem(asm.R0, regCtx, g.regs.Args[n], asm.DWord))
}

// pathType resolves built-in value x that reads kernel data along its
// path from the current task (ppid: task.real_parent.tgid).
func (g *gen) pathType(x *spec.Var, b *spec.Builtin) spec.Type {
	path := &spec.KernelPath{Root: spec.RootTask}
	for _, f := range b.Path {
		path.Fields = append(path.Fields, spec.PathField{Name: f, Range: x.Range()})
	}
	a, t := g.resolveIn(x, path)
	if g.paths == nil {
		g.paths = map[string]*access{}
	}
	g.paths[x.Name] = a
	return t
}

// checkSince reports a built-in value that the target's kernel is too old
// for (its helper came later).
func (g *gen) checkSince(x *spec.Var) *hcl.Diagnostic {
	b := spec.LookupBuiltin(x.Name)
	if b == nil || b.Since == (bpf.Version{}) || g.facts.Kernel.AtLeast(b.Since.Major, b.Since.Minor) {
		return nil
	}
	return diagf(x.Range(), "Value needs a newer kernel",
		"%s reads %s (Linux %d.%d), which the target (%s, Linux %s) lacks.",
		x.Name, b.Helper, b.Since.Major, b.Since.Minor, g.facts.Label(), g.facts.Kernel)
}
