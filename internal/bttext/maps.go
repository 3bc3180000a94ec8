package bttext

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// MapKind is what a bpftrace map holds: the aggregation that fills it.
type MapKind int

const (
	Count MapKind = iota
	Sum
	Min
	Max
	Avg
	Stats
	HistMap  // hist()
	LhistMap // lhist(v, Min, Max, Step)
)

// MapKinds names the kinds as bpftrace's functions: count, sum, ...
var MapKinds = map[string]MapKind{"count": Count, "sum": Sum, "min": Min, "max": Max,
	"avg": Avg, "stats": Stats, "hist": HistMap, "lhist": LhistMap}

// Map is a bpftrace map as its printer sees it.
type Map struct {
	Name           string // with its @: "@bytes", or "@" for the anonymous map
	Kind           MapKind
	Keyed          bool  // the map has keys (@x[k]); false: a scalar (@x)
	Min, Max, Step int64 // an lhist's bounds
	Entries        []MapEntry
}

// MapEntry is one key's value.
type MapEntry struct {
	Key []any // the key's parts: int64, uint64, string or Stack; none for a scalar
	// Value is a count's, sum's, min's or max's value.
	Value int64
	// Count and Total are an avg's or a stats' observations and their sum.
	Count, Total int64
	// Buckets are a hist's or lhist's counts, indexed as HistIndex or
	// LhistIndex say.
	Buckets []uint64
}

// Text is what bpftrace 0.17 prints for the map (print(@m, top), or at
// exit with top 0), newline and all: rows sorted as bpftrace sorts them
// (by value ascending, a hist by its count of observations, an avg and a
// stats by its average), joined by a newline; hist and lhist rows under
// each key's "@m[k]: " line; a blank line after a stats' or an avg's rows.
// An empty map prints an empty line. top > 0 keeps the top largest (not
// for stats, as bpftrace).
//
// Where bpftrace's sort is unstable (two keys of the same value), Text
// orders them by key.
func (m Map) Text(top int) string {
	es := m.sorted(top)
	var rows []string
	for _, e := range es {
		k := m.Name + keyText(e.Key, ", ", "[", "]")
		switch m.Kind {
		case HistMap:
			rows = append(rows, k+": \n"+Hist(e.Buckets))
		case LhistMap:
			rows = append(rows, k+": \n"+Lhist(e.Buckets, m.Min, m.Max, m.Step))
		case Stats:
			rows = append(rows, fmt.Sprintf("%s: count %d, average %d, total %d", k, e.Count, average(e), e.Total))
		case Avg:
			rows = append(rows, k+": "+strconv.FormatInt(average(e), 10))
		default:
			rows = append(rows, k+": "+strconv.FormatInt(e.Value, 10))
		}
	}
	out := strings.Join(rows, "\n") + "\n"
	if m.Kind == Avg || m.Kind == Stats {
		out += "\n"
	}
	return out
}

// JSON is the line bpftrace 0.17's -f json prints for the map, newline
// and all: {"type": "map"|"hist"|"stats", "data": {"@m": ...}}, the value
// of a scalar, or an object from each key (its parts joined by commas)
// to its value; "" for an empty map, which bpftrace does not print.
func (m Map) JSON(top int) string {
	es := m.sorted(top)
	if len(es) == 0 {
		return ""
	}
	typ := "map"
	switch m.Kind {
	case HistMap, LhistMap:
		typ = "hist"
	case Avg, Stats:
		typ = "stats"
	}
	var rows []string
	for _, e := range es {
		var v string
		switch m.Kind {
		case HistMap:
			v = histJSON(e.Buckets)
		case LhistMap:
			v = lhistJSON(e.Buckets, m.Min, m.Max, m.Step)
		case Stats:
			v = fmt.Sprintf(`{"count": %d, "average": %d, "total": %d}`, e.Count, average(e), e.Total)
		case Avg:
			v = strconv.FormatInt(average(e), 10)
		default:
			v = strconv.FormatInt(e.Value, 10)
		}
		if m.Keyed {
			v = `"` + JSONEscape(keyText(e.Key, ",", "", "")) + `": ` + v
		}
		rows = append(rows, v)
	}
	data := strings.Join(rows, ", ")
	if m.Keyed {
		data = "{" + data + "}"
	}
	return `{"type": "` + typ + `", "data": {"` + JSONEscape(m.Name) + `": ` + data + "}}\n"
}

// PrintfJSON is the -f json line of a printf's text.
func PrintfJSON(text string) string {
	return `{"type": "printf", "data": "` + JSONEscape(text) + "\"}\n"
}

// AttachedJSON is the -f json line saying how many probes attached.
func AttachedJSON(n int) string {
	return fmt.Sprintf(`{"type": "attached_probes", "data": {"probes": %d}}`+"\n", n)
}

// LostJSON is the -f json line counting lost events.
func LostJSON(n uint64) string {
	return fmt.Sprintf(`{"type": "lost_events", "data": {"events": %d}}`+"\n", n)
}

