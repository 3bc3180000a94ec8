package spec

import (
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/probectl/probectl/bpf"
	"github.com/zclconf/go-cty/cty"
)

// This file lowers what reads data: tracepoint fields and kernel data by
// name, strings, and tables.

// args lowers args.NAME: a tracepoint's field, or a kernel function's
// argument by the name its BTF gives it, followed by struct fields.
func (s *scope) args(e *hclsyntax.ScopeTraversalExpr) Expr {
	tr := e.Traversal
	if len(tr) < 2 {
		return s.errorf(e.Range(), "Invalid args reference", "Write args.NAME: a tracepoint's field, or a kernel function's argument by name.")
	}
	name, ok := tr[1].(hcl.TraverseAttr)
	if !ok {
		return s.errorf(e.Range(), "Invalid args reference", "Write args.NAME: a tracepoint's field, or a kernel function's argument by name.")
	}
	switch s.probe.Addr.Kind {
	case bpf.KindTracepoint:
		if len(tr) > 2 {
			return s.errorf(tr[2].SourceRange(), "Tracepoint fields have no fields",
				"args.%s is a field of the event's record; it has no fields of its own. Read a string it points at with str(args.%s).", name.Name, name.Name)
		}
		return &ArgsField{exprBase: s.base(e, TypeTarget), Name: name.Name}
	case bpf.KindKernel:
		if s.exit {
			return s.errorf(e.Range(), "Arguments are gone in on_exit",
				"Argument registers are overwritten by the time the function returns. Save it in on_entry (save = { %s = args.%s }) and read entry.%s.",
				name.Name, name.Name, name.Name)
		}
		return &KernelPath{exprBase: s.base(e, TypeTarget), Root: RootArg, Arg: name.Name, Fields: s.pathFields(tr[2:])}
	}
	x, _ := s.refused(e, builtinByName["args"]) // user and profile probes
	return x
}

// pathFields lowers the .FIELD steps of a kernel path.
func (s *scope) pathFields(tr hcl.Traversal) []PathField {
	var out []PathField
	for _, step := range tr {
		a, ok := step.(hcl.TraverseAttr)
		if !ok {
			s.errorf(step.SourceRange(), "Unsupported index", "Kernel data is followed field by field (.name); indexing is not supported.")
			return out
		}
		out = append(out, PathField{Name: a.Name, Range: a.SrcRange})
	}
	return out
}

// cast lowers cast(X, "struct NAME") and user_cast(X, "struct NAME"), then
// the fields in tr after it. user_cast reads the struct (and the pointers
// it leads to) from user memory, typed by the kernel's BTF: a struct a
// syscall takes (struct __kernel_timespec).
func (s *scope) cast(e *hclsyntax.FunctionCallExpr, tr hcl.Traversal) Expr {
	space := SpaceKernel
	if e.Name == "user_cast" {
		space = SpaceUser
	}
	if s.probe.Addr.Kind == bpf.KindUser {
		return s.errorf(e.Range(), "cast is for kernel data", "cast reads a kernel struct through the kernel's BTF; user functions have none.")
	}
	if len(e.Args) != 2 {
		return s.errorf(e.Range(), "Wrong number of arguments", "%s takes a pointer and a struct: %s(arg0, \"struct sock\").", e.Name, e.Name)
	}
	x := s.lower(e.Args[0])
	if isInvalid(x) {
		return x
	}
	if !x.Type().Numeric() {
		return s.errorf(x.Range(), e.Name+" needs a pointer", "%s is a %s, not a pointer.", x.Text(), x.Type())
	}
	name, ok := s.d.literalString(e.Args[1])
	st, isStruct := strings.CutPrefix(name, "struct ")
	if !ok || !isStruct || !bpf.ValidName(st) {
		return s.errorf(e.Args[1].Range(), "Expected a struct", "The second argument names a kernel struct: \"struct sock\".")
	}
	rng := e.Range()
	if len(tr) > 0 {
		rng = hcl.RangeBetween(rng, tr[len(tr)-1].SourceRange())
	}
	return &KernelPath{exprBase: exprBase{rng: rng, src: s.d.src, typ: TypeTarget}, Root: RootCast, Base: x, Struct: st, Space: space, StructRange: e.Args[1].Range(), Fields: s.pathFields(tr)}
}

