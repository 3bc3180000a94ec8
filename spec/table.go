package spec

import (
	"cmp"
	"fmt"
	"slices"
	"sort"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/probectl/probectl/bpf"
	"github.com/zclconf/go-cty/cty"
)

// Table is state shared between probes: a bounded map from keys to values,
// written by one probe's handler (store), read (T[KEY], has) and deleted
// in another's. Its types come from what the probes store.
type Table struct {
	Name      string
	DeclRange hcl.Range
	MaxKeys   int
	// Key lists the types of the key's parts, in order.
	Key []Type
	// Value is the type of a table of single values; Fields, in order, the
	// named values of a table of objects (value = { ts = ktime, ... }).
	Value  Type
	Fields []*TableField
	// Stores, Reads count the probes' uses (Reads includes has).
	Stores, Reads, Deletes int
}

// TableField is one named value of a table of objects.
type TableField struct {
	Name string
	Type Type
}

// Field returns the named field, or nil.
func (t *Table) Field(name string) *TableField {
	for _, f := range t.Fields {
		if f.Name == name {
			return f
		}
	}
	return nil
}

// FieldNames lists the fields' names.
func (t *Table) FieldNames() []string {
	var names []string
	for _, f := range t.Fields {
		names = append(names, f.Name)
	}
	return names
}

// DefaultTableKeys is a table's key limit when max_keys is not set.
const DefaultTableKeys = 10240

var tableSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "max_keys"}}}

// tables holds the tables of a spec set, by name; the decoders of every
// file share it.
type tables map[string]*Table

// table decodes a table block.
func (d *decoder) table(b *hcl.Block, all tables) {
	name := b.Labels[0]
	if !bpf.ValidName(name) {
		d.errorf(b.LabelRanges[0], "Invalid table name",
			"%q is not a valid table name. Use letters, digits and underscores, starting with a letter: for example \"queued_at\".", name)
		return
	}
	if builtinByName[name] != nil || reserved[name] {
		d.errorf(b.LabelRanges[0], "Table name taken",
			"%q is a built-in name: a table called so could not be read. Rename the table.", name)
		return
	}
	if first := all[name]; first != nil {
		d.errorf(b.DefRange, "Duplicate table",
			"A table %q is already declared at %s. Table names are unique in a spec set: rename one.", name, pos(first.DeclRange))
		return
	}
	t := &Table{Name: name, DeclRange: b.DefRange, MaxKeys: DefaultTableKeys}
	content, diags := b.Body.Content(tableSchema)
	d.diags = append(d.diags, diags...)
	if attr, ok := content.Attributes["max_keys"]; ok {
		if n, ok := d.intAttr(attr, 1, 1<<20); ok {
			t.MaxKeys = int(n)
		}
	}
	all[name] = t
}

// reserved are names expressions use other than the built-in values.
var reserved = map[string]bool{"true": true, "false": true}

// inferTables gives each table its types from what the probes store in
// it, before any probe is lowered: the stores' key and value expressions
// are typed by their shape (str(...) is a string, comm a task name,
// args.FIELD and kernel data are typed by the target, table reads by that
// table, everything else an integer). Lowering then checks every store
// and read against these types. Stores that disagree are reported there.
func inferTables(all tables, files []*hclsyntax.Body) {
	stores := collectStores(files)
	// A table's value may be read from another table: resolve in rounds.
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	sort.Strings(names)
	for changed := true; changed; {
		changed = false
		for _, name := range names {
			if t := all[name]; t.Key == nil && inferTable(all, t, stores[name]) {
				changed = true
			}
		}
	}
}

// tableStore is one store action's key and value, in its probe.
type tableStore struct {
	key, value hcl.Expression
	probe      *hclsyntax.Block
}

