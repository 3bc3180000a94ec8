package runtime

import (
	"encoding/json"
	"errors"
	"fmt"
	goruntime "runtime"
	"sort"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/bpf/sys"
	"github.com/probectl/probectl/compiler/compiled"
	"golang.org/x/sys/unix"
)

// LoadError is a program the kernel refused to load.
type LoadError struct {
	Probe   *compiled.Probe
	Program *compiled.Program // nil when a map failed
	Err     error
}

func (e *LoadError) Error() string {
	if e.Program == nil {
		return fmt.Sprintf("%s: load: %v%s", e.Probe.Address, e.Err, hint(e.Err))
	}
	return fmt.Sprintf("%s: load %s program: %v%s", e.Probe.Address, e.Program.Role, e.Err, hint(e.Err))
}

func (e *LoadError) Unwrap() error { return e.Err }

// Result says what an apply or destroy did.
type Result struct {
	Created, Replaced, Deleted, Unchanged []bpf.Address
	// Leftovers are old pin directories that could not be removed; the next
	// command removes them.
	Leftovers []string
}

// txn is the undo log of one apply: every step that changes the kernel
// registers how to take itself back; before the commit a failure unwinds
// them all in reverse, after it they are dropped.
type txn struct{ undo []func() }

func (t *txn) onUndo(f func()) { t.undo = append(t.undo, f) }

func (t *txn) rollback() {
	for i := len(t.undo) - 1; i >= 0; i-- {
		t.undo[i]()
	}
	t.undo = nil
}

// live is one probe loaded and attached, not yet pinned.
type live struct {
	probe *compiled.Probe
	coll  *ebpf.Collection
	links []attached
	// shared are the maps of the tables the probe uses, by ref.
	shared map[string]*ebpf.Map
}

func (l *live) close() {
	for _, a := range l.links {
		_ = a.link.Close()
	}
	l.coll.Close()
}

// change is one probe being created or replaced.
type change struct {
	live
	old   *ProbeState
	state *ProbeState
}

// Apply makes the kernel hold what plan says for out, atomically: every
// program and map of every created or replaced probe is loaded before
// anything is attached; everything is attached, then pinned, then the new
// state is committed. Any failure before the commit undoes every step in
// reverse, so the kernel and the state are exactly as before. Replaced
// probes are created before the old ones are removed, so no call goes
// unobserved. s must come from Begin, which holds the lock.
func (w *Workspace) Apply(s *State, out *compiled.Output, plan *compiled.Plan) (*State, *Result, error) {
	if !w.locked {
		return nil, nil, errors.New("apply needs the workspace lock (Begin)")
	}
	a, err := w.planApply(s, out, plan)
	if err != nil {
		return nil, nil, err
	}
	defer a.finish()
	if err := a.openShared(); err != nil {
		return nil, nil, err
	}
	if err := a.loadAll(); err != nil {
		return nil, nil, err
	}
	if err := a.attachAll(); err != nil {
		return nil, nil, err
	}
	if err := a.pinAll(); err != nil {
		return nil, nil, err
	}
	next, oldDirs := a.nextState()
	if err := a.commit(next); err != nil {
		return nil, nil, err
	}
	a.res.Leftovers = w.removeDirs(oldDirs)
	return next, a.res, nil
}

// applyTxn is one apply in progress: what the plan changes, what it has
// made or opened so far, and the undo log that takes it back.
type applyTxn struct {
	w    *Workspace
	s    *State
	out  *compiled.Output
	plan *compiled.Plan
	res  *Result
	t    txn

	changes []*change
	gone    map[bpf.Address]bool
	tables  map[string]*liveTable
	buffer  *liveBuffer

	serial    uint64
	newTables []*TableState
	newEvents *EventsState
	committed bool
}