// JSONEscape escapes s as bpftrace's JSON output does: \" \\ \n \r \t,
// other bytes below 0x20 as \u00XX, and (its char being signed) every
// byte from 0x80 as \u and the hex of its negative value (ffffffc3).
func JSONEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			b.WriteString(`\"`)
		case c == '\\':
			b.WriteString(`\\`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\t':
			b.WriteString(`\t`)
		case c < 0x20 || c >= 0x80:
			fmt.Fprintf(&b, `\u%04x`, uint32(int32(int8(c))))
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// average is an avg's value: the total divided by the count, truncated
// toward zero as C does; 0 with no observations.
func average(e MapEntry) int64 {
	if e.Count == 0 {
		return 0
	}
	return e.Total / e.Count
}

// sorted is the entries in the order bpftrace prints them, the top
// largest with top > 0 (stats keeps all, as bpftrace 0.17 does).
func (m Map) sorted(top int) []MapEntry {
	es := append([]MapEntry(nil), m.Entries...)
	weight := func(e MapEntry) int64 {
		switch m.Kind {
		case HistMap, LhistMap:
			var n uint64
			for _, c := range e.Buckets {
				n += c
			}
			return int64(n)
		case Avg, Stats:
			return average(e)
		}
		return e.Value
	}
	sort.SliceStable(es, func(i, j int) bool {
		wi, wj := weight(es[i]), weight(es[j])
		if wi != wj {
			return wi < wj
		}
		return keyLess(es[i].Key, es[j].Key)
	})
	if top > 0 && len(es) > top && m.Kind != Stats {
		es = es[len(es)-top:]
	}
	return es
}

// Stack is a kstack or ustack key part as bpftrace 0.17 prints it: its
// frames, innermost first, each its function and the offset in decimal
// ("vfs_read+18") or, where no symbol covers the address, the address in
// hex ("0x4015e0"). A stack the kernel did not record (none to take, a
// full stack map, a collision) has none: bpftrace prints it as an empty
// key part (@[]: 2), its lookup having failed.
type Stack []string

// text is the stack as a key part: a newline, then each frame on a line
// of its own indented by four spaces, as bpftrace's default stack mode.
func (s Stack) text() string {
	if len(s) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteByte('\n')
	for _, f := range s {
		b.WriteString("    " + f + "\n")
	}
	return b.String()
}

func keyLess(a, b []any) bool {
	for i := 0; i < len(a) && i < len(b); i++ {
		x, y := a[i], b[i]
		if s, ok := x.(Stack); ok {
			x = s.text()
		}
		if s, ok := y.(Stack); ok {
			y = s.text()
		}
		sx, xs := x.(string)
		sy, ys := y.(string)
		switch {
		case xs && ys:
			if sx != sy {
				return sx < sy
			}
		case !xs && !ys:
			if ix, iy := intOf(x), intOf(y); ix != iy {
				return ix < iy
			}
		default:
			return !xs
		}
	}
	return len(a) < len(b)
}

func intOf(v any) int64 {
	switch v := v.(type) {
	case int64:
		return v
	case uint64:
		return int64(v)
	case int:
		return int64(v)
	}
	return 0
}

// keyText is a key's parts as bpftrace prints them (an integer as a
// signed 64-bit number, a stack as Stack says), joined by sep between open and close; "" for a
// scalar.
func keyText(key []any, sep, open, close string) string {
	if len(key) == 0 {
		return ""
	}
	parts := make([]string, len(key))
	for i, k := range key {
		switch k := k.(type) {
		case string:
			parts[i] = k
			continue
		case Stack:
			parts[i] = k.text()
			continue
		}
		parts[i] = strconv.FormatInt(intOf(k), 10)
	}
	return open + strings.Join(parts, sep) + close
}

// histJSON is a hist's buckets as bpftrace's JSON prints them: each
// {"min", "max", "count"} from the first non-zero bucket to the last.
// Its bounds are C ints shifted as x86 shifts them (a count of 32 shifts
// by 0), as bpftrace 0.17 computes them.
func histJSON(counts []uint64) string {
	first, last := span(counts)
	if first < 0 {
		return "[]"
	}
	shl := func(n int) int64 { return int64(int32(uint32(1) << (uint(n) & 31))) }
	var rows []string
	for i := first; i <= last; i++ {
		var r string
		switch i {
		case 0:
			r = `"max": -1, `
		case 1:
			r = `"min": 0, "max": 0, `
		case 2:
			r = `"min": 1, "max": 1, `
		default:
			r = fmt.Sprintf(`"min": %d, "max": %d, `, shl(i-2), shl(i-1)-1)
		}
		rows = append(rows, "{"+r+`"count": `+strconv.FormatUint(counts[i], 10)+"}")
	}
	return "[" + strings.Join(rows, ", ") + "]"
}

func lhistJSON(counts []uint64, min, max, step int64) string {
	first, last := span(counts)
	if first < 0 {
		return "[]"
	}
	buckets := int((max - min) / step)
	var rows []string
	for i := first; i <= last; i++ {
		var r string
		switch {
		case i == 0:
			r = fmt.Sprintf(`"max": %d, `, min-1)
		case i == buckets+1:
			r = fmt.Sprintf(`"min": %d, `, max)
		default:
			lo := int64(i-1)*step + min
			r = fmt.Sprintf(`"min": %d, "max": %d, `, lo, lo+step-1)
		}
		rows = append(rows, "{"+r+`"count": `+strconv.FormatUint(counts[i], 10)+"}")
	}
	return "[" + strings.Join(rows, ", ") + "]"
}

// span is the first and the last non-zero count; -1, -1 when none is.
func span(counts []uint64) (int, int) {
	first, last := -1, -1
	for i, c := range counts {
		if c != 0 {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	return first, last
}
