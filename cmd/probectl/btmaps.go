package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"strings"
	"time"

	"github.com/probectl/probectl/internal/bttext"
	"github.com/probectl/probectl/internal/termtext"
	"github.com/probectl/probectl/runtime"
	"github.com/probectl/probectl/spec/bpftrace"
)

// btOutput is what run prints of an imported bpftrace program as bpftrace
// prints it: its BEGIN, END and interval steps, its maps, and with -f
// json bpftrace's JSON lines. A clear() or zero() cannot remove what the
// kernel's maps hold: it takes the values as they are as the map's new
// zero (base), and a cleared map shows only the keys that changed since.
type btOutput struct {
	maps   []bpftrace.Map
	begin  []bpftrace.Step
	end    []bpftrace.Step
	every  []bpftrace.Interval
	probes int // the attach points bpftrace would count
	json   bool
	base   map[string]map[string]bttext.MapEntry // by map, then key text
	keep   map[string]bool                       // zeroed: its keys stay
}

func newBtOutput(imp bpftrace.Run, json bool) *btOutput {
	return &btOutput{maps: imp.Maps, begin: imp.Begin, end: imp.End, every: imp.Intervals,
		probes: imp.Probes, json: json, base: map[string]map[string]bttext.MapEntry{}, keep: map[string]bool{}}
}

// steps does a probe's steps; it says whether one was exit().
func (b *btOutput) steps(w io.Writer, steps []bpftrace.Step, read func() []runtime.ProbeResult) bool {
	var results []runtime.ProbeResult
	current := func() []runtime.ProbeResult {
		if results == nil {
			results = read()
		}
		return results
	}
	for _, s := range steps {
		switch s.Op {
		case "printf":
			b.printf(w, bttext.Printf(s.Format, s.Args...))
		case "time":
			b.printf(w, bttext.Strftime(s.Format, time.Now()))
		case "print":
			if m, ok := b.mapNamed(s.Map, current()); ok {
				b.print(w, m, s.Top, s.Div)
			}
		case "clear", "zero":
			if m, ok := b.totals(s.Map, current()); ok {
				b.reset(m, s.Op == "zero" || !m.Keyed && m.Kind == bttext.Count)
			}
		case "exit":
			return true
		}
	}
	return false
}

// finish is what bpftrace prints at exit: END's steps, two newlines,
// then every map.
func (b *btOutput) finish(w io.Writer, read func() []runtime.ProbeResult, lost uint64) {
	b.steps(w, b.end, read)
	if lost > 0 {
		if b.json {
			io.WriteString(w, bttext.LostJSON(lost))
		} else {
			fmt.Fprintf(w, "Lost %d events\n", lost)
		}
	}
	io.WriteString(w, "\n\n")
	results := read()
	for _, bm := range b.maps {
		m, _ := b.mapNamed(bm.Name, results)
		b.print(w, m, 0, 0)
	}
}

func (b *btOutput) printf(w io.Writer, text string) {
	if b.json {
		io.WriteString(w, bttext.PrintfJSON(text))
		return
	}
	io.WriteString(w, text)
}

func (b *btOutput) print(w io.Writer, m bttext.Map, top, div int) {
	if div > 1 {
		for i := range m.Entries {
			e := &m.Entries[i]
			e.Value /= int64(div)
			if m.Kind == bttext.Avg {
				e.Total /= int64(div)
			}
		}
	}
	if b.json {
		io.WriteString(w, m.JSON(top))
		return
	}
	io.WriteString(w, m.Text(top))
}

// reset takes m's values as its zero; keep: its keys stay (zero(), or
// clear() of a count without keys, an array map that bpftrace zeroes).
func (b *btOutput) reset(m bttext.Map, keep bool) {
	base := b.base[m.Name]
	if base == nil {
		base = map[string]bttext.MapEntry{}
		b.base[m.Name] = base
	}
	for _, e := range m.Entries {
		k := btKey(e.Key)
		base[k] = addEntry(m.Kind, base[k], e, true)
	}
	b.keep[m.Name] = keep
}

// mapNamed is the bpftrace map name as the results hold it now: its spec
// aggregations' entries merged by key, less what a clear() or zero() took
// as its zero.
func (b *btOutput) mapNamed(name string, results []runtime.ProbeResult) (bttext.Map, bool) {
	m, ok := b.totals(name, results)
	if !ok {
		return m, false
	}
	base, cleared := b.base[name]
	if !cleared {
		return m, true
	}
	var kept []bttext.MapEntry
	for _, e := range m.Entries {
		old, had := base[btKey(e.Key)]
		if had && !b.keep[name] && unchanged(e, old) {
			continue
		}
		kept = append(kept, subEntry(m.Kind, e, old))
	}
	m.Entries = kept
	return m, true
}

