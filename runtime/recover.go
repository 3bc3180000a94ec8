package runtime

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/probectl/probectl/bpf"
)

// Recover rebuilds a lost state file from what is pinned: the lineage from
// the workspace's identity, and each probe from the description pinned in
// its directory (complete directories only; of several for one probe, the
// newest). It refuses when the state still records probes. The workspace
// must be locked (Lock, not Begin: Begin refuses pins it does not own).
// It returns the state written and the directories it did not adopt, which
// the next command's Repair removes.
func (w *Workspace) Recover() (*State, []string, error) {
	if !w.locked {
		return nil, nil, errors.New("recover needs the workspace lock")
	}
	cur, id, dirs, err := w.recoverable()
	if err != nil {
		return nil, nil, err
	}
	next := &State{Version: StateVersion, Workspace: w.Name, Serial: cur.Serial}
	if id != nil {
		next.Lineage = id.Lineage
	} else {
		next.Lineage = newLineage()
	}
	f := &found{newest: map[bpf.Address]*ProbeState{}, tables: map[string]*TableState{}}
	sort.Slice(dirs, func(i, j int) bool { return dirSerial(dirs[i]) < dirSerial(dirs[j]) })
	for _, name := range dirs {
		next.Serial = max(next.Serial, dirSerial(name))
		w.adopt(f, name)
	}
	f.fill(next)
	if err := next.validate(w.Name); err != nil {
		return nil, nil, fmt.Errorf("recover: %w", err)
	}
	t := &txn{}
	if err := w.ensureIdentity(t, next); err != nil {
		t.rollback()
		return nil, nil, err
	}
	if err := w.commit(next); err != nil {
		t.rollback()
		return nil, nil, err
	}
	return next, f.skipped, nil
}

// recoverable reads what a recovery starts from: the current state, which
// must record no probes, the workspace's identity, and the pin
// directories, of which there must be some.
func (w *Workspace) recoverable() (*State, *identity, []string, error) {
	cur, err := w.State()
	if err != nil {
		return nil, nil, nil, err
	}
	if len(cur.Probes) > 0 {
		return nil, nil, nil, fmt.Errorf("the state of workspace %q in %s records %d probes: there is nothing to recover", w.Name, w.dir(), len(cur.Probes))
	}
	id, err := readIdentity(w.pins)
	if err != nil {
		return nil, nil, nil, err
	}
	dirs, err := probeDirs(w.pins)
	if err != nil {
		return nil, nil, nil, err
	}
	if len(dirs) == 0 {
		return nil, nil, nil, fmt.Errorf("workspace %q has no probes pinned under %s: there is nothing to recover", w.Name, w.PinDir())
	}
	return cur, id, dirs, nil
}

// dirSerial is the serial a pin directory is named for.
func dirSerial(name string) uint64 {
	n, _ := strconv.ParseUint(name[strings.LastIndexByte(name, '-')+1:], 10, 64)
	return n
}

// found is what a recovery adopts: the newest description of each probe
// and table, and of the event buffer, and the directories it skips.
type found struct {
	newest  map[bpf.Address]*ProbeState
	tables  map[string]*TableState
	events  *EventsState
	skipped []string
}

// adopt reads the description in one pin directory into f; directories
// are adopted oldest first, so a newer copy displaces an older one.
func (w *Workspace) adopt(f *found, name string) {
	switch {
	case strings.HasPrefix(name, eventsPinDir):
		es, err := w.readEventsMeta(name)
		if err != nil {
			f.skip(name, err)
			return
		}
		if f.events != nil {
			f.skipped = append(f.skipped, f.events.PinDir+" (an older copy)")
		}
		f.events = es
	case strings.HasPrefix(name, "table-"):
		ts, err := w.readTableMeta(name)
		if err != nil {
			f.skip(name, err)
			return
		}
		if old := f.tables[ts.Address.Name]; old != nil {
			f.skipped = append(f.skipped, old.PinDir+" (an older copy)")
		}
		f.tables[ts.Address.Name] = ts
	default:
		ps, err := w.readMeta(name)
		if err != nil {
			f.skip(name, err)
			return
		}
		if old := f.newest[ps.Address]; old != nil {
			f.skipped = append(f.skipped, old.PinDir+" (an older copy)")
		}
		f.newest[ps.Address] = ps
	}
}

