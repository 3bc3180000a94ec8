package runtime

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/spec"
)

// ProbeResult is what one probe measured: the stable JSON of "probectl show -json".
type ProbeResult struct {
	Address      string              `json:"address"`
	Aggregations []AggregationResult `json:"aggregations"`
}

// AggregationResult is one aggregation's data.
type AggregationResult struct {
	Name    string          `json:"name"`
	Kind    spec.ActionKind `json:"kind"`
	KeyKeys []string        `json:"-"` // the by fields, in order
	Entries []Entry         `json:"entries"`
	Dropped uint64          `json:"dropped"`
}

// Entry is one key's value: Value for count, sum, min and max; Buckets for
// histograms.
type Entry struct {
	Key     OrderedKey `json:"key"`
	Value   *int64     `json:"value,omitempty"`
	Buckets []Bucket   `json:"buckets,omitempty"`
}

// Bucket is a histogram bucket: values in [Low, High).
type Bucket struct {
	Low   int64  `json:"low"`
	High  int64  `json:"high"`
	Count uint64 `json:"count"`
}

// KeyField is one decoded key field.
type KeyField struct {
	Name  string
	Value any // int64 or string
}

// OrderedKey is a decoded key: an object from each by field to its value,
// in the order of by.
type OrderedKey []KeyField