// collectStores lists the store actions of every probe, by table name.
func collectStores(files []*hclsyntax.Body) map[string][]tableStore {
	stores := map[string][]tableStore{}
	for _, body := range files {
		for _, pb := range body.Blocks {
			if pb.Type != "probe" {
				continue
			}
			for _, hb := range pb.Body.Blocks {
				for _, ab := range hb.Body.Blocks {
					if ab.Type == string(Store) && len(ab.Labels) == 1 {
						stores[ab.Labels[0]] = append(stores[ab.Labels[0]], storeOf(pb, ab))
					}
				}
			}
		}
	}
	return stores
}

// storeOf is the store action ab of probe pb.
func storeOf(pb, ab *hclsyntax.Block) tableStore {
	st := tableStore{probe: pb}
	if a := ab.Body.Attributes["key"]; a != nil {
		st.key = a.Expr
	}
	if a := ab.Body.Attributes["value"]; a != nil {
		st.value = a.Expr
	}
	return st
}

// inferTable types t from the first of its stores whose key and value
// can be typed; false when none can (yet).
func inferTable(all tables, t *Table, stores []tableStore) bool {
	// A string literal (refused) types the table only when no other store
	// can: the others say what the table is meant to hold.
	stores = slices.Clone(stores)
	slices.SortStableFunc(stores, func(a, b tableStore) int {
		_, la := a.value.(*hclsyntax.TemplateExpr)
		_, lb := b.value.(*hclsyntax.TemplateExpr)
		return cmp.Compare(boolInt(la), boolInt(lb))
	})
	for _, st := range stores {
		g := guesser{tables: all, probe: st.probe}
		key, ok := g.list(st.key)
		if !ok {
			continue
		}
		if obj, isObj := st.value.(*hclsyntax.ObjectConsExpr); isObj {
			fields := g.fields(obj)
			if fields == nil {
				continue
			}
			t.Key, t.Fields = key, fields
			return true
		}
		if vt, ok := g.guess(st.value); ok {
			t.Key, t.Value = key, vt
			return true
		}
	}
	return false
}

// fields types the fields of a value object; nil when one cannot be.
func (g guesser) fields(obj *hclsyntax.ObjectConsExpr) []*TableField {
	var fields []*TableField
	for _, item := range obj.Items {
		fname := hcl.ExprAsKeyword(item.KeyExpr)
		ft, ok := g.guess(item.ValueExpr)
		if fname == "" || !ok {
			return nil
		}
		fields = append(fields, &TableField{Name: fname, Type: ft})
	}
	return fields
}

// guesser types a store's expression by its shape.
type guesser struct {
	tables tables
	probe  *hclsyntax.Block
	depth  int
}

func (g guesser) list(e hcl.Expression) ([]Type, bool) {
	if e == nil {
		return nil, false
	}
	exprs, diags := hcl.ExprList(e)
	if diags.HasErrors() {
		t, ok := g.guess(e) // a single key without brackets
		return []Type{t}, ok
	}
	var out []Type
	for _, x := range exprs {
		t, ok := g.guess(x)
		if !ok {
			return nil, false
		}
		if t.IsStack() {
			t = TypeInt // an error at the store: the other uses are checked as integers
		}
		out = append(out, t)
	}
	return out, len(out) > 0
}

