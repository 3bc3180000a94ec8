package spec

import (
	"fmt"
	"math"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/probectl/probectl/bpf"
	"github.com/zclconf/go-cty/cty"
)

// This file lowers what changes how a value reads: display decoders
// (errno_name(x), inet(addr, port), labels(NAME, x), ...), which the kernel
// never sees, width and sign casts (u32(x), s16(x)), and hex literals
// (hex("0x40")).

// Decoder names how show, -json and events print a key or an event field.
// The kernel keeps the number; the decoder is applied in user space.
type Decoder string

// The decoders, as layouts name them.
const (
	DecodeErrno   Decoder = "errno"   // errno_name(x): ENOENT, for -2 or 2
	DecodeSignal  Decoder = "signal"  // signal_name(x): SIGKILL
	DecodeSyscall Decoder = "syscall" // syscall_name(x): openat, by the target's table
	DecodeInet    Decoder = "inet"    // inet(addr[, port]): 127.0.0.1:80
	DecodeInet6   Decoder = "inet6"   // inet6(addr[, port]): [::1]:80
	DecodeHex     Decoder = "hex"     // hex(x): 0x1f
	DecodeCgroup  Decoder = "cgroup"  // cgroup_path(id): /system.slice/ssh.service
	DecodeLabels  Decoder = "labels"  // labels(NAME, x): a label table of the spec
	DecodeKsym    Decoder = "ksym"    // ksym(x): a kernel address, vfs_read+0x12 [module]
	DecodeUsym    Decoder = "usym"    // usym(x): a user address of the current process, main+0x12 [file]
)

// decoderFuncs maps each decoder's function to its decoder.
var decoderFuncs = map[string]Decoder{
	"errno_name": DecodeErrno, "signal_name": DecodeSignal, "syscall_name": DecodeSyscall,
	"inet": DecodeInet, "inet6": DecodeInet6, "hex": DecodeHex, "cgroup_path": DecodeCgroup,
	"labels": DecodeLabels, "ksym": DecodeKsym, "usym": DecodeUsym,
}

// Display is a value shown through a decoder: X (and, for inet and inet6,
// Port) is what the kernel keeps; Decoder says how it prints. Only a by
// key and an event field can be one.
type Display struct {
	exprBase
	Decoder Decoder
	X       Expr
	Port    Expr      // inet, inet6: nil without a port
	Labels  *LabelSet // labels
}

// IntCast is u8(x), u16(x), u32(x), u64(x), s8(x), s16(x), s32(x) or
// s64(x): the low Bits bits of X, zero- or sign-extended back to 64.
type IntCast struct {
	exprBase
	X      Expr
	Bits   int
	Signed bool
}

// casts are the cast functions and what each keeps.
var casts = map[string]struct {
	bits   int
	signed bool
}{
	"u8": {8, false}, "u16": {16, false}, "u32": {32, false}, "u64": {64, false},
	"s8": {8, true}, "s16": {16, true}, "s32": {32, true}, "s64": {64, true},
}

// LabelSet is a labels block: names for numbers, shown by labels(NAME, x).
type LabelSet struct {
	Name      string
	DeclRange hcl.Range
	Values    map[int64]string
	Uses      int
}

// MaxLabels bounds the entries of one labels block.
const MaxLabels = 4096

// MaxLabelLen bounds a label's length.
const MaxLabelLen = 64

// labelSets holds the spec set's label tables by name, shared by every file.
type labelSets map[string]*LabelSet

var labelsSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "values", Required: true}}}

// labelsBlock decodes labels "NAME" { values = { 1 = "HUP", 2 = "INT" } }.
// HCL block bodies take identifiers only, so the numbers are the keys of
// an object.
func (d *decoder) labelsBlock(b *hcl.Block, all labelSets, tabs tables) {
	name := b.Labels[0]
	if !d.labelsNameFree(b, all, tabs) {
		return
	}
	ls := &LabelSet{Name: name, DeclRange: b.DefRange, Values: map[int64]string{}}
	all[name] = ls
	pairs, ok := d.labelPairs(b)
	if !ok {
		return
	}
	where := map[int64]hcl.Range{}
	for _, kv := range pairs {
		n, text, ok := d.label(kv)
		if !ok {
			continue
		}
		if first, dup := where[n]; dup {
			d.errorf(kv.Key.Range(), "Duplicate label", "%d already has a label at %s. Remove one.", n, pos(first))
			continue
		}
		where[n] = kv.Key.Range()
		ls.Values[n] = text
	}
}

