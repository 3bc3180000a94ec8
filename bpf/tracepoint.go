package bpf

import (
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// FieldClass says what a tracepoint field holds, and whether probes can
// read it.
type FieldClass string

// The field classes.
const (
	FieldInteger FieldClass = "integer"  // integers, enums, typedefs of 1, 2, 4 or 8 bytes
	FieldPointer FieldClass = "pointer"  // read as an integer
	FieldString  FieldClass = "string"   // char[N]
	FieldDataLoc FieldClass = "data_loc" // __data_loc or __rel_loc: a variable-length value after the record
	FieldArray   FieldClass = "array"    // other arrays
	FieldStruct  FieldClass = "struct"   // a struct or union by value
	FieldUnknown FieldClass = "unknown"  // a typedef whose size is no integer's
)

// Readable reports whether probes can read fields of class c.
func (c FieldClass) Readable() bool { return c == FieldInteger || c == FieldPointer }

// TracepointField is one field of a tracepoint's record.
type TracepointField struct {
	Name string `json:"name"`
	// Type is the declared type, array dimensions included: "int",
	// "const char *", "char[16]", "__data_loc char[]".
	Type   string     `json:"type"`
	Class  FieldClass `json:"class"`
	Offset int        `json:"offset"`
	Size   int        `json:"size"`
	Signed bool       `json:"signed"`
}

// ClassifyField tells what a field of a declared type and size holds. It
// is the one rule for every field, parsed or read from a facts file.
func ClassifyField(typ string, size int) FieldClass {
	base := strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(typ, "const "), "volatile "))
	switch {
	case strings.HasPrefix(base, "__data_loc") || strings.HasPrefix(base, "__rel_loc"):
		// Alone, as facts files written before the classes recorded it.
		return FieldDataLoc
	case strings.HasSuffix(base, "]"):
		elem := strings.TrimSpace(base[:strings.LastIndex(base, "[")])
		if elem == "char" || elem == "signed char" || elem == "const char" {
			return FieldString
		}
		return FieldArray
	case strings.Contains(base, "*"):
		return FieldPointer
	case strings.HasPrefix(base, "struct ") || strings.HasPrefix(base, "union "):
		return FieldStruct
	}
	switch size {
	case 1, 2, 4, 8:
		return FieldInteger
	}
	return FieldUnknown
}

// check refuses a field whose layout cannot be right: the compiler reads
// fields at 16-bit offsets, and a class's size must be that class's.
func (f *TracepointField) check() error {
	if f.Offset < 0 || f.Size < 0 || f.Offset > math.MaxInt16 || f.Size > math.MaxInt16 || f.Offset+f.Size > math.MaxInt16 {
		return fmt.Errorf("field %s: offset %d, size %d: out of range", f.Name, f.Offset, f.Size)
	}
	want := map[FieldClass][]int{FieldDataLoc: {4}, FieldPointer: {4, 8}}[f.Class]
	if want != nil && !slices.Contains(want, f.Size) {
		return fmt.Errorf("field %s: a %s of %d bytes", f.Name, f.Type, f.Size)
	}
	return nil
}

// TracepointFormat is the record layout of one tracepoint event, as its
// tracefs format file gives it. Common fields (common_pid, ...) are left out.
type TracepointFormat struct {
	Event  string            `json:"event"`
	Fields []TracepointField `json:"fields"`
}

// Field returns the named field, or nil.
func (t *TracepointFormat) Field(name string) *TracepointField {
	for i := range t.Fields {
		if t.Fields[i].Name == name {
			return &t.Fields[i]
		}
	}
	return nil
}

// FieldNames lists the fields' names.
func (t *TracepointFormat) FieldNames() []string {
	names := make([]string, len(t.Fields))
	for i, f := range t.Fields {
		names[i] = f.Name
	}
	return names
}

// ParseTracepointFormat parses the text of a tracefs format file.
func ParseTracepointFormat(event, text string) (*TracepointFormat, error) {
	tp := &TracepointFormat{Event: event}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "field:") {
			continue
		}
		f, err := parseFieldLine(line)
		if err != nil {
			return nil, fmt.Errorf("tracepoint %s: %w", event, err)
		}
		if strings.HasPrefix(f.Name, "common_") {
			continue
		}
		tp.Fields = append(tp.Fields, f)
	}
	return tp, nil
}