func (g guesser) guess(e hcl.Expression) (Type, bool) {
	if e == nil || g.depth > 100 {
		return Type{}, false
	}
	g.depth++
	switch e := e.(type) {
	case *hclsyntax.ParenthesesExpr:
		return g.guess(e.Expression)
	case *hclsyntax.LiteralValueExpr:
		return boolOrInt(e.Val.Type() == cty.Bool), true
	case *hclsyntax.TemplateExpr:
		// A string literal: refused at the store (checkSlot), whose
		// table is typed so that its reads are not refused as well.
		return StringType(DefaultStrSize), true
	case *hclsyntax.BinaryOpExpr:
		return boolOrInt(boolOps[e.Op]), true
	case *hclsyntax.UnaryOpExpr:
		return boolOrInt(e.Op == hclsyntax.OpLogicalNot), true
	case *hclsyntax.ConditionalExpr:
		return g.guess(e.TrueResult)
	case *hclsyntax.FunctionCallExpr:
		return guessCall(e), true
	case *hclsyntax.ScopeTraversalExpr:
		return g.traversal(e)
	case *hclsyntax.IndexExpr:
		if tr, ok := e.Collection.(*hclsyntax.ScopeTraversalExpr); ok && len(tr.Traversal) == 1 {
			return g.tableValue(tr.Traversal.RootName(), "")
		}
	case *hclsyntax.RelativeTraversalExpr:
		return g.relative(e)
	}
	return Type{}, false
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func boolOrInt(isBool bool) Type {
	if isBool {
		return TypeBool
	}
	return TypeInt
}

// boolOps are the binary operators whose result is a bool.
var boolOps = map[*hclsyntax.Operation]bool{
	hclsyntax.OpEqual: true, hclsyntax.OpNotEqual: true, hclsyntax.OpLessThan: true, hclsyntax.OpLessThanOrEqual: true,
	hclsyntax.OpGreaterThan: true, hclsyntax.OpGreaterThanOrEqual: true, hclsyntax.OpLogicalAnd: true, hclsyntax.OpLogicalOr: true,
}

// guessCall types a function call by the function's name.
func guessCall(e *hclsyntax.FunctionCallExpr) Type {
	switch e.Name {
	case "str", "user_str", "kernel_str":
		size := DefaultStrSize
		if len(e.Args) == 2 {
			size = constArg(e.Args[1], MaxStrSize, size)
		}
		return StringType(size)
	case "has", "starts_with":
		return TypeBool
	case "cast", "user_cast":
		return TypeTarget
	case "kstack", "ustack":
		depth := MaxStackDepth
		if len(e.Args) == 1 {
			depth = constArg(e.Args[0], MaxStackDepth, depth)
		}
		return StackType(e.Name == "ustack", depth)
	}
	return TypeInt
}

// constArg is the constant whole number in 1..limit that e is, or def.
func constArg(e hcl.Expression, limit, def int) int {
	if v, diags := e.Value(nil); !diags.HasErrors() && v.Type() == cty.Number {
		if n, acc := v.AsBigFloat().Int64(); acc == 0 && n > 0 && n <= int64(limit) {
			return int(n)
		}
	}
	return def
}

// traversal types a name by its root: a builtin, entry.NAME, or a table.
func (g guesser) traversal(e *hclsyntax.ScopeTraversalExpr) (Type, bool) {
	root := e.Traversal.RootName()
	switch b := builtinByName[root]; {
	case b != nil && b.Type.IsString(): // comm
		return b.Type, true
	case root == "kstack" || root == "ustack":
		return StackType(root == "ustack", MaxStackDepth), true
	case root == "args", root == "task":
		return TypeTarget, true
	case root == "entry":
		return g.entry(e.Traversal)
	case g.tables[root] != nil:
		var field string
		if len(e.Traversal) == 3 {
			if a, ok := e.Traversal[2].(hcl.TraverseAttr); ok {
				field = a.Name
			}
		}
		return g.tableValue(root, field)
	}
	return TypeInt, true
}

// relative types TABLE[key].FIELD by the table, and any other traversal
// of a value as kernel data.
func (g guesser) relative(e *hclsyntax.RelativeTraversalExpr) (Type, bool) {
	if ix, ok := e.Source.(*hclsyntax.IndexExpr); ok && len(e.Traversal) == 1 {
		if tr, ok := ix.Collection.(*hclsyntax.ScopeTraversalExpr); ok {
			if a, ok := e.Traversal[0].(hcl.TraverseAttr); ok {
				return g.tableValue(tr.Traversal.RootName(), a.Name)
			}
		}
	}
	return TypeTarget, true
}

// entry types entry.NAME by the on_entry save that sets it.
func (g guesser) entry(tr hcl.Traversal) (Type, bool) {
	if len(tr) != 2 {
		return Type{}, false
	}
	a, ok := tr[1].(hcl.TraverseAttr)
	if !ok {
		return Type{}, false
	}
	for _, hb := range g.probe.Body.Blocks {
		if hb.Type != "on_entry" {
			continue
		}
		save := hb.Body.Attributes["save"]
		if save == nil {
			continue
		}
		if obj, ok := save.Expr.(*hclsyntax.ObjectConsExpr); ok {
			for _, item := range obj.Items {
				if hcl.ExprAsKeyword(item.KeyExpr) == a.Name {
					return g.guess(item.ValueExpr)
				}
			}
		}
	}
	return Type{}, false
}

func (g guesser) tableValue(name, field string) (Type, bool) {
	t := g.tables[name]
	if t == nil || t.Key == nil {
		return Type{}, false
	}
	if field == "" {
		return t.Value, t.Fields == nil
	}
	if f := t.Field(field); f != nil {
		return f.Type, true
	}
	return Type{}, false
}

// checkTables reports tables that no probe writes, or that no probe
// reads: a table written and never read holds memory for nothing.
func checkTables(all tables) hcl.Diagnostics {
	var diags hcl.Diagnostics
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t := all[n]
		switch {
		case t.Stores == 0:
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Table never written",
				Detail:  fmt.Sprintf("No probe stores into %q, so it is always empty. Add a store \"%s\" { key = [...], value = ... } to a handler, or remove the table.", n, n),
				Subject: t.DeclRange.Ptr()})
		case t.Reads == 0:
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Table never read",
				Detail:  fmt.Sprintf("Probes store into %q but none reads it (%s[KEY], has(%s, KEY)): it would hold memory for nothing. Read it, or remove it and its stores.", n, n, n),
				Subject: t.DeclRange.Ptr()})
		}
	}
	return diags
}

var tableActionSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "key", Required: true}, {Name: "value"}, {Name: "when"}}}

// tableAction decodes store "T" { key = [...], value = ... } and
// delete "T" { key = [...] }.
func (d *decoder) tableAction(sc *scope, b *hcl.Block, a *Action) *Action {
	t := d.tables[a.Name]
	if t == nil {
		d.errorf(b.LabelRanges[0], "Unknown table",
			"No table %q is declared.%s Declare it at the top level: table %q { max_keys = 10240 }.", a.Name, suggestTable(a.Name, d.tables), a.Name)
		return a // reported: the handler is not also empty
	}
	a.Table = t
	content, diags := b.Body.Content(tableActionSchema)
	d.diags = append(d.diags, diags...)
	if diags.HasErrors() {
		return nil
	}
	if attr := content.Attributes["when"]; attr != nil {
		a.When = sc.boolExpr(attr.Expr, "when")
	}
	a.Key = sc.tableKey(t, content.Attributes["key"].Expr)
	value := content.Attributes["value"]
	switch {
	case a.Kind == Delete:
		t.Deletes++
		if value != nil {
			d.errorf(value.NameRange, "Argument not valid here", "delete takes key and when, not value: it removes the key. Remove it.")
		}
		return a
	case value == nil:
		d.errorf(b.DefRange, "Missing required argument", "store needs \"value\": what the table keeps for the key. Add it.")
		return a
	}
	t.Stores++
	if t.Key == nil {
		d.errorf(value.Expr.Range(), "Table type unknown",
			"The type of what %q holds could not be told from its stores (a value read only from tables that are themselves unknown). Store a value whose type is plain: an integer, str(...), comm.", t.Name)
		return a
	}
	if t.Fields != nil {
		d.storeFields(sc, t, a, value)
		return a
	}
	if _, obj := value.Expr.(*hclsyntax.ObjectConsExpr); obj {
		d.errorf(value.Expr.Range(), "Stores disagree", "%q holds single values (another store sets one), not objects.", t.Name)
		return a
	}
	a.Value = sc.lower(value.Expr)
	sc.checkSlot(a.Value, t.Value, t.Name)
	return a
}

