package runtime

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler/compiled"
)

// TableState is one applied table: its layout (as compiled) and its pins.
// A table belongs to the spec set, not to a probe: an apply that keeps it
// (same layout) keeps its contents, and the probes that use it share its
// map.
type TableState struct {
	compiled.Table
	PinDir    string     `json:"pin_dir"`
	Pins      []MapState `json:"pins"`
	BootID    string     `json:"boot_id,omitempty"`
	MetaID    ebpf.MapID `json:"meta_id,omitempty"`
	AppliedAt int64      `json:"applied_at"`
}

// Table returns the state of the table named name, or nil.
func (s *State) Table(name string) *TableState {
	for _, t := range s.Tables {
		if t.Address.Name == name {
			return t
		}
	}
	return nil
}

// liveTable is a table's maps during an apply: made anew, or opened from
// the pins of the table the apply keeps.
type liveTable struct {
	table *compiled.Table
	maps  map[string]*ebpf.Map // by ref
	made  bool
	old   *TableState
}

func (l *liveTable) close() {
	for _, m := range l.maps {
		m.Close()
	}
}

// makeTable creates a table's maps.
func (w *Workspace) makeTable(t *txn, tb *compiled.Table) (*liveTable, error) {
	if err := w.step("load %s", tb.Address); err != nil {
		return nil, err
	}
	l := &liveTable{table: tb, maps: map[string]*ebpf.Map{}, made: true}
	for _, m := range tb.Maps {
		km, err := ebpf.NewMap(m.Spec())
		if err != nil {
			l.close()
			return nil, fmt.Errorf("%s: create map %s: %w", tb.Address, m.Name, err)
		}
		l.maps[m.Ref] = km
		if info, err := km.Info(); err == nil {
			id, _ := info.ID()
			w.created("map", uint32(id))
		}
	}
	t.onUndo(l.close)
	return l, nil
}

// openTable opens the pinned maps of an applied table.
func (w *Workspace) openTable(ts *TableState) (*liveTable, error) {
	d, err := w.tableDir(ts)
	if err != nil {
		return nil, err
	}
	defer d.close()
	l := &liveTable{table: &ts.Table, maps: map[string]*ebpf.Map{}, old: ts}
	for _, p := range ts.Pins {
		path, err := d.procPath(p.Pin)
		if err != nil {
			l.close()
			return nil, err
		}
		m, err := ebpf.LoadPinnedMap(path, nil)
		if err != nil {
			l.close()
			return nil, fmt.Errorf("%s: open map %s: %w", ts.Address, p.Name, err)
		}
		l.maps[p.Ref] = m
	}
	return l, nil
}

func (w *Workspace) tableDir(ts *TableState) (*dir, error) {
	if w.pins == nil {
		return nil, fmt.Errorf("%s: %s is not there", ts.Address, w.PinDir())
	}
	d, err := w.pins.sub(ts.PinDir, false, trustPrivate)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ts.Address, err)
	}
	return d, nil
}

// pinTable pins a new table's maps under a new directory, then its
// description.
func (w *Workspace) pinTable(t *txn, l *liveTable, serial uint64) (*TableState, error) {
	tb := l.table
	name := fmt.Sprintf("table-%s-%d", tb.Address.Name, serial)
	if err := w.pins.mkdirExcl(name); err != nil {
		return nil, fmt.Errorf("%s: pin directory: %w", tb.Address, err)
	}
	t.onUndo(func() { _ = w.pins.removeAll(name) })
	d, err := w.pins.sub(name, false, trustPrivate)
	if err != nil {
		return nil, err
	}
	defer d.close()
	ts := &TableState{Table: *tb, PinDir: name, BootID: bootID(), AppliedAt: nowUnix()}
	for _, m := range tb.Maps {
		if err := w.step("pin %s map %s", tb.Address, m.Ref); err != nil {
			return nil, fmt.Errorf("%s: pin map %s: %w", tb.Address, m.Ref, err)
		}
		pin := "map_" + m.Ref
		path, err := d.procPath(pin)
		if err != nil {
			return nil, err
		}
		km := l.maps[m.Ref]
		if err := km.Pin(path); err != nil {
			return nil, fmt.Errorf("%s: pin map %s: %w", tb.Address, m.Ref, err)
		}
		info, err := km.Info()
		if err != nil {
			return nil, err
		}
		id, _ := info.ID()
		ts.Pins = append(ts.Pins, MapState{Ref: m.Ref, Name: m.Name, ID: id, Pin: pin})
	}
	b, err := json.Marshal(ts)
	if err != nil {
		return nil, err
	}
	mid, err := pinBlob(d, metaPin, "probectl.meta", b)
	if err != nil {
		return nil, fmt.Errorf("%s: pin meta: %w", tb.Address, err)
	}
	w.created("map", uint32(mid))
	ts.MetaID = mid
	return ts, nil
}

