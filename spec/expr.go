package spec

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
)

// Kind is what kind of value an expression has.
type Kind uint8

// The kinds.
const (
	KindInt    Kind = iota + 1 // a signed 64-bit integer
	KindBool                   // the result of a comparison
	KindString                 // text, NUL-terminated in a buffer of Size bytes
	KindBytes                  // a fixed array of Size bytes, such as an address
	// KindTarget is typed by the target: a tracepoint field, or kernel data
	// reached through BTF. The compiler resolves it (an integer, a pointer,
	// a string or bytes) and checks each use; here it passes where an
	// integer or a string could.
	KindTarget
	// KindKStack and KindUStack are call stacks (kstack, ustack): an id in
	// a stack trace map, Size frames deep at most. They are keys, event
	// fields, saved and table values, never computed with.
	KindKStack
	KindUStack
)

// Type is the type of an expression: its kind, and for strings and bytes
// the size of the buffer that holds it.
type Type struct {
	Kind Kind
	Size int
}

// The types of fixed size.
var (
	TypeInt    = Type{KindInt, 8}
	TypeBool   = Type{KindBool, 8}
	TypeComm   = Type{KindString, CommSize} // a task name
	TypeTarget = Type{KindTarget, 8}
)

// StringType is a string in a buffer of size bytes (the NUL included).
func StringType(size int) Type { return Type{KindString, size} }

// BytesType is an array of size bytes.
func BytesType(size int) Type { return Type{KindBytes, size} }

// String limits: str() reads 64 bytes unless told otherwise, at most 256.
const (
	DefaultStrSize = 64
	MaxStrSize     = 256
)

func (t Type) String() string {
	switch t.Kind {
	case KindInt:
		return "integer"
	case KindBool:
		return "bool"
	case KindString:
		return "string"
	case KindBytes:
		return fmt.Sprintf("byte array (%d bytes)", t.Size)
	case KindTarget:
		return "target-typed value"
	case KindKStack:
		return "kernel stack"
	case KindUStack:
		return "user stack"
	}
	return "invalid"
}

// IsString reports whether t is a string.
func (t Type) IsString() bool { return t.Kind == KindString }

// Numeric reports whether t can be an integer: an integer, or a value the
// target types (which the compiler checks).
func (t Type) Numeric() bool { return t.Kind == KindInt || t.Kind == KindTarget }

// Size is the number of bytes a value of type t takes in a key, a record
// or a table: 8 for integers (and, until the compiler resolves them,
// target-typed values), the buffer for strings and bytes.
func (t Type) Bytes() int {
	switch t.Kind {
	case KindString, KindBytes:
		return t.Size
	case KindUStack:
		return 16 // the stack id, and the process it was taken in
	}
	return 8
}

// CommSize is the size of a task's comm (TASK_COMM_LEN).
const CommSize = 16

// Expr is a checked expression. Every node knows its type, its source range
// and its source text.
type Expr interface {
	Range() hcl.Range
	Type() Type
	// Text is the expression's source text.
	Text() string
}

// source is a spec file's text, shared by its expressions: each keeps a
// range into it, and takes its text from it only when asked.
type source []byte

type exprBase struct {
	rng hcl.Range
	src *source
	typ Type
}

func (b *exprBase) Range() hcl.Range { return b.rng }
func (b *exprBase) Type() Type       { return b.typ }

func (b *exprBase) Text() string {
	if b.src == nil {
		return ""
	}
	return string(b.rng.SliceBytes(*b.src))
}

// IntLit is an integer literal.
type IntLit struct {
	exprBase
	Value int64
}

// Buf is buf(X, LEN): the LEN bytes at pointer X (at most BufSize), kept
// whole and shown with escapes for the bytes that do not print, as
// bpftrace's %r shows them. Its slot is the length read (8 bytes), then
// the bytes. Memory is the process's or the kernel's as for str().
type Buf struct {
	exprBase
	X, Len Expr
	Space  Space
}

// KernelConst is a constant the target's BTF gives:
// enum_value("NAME"), an enumerator of any of the kernel's enums
// (SKB_DROP_REASON_NOT_SPECIFIED), or offsetof("struct NAME", "FIELD"),
// a member's byte offset (nested members by dots, a.b). The compiler
// resolves it against the target's BTF (at apply for a profile).
type KernelConst struct {
	exprBase
	Enum   string // enum_value's enumerator
	Struct string // offsetof's struct, without "struct "
	Field  string // offsetof's member path
}

// KernelAddr is kaddr("SYMBOL"): the address of a kernel variable, as
// /proc/kallsyms names it. The kernel's addresses move at each boot
// (KASLR), so the runtime reads it at apply, as root, into the probe's
// kaddr map (compiled.KaddrMapRef); apply refuses a symbol kallsyms lacks
// or hides.
type KernelAddr struct {
	exprBase
	Symbol string
}

// KernelRead is kernel_u64(ADDR): the 8 bytes of kernel memory at ADDR,
// read with bpf_probe_read_kernel (0 where unreadable), as bpftrace's
// *ADDR reads a kaddr.
type KernelRead struct {
	exprBase
	X Expr
}

// BoolLit is true or false.
type BoolLit struct {
	exprBase
	Value bool
}

// StringLit is a string literal: compared with strings, never stored.
type StringLit struct {
	exprBase
	Value string
}

// Var is a built-in value: pid, tid, uid, gid, cpu, comm, func, ktime,
// arg0..arg5, ret.
type Var struct {
	exprBase
	Name string
}