// kernelConst lowers enum_value("NAME") and offsetof("struct NAME",
// "FIELD"): names the compiler looks up in the target's BTF.
func (s *scope) kernelConst(e *hclsyntax.FunctionCallExpr) Expr {
	if s.probe.Addr.Kind == bpf.KindUser {
		return s.errorf(e.Range(), e.Name+" is for kernel types", "%s reads the kernel's BTF; user functions have none.", e.Name)
	}
	if e.Name == "enum_value" {
		name, ok := "", len(e.Args) == 1
		if ok {
			name, ok = s.d.literalString(e.Args[0])
		}
		if !ok || !bpf.ValidName(name) {
			return s.errorf(e.Range(), "Expected an enumerator", "enum_value takes the name of a kernel enum's constant, quoted: enum_value(\"SKB_DROP_REASON_NOT_SPECIFIED\").")
		}
		return &KernelConst{exprBase: s.base(e, TypeInt), Enum: name}
	}
	if len(e.Args) != 2 {
		return s.errorf(e.Range(), "Wrong number of arguments", "offsetof takes a struct and a member, quoted: offsetof(\"struct mount\", \"mnt\").")
	}
	name, ok := s.d.literalString(e.Args[0])
	st, isStruct := strings.CutPrefix(name, "struct ")
	if !ok || !isStruct || !bpf.ValidName(st) {
		return s.errorf(e.Args[0].Range(), "Expected a struct", "The first argument names a kernel struct: \"struct mount\".")
	}
	field, ok := s.d.literalString(e.Args[1])
	valid := ok && field != ""
	for _, part := range strings.Split(field, ".") {
		valid = valid && bpf.ValidName(part)
	}
	if !valid {
		return s.errorf(e.Args[1].Range(), "Expected a member", "The second argument names a member of the struct, nested ones by dots: \"mnt\", \"__sk_common.skc_family\".")
	}
	return &KernelConst{exprBase: s.base(e, TypeInt), Struct: st, Field: field}
}

// str lowers str(X[, N]), user_str and kernel_str.
func (s *scope) str(e *hclsyntax.FunctionCallExpr) Expr {
	if len(e.Args) < 1 || len(e.Args) > 2 {
		return s.errorf(e.Range(), "Wrong number of arguments", "%s takes a pointer and, optionally, the most bytes to read: %s(args.filename, 128).", e.Name, e.Name)
	}
	size := DefaultStrSize
	if len(e.Args) == 2 {
		n, ok := s.smallInt(e.Args[1], 2, MaxStrSize)
		if !ok {
			return &invalid{exprBase{rng: e.Range()}}
		}
		size = int(n)
	}
	x := s.lower(e.Args[0])
	if isInvalid(x) {
		return x
	}
	switch t := x.Type(); {
	case t.IsString():
		return s.errorf(x.Range(), "Already a string", "%s is a string already: use it as it is.", x.Text())
	case !t.Numeric():
		return s.errorf(x.Range(), e.Name+" needs a pointer", "%s reads the string a pointer points at; %s is a %s.", e.Name, x.Text(), t)
	}
	space := map[string]Space{"str": SpaceAuto, "user_str": SpaceUser, "kernel_str": SpaceKernel}[e.Name]
	return &Str{exprBase: s.base(e, StringType(size)), X: x, Space: space}
}

// MaxJoinArgs is the most strings join reads.
const MaxJoinArgs = 16

// Join is join(X[, N]): the strings of a NULL-terminated array of string
// pointers in user memory (an argv), joined with spaces, at most N of them,
// in a buffer of JoinSize bytes.
type Join struct {
	exprBase
	X    Expr
	Args int
}

// JoinSize is the buffer join fills.
const JoinSize = 256

func (s *scope) join(e *hclsyntax.FunctionCallExpr) Expr {
	if len(e.Args) < 1 || len(e.Args) > 2 {
		return s.errorf(e.Range(), "Wrong number of arguments", "join takes an array of string pointers and, optionally, how many to read: join(args.argv, 8).")
	}
	n := int64(MaxJoinArgs)
	if len(e.Args) == 2 {
		var ok bool
		if n, ok = s.smallInt(e.Args[1], 1, MaxJoinArgs); !ok {
			return &invalid{exprBase{rng: e.Range()}}
		}
	}
	x := s.lower(e.Args[0])
	if isInvalid(x) {
		return x
	}
	if !x.Type().Numeric() {
		return s.errorf(x.Range(), "join needs a pointer", "join reads an array of string pointers (such as args.argv); %s is a %s.", x.Text(), x.Type())
	}
	return &Join{exprBase: s.base(e, StringType(JoinSize)), X: x, Args: int(n)}
}

