package spec

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
)

// Type is the type of an expression.
type Type uint8

// The types.
const (
	TypeInt    Type = iota + 1 // a signed 64-bit integer
	TypeBool                   // the result of a comparison
	TypeString                 // comm or a string literal: at most 16 bytes, NUL-padded
)

func (t Type) String() string {
	switch t {
	case TypeInt:
		return "integer"
	case TypeBool:
		return "bool"
	case TypeString:
		return "string"
	}
	return "invalid"
}

// Size is the number of bytes a value of type t takes in a key or record.
func (t Type) Size() int {
	if t == TypeString {
		return CommSize
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

// BoolLit is true or false.
type BoolLit struct {
	exprBase
	Value bool
}

// StringLit is a string literal; it can only be compared with comm.
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

// ArgsField is args.FIELD: a field of a tracepoint's record.
type ArgsField struct {
	exprBase
	Name string
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

// Vars are the built-in values, with their types.
var Vars = map[string]Type{
	"pid": TypeInt, "tid": TypeInt, "uid": TypeInt, "gid": TypeInt, "cpu": TypeInt,
	"comm": TypeString, "func": TypeInt, "ktime": TypeInt,
	"arg0": TypeInt, "arg1": TypeInt, "arg2": TypeInt, "arg3": TypeInt, "arg4": TypeInt, "arg5": TypeInt,
	"ret": TypeInt,
}

// Walk calls fn for e and every expression below it, parents first.
func Walk(e Expr, fn func(Expr)) {
	if e == nil {
		return
	}
	fn(e)
	switch e := e.(type) {
	case *Unary:
		Walk(e.X, fn)
	case *Binary:
		Walk(e.L, fn)
		Walk(e.R, fn)
	case *Cond:
		Walk(e.If, fn)
		Walk(e.Then, fn)
		Walk(e.Else, fn)
	}
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