// labelsNameFree reports whether the name of labels block b is valid and
// not yet taken by a built-in value, a table or other labels; it says
// why not.
func (d *decoder) labelsNameFree(b *hcl.Block, all labelSets, tabs tables) bool {
	name := b.Labels[0]
	switch {
	case !bpf.ValidName(name):
		d.errorf(b.LabelRanges[0], "Invalid labels name",
			"%q is not a valid name. Use letters, digits and underscores, starting with a letter: for example \"capability\".", name)
		return false
	case builtinByName[name] != nil || reserved[name] || tabs[name] != nil:
		d.errorf(b.LabelRanges[0], "Labels name taken",
			"%q is already a built-in value or a table: labels(%s, x) could not tell them apart. Rename the labels.", name, name)
		return false
	case all[name] != nil:
		d.errorf(b.DefRange, "Duplicate labels",
			"Labels %q are already declared at %s. Names are unique in a spec set: rename one.", name, pos(all[name].DeclRange))
		return false
	}
	return true
}

// labelPairs returns the entries of labels block b's values object, and
// whether there is one within MaxLabels; it says why not.
func (d *decoder) labelPairs(b *hcl.Block) ([]hcl.KeyValuePair, bool) {
	content, diags := b.Body.Content(labelsSchema)
	d.diags = append(d.diags, diags...)
	attr := content.Attributes["values"]
	if attr == nil {
		return nil, false
	}
	pairs, diags := hcl.ExprMap(attr.Expr)
	if diags.HasErrors() {
		d.errorf(attr.Expr.Range(), "Expected an object", "values maps numbers to names: { 1 = \"SIGHUP\", 2 = \"SIGINT\" }.")
		return nil, false
	}
	if len(pairs) > MaxLabels {
		d.errorf(attr.Expr.Range(), "Too many labels", "values has %d entries; at most %d are allowed.", len(pairs), MaxLabels)
		return nil, false
	}
	return pairs, true
}

// label reads one entry of a values object: its number and its label,
// and whether both are valid; it says why not.
func (d *decoder) label(kv hcl.KeyValuePair) (int64, string, bool) {
	n, ok := labelKey(kv.Key)
	if !ok {
		d.errorf(kv.Key.Range(), "Expected a number",
			"Each key is a whole number written as it is (1, -1) or quoted (\"0x10\", \"-3\"), from %d to %d.", int64(math.MinInt64), int64(math.MaxInt64))
		return 0, "", false
	}
	text, ok := d.literalString(kv.Value)
	switch {
	case !ok:
		d.errorf(kv.Value.Range(), "Expected a name", "Each value is a quoted name: 1 = \"SIGHUP\".")
		return 0, "", false
	case text == "" || len(text) > MaxLabelLen || !Printable(text):
		d.errorf(kv.Value.Range(), "Invalid label",
			"A label is 1 to %d printable characters (no control characters, valid UTF-8); %q is not.", MaxLabelLen, text)
		return 0, "", false
	}
	return n, text, true
}

// unparen returns e without the parentheses around it.
func unparen(e hcl.Expression) hcl.Expression {
	for {
		p, ok := e.(*hclsyntax.ParenthesesExpr)
		if !ok {
			return e
		}
		e = p.Expression
	}
}

// labelKey reads a labels key: a number literal, a negated one, or a
// string holding a decimal or hex number.
func labelKey(e hcl.Expression) (int64, bool) {
	if k, ok := e.(*hclsyntax.ObjectConsKeyExpr); ok {
		if hcl.ExprAsKeyword(k) != "" {
			return 0, false // a bare name
		}
		e = k.Wrapped
	}
	e = unparen(e)
	neg := false
	if u, ok := e.(*hclsyntax.UnaryOpExpr); ok && u.Op == hclsyntax.OpNegate {
		neg, e = true, u.Val
	}
	return labelNumber(e, neg)
}