// parseFieldLine parses "field:const char * filename;	offset:24;	size:8;	signed:0;".
func parseFieldLine(line string) (TracepointField, error) {
	var f TracepointField
	seen := map[string]bool{}
	for _, part := range strings.Split(line, ";") {
		key, val, ok := strings.Cut(strings.TrimSpace(part), ":")
		if !ok {
			continue
		}
		seen[key] = true
		switch key {
		case "field":
			name, typ, err := parseDecl(val)
			if err != nil {
				return f, err
			}
			f.Name, f.Type = name, typ
		case "offset", "size", "signed":
			n, err := strconv.Atoi(val)
			if err != nil {
				return f, fmt.Errorf("field %q: %s %q", f.Name, key, val)
			}
			switch key {
			case "offset":
				f.Offset = n
			case "size":
				f.Size = n
			default:
				f.Signed = n != 0
			}
		}
	}
	if !seen["field"] || !seen["offset"] || !seen["size"] {
		return f, fmt.Errorf("bad field line %q", line)
	}
	f.Class = ClassifyField(f.Type, f.Size)
	return f, f.check()
}

// parseDecl splits a C declaration into the name and the type, array
// dimensions moved to the type: "char comm[16]" is comm, "char[16]";
// "__data_loc char[] name" is name, "__data_loc char[]".
func parseDecl(decl string) (name, typ string, err error) {
	decl = strings.TrimSpace(decl)
	dims := ""
	if strings.HasSuffix(decl, "]") {
		if i := strings.LastIndex(decl, "["); i >= 0 {
			decl, dims = strings.TrimSpace(decl[:i]), decl[i:]
		}
	}
	i := len(decl)
	for i > 0 && isIdentByte(decl[i-1]) {
		i--
	}
	name, typ = decl[i:], strings.TrimSpace(decl[:i])
	if name == "" || typ == "" || name[0] >= '0' && name[0] <= '9' {
		return "", "", fmt.Errorf("field %q: want TYPE NAME", decl+dims)
	}
	return name, typ + dims, nil
}

func isIdentByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// MaxEventName is the longest tracepoint group or event name the kernel
// takes (MAX_EVENT_NAME_LEN).
const MaxEventName = 64

// CheckEvent checks a tracepoint's name, "GROUP:EVENT": each part is at
// most [MaxEventName] characters, a letter or an underscore then letters,
// digits and underscores (hyphens too in GROUP, as in dynamic events'
// groups). The ftrace group holds the function tracer's own records, which
// cannot be attached to.
func CheckEvent(event string) error {
	group, name, ok := strings.Cut(event, ":")
	if !ok {
		return fmt.Errorf("it is not GROUP:EVENT")
	}
	for _, part := range []struct {
		what, s, extra string
	}{{"group", group, "-"}, {"event", name, ""}} {
		switch {
		case part.s == "":
			return fmt.Errorf("the %s name is empty", part.what)
		case len(part.s) > MaxEventName:
			return fmt.Errorf("the %s name has %d characters; the kernel's are at most %d", part.what, len(part.s), MaxEventName)
		}
		for i := 0; i < len(part.s); i++ {
			c := part.s[i]
			letter := c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
			if !letter && (i == 0 || !isIdentByte(c) && strings.IndexByte(part.extra, c) < 0) {
				return fmt.Errorf("the %s name %q has %q; names are letters, digits and underscores, starting with a letter or an underscore", part.what, part.s, c)
			}
		}
	}
	if group == "ftrace" {
		return fmt.Errorf("the ftrace group holds the function tracer's own records, which are not tracepoints and cannot be attached")
	}
	return nil
}

// ReadTracepointFormat reads "group:event"'s format from tracefs.
func ReadTracepointFormat(tracefs, event string) (*TracepointFormat, error) {
	if err := CheckEvent(event); err != nil {
		return nil, fmt.Errorf("tracepoint %q: %w", event, err)
	}
	group, name, _ := strings.Cut(event, ":")
	b, err := os.ReadFile(filepath.Join(tracefs, "events", group, name, "format"))
	if err != nil {
		return nil, err
	}
	return ParseTracepointFormat(event, string(b))
}

// IsEventGlob reports whether an event pattern is a glob.
func IsEventGlob(pattern string) bool { return strings.ContainsAny(pattern, "*?[") }

