package runtime

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/bpf/symbols"
	"github.com/probectl/probectl/bpf/sys"
	"github.com/probectl/probectl/compiler/compiled"
)

// ProbeResult is what one probe measured: the stable JSON of "probectl show -json".
type ProbeResult struct {
	Address      string              `json:"address"`
	Aggregations []AggregationResult `json:"aggregations"`
	// Error says why the probe could not be read; the others still are.
	Error string `json:"error,omitempty"`
	// Events says whether the probe emits events (which show cannot print).
	Events bool `json:"-"`
}

// AggregationResult is one aggregation's data.
type AggregationResult struct {
	Name     string                   `json:"name"`
	Kind     compiled.AggregationKind `json:"kind"`
	ByFields []string                 `json:"-"` // the names of the by fields, in order
	Entries  []Entry                  `json:"entries"`
	Dropped  uint64                   `json:"dropped"`
	// Omitted counts the keys left out of Entries (show -top N).
	Omitted int `json:"omitted,omitempty"`
	// StacksLost counts the stacks of Entries without frames, by kind
	// (Stack.Lost: "full", "collision", "no stack", ...): samples for a
	// count aggregation, keys for the others.
	StacksLost map[string]int64 `json:"stacks_lost,omitempty"`
}

// Entry is one key's value: Value for count, sum, min and max; Buckets for
// histograms, and Sum, the sum of their observations (modulo 2^64; nil for
// a probe applied before histograms kept it).
type Entry struct {
	Key     OrderedKey `json:"key"`
	Value   *int64     `json:"value,omitempty"`
	Buckets []Bucket   `json:"buckets,omitempty"`
	Sum     *int64     `json:"sum,omitempty"`
}

// Bucket is a histogram bucket: values in [Low, High). An open end (the
// bucket below 0, or lhist's below min; hist's from 2^62, lhist's from
// max) is the int64 limit: Low is MinInt64, High MaxInt64 (OpenLow,
// OpenHigh).
type Bucket struct {
	Low   int64
	High  int64
	Count uint64
}

// OpenLow reports whether the bucket has no lower bound: every value
// below High.
func (b Bucket) OpenLow() bool { return b.Low == math.MinInt64 }

// OpenHigh reports whether the bucket has no upper bound: every value
// from Low up.
func (b Bucket) OpenHigh() bool { return b.High == math.MaxInt64 }

// MarshalJSON writes {low, high, count}, and for an open end "open": true
// in the place of its bound: no int64 limit stands for it.
func (b Bucket) MarshalJSON() ([]byte, error) {
	type bucket struct {
		Low   *int64 `json:"low,omitempty"`
		High  *int64 `json:"high,omitempty"`
		Count uint64 `json:"count"`
		Open  bool   `json:"open,omitempty"`
	}
	out := bucket{Count: b.Count, Open: b.OpenLow() || b.OpenHigh()}
	if !b.OpenLow() {
		out.Low = &b.Low
	}
	if !b.OpenHigh() {
		out.High = &b.High
	}
	return bpf.JSON(out)
}

// KeyField is one decoded key field.
type KeyField struct {
	Name  string
	Value any // int64, uint64 or string
}

// OrderedKey is a decoded key: an object from each by field to its value,
// in the order of by.
type OrderedKey []KeyField