// totals is the map as the kernel's maps hold it: every part's entries
// merged by key, since the start.
func (b *btOutput) totals(name string, results []runtime.ProbeResult) (bttext.Map, bool) {
	var bm *bpftrace.Map
	for i := range b.maps {
		if b.maps[i].Name == name {
			bm = &b.maps[i]
		}
	}
	if bm == nil {
		return bttext.Map{}, false
	}
	m := bttext.Map{Name: bm.Name, Kind: bttext.MapKinds[bm.Kind], Keyed: bm.Keyed, Min: bm.Min, Max: bm.Max, Step: bm.Step}
	byKey := map[string]int{}
	for _, part := range bm.Parts {
		for _, pr := range results {
			if pr.Address != part.Probe {
				continue
			}
			for _, ar := range pr.Aggregations {
				if ar.Name != part.Aggregation {
					continue
				}
				for _, e := range ar.Entries {
					be := b.entry(bm, part.Role, e)
					k := btKey(be.Key)
					i, ok := byKey[k]
					if !ok {
						byKey[k] = len(m.Entries)
						m.Entries = append(m.Entries, be)
						continue
					}
					m.Entries[i] = addEntry(m.Kind, m.Entries[i], be, false)
				}
			}
		}
	}
	if !m.Keyed && m.Kind == bttext.Count && len(m.Entries) == 0 {
		// bpftrace keeps a count without keys in an array map: its one
		// element is there, 0, before the first count.
		m.Entries = []bttext.MapEntry{{}}
	}
	return m, true
}

// unchanged: e holds what its base old held, nothing observed since.
func unchanged(e, old bttext.MapEntry) bool {
	if e.Value != old.Value || e.Count != old.Count || e.Total != old.Total || len(e.Buckets) != len(old.Buckets) {
		return false
	}
	for i := range e.Buckets {
		if e.Buckets[i] != old.Buckets[i] {
			return false
		}
	}
	return true
}

// entry is a result's entry as a bpftrace map's: a count's or a sum's
// part of an avg or a stats, or a hist's buckets at bpftrace's indices.
func (b *btOutput) entry(bm *bpftrace.Map, role string, e runtime.Entry) bttext.MapEntry {
	var out bttext.MapEntry
	for i, f := range e.Key {
		v := f.Value
		if s, ok := v.(*runtime.Stack); ok {
			v = btStack(s)
		}
		if s, ok := v.(string); ok && i < len(bm.Keys) && (bm.Keys[i] == "ksym" || bm.Keys[i] == "usym") {
			v = symbolName(s)
		}
		out.Key = append(out.Key, v)
	}
	var v int64
	if e.Value != nil {
		v = *e.Value
	}
	switch role {
	case "count":
		out.Count = v
	case "sum":
		out.Total = v
	default:
		out.Value = v
	}
	if e.Buckets != nil {
		n := 34
		if bm.Kind == "lhist" {
			n = bttext.LhistIndex(bm.Max, bm.Min, bm.Max, bm.Step) + 1
		}
		out.Buckets = make([]uint64, n)
		for _, bk := range e.Buckets {
			out.Buckets[bucketIndex(bm, bk, n)] += bk.Count
		}
	}
	return out
}

// bucketIndex is the bpftrace bucket a runtime bucket counts in: a hist's
// from 2^32 in [2G, 4G), as bpftrace 0.17's 32-bit log2 puts them.
func bucketIndex(bm *bpftrace.Map, bk runtime.Bucket, n int) int {
	switch {
	case bk.Low == math.MinInt64:
		return 0
	case bm.Kind == "lhist" && bk.High == math.MaxInt64:
		return n - 1
	case bm.Kind == "lhist":
		return bttext.LhistIndex(bk.Low, bm.Min, bm.Max, bm.Step)
	case bk.Low == 0:
		return 1
	}
	return min(bits.Len64(uint64(bk.Low))+1, n-1)
}