// BufSize is the most bytes buf() keeps: bpftrace's default (its
// strlen, 64).
const BufSize = 64

// buf lowers buf(X, LEN).
func (s *scope) buf(e *hclsyntax.FunctionCallExpr) Expr {
	if len(e.Args) != 2 {
		return s.errorf(e.Range(), "Wrong number of arguments", "buf takes a pointer and a length: buf(args.buf, args.count) (at most %d bytes are kept).", BufSize)
	}
	x, n := s.lower(e.Args[0]), s.lower(e.Args[1])
	for _, v := range []Expr{x, n} {
		if isInvalid(v) {
			return v
		}
	}
	if !x.Type().Numeric() {
		return s.errorf(x.Range(), "buf needs a pointer", "buf reads the bytes a pointer points to; %s is a %s.", x.Text(), x.Type())
	}
	if !n.Type().Numeric() {
		return s.errorf(n.Range(), "buf needs a length", "buf's length is an integer; %s is a %s.", n.Text(), n.Type())
	}
	return &Buf{exprBase: s.base(e, BytesType(8+BufSize)), X: x, Len: n}
}

func (s *scope) smallInt(e hcl.Expression, lo, hi int64) (int64, bool) {
	v, diags := e.Value(nil)
	if !diags.HasErrors() && v.Type() == cty.Number && !v.IsNull() {
		if n, acc := v.AsBigFloat().Int64(); acc == 0 && n >= lo && n <= hi {
			return n, true
		}
	}
	s.errorf(e.Range(), "Expected a number", "Give a whole number from %d to %d.", lo, hi)
	return 0, false
}

func (s *scope) startsWith(e *hclsyntax.FunctionCallExpr) Expr {
	if len(e.Args) != 2 {
		return s.errorf(e.Range(), "Wrong number of arguments", "starts_with takes a string and a literal prefix: starts_with(str(args.filename), \"/tmp/\").")
	}
	x := s.lower(e.Args[0])
	if isInvalid(x) {
		return x
	}
	if t := x.Type(); !t.IsString() && t.Kind != KindTarget || isLiteral(x) {
		return s.errorf(x.Range(), "starts_with needs a string", "%s is a %s; give a string value: comm, str(...), a string field.", x.Text(), x.Type())
	}
	prefix, ok := s.prefix(e.Args[1], x)
	if !ok {
		return &invalid{exprBase{rng: e.Args[1].Range()}}
	}
	return &StartsWith{exprBase: s.base(e, TypeBool), X: x, Prefix: prefix}
}

// prefix reads starts_with's prefix a: a non-empty string literal shorter
// than what x can hold.
func (s *scope) prefix(a hcl.Expression, x Expr) (string, bool) {
	prefix, ok := s.d.literalString(a)
	if !ok || prefix == "" {
		s.errorf(a.Range(), "Expected a prefix", "The prefix is a quoted, non-empty string literal.")
		return "", false
	}
	if t := x.Type(); t.IsString() && len(prefix) >= t.Size {
		s.errorf(a.Range(), "Prefix too long", "%s holds at most %d bytes, so it never starts with these %d.", x.Text(), t.Size-1, len(prefix))
		return "", false
	}
	return prefix, true
}

func (s *scope) byteSwap(e *hclsyntax.FunctionCallExpr) Expr {
	if len(e.Args) != 1 {
		return s.errorf(e.Range(), "Wrong number of arguments", "%s takes one integer.", e.Name)
	}
	x := s.lower(e.Args[0])
	if isInvalid(x) {
		return x
	}
	if !x.Type().Numeric() {
		return s.errorf(x.Range(), e.Name+" needs an integer", "%s is a %s.", x.Text(), x.Type())
	}
	bits := 16
	if e.Name == "ntohl" || e.Name == "htonl" {
		bits = 32
	}
	return &ByteSwap{exprBase: s.base(e, TypeInt), X: x, Bits: bits}
}

// has lowers has(T, KEY).
func (s *scope) has(e *hclsyntax.FunctionCallExpr) Expr {
	if len(e.Args) != 2 {
		return s.errorf(e.Range(), "Wrong number of arguments", "has takes a table and a key: has(queued_at, [args.pid]).")
	}
	t := s.tableName(e.Args[0])
	if t == nil {
		return &invalid{exprBase{rng: e.Range()}}
	}
	t.Reads++
	return &Has{exprBase: s.base(e, TypeBool), Table: t, Key: s.tableKey(t, e.Args[1])}
}