// planApply matches the plan against the compiled probes: the probes it
// creates or replaces, those it deletes and those it keeps.
func (w *Workspace) planApply(s *State, out *compiled.Output, plan *compiled.Plan) (*applyTxn, error) {
	if err := raiseMemlock(); err != nil {
		return nil, err
	}
	a := &applyTxn{w: w, s: s, out: out, plan: plan, res: &Result{}, gone: map[bpf.Address]bool{}}
	byAddr := map[bpf.Address]*compiled.Probe{}
	for _, p := range out.Probes {
		byAddr[p.Address] = p
	}
	for _, c := range plan.Changes {
		switch c.Action {
		case compiled.ActionCreate, compiled.ActionReplace:
			p := byAddr[c.Address]
			if p == nil || p.Digest != c.Digest {
				return nil, fmt.Errorf("%s: the plan does not match the compiled probes; plan again", c.Address)
			}
			if err := pinnable(p); err != nil {
				return nil, err
			}
			a.changes = append(a.changes, &change{live: live{probe: p}, old: s.Probe(c.Address)})
		case compiled.ActionDelete:
			a.gone[c.Address] = true
			a.res.Deleted = append(a.res.Deleted, c.Address)
		default:
			a.res.Unchanged = append(a.res.Unchanged, c.Address)
		}
	}
	if s.Serial >= MaxSerial {
		return nil, fmt.Errorf("the state's serial %d is at its limit (%d): the state file was edited", s.Serial, uint64(MaxSerial))
	}
	a.serial = s.Serial + 1
	return a, nil
}

// finish closes the tables and the buffer opened from pins (the programs
// hold what they use) and, unless the apply committed, undoes every step.
func (a *applyTxn) finish() {
	if a.buffer != nil && !a.buffer.made {
		a.buffer.close()
	}
	for _, l := range a.tables {
		if !l.made {
			l.close()
		}
	}
	if !a.committed {
		a.t.rollback()
	}
}

// openShared makes or opens the tables and the event buffer the probes
// share.
func (a *applyTxn) openShared() error {
	tables, err := a.w.liveTables(&a.t, a.s, a.out, a.plan)
	if err != nil {
		return err
	}
	a.tables = tables
	buffer, err := a.w.liveEvents(&a.t, a.s, a.out, a.plan)
	if err != nil {
		return err
	}
	a.buffer = buffer
	return nil
}

// bufferMade says whether this apply makes a new event buffer.
func (a *applyTxn) bufferMade() bool { return a.buffer != nil && a.buffer.made }

// loadAll loads every created or replaced probe, with the maps it shares:
// first, in order, each probe's step and the checks that need nothing
// loaded (a refusal stops the apply before any load); then the loads, on
// as many goroutines as there are CPUs, the kernel's verifier and map
// creation being most of an apply (issue 22). The collections are
// registered for the undo in the probes' order, the first failing
// probe's error returned, and the loaded ones closed by the rollback.
func (a *applyTxn) loadAll() error {
	var kernelBTF *btf.Spec
	for _, c := range a.changes {
		if c.probe.Buffer != nil && a.buffer == nil {
			return fmt.Errorf("%s: the plan has no event buffer for its events; plan again", c.probe.Address)
		}
		c.shared = withBuffer(sharedMaps(c.probe, a.tables), c.probe, a.buffer)
		if err := a.w.beforeLoad(&c.live, &kernelBTF); err != nil {
			return err
		}
	}
	errs := make([]error, len(a.changes))
	parallelN(len(a.changes), goruntime.GOMAXPROCS(0), func(i int) {
		errs[i] = a.w.load(&a.changes[i].live, kernelBTF)
	})
	for _, c := range a.changes {
		if c.coll != nil {
			a.t.onUndo(c.coll.Close)
			a.w.createdColl(c.coll)
		}
	}
	return firstError(errs)
}

