package spec

import (
	"fmt"
	"math"
	"math/big"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/probectl/probectl/bpf"
	"github.com/zclconf/go-cty/cty"
)

// scope lowers HCL expressions of one handler into checked Exprs.
type scope struct {
	probe *Probe
	exit  bool
	d     *decoder
}

// invalid is returned for an expression that failed to check; its errors
// are already reported, and it never produces further ones.
type invalid struct{ exprBase }

func (s *scope) errorf(rng hcl.Range, summary, detail string, args ...any) Expr {
	s.d.errorf(rng, summary, detail, args...)
	return &invalid{exprBase{rng: rng}}
}

func isInvalid(e Expr) bool {
	_, bad := e.(*invalid)
	return bad || e == nil
}

func (s *scope) boolExpr(e hcl.Expression, what string) Expr {
	x := s.lower(e)
	if s.stackMisuse(x, what) {
		return &invalid{exprBase{rng: x.Range()}}
	}
	if !isInvalid(x) && x.Type().Kind != KindBool {
		hint := fmt.Sprintf("compare it, for example %s != 0", x.Text())
		if x.Type().IsString() {
			hint = fmt.Sprintf("compare it with a string, for example %s == \"bash\"", x.Text())
		}
		return s.errorf(x.Range(), "Condition is not a bool", "%s needs a condition, but this is a %s: %s.", what, x.Type(), hint)
	}
	return x
}

func (s *scope) intExpr(e hcl.Expression, what string) Expr {
	x := s.lower(e)
	if s.stackMisuse(x, what) {
		return &invalid{exprBase{rng: x.Range()}}
	}
	if !isInvalid(x) && !x.Type().Numeric() {
		return s.errorf(x.Range(), "Value is not an integer",
			"%s must be an integer expression, but this is a %s. Use a number such as ktime, arg0 or entry.NAME.", what, x.Type())
	}
	return x
}

// keys lowers by: a list, whose keys are named by their text, or an
// object naming each column (by = { errno = -ret, file = str(args.filename) }).
// A key may be shown through a decoder (errno_name(x), inet(a, p), ...).
func (s *scope) keys(attr *hcl.Attribute) ([]Expr, []string) {
	exprs, names, ok := s.keyExprs(attr)
	if !ok {
		return nil, nil
	}
	if len(exprs) > MaxKeyFields {
		s.errorf(attr.Expr.Range(), "Too many keys", "by takes at most %d values; drop some.", MaxKeyFields)
		return nil, nil
	}
	var out []Expr
	var outNames []string
	for i, e := range exprs {
		x := s.shown(e)
		if !s.validKey(x) {
			continue
		}
		out = append(out, x)
		if names != nil {
			outNames = append(outNames, names[i])
		}
	}
	return out, outNames
}

// keyExprs reads by's expressions: a list, or an object (whose names it
// returns too, nil for a list). It reports what it refuses (not ok).
func (s *scope) keyExprs(attr *hcl.Attribute) ([]hcl.Expression, []string, bool) {
	if obj, ok := attr.Expr.(*hclsyntax.ObjectConsExpr); ok {
		return s.namedKeys(obj)
	}
	exprs, diags := hcl.ExprList(attr.Expr)
	if diags.HasErrors() {
		s.errorf(attr.Expr.Range(), "Expected a list or an object",
			"by is a list of values to group by, for example [func, comm], or an object that names them: { fn = func, errno = -ret }.")
		return nil, nil, false
	}
	return exprs, nil, true
}

// namedKeys reads by = { NAME = VALUE, ... }: each name an identifier,
// none twice.
func (s *scope) namedKeys(obj *hclsyntax.ObjectConsExpr) ([]hcl.Expression, []string, bool) {
	var exprs []hcl.Expression
	var names []string
	seen := map[string]bool{}
	for _, item := range obj.Items {
		name := hcl.ExprAsKeyword(item.KeyExpr)
		switch {
		case name == "" || !bpf.ValidName(name):
			s.errorf(item.KeyExpr.Range(), "Invalid key name",
				"Key names are identifiers (letters, digits and underscores, starting with a letter), as metric labels need: by = { errno = -ret }.")
			return nil, nil, false
		case seen[name]:
			s.errorf(item.KeyExpr.Range(), "Duplicate key name", "%q names two keys. Rename one.", name)
			return nil, nil, false
		}
		seen[name] = true
		names = append(names, name)
		exprs = append(exprs, item.ValueExpr)
	}
	return exprs, names, true
}