// CheckEventPattern checks an event name or glob: a glob must be valid and
// name events of the kernel's charset ("syscalls:sys_enter_exec*"). Errors
// quote the pattern as written.
func CheckEventPattern(pattern string) error {
	if !IsEventGlob(pattern) {
		return CheckEvent(pattern)
	}
	if _, err := path.Match(pattern, ""); err != nil {
		return fmt.Errorf("%q is not a valid glob (an unclosed [ or a stray \\)", pattern)
	}
	group, name, ok := strings.Cut(pattern, ":")
	if !ok {
		return fmt.Errorf("%q has no colon: a glob names events as GROUP:EVENT too, such as \"syscalls:sys_enter_open*\"", pattern)
	}
	for _, part := range []struct{ what, s, extra string }{{"group", group, "-"}, {"event", name, ""}} {
		if part.s == "" {
			return fmt.Errorf("the %s part of %q is empty", part.what, pattern)
		}
		if len(part.s) > 4*MaxEventName {
			return fmt.Errorf("the %s part of %q has %d characters; the kernel's names are at most %d", part.what, pattern, len(part.s), MaxEventName)
		}
		for i := 0; i < len(part.s); i++ {
			c := part.s[i]
			if isIdentByte(c) || strings.IndexByte(part.extra, c) >= 0 || strings.IndexByte("*?[]^!", c) >= 0 {
				continue
			}
			return fmt.Errorf("the %s part of %q has %q, which no event name has: names are letters, digits and underscores, and a glob adds *, ? and [...]", part.what, pattern, c)
		}
	}
	if group == "ftrace" {
		return CheckEvent(group + ":" + strings.Map(func(r rune) rune { return 'a' }, name))
	}
	return nil
}

// Elem is the element type of an array or __data_loc field ("char" of
// "__data_loc char[]" and of "char[16]"), or "" for other fields.
func (f *TracepointField) Elem() string {
	base := strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(f.Type, "const "), "volatile "))
	for _, p := range []string{"__data_loc ", "__rel_loc "} {
		base = strings.TrimSpace(strings.TrimPrefix(base, p))
	}
	i := strings.LastIndex(base, "[")
	if i < 0 {
		return ""
	}
	elem := strings.TrimSpace(base[:i])
	if elem == "signed char" || elem == "const char" {
		elem = "char"
	}
	return elem
}

// EventList lists the target's tracepoints, "group:event", sorted: the
// live kernel's or a facts file's list, or a profile's capture. It returns
// [ErrEventsUnknown] when the target does not list them.
func (f *Facts) EventList() ([]string, error) {
	switch {
	case f.Events != nil:
		return f.Events, nil
	case f.formats != nil:
		return f.formats.events()
	case f.Source == "live":
		// Detected without the function list: read the events now.
		if dir, err := Tracefs(); err == nil {
			f.Events = listEvents(dir)
			return f.Events, nil
		}
	}
	return nil, ErrEventsUnknown
}

// MatchEvents lists the target's events a glob matches, sorted, or says
// why the target's events are not known ([Facts.EventList]).
func (f *Facts) MatchEvents(pattern string) ([]string, error) {
	list, err := f.EventList()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ev := range list {
		if ok, _ := path.Match(pattern, ev); ok {
			out = append(out, ev)
		}
	}
	return out, nil
}

// SameType reports whether two declared field types are one C type: the
// spellings of an integer type ("unsigned" and "unsigned int", "long int"
// and "long"), qualifiers (const, volatile) and spacing aside.
func SameType(a, b string) bool { return canonicalType(a) == canonicalType(b) }

// canonicalType spells a declared type one way: an integer type as
// "[unsigned ]char|signed char|short|int|long|long long", anything else with
// its qualifiers dropped and single spaces.
func canonicalType(t string) string {
	words, integer := typeWords(t)
	if !integer || len(words) == 0 {
		return strings.Join(words, " ")
	}
	return canonicalInteger(words)
}

// typeWords returns the words of a declared type without its qualifiers,
// and whether they are all words of an integer type.
func typeWords(t string) (words []string, integer bool) {
	integer = true
	for _, w := range strings.Fields(t) {
		switch w {
		case "const", "volatile":
			continue
		case "signed", "unsigned", "char", "short", "int", "long":
		default:
			integer = false
		}
		words = append(words, w)
	}
	return words, integer
}

// canonicalInteger spells the integer type of words one way.
func canonicalInteger(words []string) string {
	var unsigned, signed, char, short bool
	longs := 0
	for _, w := range words {
		switch w {
		case "unsigned":
			unsigned = true
		case "signed":
			signed = true
		case "char":
			char = true
		case "short":
			short = true
		case "long":
			longs++
		}
	}
	base := "int"
	switch {
	case char && signed:
		return "signed char" // char, signed char and unsigned char are three types
	case char:
		base = "char"
	case short:
		base = "short"
	case longs == 1:
		base = "long"
	case longs == 2:
		base = "long long"
	}
	if unsigned {
		return "unsigned " + base
	}
	return base
}