// labelNumber is the number e's constant value is, negated with neg: a
// whole number, or a string of a decimal or hex one (not negated).
func labelNumber(e hcl.Expression, neg bool) (int64, bool) {
	v, diags := e.Value(nil)
	if diags.HasErrors() || v.IsNull() || !v.IsKnown() {
		return 0, false
	}
	switch v.Type() {
	case cty.Number:
		bf := v.AsBigFloat()
		if neg {
			bf = new(big.Float).Neg(bf)
		}
		n, acc := bf.Int64()
		return n, bf.IsInt() && acc == big.Exact
	case cty.String:
		if neg {
			return 0, false
		}
		return parseNumber(v.AsString())
	}
	return 0, false
}

// parseNumber reads a decimal or 0x-prefixed hex number, optionally
// negative, that fits in 64 signed bits.
func parseNumber(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 0, 64)
	if err != nil || strings.HasPrefix(strings.TrimPrefix(s, "-"), "0") && len(strings.TrimPrefix(s, "-")) > 1 && !isHexText(s) {
		return 0, false // 010 would be octal: refused rather than guessed
	}
	return n, true
}

func isHexText(s string) bool {
	s = strings.TrimPrefix(s, "-")
	return strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X")
}

// Printable reports whether every character of s prints (names in messages and labels).
func Printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// checkLabels warns about label tables no expression uses.
func checkLabels(all labelSets) hcl.Diagnostics {
	var diags hcl.Diagnostics
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if ls := all[n]; ls.Uses == 0 {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagWarning, Summary: "Labels never used",
				Detail:  fmt.Sprintf("No expression shows a value through labels(%s, ...). Use it in a by key or an event field, or remove it.", n),
				Subject: ls.DeclRange.Ptr(),
			})
		}
	}
	return diags
}

// displayOnly is the error for a decoder used where a value is computed.
func (s *scope) displayOnly(e *hclsyntax.FunctionCallExpr) Expr {
	example := e.Name + "(-ret)"
	switch decoderFuncs[e.Name] {
	case DecodeLabels:
		example = "labels(NAME, args.cap)"
	case DecodeInet, DecodeInet6:
		example = e.Name + "(addr, port)"
	case DecodeCgroup:
		example = "cgroup_path(cgroup)"
	case DecodeKsym, DecodeUsym:
		example = e.Name + "(arg0)"
	}
	return s.errorf(e.Range(), "Decoder used as a value",
		"%s changes only how a value is shown, so it belongs where values are shown: a by key (by = { name = %s }) or an event field. Here use the value itself.",
		e.Name, example)
}

// shown lowers a by key or an event field: a value, or a value shown
// through a decoder.
func (s *scope) shown(e hcl.Expression) Expr {
	e = unparen(e)
	call, ok := e.(*hclsyntax.FunctionCallExpr)
	if !ok {
		return s.lower(e)
	}
	dec, ok := decoderFuncs[call.Name]
	if !ok || dec == DecodeHex && hexLiteralCall(call) {
		return s.lower(e)
	}
	if call.ExpandFinal {
		return s.errorf(call.Range(), "Unsupported expansion", "Write the arguments out: %s(...) takes no \"...\".", call.Name)
	}
	switch dec {
	case DecodeLabels:
		return s.labelsCall(call)
	case DecodeInet, DecodeInet6:
		return s.inetCall(call, dec)
	}
	return s.intDecoderCall(call, dec)
}

// intDecoderCall lowers a decoder of one integer: hex(x), ksym(x),
// usym(x) and the like.
func (s *scope) intDecoderCall(call *hclsyntax.FunctionCallExpr, dec Decoder) Expr {
	if len(call.Args) != 1 {
		return s.errorf(call.Range(), "Wrong number of arguments", "%s takes one integer: %s(x).", call.Name, call.Name)
	}
	x := s.lower(call.Args[0])
	if isInvalid(x) {
		return x
	}
	if !x.Type().Numeric() {
		if dec == DecodeKsym || dec == DecodeUsym {
			return s.errorf(x.Range(), call.Name+" needs an address", "%s names the function at an address, an integer (arg0, a function pointer field); %s is a %s.", call.Name, x.Text(), x.Type())
		}
		return s.errorf(x.Range(), call.Name+" needs an integer", "%s shows an integer; %s is a %s.", call.Name, x.Text(), x.Type())
	}
	if dec == DecodeUsym {
		// The address, then the process id: a user address means
		// something only in its process (as a ustack key keeps it).
		return &Display{exprBase: s.base(call, BytesType(16)), Decoder: dec, X: x}
	}
	return &Display{exprBase: s.base(call, x.Type()), Decoder: dec, X: x}
}