// validKey says x can be a key: valid, and neither a bool nor a constant
// string (which it reports).
func (s *scope) validKey(x Expr) bool {
	switch {
	case isInvalid(x):
		return false
	case x.Type().Kind == KindBool:
		s.errorf(x.Range(), "Key is a bool", "Group by a value, not a condition: use %s ? 1 : 0 to key by it.", x.Text())
		return false
	case isLiteral(x):
		s.errorf(x.Range(), "Key is a constant string", "A key must vary: group by comm, str(...), or an integer value.")
		return false
	}
	return true
}

// MaxKeyFields is the most values a by list may have.
const MaxKeyFields = 8

func isFunc(x Expr) bool {
	v, ok := x.(*Var)
	return ok && v.Name == "func"
}

// FuncName returns the function name b compares func with ("func ==
// \"vfs_read\""), which the compiler turns into the function's index.
func FuncName(b *Binary) (string, bool) {
	if !isFunc(b.L) {
		return "", false
	}
	lit, ok := b.R.(*StringLit)
	if !ok {
		return "", false
	}
	return lit.Value, true
}

// fields lowers an object of named values: save or event fields.
func (s *scope) fields(attr *hcl.Attribute, what string) []*Field {
	pairs, diags := hcl.ExprMap(attr.Expr)
	if diags.HasErrors() {
		s.errorf(attr.Expr.Range(), "Expected an object", "%s is an object of names to values, for example { start = ktime }.", what)
		return nil
	}
	var out []*Field
	seen := map[string]bool{}
	for _, kv := range pairs {
		name := hcl.ExprAsKeyword(kv.Key)
		if name == "" || !bpf.ValidName(name) {
			s.errorf(kv.Key.Range(), "Invalid field name", "Field names are bare identifiers, for example start = ktime.")
			continue
		}
		if seen[name] {
			s.errorf(kv.Key.Range(), "Duplicate field", "%q is set twice in %s. Remove one.", name, what)
			continue
		}
		seen[name] = true
		if x := s.fieldValue(kv.Value, what); x != nil {
			out = append(out, &Field{Name: name, Value: x, Range: hcl.RangeBetween(kv.Key.Range(), kv.Value.Range())})
		}
	}
	return out
}

// fieldValue lowers the value of a field of what (an event's fields are
// shown, a save's are not): an integer or a string that varies; nil
// after an error.
func (s *scope) fieldValue(e hcl.Expression, what string) Expr {
	var x Expr
	if what == "fields" {
		x = s.shown(e)
	} else {
		x = s.lower(e)
	}
	if isInvalid(x) {
		return nil
	}
	switch {
	case isLiteral(x):
		s.errorf(x.Range(), "Field cannot hold this", "The values of %s = { ... } are integers and strings that vary; the string literal %s is the same every time. Keep a value that varies, and name what is constant in the field's name.", what, x.Text())
		return nil
	case x.Type().Kind == KindBool:
		s.errorf(x.Range(), "Field cannot hold this", "The values of %s = { ... } are integers and strings that vary, not a %s. Use cond ? 1 : 0 for a flag.", what, x.Type())
		return nil
	}
	return x
}

func (s *scope) base(e hcl.Expression, t Type) exprBase {
	return exprBase{rng: e.Range(), src: s.d.src, typ: t}
}

// lower checks one expression. Every error path reports a diagnostic and
// returns an *invalid, which later checks pass over silently.
func (s *scope) lower(e hcl.Expression) Expr {
	switch e := e.(type) {
	case *hclsyntax.ParenthesesExpr:
		return s.lower(e.Expression)
	case *hclsyntax.LiteralValueExpr:
		return s.literal(e, e.Val)
	case *hclsyntax.TemplateExpr:
		return s.template(e)
	case *hclsyntax.TemplateWrapExpr:
		return s.errorf(e.Range(), "Templates are not supported", "Write the expression without \"${...}\" around it.")
	case *hclsyntax.ScopeTraversalExpr:
		return s.traversal(e)
	case *hclsyntax.UnaryOpExpr:
		return s.unary(e)
	case *hclsyntax.BinaryOpExpr:
		return s.binary(e)
	case *hclsyntax.ConditionalExpr:
		return s.conditional(e)
	case *hclsyntax.FunctionCallExpr:
		return s.call(e)
	case *hclsyntax.IndexExpr:
		return s.index(e)
	case *hclsyntax.RelativeTraversalExpr:
		return s.relative(e)
	}
	return s.errorf(e.Range(), "Unsupported expression",
		"Probe expressions are built from numbers, built-in values (pid, comm, arg0, ...), entry.NAME, args.FIELD, operators, cond ? a : b and bit functions (band, bor, bxor, shl, shr, bnot).")
}