// diffTables plans the tables: the same layout keeps the applied table and
// its contents; another layout replaces it; a table no spec declares goes.
func diffTables(s *State, out *compiled.Output, plan *compiled.Plan, drift map[bpf.Address][]string) {
	seen := map[string]bool{}
	for _, t := range out.Tables {
		seen[t.Address.Name] = true
		c := out.TableChange(t, compiled.ActionCreate)
		if old := s.Table(t.Address.Name); old != nil {
			switch {
			case len(drift[t.Address]) > 0:
				c.Action, c.Why = compiled.ActionReplace, "drift: "+strings.Join(drift[t.Address], "; ")
			case old.Digest == t.Digest:
				c.Action = compiled.ActionNoOp
			default:
				c.Action, c.Why = compiled.ActionReplace, "its layout changed: a new, empty table"
			}
		}
		plan.Tables = append(plan.Tables, c)
	}
	for _, old := range s.Tables {
		if !seen[old.Address.Name] {
			plan.Tables = append(plan.Tables, &compiled.TableChange{Table: old.Table, Action: compiled.ActionDelete, Why: "no longer in the specs"})
		}
	}
	sort.Slice(plan.Tables, func(i, j int) bool { return plan.Tables[i].Address.Name < plan.Tables[j].Address.Name })
}

// TableResult is what a table holds: the JSON of show -json's tables.
type TableResult struct {
	Address string       `json:"address"`
	Entries []TableEntry `json:"entries"`
	// Dropped counts the stores the full table could not take.
	Dropped uint64 `json:"dropped"`
	Error   string `json:"error,omitempty"`
}

// TableEntry is one key of a table and what it holds.
type TableEntry struct {
	Key   OrderedKey `json:"key"`
	Value OrderedKey `json:"value"`
}

// maxTableRead bounds what show reads of one table.
const maxTableRead = 100000

func readTable(ts *compiled.Table, open mapSource) TableResult {
	res := TableResult{Address: ts.Address.String(), Entries: []TableEntry{}}
	data, stats := tableMapRefs(ts)
	res.Dropped = tableDropped(open, stats)
	m, release, err := open(data)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	defer release()
	var key, value []byte
	iter := m.Iterate()
	for iter.Next(&key, &value) && len(res.Entries) < maxTableRead {
		res.Entries = append(res.Entries, TableEntry{Key: decodeKey(ts.Key, key, nil), Value: decodeKey(ts.Value, value, nil)})
	}
	if err := iter.Err(); err != nil && !errors.Is(err, ebpf.ErrIterationAborted) {
		res.Error = err.Error()
	}
	sort.Slice(res.Entries, func(i, j int) bool {
		a, _ := json.Marshal(res.Entries[i].Key)
		b, _ := json.Marshal(res.Entries[j].Key)
		return string(a) < string(b)
	})
	return res
}

// tableMapRefs are the refs of a table's data map (a hash) and its stats
// map (a per-CPU array).
func tableMapRefs(ts *compiled.Table) (data, stats string) {
	for _, m := range ts.Maps {
		switch m.Type {
		case ebpf.Hash:
			data = m.Ref
		case ebpf.PerCPUArray:
			stats = m.Ref
		}
	}
	return data, stats
}

// tableDropped sums the stores a table's stats map counts as dropped over
// every CPU; 0 when it cannot be read.
func tableDropped(open mapSource, stats string) uint64 {
	m, release, err := open(stats)
	if err != nil {
		return 0
	}
	defer release()
	var per []uint64
	var n uint64
	if m.Lookup(uint32(0), &per) == nil {
		for _, v := range per {
			n += v
		}
	}
	return n
}

// ReadTables returns what the applied tables hold.
func (w *Workspace) ReadTables(tables []*TableState) []TableResult {
	out := make([]TableResult, 0, len(tables))
	for _, ts := range tables {
		out = append(out, readTable(&ts.Table, w.pinnedTableMaps(ts)))
	}
	return out
}

func (w *Workspace) pinnedTableMaps(ts *TableState) mapSource {
	return func(ref string) (*ebpf.Map, func(), error) {
		for _, p := range ts.Pins {
			if p.Ref != ref {
				continue
			}
			d, err := w.tableDir(ts)
			if err != nil {
				return nil, nil, err
			}
			defer d.close()
			path, err := d.procPath(p.Pin)
			if err != nil {
				return nil, nil, err
			}
			m, err := ebpf.LoadPinnedMap(path, &ebpf.LoadPinOptions{ReadOnly: true})
			if err != nil {
				return nil, nil, fmt.Errorf("%s: open map %s: %w", ts.Address, p.Name, err)
			}
			return m, func() { m.Close() }, nil
		}
		return nil, nil, fmt.Errorf("%s: no map %s in the state", ts.Address, ref)
	}
}