// firstError is the first error of errs that is not nil, or nil.
func firstError(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// attachAll attaches every loaded probe.
func (a *applyTxn) attachAll() error {
	for _, c := range a.changes {
		if err := a.w.attach(&a.t, &c.live); err != nil {
			return err
		}
	}
	return nil
}

// pinAll pins the probes, the new tables and the new event buffer under
// the next serial, after the workspace's identity when anything is new.
func (a *applyTxn) pinAll() error {
	if len(a.changes) > 0 || a.bufferMade() {
		if err := a.w.ensureIdentity(&a.t, a.s); err != nil {
			return err
		}
	}
	for _, c := range a.changes {
		ps, err := a.w.pin(&a.t, c, a.serial)
		if err != nil {
			return err
		}
		c.state = ps
	}
	if err := a.pinTables(); err != nil {
		return err
	}
	if a.bufferMade() {
		ev, err := a.w.pinBuffer(&a.t, a.buffer, a.serial)
		if err != nil {
			return err
		}
		a.newEvents = ev
	}
	return nil
}

// pinTables pins the tables the apply made, in name order.
func (a *applyTxn) pinTables() error {
	for _, name := range sortedNames(a.tables) {
		if l := a.tables[name]; l.made {
			ts, err := a.w.pinTable(&a.t, l, a.serial)
			if err != nil {
				return err
			}
			a.newTables = append(a.newTables, ts)
		}
	}
	return nil
}

// nextState is the state the apply commits, and the pin directories of
// what it replaces or deletes.
func (a *applyTxn) nextState() (*State, []string) {
	s := a.s
	next := &State{Version: StateVersion, Lineage: s.Lineage, Serial: a.serial, Workspace: a.w.Name, Facts: stripFacts(a.out.Facts)}
	replaced := a.newProbes(next)
	var oldDirs []string
	var goneProbes []*ProbeState
	for _, p := range s.Probes {
		if a.gone[p.Address] || replaced[p.Address] {
			oldDirs = append(oldDirs, p.PinDir)
			goneProbes = append(goneProbes, p)
		} else {
			next.Probes = append(next.Probes, p)
		}
	}
	oldDirs = append(oldDirs, a.nextTables(next)...)
	oldDirs = append(oldDirs, a.nextEvents(next, goneProbes)...)
	sort.Slice(next.Tables, func(i, j int) bool { return next.Tables[i].Address.Name < next.Tables[j].Address.Name })
	sort.Slice(next.Probes, func(i, j int) bool { return next.Probes[i].Address.Less(next.Probes[j].Address) })
	return next, oldDirs
}

// newProbes adds the created and replaced probes to next and the result,
// and says which addresses they replace.
func (a *applyTxn) newProbes(next *State) map[bpf.Address]bool {
	replaced := map[bpf.Address]bool{}
	for _, c := range a.changes {
		replaced[c.probe.Address] = true
		next.Probes = append(next.Probes, c.state)
		if c.old != nil {
			a.res.Replaced = append(a.res.Replaced, c.probe.Address)
		} else {
			a.res.Created = append(a.res.Created, c.probe.Address)
		}
	}
	return replaced
}

// nextTables gives next the kept and the new tables, and returns the pin
// directories of those that go.
func (a *applyTxn) nextTables(next *State) []string {
	var oldDirs []string
	for _, ts := range a.s.Tables {
		if l := a.tables[ts.Address.Name]; l != nil && !l.made {
			next.Tables = append(next.Tables, ts)
		} else {
			oldDirs = append(oldDirs, ts.PinDir)
		}
	}
	next.Tables = append(next.Tables, a.newTables...)
	return oldDirs
}

// nextEvents gives next its event buffer: made anew (the old one goes,
// last, once the probes that wrote into it are gone), kept (with the
// layouts of the probes that leave it, whose records it may still hold),
// or gone. It returns the old buffer's pin directory when that goes.
func (a *applyTxn) nextEvents(next *State, goneProbes []*ProbeState) []string {
	s := a.s
	switch {
	case a.newEvents != nil:
		next.Events = a.newEvents
	case a.buffer != nil:
		next.Events = s.Events.retire(goneProbes, next.Probes, a.serial)
	}
	if s.Events != nil && (next.Events == nil || next.Events.PinDir != s.Events.PinDir) {
		return []string{s.Events.PinDir}
	}
	return nil
}

// commit writes next. Committed, the pins hold the objects and our
// descriptors can go; a failure to remove what was replaced or deleted
// afterwards leaves directories the next command's Repair removes: the
// state is right.
func (a *applyTxn) commit(next *State) error {
	if err := a.w.commit(next); err != nil {
		return err
	}
	a.committed = true
	for _, c := range a.changes {
		c.close()
	}
	for _, l := range a.tables {
		if l.made {
			l.close()
		}
	}
	if a.bufferMade() {
		a.buffer.close()
	}
	return nil
}

// liveTables makes the tables the plan creates or replaces and opens those
// it keeps, by name.
func (w *Workspace) liveTables(t *txn, s *State, out *compiled.Output, plan *compiled.Plan) (map[string]*liveTable, error) {
	byName := map[string]*compiled.Table{}
	for _, tb := range out.Tables {
		byName[tb.Address.Name] = tb
	}
	tables := map[string]*liveTable{}
	for _, tc := range plan.Tables {
		var l *liveTable
		var err error
		switch tc.Action {
		case compiled.ActionCreate, compiled.ActionReplace:
			l, err = w.madeTable(t, s, tc, byName[tc.Address.Name])
		case compiled.ActionNoOp:
			l, err = w.keptTable(s, tc)
		default:
			continue
		}
		if err != nil {
			return nil, err
		}
		tables[tc.Address.Name] = l
	}
	return tables, nil
}

// madeTable makes tb, the table the plan's change tc creates or replaces
// (nil when out has none of that name), after the table of s it replaces.
func (w *Workspace) madeTable(t *txn, s *State, tc *compiled.TableChange, tb *compiled.Table) (*liveTable, error) {
	if tb == nil || tb.Digest != tc.Digest {
		return nil, fmt.Errorf("%s: the plan does not match the compiled tables; plan again", tc.Address)
	}
	l, err := w.makeTable(t, tb)
	if err != nil {
		return nil, err
	}
	l.old = s.Table(tc.Address.Name)
	return l, nil
}

// keptTable opens the table of s that the plan's change tc keeps.
func (w *Workspace) keptTable(s *State, tc *compiled.TableChange) (*liveTable, error) {
	ts := s.Table(tc.Address.Name)
	if ts == nil {
		return nil, fmt.Errorf("%s: the plan keeps a table the state does not have; plan again", tc.Address)
	}
	return w.openTable(ts)
}

// sharedMaps gives a probe's programs the maps of the tables they use.
func sharedMaps(p *compiled.Probe, tables map[string]*liveTable) map[string]*ebpf.Map {
	out := map[string]*ebpf.Map{}
	for _, tb := range p.Shared {
		if l := tables[tb.Address.Name]; l != nil {
			for ref, m := range l.maps {
				out[ref] = m
			}
		}
	}
	return out
}

func sortedNames(m map[string]*liveTable) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (w *Workspace) commit(next *State) error {
	if err := w.step("write state"); err != nil {
		return err
	}
	return w.writeState(next)
}

// loadOne loads one probe's maps and programs (beforeLoad, then load),
// its collection closed by t's undo.
func (w *Workspace) loadOne(t *txn, l *live, kernelBTF **btf.Spec) error {
	if err := w.beforeLoad(l, kernelBTF); err != nil {
		return err
	}
	err := w.load(l, *kernelBTF)
	if l.coll != nil {
		t.onUndo(l.coll.Close)
		w.createdColl(l.coll)
	}
	return err
}

// beforeLoad is what comes before a probe's load, in the apply's order:
// its step, the check that it can be loaded, the kernel's BTF when it
// needs it.
func (w *Workspace) beforeLoad(l *live, kernelBTF **btf.Spec) error {
	p := l.probe
	if err := w.step("load %s", p.Address); err != nil {
		return &LoadError{Probe: p, Err: err}
	}
	if err := loadable(p); err != nil {
		return &LoadError{Probe: p, Err: err}
	}
	return lookupKernelBTF(p, kernelBTF)
}

// load loads the maps and programs of a probe that beforeLoad passed
// into l.coll, mapping a verifier rejection to the program it belongs to.
// l.coll holds what it loaded even when it fails (the caller closes it).
// It runs beside the loads of other probes.
func (w *Workspace) load(l *live, kernelBTF *btf.Spec) error {
	p := l.probe
	cs, err := p.CollectionSpec(kernelBTF, p.Functions)
	if err != nil {
		return &LoadError{Probe: p, Err: err}
	}
	fsessions := takeFsessions(cs)
	coll, err := ebpf.NewCollectionWithOptions(cs, ebpf.CollectionOptions{
		Programs: ebpf.ProgramOptions{KernelTypes: kernelBTF}, MapReplacements: l.shared,
		Cache: bpf.KernelBTFCache(),
	})
	if err != nil {
		return loadError(p, err)
	}
	l.coll = coll
	if err := fillPods(p, coll); err != nil {
		return &LoadError{Probe: p, Err: err}
	}
	if err := fillStart(p, coll); err != nil {
		return &LoadError{Probe: p, Err: err}
	}
	if err := fillKaddr(p, coll); err != nil {
		return &LoadError{Probe: p, Err: err}
	}
	return loadFsessions(p, coll, l.shared, fsessions, kernelBTF)
}

// loadable refuses a probe planned without what its load needs: resolved
// functions, and the kernel's BTF for what was deferred to apply.
func loadable(p *compiled.Probe) error {
	if p.Functions == nil && p.Address.Kind != bpf.KindTracepoint && p.Address.Kind != bpf.KindProfile {
		return errors.New("functions are not resolved; plan against the live kernel")
	}
	if len(p.Deferred) > 0 {
		return fmt.Errorf("it was planned without the kernel's BTF, so %s %s resolved at apply: apply the specs, not a plan made against a profile",
			strings.Join(p.Deferred, ", "), map[bool]string{true: "is", false: "are"}[len(p.Deferred) == 1])
	}
	return nil
}

// lookupKernelBTF reads the kernel's BTF into *spec, once, when p needs it.
func lookupKernelBTF(p *compiled.Probe, spec **btf.Spec) error {
	if *spec != nil || !needsBTF(p) {
		return nil
	}
	s, err := bpf.KernelBTF()
	if err != nil {
		return fmt.Errorf("%s: kernel BTF: %w", p.Address, err)
	}
	*spec = s
	return nil
}

// takeFsessions removes the fsession programs from cs and returns them:
// cilium/ebpf cannot load them, so they are loaded after the collection,
// with its maps.
func takeFsessions(cs *ebpf.CollectionSpec) map[string]*ebpf.ProgramSpec {
	fsessions := map[string]*ebpf.ProgramSpec{}
	for key, ps := range cs.Programs {
		if ps.AttachType == sys.AttachTraceFsession {
			fsessions[key] = ps
			delete(cs.Programs, key)
		}
	}
	return fsessions
}

// loadError names the program a verifier rejection belongs to, when it can.
func loadError(p *compiled.Probe, err error) error {
	var ve *ebpf.VerifierError
	if errors.As(err, &ve) {
		for _, prog := range p.Programs {
			// cilium/ebpf names the failing program: "program ROLE[:FUNCTION]: ...".
			if strings.Contains(err.Error(), "program "+string(prog.Role)) {
				return &LoadError{Probe: p, Program: prog, Err: err}
			}
		}
	}
	return &LoadError{Probe: p, Err: err}
}

// createdColl records the maps and programs of coll as created.
// Only tests observe creations; without an observer it asks for no ids.
func (w *Workspace) createdColl(coll *ebpf.Collection) {
	if w.observe == nil {
		return
	}
	for _, m := range coll.Maps {
		if id, err := sys.ObjectID(m.FD()); err == nil {
			w.created("map", id)
		}
	}
	for _, prog := range coll.Programs {
		if id, err := sys.ObjectID(prog.FD()); err == nil {
			w.created("prog", id)
		}
	}
}

// linkIDs are the ids of a link and its program, with one system call
// where the link shows its fd (all of cilium/ebpf's do), else with Info.
func linkIDs(l link.Link) (link.ID, ebpf.ProgramID, error) {
	if fl, ok := l.(interface{ FD() int }); ok {
		o, err := sys.ObjectInfo(fl.FD())
		return link.ID(o.ID), ebpf.ProgramID(o.ProgramID), err
	}
	info, err := l.Info()
	if err != nil {
		return 0, 0, err
	}
	return info.ID, info.Program, nil
}

// loadFsessions loads a probe's fsession programs, one per function, into
// coll (whose Close closes them), with its maps or the shared ones.
func loadFsessions(p *compiled.Probe, coll *ebpf.Collection, shared map[string]*ebpf.Map, specs map[string]*ebpf.ProgramSpec, kernel *btf.Spec) error {
	keys := make([]string, 0, len(specs))
	for key := range specs {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	maps := func(ref string) *ebpf.Map {
		if m := shared[ref]; m != nil {
			return m
		}
		return coll.Maps[ref]
	}
	for _, key := range keys {
		ps := specs[key]
		prog, err := sys.LoadFsession(ps, ps.AttachTo, maps, kernel)
		if err != nil {
			for _, cp := range p.Programs {
				if cp.Family == compiled.FamilyFsession {
					return &LoadError{Probe: p, Program: cp, Err: err}
				}
			}
			return &LoadError{Probe: p, Err: err}
		}
		coll.Programs[key] = prog
	}
	return nil
}

func needsBTF(p *compiled.Probe) bool {
	for _, prog := range p.Programs {
		if prog.Type == ebpf.Tracing {
			return true
		}
		for i := range prog.Instructions {
			if _, ok := bpf.KfuncName(&prog.Instructions[i]); ok {
				return true
			}
		}
	}
	return false
}

// pin pins a probe's maps and links under a new directory named for serial,
// then its description (meta, last: a probe directory with meta is
// complete). The directory must not exist: a command removes only what it
// created itself.
func (w *Workspace) pin(t *txn, c *change, serial uint64) (*ProbeState, error) {
	p := c.probe
	name := fmt.Sprintf("%s-%s-%d", p.Address.Kind, p.Address.Name, serial) // bpffs refuses dots
	if err := w.pins.mkdirExcl(name); err != nil {
		return nil, fmt.Errorf("%s: pin directory: %w (the state's serial %d is behind the pins: was the state file edited or restored from a backup?)", p.Address, err, serial-1)
	}
	t.onUndo(func() { _ = w.pins.removeAll(name) })
	d, err := w.pins.sub(name, false, trustPrivate)
	if err != nil {
		return nil, err
	}
	defer d.close()
	ps := newProbeState(p)
	ps.BootID, ps.PinDir = bootID(), name
	for _, a := range c.links {
		if a.file != nil {
			ps.BinaryFile = a.file
		}
	}
	if err := w.pinMaps(d, c, ps); err != nil {
		return nil, err
	}
	if err := w.pinLinks(d, c, ps); err != nil {
		return nil, err
	}
	if err := w.pinPrograms(d, c, ps); err != nil {
		return nil, err
	}
	if err := w.pinMeta(d, p, ps); err != nil {
		return nil, err
	}
	return ps, nil
}

// pinMaps pins the probe's own maps in d and records them in ps.
func (w *Workspace) pinMaps(d *dir, c *change, ps *ProbeState) error {
	p := c.probe
	for _, m := range p.Maps {
		if err := w.step("pin %s map %s", p.Address, m.Ref); err != nil {
			return fmt.Errorf("%s: pin map %s: %w", p.Address, m.Ref, err)
		}
		pin := "map_" + m.Ref
		path, err := d.procPath(pin)
		if err != nil {
			return err
		}
		km := c.coll.Maps[m.Ref]
		if err := km.Pin(path); err != nil {
			return fmt.Errorf("%s: pin map %s: %w", p.Address, m.Ref, err)
		}
		id, err := sys.ObjectID(km.FD())
		if err != nil {
			return fmt.Errorf("%s: map info: %w", p.Address, err)
		}
		ps.Maps = append(ps.Maps, MapState{Ref: m.Ref, Name: m.Name, ID: ebpf.MapID(id), Pin: pin, Match: m.Match})
	}
	return nil
}

// pinLinks pins the probe's links in d, in attach order, and records them
// in ps.
func (w *Workspace) pinLinks(d *dir, c *change, ps *ProbeState) error {
	p := c.probe
	for i, a := range c.links {
		if err := w.step("pin %s link %d", p.Address, i); err != nil {
			return fmt.Errorf("%s: pin link: %w", p.Address, err)
		}
		pin := fmt.Sprintf("link_%d", i)
		path, err := d.procPath(pin)
		if err != nil {
			return err
		}
		if err := a.link.Pin(path); err != nil {
			return fmt.Errorf("%s: pin %s link: %w", p.Address, a.family, err)
		}
		id, progID, err := linkIDs(a.link)
		if err != nil {
			return fmt.Errorf("%s: link info: %w", p.Address, err)
		}
		ps.Links = append(ps.Links, LinkState{Family: a.family, Function: a.function, ID: id,
			Program: a.program, ProgramID: progID, Pin: pin})
	}
	return nil
}

// pinPrograms pins the probe's programs in d, by name, and records them
// in ps.
func (w *Workspace) pinPrograms(d *dir, c *change, ps *ProbeState) error {
	p := c.probe
	names := make([]string, 0, len(c.coll.Programs))
	for name := range c.coll.Programs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := w.step("pin %s program %s", p.Address, name); err != nil {
			return fmt.Errorf("%s: pin program: %w", p.Address, err)
		}
		pin := "prog_" + name
		path, err := d.procPath(pin)
		if err != nil {
			return err
		}
		prog := c.coll.Programs[name]
		if err := prog.Pin(path); err != nil {
			return fmt.Errorf("%s: pin program %s: %w", p.Address, name, err)
		}
		id, err := sys.ObjectID(prog.FD())
		if err != nil {
			return fmt.Errorf("%s: program info: %w", p.Address, err)
		}
		ps.Programs = append(ps.Programs, ProgramState{Name: name, ID: ebpf.ProgramID(id), Pin: pin})
	}
	return nil
}

// pinMeta pins ps itself in d, last, and records the blob's map ID in it.
func (w *Workspace) pinMeta(d *dir, p *compiled.Probe, ps *ProbeState) error {
	if err := w.step("pin %s meta", p.Address); err != nil {
		return fmt.Errorf("%s: pin meta: %w", p.Address, err)
	}
	b, err := json.Marshal(ps)
	if err != nil {
		return err
	}
	mid, err := pinBlob(d, metaPin, "probectl.meta", b)
	if err != nil {
		return fmt.Errorf("%s: pin meta: %w", p.Address, err)
	}
	w.created("map", uint32(mid))
	ps.MetaID = mid
	return nil
}

// metaPin holds a probe's description in its pin directory, for
// probectl state recover.
const metaPin = "meta"

func (w *Workspace) removeDirs(dirs []string) []string {
	var left []string
	for _, d := range dirs {
		if err := w.step("remove %s", d); err != nil {
			left = append(left, d)
			continue
		}
		if err := w.pins.removeAll(d); err != nil {
			left = append(left, d)
		}
	}
	return left
}

// Destroy removes the probes at addrs (all of them when addrs is empty):
// the state without them is committed first, then their pins go. s must
// come from Begin.
func (w *Workspace) Destroy(s *State, addrs []bpf.Address) (*State, *Result, error) {
	if !w.locked {
		return nil, nil, errors.New("destroy needs the workspace lock (Begin)")
	}
	want := map[bpf.Address]bool{}
	for _, a := range addrs {
		if s.Probe(a) == nil {
			return nil, nil, fmt.Errorf("%s is not applied in workspace %q", a, w.Name)
		}
		want[a] = true
	}
	next := *s
	next.Probes = nil
	next.Serial++
	res := &Result{}
	var dirs []string
	var gone []*ProbeState
	for _, p := range s.Probes {
		if len(want) == 0 || want[p.Address] {
			dirs = append(dirs, p.PinDir)
			res.Deleted = append(res.Deleted, p.Address)
			gone = append(gone, p)
			continue
		}
		next.Probes = append(next.Probes, p)
	}
	dirs = append(dirs, destroyShared(s, &next, res, gone)...)
	if len(dirs) == 0 {
		return s, res, nil
	}
	if err := w.commit(&next); err != nil {
		return nil, nil, err
	}
	res.Leftovers = w.removeDirs(dirs)
	return &next, res, nil
}

// destroyShared gives next the tables and event buffer left once gone
// are destroyed, and returns the pin directories of those that go: the
// tables and the buffer go with the last probe, the buffer last, once the
// probes writing into it are gone (a reader drains what it holds and
// ends); otherwise the buffer keeps the layouts of gone.
func destroyShared(s, next *State, res *Result, gone []*ProbeState) []string {
	if len(next.Probes) > 0 {
		next.Events = s.Events.retire(gone, next.Probes, next.Serial)
		return nil
	}
	var dirs []string
	for _, ts := range s.Tables {
		dirs = append(dirs, ts.PinDir)
		res.Deleted = append(res.Deleted, ts.Address)
	}
	next.Tables = nil
	if s.Events != nil {
		dirs = append(dirs, s.Events.PinDir)
	}
	next.Events = nil
	return dirs
}

// release gives up a workspace whose pins hold no probes: its identity
// and its pin directory go. A writer that was waiting for the lock sees the
// directory gone and opens a new one.
func (w *Workspace) release() {
	if names, err := w.pins.list(); err != nil || len(names) > 1 || (len(names) == 1 && names[0] != identityPin) {
		return
	}
	if w.pins.removeAll(identityPin) != nil {
		return
	}
	root, err := openPath(PinRoot, false)
	if err != nil {
		return
	}
	defer root.close()
	_ = unix.Unlinkat(root.fd, w.Name, unix.AT_REMOVEDIR) // fails, harmlessly, if anything is left
}

// stripFacts keeps the facts without the (long) function list.
func stripFacts(f *bpf.Facts) *bpf.Facts {
	c := *f
	c.Functions = nil
	c.Tracepoints = nil
	c.Events = nil
	return &c
}

func nowUnix() int64 { return time.Now().Unix() }