// EntryRef is entry.NAME: a value on_entry saved, read in on_exit.
type EntryRef struct {
	exprBase
	Name string
}

// ArgsField is args.FIELD: a field of a tracepoint's record, typed by the
// event's format (KindTarget until the compiler resolves it).
type ArgsField struct {
	exprBase
	Name string
}

// Space is the memory a pointer points into.
type Space string

// The memory spaces str() reads.
const (
	SpaceAuto   Space = ""       // user memory for user probes and syscall tracepoints, kernel memory otherwise
	SpaceUser   Space = "user"   // user_str
	SpaceKernel Space = "kernel" // kernel_str
)

// Str is str(X[, N]), user_str or kernel_str: the NUL-terminated string X
// points at (or, for a char array, holds), read into a buffer of N bytes.
type Str struct {
	exprBase
	X     Expr
	Space Space
}

// StartsWith is starts_with(X, "prefix"): whether string X begins so.
type StartsWith struct {
	exprBase
	X      Expr
	Prefix string
}

// ByteSwap is ntohs(X) or ntohl(X): the low Bits bits of X, from network
// (big-endian) byte order.
type ByteSwap struct {
	exprBase
	X    Expr
	Bits int
}

// TableRead is T[KEY] or T[KEY].FIELD: what a table holds for a key, 0 or
// the empty string when it holds nothing.
type TableRead struct {
	exprBase
	Table *Table
	Key   []Expr
	Field string // for tables of objects
}

// Has is has(T, KEY): whether the table holds the key.
type Has struct {
	exprBase
	Table *Table
	Key   []Expr
}

// KernelPath is kernel data reached through BTF: an argument of a kernel
// function by name (args.NAME), the current task (task), or a pointer cast
// to a struct (cast(X, "struct sock")), then struct fields through pointers
// (.f_path.dentry), the way bpftrace's -> follows them. The compiler
// resolves it against the target's BTF.
type KernelPath struct {
	exprBase
	Root   PathRoot
	Arg    string // RootArg: the argument's name
	Base   Expr   // RootCast: the pointer
	Struct string // RootCast: the struct's name, without "struct "
	// Space is the memory a cast's struct and the pointers it leads to
	// are read from: SpaceUser for user_cast, SpaceKernel otherwise.
	Space Space
	// StructRange is the range of the struct's name (RootCast).
	StructRange hcl.Range
	Fields      []PathField
}

// PathRoot is where a KernelPath starts.
type PathRoot string

// The roots of kernel paths.
const (
	RootArg  PathRoot = "args"
	RootTask PathRoot = "task"
	RootCast PathRoot = "cast"
)

// PathField is one field of a KernelPath, with its range for diagnostics.
type PathField struct {
	Name  string
	Range hcl.Range
}

// Op is an operator.
type Op string

// The operators. Bit operations are spelled as functions in HCL
// (band, bor, bxor, shl, shr, bnot) and become these.
const (
	OpAdd  Op = "+"
	OpSub  Op = "-"
	OpMul  Op = "*"
	OpDiv  Op = "/"
	OpMod  Op = "%"
	OpEq   Op = "=="
	OpNe   Op = "!="
	OpLt   Op = "<"
	OpLe   Op = "<="
	OpGt   Op = ">"
	OpGe   Op = ">="
	OpAnd  Op = "&&"
	OpOr   Op = "||"
	OpNot  Op = "!"
	OpNeg  Op = "neg"
	OpBAnd Op = "&"
	OpBOr  Op = "|"
	OpBXor Op = "^"
	OpShl  Op = "<<"
	OpShr  Op = ">>"
	OpBNot Op = "~"
)

// Unary is !X, -X or bnot(X).
type Unary struct {
	exprBase
	Op Op
	X  Expr
}

// Binary is L op R.
type Binary struct {
	exprBase
	Op   Op
	L, R Expr
}

// Cond is If ? Then : Else.
type Cond struct {
	exprBase
	If, Then, Else Expr
}

// Walk calls fn for e and every expression below it, parents first.
func Walk(e Expr, fn func(Expr)) {
	if e == nil {
		return
	}
	fn(e)
	for _, x := range operands(e) {
		Walk(x, fn)
	}
}

// operands returns the expressions e is built of, in source order (nil
// for one left out, such as a Display's port).
func operands(e Expr) []Expr {
	switch e := e.(type) {
	case *Unary:
		return []Expr{e.X}
	case *Binary:
		return []Expr{e.L, e.R}
	case *Cond:
		return []Expr{e.If, e.Then, e.Else}
	case *Str:
		return []Expr{e.X}
	case *StartsWith:
		return []Expr{e.X}
	case *ByteSwap:
		return []Expr{e.X}
	case *KernelRead:
		return []Expr{e.X}
	case *TableRead:
		return e.Key
	case *Has:
		return e.Key
	case *KernelPath:
		return []Expr{e.Base}
	case *Join:
		return []Expr{e.X}
	case *Buf:
		return []Expr{e.X, e.Len}
	case *Display:
		return []Expr{e.X, e.Port}
	case *IntCast:
		return []Expr{e.X}
	}
	return nil
}

// Uses reports whether e refers to the built-in value name.
func Uses(e Expr, name string) bool {
	found := false
	Walk(e, func(x Expr) {
		if v, ok := x.(*Var); ok && v.Name == name {
			found = true
		}
	})
	return found
}

func (e *Binary) String() string { return fmt.Sprintf("(%s %s %s)", e.L.Text(), e.Op, e.R.Text()) }