// addEntry merges two parts of one key: counts, sums, observations and
// buckets add; min and max keep the least and the largest. replace: a
// base being taken again, where the later values replace the earlier.
func addEntry(k bttext.MapKind, a, e bttext.MapEntry, replace bool) bttext.MapEntry {
	if replace {
		return e
	}
	switch k {
	case bttext.Min:
		a.Value = min(a.Value, e.Value)
	case bttext.Max:
		a.Value = max(a.Value, e.Value)
	default:
		a.Value += e.Value
	}
	a.Count += e.Count
	a.Total += e.Total
	for i := range a.Buckets {
		if i < len(e.Buckets) {
			a.Buckets[i] += e.Buckets[i]
		}
	}
	if a.Buckets == nil {
		a.Buckets = e.Buckets
	}
	return a
}

// subEntry is e less its base old: a min's or a max's value as it is
// (what the kernel keeps cannot be taken back).
func subEntry(k bttext.MapKind, e, old bttext.MapEntry) bttext.MapEntry {
	if k != bttext.Min && k != bttext.Max {
		e.Value -= old.Value
	} else if e.Value == old.Value {
		e.Value = 0
	}
	e.Count -= old.Count
	e.Total -= old.Total
	if e.Buckets != nil {
		bs := make([]uint64, len(e.Buckets))
		for i, c := range e.Buckets {
			if i < len(old.Buckets) {
				c -= min(c, old.Buckets[i])
			}
			bs[i] = c
		}
		e.Buckets = bs
	}
	return e
}

// btKey is a key's identity.
func btKey(k []any) string {
	var b strings.Builder
	for _, p := range k {
		fmt.Fprintf(&b, "%T:%v\x00", p, p)
	}
	return b.String()
}

// btIntervals ticks the imported program's interval probes: the index of
// each as its period passes.
func (r *probeRun) btIntervals() (<-chan int, func()) {
	ch := make(chan int)
	done := make(chan struct{})
	if r.o.bto == nil {
		return ch, func() {}
	}
	r.btFired = make([]time.Time, len(r.o.bto.every))
	for i, iv := range r.o.bto.every {
		if iv.Every <= 0 {
			continue
		}
		r.btFired[i] = time.Now()
		t := time.NewTicker(iv.Every)
		go func() {
			defer t.Stop()
			for {
				select {
				case <-t.C:
					select {
					case ch <- i:
					case <-done:
						return
					}
				case <-done:
					return
				}
			}
		}()
	}
	return ch, func() { close(done) }
}

// btInterval does interval probe i's steps; it says whether one was exit().
func (r *probeRun) btInterval(i int) bool {
	r.btFired[i] = time.Now()
	exit := false
	r.pr.WithPrinter(func(w io.Writer) { exit = r.o.bto.steps(w, r.o.bto.every[i].Steps, r.sess.Read) })
	return exit
}

// btDue: a run that ends at its interval probe's exit() (the -duration
// that probe's period gave it) does that probe's steps first, unless its
// tick just did them.
func (r *probeRun) btDue(ctx context.Context) {
	if r.o.bto == nil || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return
	}
	for i, iv := range r.o.bto.every {
		ends := false
		for _, s := range iv.Steps {
			ends = ends || s.Op == "exit"
		}
		if ends && iv.Every > 0 && time.Since(r.btFired[i]) > iv.Every/2 {
			r.btInterval(i)
			return
		}
	}
}

// btStack is a stack key's frames as bpftrace prints them: func+off,
// the offset in decimal, or the address in hex where no symbol covers it
// (bpftrace shows neither the module nor the file). A lost stack has none.
// A symbol is named by the ELF file a process maps, anyone's: one that
// does not print (a newline, an escape sequence) is Go-quoted, where
// bpftrace would write it raw, so that no frame passes for another line.
func btStack(s *runtime.Stack) bttext.Stack {
	if s.Err != "" {
		return bttext.Stack{}
	}
	out := make(bttext.Stack, 0, len(s.Frames))
	for _, f := range s.Frames {
		if f.Symbol == "" {
			out = append(out, fmt.Sprintf("0x%x", f.Addr))
			continue
		}
		out = append(out, fmt.Sprintf("%s+%d", termtext.Printable(f.Symbol), f.Offset))
	}
	return out
}

// symbolName is a ksym's or usym's text as bpftrace prints it: the
// function's name alone, without the offset and the module or file
// probectl shows ("vfs_read+0x12 [mod]": vfs_read); an address no symbol
// covers in hex, as it is.
func symbolName(s string) string {
	if strings.HasPrefix(s, "0x") {
		s, _, _ = strings.Cut(s, " ")
		return s
	}
	s, _, _ = strings.Cut(s, " [")
	if i := strings.LastIndex(s, "+0x"); i > 0 {
		s = s[:i]
	}
	return s
}