// template lowers a quoted string: HCL parses "x" as a template, of which
// only a plain literal is a probe value.
func (s *scope) template(e *hclsyntax.TemplateExpr) Expr {
	if len(e.Parts) == 1 {
		if lit, ok := e.Parts[0].(*hclsyntax.LiteralValueExpr); ok && lit.Val.Type() == cty.String {
			v := lit.Val.AsString()
			return &StringLit{exprBase: s.base(e, StringType(len(v)+1)), Value: v}
		}
	}
	if len(e.Parts) == 0 {
		return &StringLit{exprBase: s.base(e, StringType(1))}
	}
	return s.errorf(e.Range(), "Templates are not supported", "Strings are plain literals; \"${...}\" interpolation is not available in probes.")
}

func (s *scope) literal(e hcl.Expression, v cty.Value) Expr {
	switch {
	case v.IsNull():
		return s.errorf(e.Range(), "Null is not a value", "Use a number, such as 0.")
	case v.Type() == cty.Bool:
		return &BoolLit{exprBase: s.base(e, TypeBool), Value: v.True()}
	case v.Type() == cty.Number:
		return s.number(e, v.AsBigFloat())
	}
	return s.errorf(e.Range(), "Unsupported literal", "Use a number, true, false, or a quoted string compared with comm.")
}

// number checks a numeric literal: a 64-bit integer. A negative one is
// written -N, so number is also given N negated.
func (s *scope) number(e hcl.Expression, bf *big.Float) Expr {
	if !bf.IsInt() {
		return s.errorf(e.Range(), "Not a whole number", "Probes compute with 64-bit integers; %s is not one.", bf.Text('g', -1))
	}
	n, acc := bf.Int64()
	if acc != big.Exact {
		return s.errorf(e.Range(), "Number out of range", "%s", outOfRange(bf))
	}
	return &IntLit{exprBase: s.base(e, TypeInt), Value: n}
}

// outOfRange says why a number does not fit, and what to write: probes
// compute with signed 64-bit integers, so an unsigned 64-bit constant (a
// mask, -1 as a u64) is written as the signed number with the same bits.
func outOfRange(bf *big.Float) string {
	text := bf.Text('f', 0)
	limits := fmt.Sprintf("probes compute with signed 64-bit integers, from %d to %d", int64(math.MinInt64), int64(math.MaxInt64))
	u, acc := bf.Uint64()
	if bf.Sign() > 0 && acc == big.Exact {
		return fmt.Sprintf("%s is above %d: %s. For these 64 bits as an unsigned value, write %d (the same bits, signed) or hex(\"0x%x\").",
			text, int64(math.MaxInt64), limits, int64(u), u)
	}
	return fmt.Sprintf("%s does not fit in 64 bits: %s.", text, limits)
}

// traversal lowers a name, or a name with fields: a path root (entry,
// args, task), a table read, a stack, or a built-in value.
func (s *scope) traversal(e *hclsyntax.ScopeTraversalExpr) Expr {
	tr := e.Traversal
	root := tr.RootName()
	switch root {
	case "entry":
		return s.entryRef(e)
	case "args":
		return s.args(e)
	case "task":
		if x, refused := s.refused(e, builtinByName["task"]); refused {
			return x
		}
		return &KernelPath{exprBase: s.base(e, TypeTarget), Root: RootTask, Fields: s.pathFields(tr[1:])}
	}
	if t := s.d.tables[root]; t != nil {
		return s.tableTraversal(e, t)
	}
	b := builtinByName[root]
	switch {
	case b != nil && b.Form == FormStack:
		return s.stackVar(e)
	case b == nil:
		return s.unknownName(e, root, attrNames(tr[1:]))
	case len(tr) != 1:
		return s.plainFields(e, root, b)
	}
	return s.value(e, b)
}