// labelsCall lowers labels(NAME, x).
func (s *scope) labelsCall(e *hclsyntax.FunctionCallExpr) Expr {
	if len(e.Args) != 2 {
		return s.errorf(e.Range(), "Wrong number of arguments", "labels takes a labels block's name and an integer: labels(capability, args.cap).")
	}
	ls := s.labelSet(e.Args[0])
	if ls == nil {
		return &invalid{exprBase{rng: e.Range()}}
	}
	x := s.lower(e.Args[1])
	if isInvalid(x) {
		return x
	}
	if !x.Type().Numeric() {
		return s.errorf(x.Range(), "labels needs an integer", "labels names numbers; %s is a %s.", x.Text(), x.Type())
	}
	ls.Uses++
	return &Display{exprBase: s.base(e, x.Type()), Decoder: DecodeLabels, X: x, Labels: ls}
}

// labelSet resolves the name of a labels block.
func (s *scope) labelSet(e hcl.Expression) *LabelSet {
	tr, ok := e.(*hclsyntax.ScopeTraversalExpr)
	if !ok || len(tr.Traversal) != 1 {
		s.errorf(e.Range(), "Expected a labels name", "The first argument names a labels block: labels \"capability\" { values = { 0 = \"CAP_CHOWN\" } }.")
		return nil
	}
	name := tr.Traversal.RootName()
	ls := s.d.labels[name]
	if ls == nil {
		var names []string
		for n := range s.d.labels {
			names = append(names, n)
		}
		sort.Strings(names)
		hint := " Declare it: labels \"" + name + "\" { values = { 1 = \"ONE\" } }."
		if len(names) > 0 {
			hint = " Declared: " + strings.Join(names, ", ") + "."
		}
		s.errorf(e.Range(), "Unknown labels", "No labels block %q is declared.%s", name, hint)
	}
	return ls
}

// inetCall lowers inet(addr[, port]) and inet6(addr[, port]): the address
// and the port as the kernel stores them in struct sock and in sockaddr,
// in network byte order.
func (s *scope) inetCall(e *hclsyntax.FunctionCallExpr, dec Decoder) Expr {
	if len(e.Args) < 1 || len(e.Args) > 2 {
		return s.errorf(e.Range(), "Wrong number of arguments",
			"%s takes an address and, optionally, a port, both as the kernel stores them (network byte order): %s(args.sk.__sk_common.skc_daddr, args.sk.__sk_common.skc_dport).", e.Name, e.Name)
	}
	x := s.lower(e.Args[0])
	if isInvalid(x) {
		return x
	}
	if bad := s.inetAddress(x, dec); bad != nil {
		return bad
	}
	d := &Display{Decoder: dec, X: x}
	t := x.Type()
	if len(e.Args) == 2 {
		port := s.lower(e.Args[1])
		if isInvalid(port) {
			return port
		}
		if !port.Type().Numeric() {
			return s.errorf(port.Range(), e.Name+" needs a port", "The port is an integer as the kernel stores it (skc_dport, sin_port); %s is a %s.", port.Text(), port.Type())
		}
		// The address's slot, then the port's.
		d.Port = port
		t = BytesType(16)
		if dec == DecodeInet6 {
			t = BytesType(24)
		}
	}
	d.exprBase = s.base(e, t)
	return d
}

// inetAddress returns nil when x is an address decoder dec shows (inet:
// IPv4, inet6: IPv6), or the error that says what it takes.
func (s *scope) inetAddress(x Expr, dec Decoder) Expr {
	switch t := x.Type(); {
	case isInetAddress(t, dec):
	case dec == DecodeInet:
		return s.errorf(x.Range(), "inet needs an IPv4 address",
			"inet shows an IPv4 address: a 32-bit integer as the kernel stores it (skc_daddr, sin_addr.s_addr) or 4 bytes (a tracepoint's u8[4]); %s is a %s.", x.Text(), t)
	default:
		return s.errorf(x.Range(), "inet6 needs an IPv6 address",
			"inet6 shows an IPv6 address: 16 bytes (skc_v6_daddr.in6_u.u6_addr8, a tracepoint's u8[16]); %s is a %s.", x.Text(), t)
	}
	return nil
}