// tableName resolves an expression that names a table.
func (s *scope) tableName(e hcl.Expression) *Table {
	tr, ok := e.(*hclsyntax.ScopeTraversalExpr)
	if !ok || len(tr.Traversal) != 1 {
		s.errorf(e.Range(), "Expected a table", "Name a table declared with table \"NAME\" { ... }.")
		return nil
	}
	name := tr.Traversal.RootName()
	t := s.d.tables[name]
	if t == nil {
		s.errorf(e.Range(), "Unknown table", "No table %q is declared.%s", name, suggestTable(name, s.d.tables))
	}
	return t
}

// index lowers T[KEY]: a table read.
func (s *scope) index(e *hclsyntax.IndexExpr) Expr {
	t := s.tableName(e.Collection)
	if t == nil {
		return &invalid{exprBase{rng: e.Range()}}
	}
	return s.tableRead(e, t, s.tableKey(t, e.Key), "", hcl.Range{})
}

// relative lowers T[KEY].FIELD and cast(...).FIELD....
func (s *scope) relative(e *hclsyntax.RelativeTraversalExpr) Expr {
	switch src := e.Source.(type) {
	case *hclsyntax.IndexExpr:
		t := s.tableName(src.Collection)
		if t == nil {
			return &invalid{exprBase{rng: e.Range()}}
		}
		a, ok := e.Traversal[0].(hcl.TraverseAttr)
		if !ok || len(e.Traversal) != 1 {
			return s.errorf(e.Range(), "Invalid table read", "Read a table as T[KEY], or T[KEY].FIELD for a table of objects.")
		}
		return s.tableRead(e, t, s.tableKey(t, src.Key), a.Name, a.SrcRange)
	case *hclsyntax.FunctionCallExpr:
		if src.Name == "cast" || src.Name == "user_cast" {
			return s.cast(src, e.Traversal)
		}
	}
	return s.errorf(e.Range(), "Unsupported expression", "Only table reads (T[KEY].FIELD) and cast(...).FIELD have fields.")
}

// tableTraversal lowers T[0] and T[0].FIELD, which HCL folds into one
// traversal when the key is a literal.
func (s *scope) tableTraversal(e *hclsyntax.ScopeTraversalExpr, t *Table) Expr {
	tr := e.Traversal
	if len(tr) < 2 || len(tr) > 3 {
		return s.errorf(e.Range(), "Invalid table read", "Read a table as %s[KEY], or %s[KEY].FIELD for a table of objects.", t.Name, t.Name)
	}
	ix, ok := tr[1].(hcl.TraverseIndex)
	if !ok {
		return s.errorf(e.Range(), "Invalid table read", "Read a table as %s[KEY], or %s[KEY].FIELD for a table of objects.", t.Name, t.Name)
	}
	key := &hclsyntax.LiteralValueExpr{Val: ix.Key, SrcRange: ix.SrcRange}
	field, frng := "", hcl.Range{}
	if len(tr) == 3 {
		a, ok := tr[2].(hcl.TraverseAttr)
		if !ok {
			return s.errorf(e.Range(), "Invalid table read", "A table's key is given once: %s[KEY].", t.Name)
		}
		field, frng = a.Name, a.SrcRange
	}
	return s.tableRead(e, t, s.tableKey(t, key), field, frng)
}

func (s *scope) tableRead(e hcl.Expression, t *Table, key []Expr, field string, frng hcl.Range) Expr {
	t.Reads++
	if t.Key == nil {
		return s.errorf(e.Range(), "Table type unknown", "What %q holds is not known: no store into it has a value whose type can be told.", t.Name)
	}
	if t.Fields != nil {
		if field == "" {
			return s.errorf(e.Range(), "Pick a field", "%q holds objects with %s: read one, such as %s[KEY].%s.", t.Name, quoteList(t.FieldNames()), t.Name, t.Fields[0].Name)
		}
		f := t.Field(field)
		if f == nil {
			return s.errorf(frng, "Unknown table field", "%q holds objects with %s, not %q.", t.Name, quoteList(t.FieldNames()), field)
		}
		return &TableRead{exprBase: s.base(e, f.Type), Table: t, Key: key, Field: field}
	}
	if field != "" {
		return s.errorf(frng, "Not a table of objects", "%q holds single values: read it as %s[KEY].", t.Name, t.Name)
	}
	return &TableRead{exprBase: s.base(e, t.Value), Table: t, Key: key}
}