// plainFields reports fields on root, a plain value (b, when it is a
// built-in one): a kernel probe's register is cast to reach a struct.
func (s *scope) plainFields(e hcl.Expression, root string, b *Builtin) Expr {
	hint := ""
	if b != nil && b.Register && s.probe.Addr.Kind == bpf.KindKernel {
		hint = fmt.Sprintf(" To read the struct it points to, cast it: cast(%s, \"struct NAME\").FIELD.", root)
	}
	return s.errorf(e.Range(), "Unsupported traversal", "Only entry.NAME, args.FIELD, task.FIELD and table reads have fields; %s is a plain value.%s", root, hint)
}

// value lowers built-in value b, where the probe's kind and the handler
// have it.
func (s *scope) value(e hcl.Expression, b *Builtin) Expr {
	if x, refused := s.refused(e, b); refused {
		return x
	}
	if b.Phase == ExitOnly && !s.exit || b.Phase == EntryOnly && s.exit {
		return s.refusal(e, b, b.PhaseRefusal)
	}
	if b.USDTOnly && s.probe.USDT == "" {
		return s.refusal(e, b, noArgRegister)
	}
	return &Var{exprBase: s.base(e, b.TypeIn(s.probe.Addr.Kind)), Name: b.Name}
}

// unknownName reports a name that is no built-in value or table, with
// what bpftrace's name is here or the closest name, and every value; its
// fields are the names after it (curtask.pid), nil for none.
func (s *scope) unknownName(e hcl.Expression, name string, fields []string) Expr {
	hint := bpftraceHint(name) + bpftracePath(name, fields)
	if hint == "" {
		hint = s.suggest(name)
	}
	return s.errorf(e.Range(), "Unknown name", "%q is not a built-in value or a table.%s Available: %s, and the tables.", name, hint, knownValues)
}

// knownValues lists every built-in name, for the unknown name's error.
var knownValues = func() string {
	var names []string
	for _, b := range builtinList {
		if w := b.written(); !slices.Contains(names, w) {
			names = append(names, w)
		}
	}
	return strings.Join(names, ", ")
}()

// refused reports the error for b where the probe's kind lacks it.
func (s *scope) refused(e hcl.Expression, b *Builtin) (Expr, bool) {
	r, refused := b.Refused[s.probe.Addr.Kind]
	if !refused {
		return nil, false
	}
	return s.refusal(e, b, r), true
}

func (s *scope) refusal(e hcl.Expression, b *Builtin, r Refusal) Expr {
	return s.errorf(e.Range(), b.expand(r.Summary), "%s", b.expand(r.Detail))
}

// entryRef lowers entry.NAME: what on_entry saved, read in on_exit.
func (s *scope) entryRef(e *hclsyntax.ScopeTraversalExpr) Expr {
	tr := e.Traversal
	var name string
	if len(tr) == 2 {
		if a, ok := tr[1].(hcl.TraverseAttr); ok {
			name = a.Name
		}
	}
	if name == "" {
		return s.errorf(e.Range(), "Invalid entry reference", "Write entry.NAME, where NAME is saved by on_entry's save.")
	}
	if !s.exit {
		return s.errorf(e.Range(), "entry is only for on_exit",
			"entry.%s reads what on_entry saved, so it exists only in on_exit. In on_entry use the value itself.", name)
	}
	var saved []string
	if s.probe.Entry != nil {
		for _, f := range s.probe.Entry.Save {
			if f.Name == name {
				return &EntryRef{exprBase: s.base(e, f.Value.Type()), Name: name}
			}
			saved = append(saved, f.Name)
		}
	}
	if len(saved) == 0 {
		return s.errorf(e.Range(), "Nothing saved on entry",
			"entry.%s is never saved. Add save = { %s = ... } to on_entry.", name, name)
	}
	return s.errorf(e.Range(), "Unknown entry value",
		"on_entry saves %s, not %q. Add it to save, or use one of those.", quoteList(saved), name)
}