// MarshalJSON writes the key as an object, fields in by order.
func (k OrderedKey) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range k {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Quote(f.Name))
		b.WriteByte(':')
		switch v := f.Value.(type) {
		case string:
			b.WriteString(strconv.Quote(v))
		default:
			fmt.Fprint(&b, v)
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// Read returns what the probes of s measured.
func (w *Workspace) Read(s *State, probes []*ProbeState) ([]ProbeResult, error) {
	var out []ProbeResult
	for _, p := range probes {
		pr, err := w.readProbe(p)
		if err != nil {
			return nil, err
		}
		out = append(out, *pr)
	}
	return out, nil
}

func (w *Workspace) openMap(p *ProbeState, ref string) (*ebpf.Map, error) {
	for _, m := range p.Maps {
		if m.Ref == ref {
			mp, err := ebpf.LoadPinnedMap(filepath.Join(w.PinDir(), p.PinDir, m.Pin), nil)
			if err != nil {
				return nil, fmt.Errorf("%s: open map %s: %w", p.Address, m.Name, err)
			}
			return mp, nil
		}
	}
	return nil, fmt.Errorf("%s: no map %s in the state", p.Address, ref)
}

// stats sums the probe's per-CPU counters.
func (w *Workspace) stats(p *ProbeState) ([]uint64, error) {
	m, err := w.openMap(p, "stats")
	if err != nil {
		return nil, err
	}
	defer m.Close()
	out := make([]uint64, p.Stats.Size)
	for i := range out {
		var per []uint64
		if err := m.Lookup(uint32(i), &per); err != nil {
			return nil, fmt.Errorf("%s: read stats: %w", p.Address, err)
		}
		for _, v := range per {
			out[i] += v
		}
	}
	return out, nil
}

func (w *Workspace) readProbe(p *ProbeState) (*ProbeResult, error) {
	stats, err := w.stats(p)
	if err != nil {
		return nil, err
	}
	res := &ProbeResult{Address: p.Address.String()}
	for _, agg := range p.Aggregations {
		ar, err := w.readAggregation(p, agg)
		if err != nil {
			return nil, err
		}
		ar.Dropped = stats[agg.DroppedIndex]
		res.Aggregations = append(res.Aggregations, *ar)
	}
	return res, nil
}

func (w *Workspace) readAggregation(p *ProbeState, agg *compiler.Aggregation) (*AggregationResult, error) {
	m, err := w.openMap(p, agg.MapRef)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	ar := &AggregationResult{Name: agg.Name, Kind: agg.Kind, Entries: []Entry{}}
	for _, f := range agg.Key {
		ar.KeyKeys = append(ar.KeyKeys, f.Name)
	}
	hist := agg.Kind == spec.Hist || agg.Kind == spec.LHist
	type group struct {
		key     OrderedKey
		buckets map[int64]uint64
		value   int64
	}
	groups := map[string]*group{}
	var order []string
	var key []byte
	var per [][]byte
	iter := m.Iterate()
	for iter.Next(&key, &per) {
		kb := key
		bucket := int64(-1)
		if hist {
			bucket = int64(binary.LittleEndian.Uint64(kb[len(kb)-8:]))
			kb = kb[:len(kb)-8]
		}
		id := string(kb)
		g := groups[id]
		if g == nil {
			g = &group{key: decodeKey(agg.Key, kb, p.Functions), buckets: map[int64]uint64{}}
			groups[id] = g
			order = append(order, id)
		}
		v, seen := combine(agg.Kind, per)
		switch {
		case hist:
			g.buckets[bucket] += uint64(v)
		case seen:
			g.value = v
		}
	}
	if err := iter.Err(); err != nil {
		return nil, fmt.Errorf("%s: read %s: %w", p.Address, agg.Name, err)
	}
	for _, id := range order {
		g := groups[id]
		e := Entry{Key: g.key}
		if hist {
			for b, n := range g.buckets {
				lo, hi := bucketRange(agg, b)
				e.Buckets = append(e.Buckets, Bucket{Low: lo, High: hi, Count: n})
			}
			sort.Slice(e.Buckets, func(i, j int) bool { return e.Buckets[i].Low < e.Buckets[j].Low })
		} else {
			v := g.value
			e.Value = &v
		}
		ar.Entries = append(ar.Entries, e)
	}
	sortEntries(ar.Entries)
	return ar, nil
}

// combine folds the per-CPU values of one key: sums for count, sum and
// histograms; min or max over the CPUs that saw the key.
func combine(kind spec.ActionKind, per [][]byte) (int64, bool) {
	var acc int64
	seen := false
	for _, b := range per {
		v := int64(binary.LittleEndian.Uint64(b))
		switch kind {
		case spec.Min, spec.Max:
			if binary.LittleEndian.Uint64(b[8:]) == 0 {
				continue
			}
			if !seen || (kind == spec.Min && v < acc) || (kind == spec.Max && v > acc) {
				acc = v
			}
			seen = true
		default:
			acc += v
			seen = true
		}
	}
	return acc, seen
}

func decodeKey(fields []compiler.KeyField, b []byte, functions []string) OrderedKey {
	key := OrderedKey{}
	for _, f := range fields {
		raw := b[f.Offset : f.Offset+f.Size]
		switch f.Kind {
		case "comm":
			key = append(key, KeyField{f.Name, string(bytes.TrimRight(raw, "\x00"))})
		case "func":
			idx := binary.LittleEndian.Uint64(raw)
			name := fmt.Sprintf("#%d", idx)
			if idx < uint64(len(functions)) {
				name = functions[idx]
			}
			key = append(key, KeyField{f.Name, name})
		default:
			key = append(key, KeyField{f.Name, int64(binary.LittleEndian.Uint64(raw))})
		}
	}
	return key
}

// bucketRange is the [low, high) range of a histogram bucket; the open
// ends are the int64 limits.
func bucketRange(agg *compiler.Aggregation, b int64) (int64, int64) {
	if agg.Kind == spec.LHist {
		n := compiler.LinearBuckets(agg.LinearMin, agg.LinearMax, agg.LinearStep)
		switch {
		case b == 0:
			return math.MinInt64, agg.LinearMin
		case b > n:
			return agg.LinearMax, math.MaxInt64
		}
		lo := agg.LinearMin + (b-1)*agg.LinearStep
		return lo, min(lo+agg.LinearStep, agg.LinearMax)
	}
	switch {
	case b == 0:
		return math.MinInt64, 0
	case b == 1:
		return 0, 1
	case b >= 64:
		return 1 << 62, math.MaxInt64
	}
	return 1 << (b - 2), 1 << (b - 1)
}

// sortEntries orders entries by value, largest first (histograms by
// total count); ties by key text.
func sortEntries(es []Entry) {
	weight := func(e Entry) int64 {
		if e.Value != nil {
			return *e.Value
		}
		var n int64
		for _, b := range e.Buckets {
			n += int64(b.Count)
		}
		return n
	}
	sort.SliceStable(es, func(i, j int) bool {
		wi, wj := weight(es[i]), weight(es[j])
		if wi != wj {
			return wi > wj
		}
		ki, _ := es[i].Key.MarshalJSON()
		kj, _ := es[j].Key.MarshalJSON()
		return string(ki) < string(kj)
	})
}

// ProbeStatus is one applied probe's health: the stable JSON of
// "probectl status -json".
type ProbeStatus struct {
	Address   string         `json:"address"`
	Route     compiler.Route `json:"route"`
	Attach    []string       `json:"attach"`
	Functions []string       `json:"functions,omitempty"`
	Event     string         `json:"event,omitempty"`
	Binary    string         `json:"binary,omitempty"`
	Links     []LinkStatus   `json:"links"`
	// EntryHits and ExitHits count program runs; Missed is the kernel's
	// count of hits it could not deliver (recursion, full rethook pools),
	// where the link type reports one.
	EntryHits     uint64   `json:"entry_hits"`
	ExitHits      uint64   `json:"exit_hits"`
	Missed        uint64   `json:"missed"`
	DroppedKeys   uint64   `json:"dropped_keys"`
	DroppedEvents uint64   `json:"dropped_events"`
	Drift         []string `json:"drift,omitempty"`
	AppliedAtUnix int64    `json:"applied_at"`
	PinDir        string   `json:"pin_dir"`
}

// LinkStatus is one link.
type LinkStatus struct {
	Family    string         `json:"family"`
	Function  string         `json:"function,omitempty"`
	ID        link.ID        `json:"id"`
	ProgramID ebpf.ProgramID `json:"program_id"`
}

// Status checks every probe of s against the kernel.
func (w *Workspace) Status(s *State) ([]ProbeStatus, error) {
	var out []ProbeStatus
	for _, p := range s.Probes {
		st := ProbeStatus{Address: p.Address.String(), Route: p.Route, Attach: p.Attach, Functions: p.Functions,
			Event: p.Event, Binary: p.Binary, AppliedAtUnix: p.AppliedAt.Unix(), PinDir: filepath.Join(w.PinDir(), p.PinDir)}
		drift, missed := w.checkProbe(p)
		st.Drift, st.Missed = drift, missed
		for _, l := range p.Links {
			st.Links = append(st.Links, LinkStatus{Family: l.Family, Function: l.Function, ID: l.ID, ProgramID: l.ProgramID})
		}
		if stats, err := w.stats(p); err == nil {
			for _, agg := range p.Aggregations {
				st.DroppedKeys += stats[agg.DroppedIndex]
			}
			st.DroppedEvents = stats[p.Stats.EventsDropped]
			st.EntryHits, st.ExitHits = stats[p.Stats.EntryHits], stats[p.Stats.ExitHits]
		}
		out = append(out, st)
	}
	return out, nil
}

// Drift checks every probe and returns what is damaged, by address.
func (w *Workspace) Drift(s *State) map[string][]string {
	out := map[string][]string{}
	for _, p := range s.Probes {
		if d, _ := w.checkProbe(p); len(d) > 0 {
			out[p.Address.String()] = d
		}
	}
	return out
}

// checkProbe compares a probe's pins with the kernel: every pin must be
// there, every link must still run the program probectl attached.
func (w *Workspace) checkProbe(p *ProbeState) (drift []string, missed uint64) {
	dir := filepath.Join(w.PinDir(), p.PinDir)
	for _, m := range p.Maps {
		mp, err := ebpf.LoadPinnedMap(filepath.Join(dir, m.Pin), nil)
		if err != nil {
			drift = append(drift, fmt.Sprintf("map %s: pin gone", m.Name))
			continue
		}
		if info, err := mp.Info(); err == nil {
			if id, _ := info.ID(); id != m.ID {
				drift = append(drift, fmt.Sprintf("map %s: replaced (id %d, was %d)", m.Name, id, m.ID))
			}
		}
		mp.Close()
	}
	for _, l := range p.Links {
		what := l.Family
		if l.Function != "" {
			what += " " + l.Function
		}
		lk, err := link.LoadPinnedLink(filepath.Join(dir, l.Pin), nil)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				drift = append(drift, fmt.Sprintf("link %s: pin gone", what))
			} else {
				drift = append(drift, fmt.Sprintf("link %s: %v", what, err))
			}
			continue
		}
		info, err := lk.Info()
		lk.Close()
		if err != nil {
			drift = append(drift, fmt.Sprintf("link %s: %v", what, err))
			continue
		}
		if info.ID != l.ID {
			drift = append(drift, fmt.Sprintf("link %s: replaced (id %d, was %d)", what, info.ID, l.ID))
		}
		if info.Program != l.ProgramID {
			drift = append(drift, fmt.Sprintf("link %s: program replaced (id %d, was %d)", what, info.Program, l.ProgramID))
		}
		if km := info.KprobeMulti(); km != nil {
			missed += km.Missed
		}
		if um := info.UprobeMulti(); um != nil {
			missed += um.Missed
		}
		if pe := info.PerfEvent(); pe != nil {
			if k := pe.Kprobe(); k != nil {
				missed += k.Missed
			}
		}
	}
	return drift, missed
}