// MarshalJSON writes the key as an object, fields in by order. Strings go
// through encoding/json: control bytes are escaped, and bytes that are not
// UTF-8 (a process may name itself anything) become U+FFFD.
func (k OrderedKey) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range k {
		if i > 0 {
			b.WriteByte(',')
		}
		name, err := bpf.JSON(f.Name)
		if err != nil {
			return nil, err
		}
		b.Write(name)
		b.WriteByte(':')
		v, err := bpf.JSON(f.Value)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// mapSource opens one of a probe's maps by its ref; the caller calls
// release when done with it.
type mapSource func(ref string) (m *ebpf.Map, release func(), err error)

// Read returns what the probes measured. A probe that cannot be read
// (a pin gone, a map replaced) has its Error set; the others are read.
func (w *Workspace) Read(probes []*ProbeState) []ProbeResult {
	return w.read(probes, readMode{sorted: true})
}

// ReadForScrape is Read as a scrape needs it: each aggregation's entries
// in the kernel's map order, for a reader that sorts only when it must
// (SortEntries), and stacks read and symbolized only where the
// aggregation exports them (the others keep their ids: a scrape adds them
// up).
func (w *Workspace) ReadForScrape(probes []*ProbeState) []ProbeResult {
	return w.read(probes, readMode{exportedStacksOnly: true})
}

// read reads the probes in parallel: a probe is a few system calls per
// map, and a workspace may hold thousands (the symbol caches lock).
func (w *Workspace) read(probes []*ProbeState, mode readMode) []ProbeResult {
	out := make([]ProbeResult, len(probes))
	syms := w.symbols()
	var tables []*TableState // read once, for probes given stack maps by a table
	for _, p := range probes {
		if len(p.Tables) > 0 {
			if s, err := w.State(); err == nil {
				tables = s.Tables
			}
			break
		}
	}
	parallel(len(probes), func(i int) {
		p := probes[i]
		d, err := w.probeDir(p)
		if err != nil {
			out[i] = ProbeResult{Address: p.Address.String(), Aggregations: []AggregationResult{}, Events: len(p.Events) > 0, Error: err.Error()}
			return
		}
		defer d.close()
		out[i] = readProbe(p, w.withTableMaps(dirMaps(d, p), p, tables), func() ([]uint64, error) { return dirStats(d, p) }, syms, mode)
	})
	_ = syms.Save() // the build-id index is a cache: losing it loses nothing now
	return out
}

// pinnedMaps opens a probe's maps from its pins, opening its pin
// directory for each.
func (w *Workspace) pinnedMaps(p *ProbeState) mapSource {
	return func(ref string) (*ebpf.Map, func(), error) {
		d, err := w.probeDir(p)
		if err != nil {
			return nil, nil, err
		}
		defer d.close()
		return dirMaps(d, p)(ref)
	}
}

// dirMaps opens a probe's maps from its pins in d, its pin directory,
// which the caller keeps open while it reads: show opens each probe's
// directory once, not once per map (issue 22).
func dirMaps(d *dir, p *ProbeState) mapSource {
	return func(ref string) (*ebpf.Map, func(), error) {
		for _, m := range p.Maps {
			if m.Ref != ref {
				continue
			}
			path, err := d.procPath(m.Pin)
			if err != nil {
				return nil, nil, err
			}
			mp, err := ebpf.LoadPinnedMap(path, &ebpf.LoadPinOptions{ReadOnly: true})
			if err != nil {
				return nil, nil, fmt.Errorf("%s: open map %s: %w", p.Address, m.Name, err)
			}
			return mp, func() { mp.Close() }, nil
		}
		return nil, nil, fmt.Errorf("%s: no map %s in the state", p.Address, ref)
	}
}

// withTableMaps opens the maps of p from open, and a map p does not have
// from the pins of a table p uses that has it: the stack maps a table
// keeps for the probes that share its stacks (the compiler's
// tableStackMaps).
func (w *Workspace) withTableMaps(open mapSource, p *ProbeState, tables []*TableState) mapSource {
	return func(ref string) (*ebpf.Map, func(), error) {
		m, rel, err := open(ref)
		if err == nil {
			return m, rel, nil
		}
		for _, ts := range tables {
			if !slices.Contains(p.Tables, ts.Address.Name) {
				continue
			}
			for _, pin := range ts.Pins {
				if pin.Ref != ref {
					continue
				}
				d, derr := w.tableDir(ts)
				if derr != nil {
					return nil, nil, derr
				}
				defer d.close()
				path, perr := d.procPath(pin.Pin)
				if perr != nil {
					return nil, nil, perr
				}
				tm, lerr := ebpf.LoadPinnedMap(path, &ebpf.LoadPinOptions{ReadOnly: true})
				if lerr != nil {
					return nil, nil, fmt.Errorf("%s: open map %s: %w", ts.Address, pin.Name, lerr)
				}
				return tm, func() { tm.Close() }, nil
			}
		}
		return nil, nil, err
	}
}

// probeDir opens the pin directory of p.
func (w *Workspace) probeDir(p *ProbeState) (*dir, error) {
	if w.pins == nil {
		return nil, fmt.Errorf("%s: %s is not there", p.Address, w.PinDir())
	}
	d, err := w.pins.sub(p.PinDir, false, trustPrivate)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.Address, err)
	}
	return d, nil
}