func (s *scope) suggest(name string) string {
	best, bestDist := "", 3
	candidates := []string{}
	for _, b := range builtinList {
		if b.Form == FormValue {
			candidates = append(candidates, b.Name)
		}
	}
	for t := range s.d.tables {
		candidates = append(candidates, t)
	}
	for _, v := range candidates {
		if dist := levenshtein(name, v); dist < bestDist || (dist == bestDist && v < best) {
			best, bestDist = v, dist
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" Did you mean %q?", best)
}

func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

func (s *scope) unary(e *hclsyntax.UnaryOpExpr) Expr {
	if lit, ok := e.Val.(*hclsyntax.LiteralValueExpr); ok && e.Op == hclsyntax.OpNegate && lit.Val.Type() == cty.Number {
		// -N is how a negative number is written: -9223372036854775808 fits.
		return s.number(e, new(big.Float).Neg(lit.Val.AsBigFloat()))
	}
	x := s.lower(e.Val)
	if isInvalid(x) {
		return x
	}
	switch e.Op {
	case hclsyntax.OpLogicalNot:
		if s.stackMisuse(x, "!") {
			return &invalid{exprBase{rng: e.Range()}}
		}
		if x.Type().Kind != KindBool {
			return s.errorf(e.Range(), "! needs a bool", "%s is a %s. Compare it first, for example !(%s == 0).", x.Text(), x.Type(), x.Text())
		}
		return &Unary{exprBase: s.base(e, TypeBool), Op: OpNot, X: x}
	case hclsyntax.OpNegate:
		if s.stackMisuse(x, "-") {
			return &invalid{exprBase{rng: e.Range()}}
		}
		if !x.Type().Numeric() {
			return s.errorf(e.Range(), "- needs an integer", "%s is a %s.", x.Text(), x.Type())
		}
		// Negating anything but a number wraps like all arithmetic:
		// -(-9223372036854775808) is -9223372036854775808.
		return &Unary{exprBase: s.base(e, TypeInt), Op: OpNeg, X: x}
	}
	return s.errorf(e.Range(), "Unsupported operator", "Use ! or -.")
}

var binaryOps = map[*hclsyntax.Operation]Op{
	hclsyntax.OpAdd: OpAdd, hclsyntax.OpSubtract: OpSub, hclsyntax.OpMultiply: OpMul,
	hclsyntax.OpDivide: OpDiv, hclsyntax.OpModulo: OpMod,
	hclsyntax.OpEqual: OpEq, hclsyntax.OpNotEqual: OpNe,
	hclsyntax.OpLessThan: OpLt, hclsyntax.OpLessThanOrEqual: OpLe,
	hclsyntax.OpGreaterThan: OpGt, hclsyntax.OpGreaterThanOrEqual: OpGe,
	hclsyntax.OpLogicalAnd: OpAnd, hclsyntax.OpLogicalOr: OpOr,
}

// binary lowers a binary operation. HCL makes a left-deep tree of a chain
// such as a + b + c: binary walks its left spine in a loop, so that a long
// chain costs no deep recursion.
func (s *scope) binary(e *hclsyntax.BinaryOpExpr) Expr {
	spine := []*hclsyntax.BinaryOpExpr{e}
	for {
		l, ok := spine[len(spine)-1].LHS.(*hclsyntax.BinaryOpExpr)
		if !ok {
			break
		}
		spine = append(spine, l)
	}
	x := s.lower(spine[len(spine)-1].LHS)
	for i := len(spine) - 1; i >= 0; i-- {
		b := spine[i]
		op, ok := binaryOps[b.Op]
		if !ok {
			x = s.errorf(b.Range(), "Unsupported operator", "This operator is not available in probes.")
			continue
		}
		r := s.lower(b.RHS)
		if isInvalid(x) || isInvalid(r) {
			x = &invalid{exprBase{rng: b.Range()}}
			continue
		}
		x = s.typeBinary(b, op, x, r)
	}
	return x
}

func (s *scope) typeBinary(e hcl.Expression, op Op, l, r Expr) Expr {
	if s.stackMisuse(l, string(op)) || s.stackMisuse(r, string(op)) {
		return &invalid{exprBase{rng: e.Range()}}
	}
	switch op {
	case OpAnd, OpOr:
		return s.logical(e, op, l, r)
	case OpEq, OpNe:
		return s.equality(e, op, l, r)
	case OpLt, OpLe, OpGt, OpGe:
		return s.ordering(e, op, l, r)
	}
	return s.arithmetic(e, op, l, r) // and bit operations
}

func (s *scope) binaryOf(e hcl.Expression, t Type, op Op, l, r Expr) Expr {
	return &Binary{exprBase: s.base(e, t), Op: op, L: l, R: r}
}

// logical checks && and ||: bools.
func (s *scope) logical(e hcl.Expression, op Op, l, r Expr) Expr {
	for _, x := range []Expr{l, r} {
		if x.Type().Kind != KindBool {
			return s.errorf(x.Range(), fmt.Sprintf("%s needs bools", op),
				"%s is a %s. Compare it, for example %s != 0.", x.Text(), x.Type(), x.Text())
		}
	}
	return s.binaryOf(e, TypeBool, op, l, r)
}

// equality checks == and !=: integers, bools, a string with a literal, a
// named value (func, event) with its name.
func (s *scope) equality(e hcl.Expression, op Op, l, r Expr) Expr {
	if isLiteral(l) && !isLiteral(r) {
		l, r = r, l // the literal second
	}
	if isNamed(l) && isLiteral(r) {
		return s.binaryOf(e, TypeBool, op, l, r)
	}
	if v, ok := l.(*Var); ok && isPodValue(v.Name) {
		return s.podEquality(e, op, v, r)
	}
	if lit, ok := r.(*StringLit); ok {
		return s.literalEquality(e, op, l, lit)
	}
	return s.valueEquality(e, op, l, r)
}

// valueEquality checks a comparison of two values: both integers or both
// bools (strings compare with literals only).
func (s *scope) valueEquality(e hcl.Expression, op Op, l, r Expr) Expr {
	lt, rt := l.Type(), r.Type()
	switch {
	case lt.IsString() != rt.IsString():
		return s.errorf(e.Range(), "Mismatched comparison",
			"%s is a %s and %s is a %s. Strings compare with string literals, such as comm == \"bash\".", l.Text(), lt, r.Text(), rt)
	case lt.IsString() || rt.IsString():
		return s.errorf(e.Range(), "Unsupported string comparison",
			"Strings compare with a literal, such as comm == \"bash\" (or starts_with(x, \"/tmp/\")); %s and %s are both values.", l.Text(), r.Text())
	case lt.Kind == KindBool && rt.Kind == KindBool, lt.Numeric() && rt.Numeric():
		return s.binaryOf(e, TypeBool, op, l, r)
	}
	return s.errorf(e.Range(), "Mismatched comparison", "%s is a %s and %s is a %s.", l.Text(), lt, r.Text(), rt)
}

// literalEquality checks a comparison with a string literal: of a string
// that can hold it, or of kernel data the target types.
func (s *scope) literalEquality(e hcl.Expression, op Op, l Expr, lit *StringLit) Expr {
	lt := l.Type()
	switch {
	case isLiteral(l):
		return s.errorf(e.Range(), "Comparison of two literals", "Both sides are constant strings: compare a string value with a literal.")
	case !lt.IsString() && lt.Kind != KindTarget:
		return s.errorf(e.Range(), "Mismatched comparison",
			"%s is a %s and %s is a string. Strings compare with strings: comm, str(...), a string field.", l.Text(), lt, lit.Text())
	case lt.IsString() && len(lit.Value) >= lt.Size:
		return s.errorf(lit.Range(), "String too long",
			"%q has %d bytes; %s holds at most %d, so they are never equal. Compare with its first %d bytes, or read a longer string: str(x, %d).",
			lit.Value, len(lit.Value), l.Text(), lt.Size-1, lt.Size-1, min(len(lit.Value)+1, MaxStrSize))
	}
	return s.binaryOf(e, TypeBool, op, l, lit)
}

// ordering checks < <= > >=: integers.
func (s *scope) ordering(e hcl.Expression, op Op, l, r Expr) Expr {
	for _, x := range []Expr{l, r} {
		if !x.Type().Numeric() {
			hint := ""
			if x.Type().IsString() {
				hint = " Strings compare only with == and != (and starts_with)."
			}
			return s.errorf(e.Range(), fmt.Sprintf("%s needs integers", op), "%s is a %s.%s", x.Text(), x.Type(), hint)
		}
	}
	return s.binaryOf(e, TypeBool, op, l, r)
}

// arithmetic checks arithmetic and bit operations: integers.
func (s *scope) arithmetic(e hcl.Expression, op Op, l, r Expr) Expr {
	for _, x := range []Expr{l, r} {
		if !x.Type().Numeric() {
			return s.errorf(x.Range(), fmt.Sprintf("%s needs integers", op), "%s is a %s, not an integer.", x.Text(), x.Type())
		}
	}
	return s.binaryOf(e, TypeInt, op, l, r)
}

// isNamed reports whether x is a built-in value that compares with a
// name (func == "vfs_read"), which the compiler resolves.
func isNamed(x Expr) bool {
	v, ok := x.(*Var)
	return ok && builtinByName[v.Name] != nil && builtinByName[v.Name].Named
}

// podEquality checks pod, namespace, container or node compared with a
// name: the compiler looks the task's cgroup up in a map of the cgroups
// that match (PodMatch), which the runtime fills from the node's pods.
func (s *scope) podEquality(e hcl.Expression, op Op, v *Var, r Expr) Expr {
	lit, ok := r.(*StringLit)
	if !ok {
		return s.errorf(e.Range(), "Pods compare with a name",
			"%s is matched against the node's pods by name: compare it with a string literal, such as %s == \"web-0\".", v.Name, v.Name)
	}
	if lit.Value == "" {
		return s.errorf(lit.Range(), "Empty name",
			"No pod has an empty %s: a task outside pods has none. Compare with a name, such as %s != \"kube-system\".", v.Name, v.Name)
	}
	return s.binaryOf(e, TypeBool, op, v, lit)
}

// PodMatch is b's pod value and name when b compares pod, namespace,
// container or node with a name (== or !=).
func PodMatch(b *Binary) (value, name string, ok bool) {
	v, ok := b.L.(*Var)
	if !ok || !isPodValue(v.Name) {
		return "", "", false
	}
	lit, ok := b.R.(*StringLit)
	if !ok {
		return "", "", false
	}
	return v.Name, lit.Value, true
}

// isPodValue reports whether name is one of the values a cgroup's pod
// names (pod, namespace, container, node).
func isPodValue(name string) bool {
	return slices.ContainsFunc(podEntries(), func(b *Builtin) bool { return b.Name == name })
}

func isEvent(x Expr) bool {
	v, ok := x.(*Var)
	return ok && v.Name == "event"
}

// EventName returns the event name b compares event with, which the
// compiler turns into the event's index, as FuncName does for func.
func EventName(b *Binary) (string, bool) {
	if !isEvent(b.L) {
		return "", false
	}
	lit, ok := b.R.(*StringLit)
	if !ok {
		return "", false
	}
	return lit.Value, true
}

func (s *scope) conditional(e *hclsyntax.ConditionalExpr) Expr {
	c, t, f := s.lower(e.Condition), s.lower(e.TrueResult), s.lower(e.FalseResult)
	if s.unusable("? :", c, t, f) {
		return &invalid{exprBase{rng: e.Range()}}
	}
	if c.Type().Kind != KindBool {
		return s.errorf(c.Range(), "Condition is not a bool", "%s is a %s. Compare it, for example %s != 0.", c.Text(), c.Type(), c.Text())
	}
	return s.choice(e, c, t, f)
}

// unusable says an operand of what is invalid (reported already) or a
// stack (reported now: the first one).
func (s *scope) unusable(what string, xs ...Expr) bool {
	for _, x := range xs {
		if isInvalid(x) {
			return true
		}
	}
	for _, x := range xs {
		if s.stackMisuse(x, what) {
			return true
		}
	}
	return false
}

// choice types cond ? t : f by its branches: both bools or both integers.
func (s *scope) choice(e *hclsyntax.ConditionalExpr, c, t, f Expr) Expr {
	switch tt, ft := t.Type(), f.Type(); {
	case tt.Kind == KindBool && ft.Kind == KindBool:
		return &Cond{exprBase: s.base(e, TypeBool), If: c, Then: t, Else: f}
	case tt.Numeric() && ft.Numeric():
		return &Cond{exprBase: s.base(e, TypeInt), If: c, Then: t, Else: f}
	case tt.Kind == KindString && ft.Kind == KindString:
		return s.errorf(e.Range(), "Strings cannot be chosen",
			"cond ? a : b chooses between integers (or bools), not strings. Choose with when instead: two actions with opposite conditions, or a store that fills a table slot only when it is empty.")
	}
	return s.errorf(e.Range(), "Mismatched branches", "Both results must be integers (or both bools); here they are %s and %s.", t.Type(), f.Type())
}

// Functions are the bit operations, which HCL has no operators for.
var Functions = map[string]Op{"band": OpBAnd, "bor": OpBOr, "bxor": OpBXor, "shl": OpShl, "shr": OpShr, "bnot": OpBNot}

// builtins are the other functions, for messages.
const builtins = "band, bor, bxor, shl, shr, bnot, str, user_str, kernel_str, join, starts_with, has, ntohs, ntohl, htons, htonl, cast, user_cast, enum_value, offsetof, kaddr, kernel_u64, buf, kstack, ustack, " +
	"u8, u16, u32, u64, s8, s16, s32, s64, hex(\"0x..\"), and in by keys and event fields errno_name, signal_name, syscall_name, inet, inet6, hex, cgroup_path, labels, ksym, usym"

// lowerer returns the lowering of a function that is not a bit operation
// or an integer cast, by name; nil for the others.
func lowerer(name string) func(*scope, *hclsyntax.FunctionCallExpr) Expr {
	switch name {
	case "str", "user_str", "kernel_str":
		return (*scope).str
	case "join":
		return (*scope).join
	case "buf":
		return (*scope).buf
	case "starts_with":
		return (*scope).startsWith
	case "has":
		return (*scope).has
	case "ntohs", "ntohl", "htons", "htonl":
		return (*scope).byteSwap
	case "cast", "user_cast":
		return func(s *scope, e *hclsyntax.FunctionCallExpr) Expr { return s.cast(e, nil) }
	case "kstack", "ustack":
		return (*scope).stackCall
	case "enum_value", "offsetof":
		return (*scope).kernelConst
	case "kaddr":
		return (*scope).kaddr
	case "kernel_u64":
		return (*scope).kernelU64
	}
	return nil
}

func (s *scope) call(e *hclsyntax.FunctionCallExpr) Expr {
	if e.ExpandFinal {
		return s.errorf(e.Range(), "Unsupported expansion", "Write the arguments out: %s(...) takes no \"...\".", e.Name)
	}
	if lower := lowerer(e.Name); lower != nil {
		return lower(s, e)
	}
	if _, ok := casts[e.Name]; ok {
		return s.intCast(e)
	}
	if hexLiteralCall(e) {
		return s.hexLiteral(e)
	}
	if _, ok := decoderFuncs[e.Name]; ok {
		return s.displayOnly(e)
	}
	op, ok := Functions[e.Name]
	if !ok {
		return s.errorf(e.NameRange, "Unknown function", "%q is not a probe function.%s Available: %s.", e.Name, bpftraceFunction(e.Name), builtins)
	}
	return s.bitCall(e, op)
}

// bitCall lowers a bit operation: band(a, b), ..., bnot(a).
func (s *scope) bitCall(e *hclsyntax.FunctionCallExpr, op Op) Expr {
	want := 2
	if op == OpBNot {
		want = 1
	}
	if len(e.Args) != want {
		return s.errorf(e.Range(), "Wrong number of arguments", "%s takes %d argument(s).", e.Name, want)
	}
	args := make([]Expr, want)
	for i, a := range e.Args {
		args[i] = s.lower(a)
		if isInvalid(args[i]) {
			return args[i]
		}
		if s.stackMisuse(args[i], e.Name) {
			return &invalid{exprBase{rng: e.Range()}}
		}
		if !args[i].Type().Numeric() {
			return s.errorf(args[i].Range(), e.Name+" needs integers", "%s is a %s.", args[i].Text(), args[i].Type())
		}
	}
	if op == OpBNot {
		return &Unary{exprBase: s.base(e, TypeInt), Op: op, X: args[0]}
	}
	return &Binary{exprBase: s.base(e, TypeInt), Op: op, L: args[0], R: args[1]}
}

// attrNames are the names of a traversal's attribute steps, in order.
func attrNames(tr hcl.Traversal) []string {
	var names []string
	for _, step := range tr {
		if a, ok := step.(hcl.TraverseAttr); ok {
			names = append(names, a.Name)
		}
	}
	return names
}
