package bpftrace

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/probectl/probectl/spec"
)

// What an expression translates to: HCL text, its precedence (to add
// parentheses only where HCL needs them) and what kind of value it is.

type valKind int

const (
	kInt valKind = iota
	kBool
	kStr
	kStack
	kDisplay // a decoder's value (inet, ksym, usym): a key or a field only
	kTime    // strftime: the event's own time
	kJoin    // join(argv)
	kTuple   // (a, b): a map's key
)

const (
	precCond = iota + 1
	precOr
	precAnd
	precEq
	precRel
	precAdd
	precMul
	precUnary
	precAtom
)

type hx struct {
	text string
	prec int
	kind valKind
	// reads are the tables the value reads (a variable holding it goes
	// stale when one of them changes).
	reads []string
	name  string // a name for an event field or key column
	// neg is a comparison's negation (a != b for a == b).
	neg string
	// nonzero: the value is never 0 (a saved ktime), so it is true.
	nonzero bool
	elems   []hx   // a tuple's
	field   string // the kernel field it is, when it is one
	// deco and arg: a decoder of one number (inet(x)), which a table
	// keeps as the number.
	deco string
	arg  *hx
	// placeholder: bpftrace's ntop(0), giving a variable its type only.
	placeholder bool
	// kaddr: a kernel variable's address (kaddr("avenrun") + 8), which *
	// reads a u64 at (kernel_u64).
	kaddr  bool
	stored bool // read from a table
	// pointee is the struct a pointer points to, when the tracepoint's
	// format names it (args.rqtp: "struct __kernel_timespec"); user: in
	// the process's memory (a system call's argument).
	pointee string
	user    bool
	// fork: a condition the rest of a block was copied under, once per
	// branch of an if (stmts); a delete on both copies does not need it.
	fork bool
	// prefix is what bpftrace prints before the value when printf prints
	// it: probe's family ("tracepoint:" before the event's name).
	prefix string
	// gens are, for a condition, how many stores each table it reads had
	// had in the handler when the condition held.
	gens map[string]int
}

func atom(text string, k valKind, name string) hx {
	return hx{text: text, prec: precAtom, kind: k, name: name}
}

// paren gives x's text, in parentheses when its precedence is below prec.
func (x hx) paren(prec int) string {
	if x.prec < prec {
		return "(" + x.text + ")"
	}
	return x.text
}

// boolean is x as a condition: bpftrace's truthiness of a number or a string.
func (x hx) boolean() hx {
	switch x.kind {
	case kBool:
		return x
	}
	if x.nonzero {
		return atom("true", kBool, "")
	}
	switch x.kind {
	case kStr:
		return hx{text: x.paren(precEq) + ` != ""`, prec: precEq, kind: kBool, reads: x.reads, neg: x.paren(precEq) + ` == ""`}
	}
	return hx{text: x.paren(precEq) + " != 0", prec: precEq, kind: kBool, reads: x.reads, neg: x.paren(precEq) + " == 0"}
}

// integer is x as a number: a condition is 1 or 0.
func (x hx) integer() hx {
	if x.kind == kBool {
		return hx{text: x.paren(precCond+1) + " ? 1 : 0", prec: precCond, kind: kInt, reads: x.reads}
	}
	return x
}

func not(x hx) hx {
	b := x.boolean()
	switch {
	case b.neg != "":
		return hx{text: b.neg, prec: b.prec, kind: kBool, reads: b.reads, neg: b.text}
	case b.text == "true":
		return atom("false", kBool, "")
	case b.text == "false":
		return atom("true", kBool, "")
	}
	return hx{text: "!" + b.paren(precUnary), prec: precUnary, kind: kBool, reads: b.reads}
}

func joinReads(xs ...hx) []string {
	var out []string
	for _, x := range xs {
		out = append(out, x.reads...)
	}
	return out
}

// quote writes s as an HCL string literal.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case (r == '$' || r == '%') && i+1 < len(s) && s[i+1] == '{':
			b.WriteRune(r)
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// castNames are bpftrace's integer types as probectl's casts.
var castNames = map[string]string{
	"int8": "s8", "int16": "s16", "int32": "s32", "int64": "s64", "int": "s32", "long": "s64", "char": "s8", "short": "s16",
	"uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64", "unsigned": "u32", "unsigned int": "u32", "unsigned long": "u64",
	"u8": "u8", "u16": "u16", "u32": "u32", "u64": "u64", "s8": "s8", "s16": "s16", "s32": "s32", "s64": "s64",
	"__u8": "u8", "__u16": "u16", "__u32": "u32", "__u64": "u64", "unsigned char": "u8", "unsigned short": "u16",
}

// importNames are bpftrace's values that the spec's table of built-in
// values (spec.BpftraceValue) does not spell as bpftrace does.
var importNames = map[string]string{
	"cgroup": "cgroup", "ppid": "ppid", "args": "args", "pcomm": "task.real_parent.comm",
}

// builtinName is what probectl writes for bpftrace's value name, or "".
func builtinName(name string) string {
	if n := spec.BpftraceValue(name); n != "" {
		return n
	}
	return importNames[name]
}

// missingValues are bpftrace's values without an equivalent, with why.
var missingValues = map[string]string{
	"username": "the kernel knows the numeric user ID only: use uid",
	"cpid":     "there is no child process: probectl run -c CMD starts one",
	"rand":     "there is no random number",
	"ncpus":    "the number of CPUs is not a value in a probe",
	"ctx":      "the raw context pointer is not a value",
	"sarg0":    "arguments on the stack cannot be read",
	"sarg1":    "arguments on the stack cannot be read",
	"usermode": "the mode the CPU was in is not a value",
	"probe":    "",
	"func":     "",
}

// knownConstants are C constants the tools use without a #define, as
// every Linux architecture has them.
var knownConstants = map[string]int64{
	"AF_INET": 2, "AF_INET6": 10, "AF_UNIX": 1,
	"TCP_ESTABLISHED": 1, "TCP_SYN_SENT": 2, "TCP_SYN_RECV": 3, "TCP_FIN_WAIT1": 4, "TCP_FIN_WAIT2": 5, "TCP_TIME_WAIT": 6,
	"TCP_CLOSE": 7, "TCP_CLOSE_WAIT": 8, "TCP_LAST_ACK": 9, "TCP_LISTEN": 10, "TCP_CLOSING": 11, "TCP_NEW_SYN_RECV": 12,
	"TASK_RUNNING": 0,
}

func numText(n *Num) string {
	t := strings.ToLower(strings.ReplaceAll(n.Text, "_", ""))
	if strings.HasPrefix(t, "0x") {
		return `hex("` + strings.TrimRight(t, "ul") + `")`
	}
	return strconv.FormatInt(n.Val, 10)
}

// identName is a field's or key's name made of s: letters, digits, _.
func identName(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9' && b.Len() > 0, r == '_':
			b.WriteRune(r)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "_"):
			b.WriteByte('_')
		}
	}
	return strings.Trim(b.String(), "_")
}