// stats sums the probe's per-CPU counters.
func stats(p *ProbeState, open mapSource) ([]uint64, error) {
	m, release, err := open(refStats)
	if err != nil {
		return nil, err
	}
	defer release()
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

// dirStats reads a probe's stats from its pinned stats map in d, its open
// pin directory, with raw bpf(2) calls (stats through cilium/ebpf costs a
// dozen more per probe).
func dirStats(d *dir, p *ProbeState) ([]uint64, error) {
	for _, m := range p.Maps {
		if m.Ref != refStats {
			continue
		}
		sums, drift, err := readStatsPin(d, p, m)
		switch {
		case drift != "" && err != nil: // not opened
			return nil, fmt.Errorf("%s: open map %s: %w", p.Address, m.Name, err)
		case drift != "":
			return nil, fmt.Errorf("%s: %s", p.Address, drift)
		case err != nil:
			return nil, fmt.Errorf("%s: read stats: %w", p.Address, err)
		}
		return sums, nil
	}
	return nil, fmt.Errorf("%s: no map %s in the state", p.Address, refStats)
}

// readStatsPin reads p's stats map m, pinned in d, summed over the CPUs
// (sys.SumPinnedCounters), checking that the pin still names the map
// recorded: drift says what is wrong with the pin (with err, why it did
// not open), err alone why the counters could not be read.
func readStatsPin(d *dir, p *ProbeState, m MapState) (sums []uint64, drift string, err error) {
	path, err := d.procPath(m.Pin)
	if err != nil {
		return nil, fmt.Sprintf("map %s: pin gone", m.Name), err
	}
	id, sums, err := sys.SumPinnedCounters(path, p.Stats.Size)
	switch {
	case err != nil && id == 0: // not opened
		return nil, fmt.Sprintf("map %s: pin gone", m.Name), err
	case ebpf.MapID(id) != m.ID:
		return nil, fmt.Sprintf("map %s: replaced (id %d, was %d)", m.Name, id, m.ID), nil
	}
	return sums, "", err
}

// refStats is the ref of every probe's stats map.
const refStats = "stats"

// readMode is how readProbe reads: entries sorted as show orders them, and
// stacks resolved only for the aggregations that export them.
type readMode struct{ sorted, exportedStacksOnly bool }

// readProbe reads a probe's aggregations from its maps; counters reads its
// stats (nil: from its stats map through open). A probe whose programs
// never ran (no entry or exit hit: each program counts its run before it
// does anything else, the tenant's filter aside, which stores nothing)
// has empty aggregations, and its maps are not opened: a hash map's
// lookup walks every bucket of its max_entries however few keys it holds,
// and most probes of a large workspace wait for events that have not come
// (issue 22).
func readProbe(p *ProbeState, open mapSource, counters func() ([]uint64, error), syms *symbols.UserSymbols, mode readMode) ProbeResult {
	res := ProbeResult{Address: p.Address.String(), Aggregations: []AggregationResult{}, Events: len(p.Events) > 0}
	if counters == nil {
		counters = func() ([]uint64, error) { return stats(p, open) }
	}
	st, err := counters()
	if err != nil {
		res.Error = err.Error()
		return res
	}
	idle := st[p.Stats.EntryHits] == 0 && st[p.Stats.ExitHits] == 0
	for _, agg := range p.Aggregations {
		if idle {
			res.Aggregations = append(res.Aggregations, *emptyAggregation(agg))
			continue
		}
		ar, err := readAggregation(p, agg, open, mode.sorted)
		if err != nil {
			res.Error = err.Error()
			return res
		}
		ar.Dropped = st[agg.DroppedIndex]
		if mode.exportedStacksOnly && !agg.ExportStacks {
			res.Aggregations = append(res.Aggregations, *ar)
			continue
		}
		if err := resolveStacks(ar, open, syms); err != nil {
			res.Error = err.Error()
			return res
		}
		res.Aggregations = append(res.Aggregations, *ar)
	}
	return res
}

// emptyAggregation is agg with no entries: what a probe whose programs
// never ran holds.
func emptyAggregation(agg *compiled.Aggregation) *AggregationResult {
	ar := &AggregationResult{Name: agg.Name, Kind: agg.Kind, Entries: []Entry{}}
	for _, f := range agg.Key {
		ar.ByFields = append(ar.ByFields, f.Name)
	}
	return ar
}

func readAggregation(p *ProbeState, agg *compiled.Aggregation, open mapSource, sorted bool) (*AggregationResult, error) {
	m, release, err := open(agg.MapRef)
	if err != nil {
		return nil, err
	}
	defer release()
	ar := emptyAggregation(agg)
	hist := agg.Kind.IsHistogram()
	byName := namedByCgroup(agg.Key)
	groups := map[string]*aggGroup{}
	var order []string
	err = eachEntry(m, func(key []byte, per [][]byte) {
		kb, bucket := splitBucket(key, hist)
		id, shown := string(kb), OrderedKey(nil)
		if byName {
			shown = decodeKey(agg.Key, kb, p)
			id = shown.id()
		}
		g := groups[id]
		if g == nil {
			if shown == nil {
				shown = decodeKey(agg.Key, kb, p)
			}
			g = &aggGroup{key: shown}
			if hist {
				g.buckets = map[int64]uint64{}
			}
			groups[id] = g
			order = append(order, id)
		}
		g.add(agg, bucket, per)
	})
	if err != nil {
		return nil, fmt.Errorf("%s: read %s: %w", p.Address, agg.Name, err)
	}
	for _, id := range order {
		ar.Entries = append(ar.Entries, groups[id].entry(agg, hist))
	}
	if sorted {
		SortEntries(ar.Entries)
	}
	return ar, nil
}

// aggGroup is one key of an aggregation as read: a histogram's buckets,
// or any other kind's value. Keys of pods (pod, namespace, container,
// node) are cgroup IDs in the kernel, and group by name: the cgroups of
// one pod are one entry of pod.
type aggGroup struct {
	key     OrderedKey
	buckets map[int64]uint64
	value   int64
	sum     int64 // a histogram's, when it keeps one
	seen    bool
}

// histSum adds up a histogram bucket's per-CPU sums: the word after each
// count.
func histSum(per [][]byte) int64 {
	var sum int64
	for _, b := range per {
		if len(b) >= 16 {
			sum += int64(binary.LittleEndian.Uint64(b[8:]))
		}
	}
	return sum
}

// add adds a key's per-CPU values (of bucket, in a histogram) to g: counts
// and sums add, min and max keep theirs.
func (g *aggGroup) add(agg *compiled.Aggregation, bucket int64, per [][]byte) {
	kind := agg.Kind
	v, seen := combine(kind, per)
	switch {
	case kind.IsHistogram():
		g.buckets[bucket] += uint64(v)
		if agg.HistSum {
			g.sum += histSum(per)
		}
	case !seen:
	case !g.seen:
		g.value, g.seen = v, true
	case kind == compiled.AggMin:
		g.value = min(g.value, v)
	case kind == compiled.AggMax:
		g.value = max(g.value, v)
	default:
		g.value += v
	}
}

// namedByCgroup reports whether a key has a field named by its cgroup
// (compiled.DecodePod...).
func namedByCgroup(key []compiled.KeyField) bool {
	for _, f := range key {
		switch f.Decode {
		case compiled.DecodePod, compiled.DecodeNamespace, compiled.DecodeContainer, compiled.DecodeNode:
			return true
		}
	}
	return false
}

// id is equal for keys whose fields show equal.
func (k OrderedKey) id() string {
	var b strings.Builder
	for _, f := range k {
		t := f.Text()
		fmt.Fprintf(&b, "%d:%s", len(t), t)
	}
	return b.String()
}

// splitBucket cuts a histogram's bucket index, its last 8 bytes, off key;
// -1 for a key of another kind.
func splitBucket(key []byte, hist bool) ([]byte, int64) {
	if !hist || len(key) < 8 {
		return key, -1
	}
	return key[:len(key)-8], int64(binary.LittleEndian.Uint64(key[len(key)-8:]))
}

// entry is the group's entry of agg: its shown buckets in order of their
// lower bounds, or its value.
func (g *aggGroup) entry(agg *compiled.Aggregation, hist bool) Entry {
	e := Entry{Key: g.key}
	if !hist {
		v := g.value
		e.Value = &v
		return e
	}
	for _, b := range shownBuckets(g.buckets) {
		lo, hi := bucketRange(agg, b)
		e.Buckets = append(e.Buckets, Bucket{Low: lo, High: hi, Count: g.buckets[b]})
	}
	sort.Slice(e.Buckets, func(i, j int) bool { return e.Buckets[i].Low < e.Buckets[j].Low })
	if agg.HistSum {
		sum := g.sum
		e.Sum = &sum
	}
	return e
}

// batchSize is how many keys one batch lookup asks for.
const batchSize = 512

// eachEntry calls fn with every key of an aggregation's map and its values:
// one per CPU from a per-CPU hash, the one shared value from a plain hash
// (compiled.Aggregation.SharedValue; the map's type decides, so a
// state written before reads as ever). It reads in batches (BPF_MAP_LOOKUP_BATCH: a few system calls for
// thousands of keys, where iterating costs two per key). Where the kernel
// has no batch lookup for the map, or a hash bucket holds more keys than a
// batch, it iterates key by key. key and per are valid only during fn.
func eachEntry(m *ebpf.Map, fn func(key []byte, per [][]byte)) error {
	done, err := eachBatch(m, fn)
	if done {
		return err
	}
	// Start over, key by key: nothing was passed to fn yet.
	var key []byte
	if !perCPU(m.Type()) {
		var value []byte
		iter := m.Iterate()
		for iter.Next(&key, &value) {
			fn(key, [][]byte{value})
		}
		return iter.Err()
	}
	var per [][]byte
	iter := m.Iterate()
	for iter.Next(&key, &per) {
		fn(key, per)
	}
	return iter.Err()
}

// perCPU reports whether a map of type t keeps one value per CPU.
func perCPU(t ebpf.MapType) bool {
	return t == ebpf.PerCPUHash || t == ebpf.PerCPUArray || t == ebpf.LRUCPUHash
}

// eachBatch reads m in batches. It returns done=false, having called fn for
// nothing, when the kernel cannot batch this map.
func eachBatch(m *ebpf.Map, fn func(key []byte, per [][]byte)) (done bool, err error) {
	keySize, valueSize := int(m.KeySize()), int(m.ValueSize())
	cpus, stride := 1, valueSize // a plain map's values are packed
	if perCPU(m.Type()) {
		if cpus, err = ebpf.PossibleCPU(); err != nil {
			return false, nil
		}
		stride = (valueSize + 7) &^ 7 // each CPU's value 8-byte aligned
	}
	n := min(batchSize, max(int(m.MaxEntries()), 1))
	// The batch counts its keys by the length of the slice: one element per
	// key and one per CPU's value, written in place (no copy).
	keysOut, keys := byteArrays(n, keySize)
	valuesOut, values := byteArrays(n*cpus, stride)
	per := make([][]byte, cpus)
	var cursor ebpf.MapBatchCursor
	first := true
	for {
		got, err := m.BatchLookup(&cursor, keysOut, valuesOut, nil)
		end := errors.Is(err, ebpf.ErrKeyNotExist)
		if err != nil && !end {
			if first {
				return false, nil
			}
			return true, err
		}
		first = false
		for i := 0; i < got; i++ {
			v := values[i*cpus*stride:]
			for c := range per {
				per[c] = v[c*stride : c*stride+valueSize]
			}
			fn(keys[i*keySize:(i+1)*keySize], per)
		}
		if end || got == 0 {
			return true, nil
		}
	}
}

// byteArrays makes a slice of n [size]byte and returns it with its memory.
func byteArrays(n, size int) (any, []byte) {
	v := reflect.MakeSlice(reflect.SliceOf(reflect.ArrayOf(size, reflect.TypeFor[byte]())), n, n)
	return v.Interface(), unsafe.Slice((*byte)(v.UnsafePointer()), n*size)
}

// maxBucketSpan bounds the buckets shown between the lowest and the
// highest non-empty one: an lhist has at most spec.MaxLinearBuckets and
// its two open ends, a log2 histogram 65. A map that claims more (written
// by something else) shows its non-empty buckets only.
const maxBucketSpan = 1002

// shownBuckets are the bucket indexes to show: every one from the lowest
// non-empty to the highest, the empty ones between included, as bpftrace
// prints a histogram.
func shownBuckets(counts map[int64]uint64) []int64 {
	var out []int64
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for b := range counts {
		out = append(out, b)
		lo, hi = min(lo, b), max(hi, b)
	}
	if len(out) == 0 || hi-lo >= maxBucketSpan || hi-lo < 0 {
		return out
	}
	out = out[:0]
	for b := lo; b <= hi; b++ {
		out = append(out, b)
	}
	return out
}

// combine folds the per-CPU values of one key: sums for count, sum and
// histograms; min or max over the CPUs that saw the key.
func combine(kind compiled.AggregationKind, per [][]byte) (int64, bool) {
	var acc int64
	seen := false
	for _, b := range per {
		v := int64(binary.LittleEndian.Uint64(b))
		switch kind {
		case compiled.AggMin, compiled.AggMax:
			if binary.LittleEndian.Uint64(b[8:]) == 0 {
				continue
			}
			if !seen || (kind == compiled.AggMin && v < acc) || (kind == compiled.AggMax && v > acc) {
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

// decodeKey decodes a key or a record by its fields. p, when given, names
// functions and events by their index.
func decodeKey(fields []compiled.KeyField, b []byte, p *ProbeState) OrderedKey {
	key := OrderedKey{}
	names := indexNames(p)
	for _, f := range fields {
		key = append(key, KeyField{f.Name, names.decodeField(f, b)})
	}
	return key
}

// keyNames are the lists a key's function and event indexes name.
type keyNames struct{ functions, events []string }

// indexNames are p's functions and events; none without p.
func indexNames(p *ProbeState) keyNames {
	if p == nil {
		return keyNames{}
	}
	n := keyNames{functions: p.Functions, events: p.Tracepoints}
	if len(n.events) == 0 && p.Event != "" {
		n.events = []string{p.Event}
	}
	return n
}

// outOfRecord is the value of a field the record is too short for.
const outOfRecord = "(out of the record)"

// decodeField decodes one field of the record b.
func (n keyNames) decodeField(f compiled.KeyField, b []byte) any {
	if f.Offset < 0 || f.Size < 0 || f.Offset+f.Size > len(b) {
		return outOfRecord
	}
	raw := b[f.Offset : f.Offset+f.Size]
	if dec := decoders[f.Decode]; dec != nil {
		return dec(f, raw)
	}
	switch f.Kind {
	case compiled.KeyComm, compiled.KeyString:
		if i := bytes.IndexByte(raw, 0); i >= 0 {
			raw = raw[:i]
		}
		return string(raw)
	case compiled.KeyArgv:
		return decodeArgv(raw)
	case compiled.KeyPath:
		return decodePath(raw)
	case compiled.KeyBuf:
		return decodeBuf(raw)
	case compiled.KeyBytes:
		return hex.EncodeToString(raw)
	case compiled.KeyFunc:
		return nameAt(n.functions, raw)
	case compiled.KeyEvent:
		return nameAt(n.events, raw)
	case compiled.KeyKStack, compiled.KeyUStack:
		if len(raw) < 8 {
			return outOfRecord
		}
		return decodeStack(f, raw)
	case compiled.KeyUint:
		return uint64(decodeInt(raw))
	}
	return decodeInt(raw)
}

// decodeBuf shows a buf() slot (the length read, then the bytes) as
// bpftrace's %r does: printable ASCII as itself, every other byte as
// \xNN.
func decodeBuf(raw []byte) string {
	if len(raw) < 8 {
		return outOfRecord
	}
	n := binary.LittleEndian.Uint64(raw)
	data := raw[8:]
	if n < uint64(len(data)) {
		data = data[:n]
	}
	var b strings.Builder
	for _, c := range data {
		if c >= 0x20 && c < 0x7f {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "\\x%02x", c)
		}
	}
	return b.String()
}

// decodePath turns the NUL-separated names of raw, leaf first (cwd's
// walk), into a path from the root: "/" when there are none.
func decodePath(raw []byte) string {
	var parts []string
	for _, s := range bytes.Split(raw, []byte{0}) {
		if len(s) == 0 {
			break
		}
		parts = append(parts, string(s))
	}
	slices.Reverse(parts)
	return "/" + strings.Join(parts, "/")
}

// decodeArgv joins the NUL-separated arguments of raw with spaces, up to
// the first empty one.
func decodeArgv(raw []byte) string {
	var parts []string
	for _, s := range bytes.Split(raw, []byte{0}) {
		if len(s) == 0 {
			break
		}
		parts = append(parts, string(s))
	}
	return strings.Join(parts, " ")
}

// nameAt is the name at the index raw holds in list, or #index outside it.
func nameAt(list []string, raw []byte) string {
	idx := binary.LittleEndian.Uint64(raw)
	if idx < uint64(len(list)) {
		return list[idx]
	}
	return fmt.Sprintf("#%d", idx)
}

// decodeInt reads a little-endian signed integer of 1, 2, 4 or 8 bytes.
func decodeInt(raw []byte) int64 {
	var buf [8]byte
	copy(buf[:], raw)
	v := int64(binary.LittleEndian.Uint64(buf[:]))
	if n := len(raw); n > 0 && n < 8 {
		shift := 64 - 8*n
		v = v << shift >> shift
	}
	return v
}

// bucketRange is the [low, high) range of a histogram bucket; the open
// ends are the int64 limits.
func bucketRange(agg *compiled.Aggregation, b int64) (int64, int64) {
	if agg.Kind == compiled.AggLHist {
		n := compiled.LinearBuckets(agg.LinearMin, agg.LinearMax, agg.LinearStep)
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

// SortEntries orders entries as Read does: by value, largest first
// (histograms by total count); ties by key text.
func SortEntries(es []Entry) {
	type sortKey struct {
		weight int64
		key    string
	}
	keys := make([]sortKey, len(es))
	ties := make(map[int64]int, len(es))
	for i, e := range es {
		k := &keys[i]
		if e.Value != nil {
			k.weight = *e.Value
		} else {
			for _, b := range e.Buckets {
				k.weight += int64(b.Count)
			}
		}
		ties[k.weight]++
	}
	// The key text only breaks ties: it is written only for the entries
	// that share their weight (writing every key was a tenth of show of
	// 1,000 probes, issue 22).
	for i, e := range es {
		if k := &keys[i]; ties[k.weight] > 1 {
			kb, _ := e.Key.MarshalJSON()
			k.key = string(kb)
		}
	}
	idx := make([]int, len(es))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(i, j int) bool {
		ki, kj := keys[idx[i]], keys[idx[j]]
		if ki.weight != kj.weight {
			return ki.weight > kj.weight
		}
		return ki.key < kj.key
	})
	sorted := make([]Entry, len(es))
	for i, j := range idx {
		sorted[i] = es[j]
	}
	copy(es, sorted)
}

// Text is the field's value as text, as show and the metrics decode it:
// strings as they are (function names, comm, decoded values), integers in
// decimal. Quoting for a terminal is the caller's.
func (f KeyField) Text() string {
	switch v := f.Value.(type) {
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	}
	return fmt.Sprint(f.Value)
}

// BucketRanges lists every bucket an aggregation of kind hist or lhist can
// fill, in order, with Count 0: for hist the <0 bucket [MinInt64, 0), [0, 1),
// the powers of two [2^k, 2^(k+1)) and the open end [2^62, MaxInt64]; for
// lhist [MinInt64, min), the steps, and [max, MaxInt64]. The ranges are
// those the entries' Buckets carry.
func BucketRanges(agg *compiled.Aggregation) []Bucket {
	last := int64(64)
	if agg.Kind == compiled.AggLHist {
		last = compiled.LinearBuckets(agg.LinearMin, agg.LinearMax, agg.LinearStep) + 1
	}
	out := make([]Bucket, 0, last+1)
	for b := int64(0); b <= last; b++ {
		lo, hi := bucketRange(agg, b)
		out = append(out, Bucket{Low: lo, High: hi})
	}
	return out
}