// isInetAddress says a value of type t is an address dec shows: for inet
// a 32-bit integer or 4 bytes, for inet6 16 bytes (or a kernel pointer).
func isInetAddress(t Type, dec Decoder) bool {
	if dec == DecodeInet {
		return t.Numeric() || t.Kind == KindBytes && t.Size == 4
	}
	return dec == DecodeInet6 && (t.Kind == KindTarget || t.Kind == KindBytes && t.Size == 16)
}

// intCast lowers u8(x) ... s64(x).
func (s *scope) intCast(e *hclsyntax.FunctionCallExpr) Expr {
	c := casts[e.Name]
	if len(e.Args) != 1 {
		return s.errorf(e.Range(), "Wrong number of arguments", "%s takes one integer: %s(ret).", e.Name, e.Name)
	}
	x := s.lower(e.Args[0])
	if isInvalid(x) {
		return x
	}
	if !x.Type().Numeric() {
		return s.errorf(x.Range(), e.Name+" needs an integer", "%s keeps the low %d bits of an integer; %s is a %s.", e.Name, c.bits, x.Text(), x.Type())
	}
	return &IntCast{exprBase: s.base(e, TypeInt), X: x, Bits: c.bits, Signed: c.signed}
}

// hexLiteralCall reports whether e is hex("0x..."): a number written in
// hex, not the hex(x) decoder.
func hexLiteralCall(e *hclsyntax.FunctionCallExpr) bool {
	if e.Name != "hex" || len(e.Args) != 1 {
		return false
	}
	_, ok := e.Args[0].(*hclsyntax.TemplateExpr)
	return ok
}

// hexLiteral lowers hex("0x40"): HCL has no hex literals, so a hex number
// is written as a string given to hex.
func (s *scope) hexLiteral(e *hclsyntax.FunctionCallExpr) Expr {
	text, ok := s.d.literalString(e.Args[0])
	if !ok {
		return s.errorf(e.Args[0].Range(), "Expected hex digits", "Write the number as a quoted literal: hex(\"0x40\").")
	}
	n, err := parseHex(text)
	if err != "" {
		return s.errorf(e.Args[0].Range(), "Invalid hex number", "%q %s. Write hex(\"0x40\"): 0x, then 1 to 16 hex digits (0-9, a-f), optionally after a -.", text, err)
	}
	return &IntLit{exprBase: s.base(e, TypeInt), Value: n}
}

// parseHex reads "0x40", "40", "-0x1" and "0xffffffffffffffff" (the 64
// bits as they are: -1), or says what is wrong.
func parseHex(text string) (int64, string) {
	body, neg := strings.CutPrefix(text, "-")
	if b, ok := strings.CutPrefix(body, "0x"); ok {
		body = b
	} else if b, ok := strings.CutPrefix(body, "0X"); ok {
		body = b
	}
	body = strings.ReplaceAll(body, "_", "")
	if body == "" {
		return 0, "has no digits"
	}
	if len(body) > 16 {
		return 0, "has more than 16 hex digits: it does not fit in 64 bits"
	}
	u, err := strconv.ParseUint(body, 16, 64)
	if err != nil {
		return 0, "is not a hex number"
	}
	n := int64(u) // the 64 bits as they are
	if neg {
		if u > 1<<63 {
			return 0, "is below the least 64-bit integer (-0x8000000000000000)"
		}
		n = -n
	}
	return n, ""
}

// hexAttr reads hex("0x40") where an attribute takes a number literal.
func hexAttr(e hcl.Expression) (*big.Float, bool) {
	call, ok := e.(*hclsyntax.FunctionCallExpr)
	if !ok || !hexLiteralCall(call) {
		return nil, false
	}
	v, diags := call.Args[0].Value(nil)
	if diags.HasErrors() || v.Type() != cty.String || v.IsNull() {
		return nil, false
	}
	n, err := parseHex(v.AsString())
	if err != "" {
		return nil, false
	}
	return new(big.Float).SetInt64(n), true
}