// storeFields lowers the value of a store into a table of objects: every
// field of the table, each of its type.
func (d *decoder) storeFields(sc *scope, t *Table, a *Action, value *hcl.Attribute) {
	before := len(d.diags)
	a.Fields = sc.fields(value, "value")
	if len(d.diags) == before && len(a.Fields) != len(t.Fields) { // a field refused is not also missing
		d.errorf(value.Expr.Range(), "Stores disagree",
			"%q holds objects with %s; every store must set exactly those fields.", t.Name, quoteList(t.FieldNames()))
		return
	}
	for _, f := range a.Fields {
		tf := t.Field(f.Name)
		if tf == nil {
			d.errorf(f.Range, "Stores disagree", "%q holds objects with %s, not %q.", t.Name, quoteList(t.FieldNames()), f.Name)
			continue
		}
		sc.checkSlot(f.Value, tf.Type, fmt.Sprintf("%s.%s", t.Name, f.Name))
	}
}

// tableKey lowers a table key: a list of values (or one bare value) whose
// types match the table's key.
func (s *scope) tableKey(t *Table, e hcl.Expression) []Expr {
	exprs, diags := hcl.ExprList(e)
	if diags.HasErrors() {
		exprs = []hcl.Expression{e}
	}
	var out []Expr
	for _, x := range exprs {
		out = append(out, s.lower(x))
	}
	if t.Key == nil {
		return out
	}
	if len(out) != len(t.Key) {
		s.errorf(e.Range(), "Wrong key", "%q is keyed by %d value(s), as its stores say; this key has %d.", t.Name, len(t.Key), len(out))
		return out
	}
	for i, x := range out {
		if !isInvalid(x) && x.Type().IsStack() {
			s.errorf(x.Range(), "Stack as a table key",
				"A table is keyed by integers and strings; %s is a %s. Keep the stack as the table's value (value = %s), or key an aggregation by it (by = [%s]).",
				x.Text(), x.Type(), x.Text(), x.Text())
			continue
		}
		s.checkSlot(x, t.Key[i], fmt.Sprintf("%s's key", t.Name))
	}
	return out
}

// checkSlot checks that x can go where a table keeps a value of type want.
func (s *scope) checkSlot(x Expr, want Type, what string) {
	if isInvalid(x) {
		return
	}
	got := x.Type()
	_, isBuf := x.(*Buf)
	switch {
	case isBuf:
		s.errorf(x.Range(), "Table cannot hold this", "buf() is shown where it is read, in an event field: a table would keep its bytes without the escapes %%r prints. Store the pointer and the length, and take buf() of them in the event.")
	case got.Kind == KindBool || want.Kind == KindBool:
		s.errorf(x.Range(), "Table cannot hold this", "Tables hold integers and strings, not bools: use %s ? 1 : 0.", x.Text())
	case got.Kind == KindString && isLiteral(x):
		s.errorf(x.Range(), "Table cannot hold this", "A string literal is the same every time: store or look up a value that varies.")
	case got.IsStack() && want.IsStack() && got != want:
		s.errorf(x.Range(), "Mismatched table types", "%s is a %s of %d frames, but %s holds a %s of %d frames, as its other uses say: a table keeps one kind of stack, of one depth.",
			x.Text(), got, got.Size, what, want, want.Size)
	case got.IsStack() != want.IsStack():
		s.errorf(x.Range(), "Mismatched table types", "%s is a %s, but %s holds a %s (as its other uses say).", x.Text(), got, what, want)
	case got.IsString() != want.IsString() && got.Kind != KindTarget && want.Kind != KindTarget:
		s.errorf(x.Range(), "Mismatched table types", "%s is a %s, but %s holds a %s (as its other uses say).", x.Text(), got, what, want)
	}
}

func isLiteral(x Expr) bool {
	_, ok := x.(*StringLit)
	return ok
}

func suggestTable(name string, all tables) string {
	best, bestDist := "", 3
	for n := range all {
		if d := levenshtein(name, n); d < bestDist || (d == bestDist && n < best) {
			best, bestDist = n, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" Did you mean %q?", best)
}