func (f *found) skip(name string, err error) {
	f.skipped = append(f.skipped, fmt.Sprintf("%s (%v)", name, err))
}

// fill gives next what f adopted, in order. The buffer's description is
// as it was made: the layouts of probes replaced since are not in it, and
// their records read as undecodable.
func (f *found) fill(next *State) {
	for _, ps := range f.newest {
		next.Probes = append(next.Probes, ps)
	}
	for _, ts := range f.tables {
		next.Tables = append(next.Tables, ts)
	}
	next.Events = f.events
	sort.Slice(next.Tables, func(i, j int) bool { return next.Tables[i].Address.Name < next.Tables[j].Address.Name })
	sort.Slice(next.Probes, func(i, j int) bool { return next.Probes[i].Address.Less(next.Probes[j].Address) })
}

// readMeta reads the description pinned in a probe directory and checks
// that it describes that directory.
func (w *Workspace) readMeta(name string) (*ProbeState, error) {
	var ps ProbeState
	if err := w.readDirMeta(name, &ps); err != nil {
		return nil, err
	}
	if ps.PinDir != name {
		return nil, fmt.Errorf("its description is of %s", ps.PinDir)
	}
	return &ps, nil
}

// readTableMeta reads a table directory's description.
func (w *Workspace) readTableMeta(name string) (*TableState, error) {
	var ts TableState
	if err := w.readDirMeta(name, &ts); err != nil {
		return nil, err
	}
	if ts.PinDir != name {
		return nil, fmt.Errorf("its description is of %s", ts.PinDir)
	}
	return &ts, nil
}

// readDirMeta reads the description pinned in a directory into v.
func (w *Workspace) readDirMeta(name string, v any) error {
	d, err := w.pins.sub(name, false, trustPrivate)
	if err != nil {
		return err
	}
	defer d.close()
	if !d.exists(metaPin) {
		return errors.New("incomplete: an apply was interrupted before it finished pinning")
	}
	b, err := readBlob(d, metaPin)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("damaged description: %w", err)
	}
	return nil
}

// checkPinOwner refuses when the pin directory holds probes of another
// state (its identity names another lineage).
func (w *Workspace) checkPinOwner(s *State) error {
	id, err := readIdentity(w.pins)
	if err != nil {
		return err
	}
	if id == nil || id.Lineage == s.Lineage {
		return nil
	}
	if dirs, _ := probeDirs(w.pins); len(dirs) > 0 {
		return &OwnerError{Workspace: w.Name, PinDir: w.PinDir(), Owner: id, StateDir: w.dir(), Lineage: s.Lineage}
	}
	return nil
}

// Forget removes probes from the state without touching the kernel, for
// probes that are gone in a way probectl cannot see (pins removed by hand).
// If their pins still exist where a later command sees them, that
// command's Repair removes them. The workspace must be locked.
func (w *Workspace) Forget(addrs []bpf.Address) (*State, error) {
	if !w.locked {
		return nil, errors.New("state rm needs the workspace lock")
	}
	s, err := w.State()
	if err != nil {
		return nil, err
	}
	if err := w.checkPinOwner(s); err != nil {
		return nil, err
	}
	drop := map[bpf.Address]bool{}
	for _, a := range addrs {
		if s.Probe(a) == nil {
			return nil, fmt.Errorf("%s is not in the state of workspace %q", a, w.Name)
		}
		drop[a] = true
	}
	next := *s
	next.Probes = nil
	next.Serial++
	for _, p := range s.Probes {
		if !drop[p.Address] {
			next.Probes = append(next.Probes, p)
		}
	}
	if err := w.commit(&next); err != nil {
		return nil, err
	}
	return &next, nil
}
