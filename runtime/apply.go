package runtime

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler"
)

// LoadError is a program the kernel refused to load.
type LoadError struct {
	Probe   *compiler.Probe
	Program *compiler.Program // nil when a map failed
	Err     error
}

func (e *LoadError) Error() string {
	if e.Program == nil {
		return fmt.Sprintf("%s: load: %v%s", e.Probe.Addr, e.Err, hint(e.Err))
	}
	return fmt.Sprintf("%s: load %s program: %v%s", e.Probe.Addr, e.Program.Role, e.Err, hint(e.Err))
}

func (e *LoadError) Unwrap() error { return e.Err }

// Result says what an apply or destroy did.
type Result struct {
	Created, Replaced, Deleted, Unchanged []string
	// Leftovers are old pin directories that could not be removed; the next
	// command removes them.
	Leftovers []string
}

// change is one probe being created or replaced.
type change struct {
	probe *compiler.Probe
	old   *ProbeState
	coll  *ebpf.Collection
	links []attached
	state *ProbeState
}

// Apply makes the kernel hold what plan says for out, atomically: every
// program and map of every created or replaced probe is loaded before
// anything is attached; everything is attached, then pinned, then the new
// state is committed. Any failure before the commit undoes every step in
// reverse, so the kernel and the state are exactly as before. Replaced
// probes are created before the old ones are removed, so no call goes
// unobserved. The workspace must be locked, and s must be its state.
func (w *Workspace) Apply(s *State, out *compiler.Output, plan *compiler.Plan) (*State, *Result, error) {
	if err := mountBPFFS(); err != nil {
		return nil, nil, err
	}
	byAddr := map[string]*compiler.Probe{}
	for _, p := range out.Probes {
		byAddr[p.Addr.String()] = p
	}
	res := &Result{}
	var changes []*change
	gone := map[bpf.Address]bool{}
	for _, c := range plan.Changes {
		addr, err := bpf.ParseAddress(c.Address)
		if err != nil {
			return nil, nil, err
		}
		switch c.Action {
		case compiler.ActionCreate, compiler.ActionReplace:
			p := byAddr[c.Address]
			if p == nil || p.Digest() != c.Digest {
				return nil, nil, fmt.Errorf("%s: the plan does not match the compiled probes; plan again", c.Address)
			}
			changes = append(changes, &change{probe: p, old: s.Probe(addr)})
		case compiler.ActionDelete:
			gone[addr] = true
			res.Deleted = append(res.Deleted, c.Address)
		default:
			res.Unchanged = append(res.Unchanged, c.Address)
		}
	}

	var undo []func()
	ok := false
	defer func() {
		if !ok {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()

	// 1. Load everything: the verifier sees every program before anything attaches.
	var kernelBTF *btf.Spec
	for _, c := range changes {
		if err := w.step("load %s", c.probe.Addr); err != nil {
			return nil, nil, &LoadError{Probe: c.probe, Err: err}
		}
		if kernelBTF == nil && needsBTF(c.probe) {
			spec, err := btf.LoadKernelSpec()
			if err != nil {
				return nil, nil, fmt.Errorf("%s: kernel BTF: %w", c.probe.Addr, err)
			}
			kernelBTF = spec
		}
		coll, err := loadProbe(c.probe, kernelBTF)
		if err != nil {
			return nil, nil, err
		}
		undo = append(undo, coll.Close)
		c.coll = coll
	}

	// 2. Attach everything.
	for _, c := range changes {
		err := w.attachProbe(c.probe, c.coll, func(a attached) {
			c.links = append(c.links, a)
			undo = append(undo, func() { _ = a.link.Close() })
		})
		if err != nil {
			return nil, nil, err
		}
	}

	// 3. Pin, under a directory no state has used.
	serial := s.Serial + 1
	for _, c := range changes {
		// bpffs refuses dots in names; probe names have no dashes.
		dir := fmt.Sprintf("%s-%s-%d", c.probe.Addr.Kind, c.probe.Addr.Name, serial)
		path := filepath.Join(w.PinDir(), dir)
		if err := os.MkdirAll(path, 0o700); err != nil {
			return nil, nil, fmt.Errorf("%s: pin directory: %w", c.probe.Addr, err)
		}
		undo = append(undo, func() { _ = os.RemoveAll(path) })
		ps, err := w.pinProbe(c, path)
		if err != nil {
			return nil, nil, err
		}
		ps.PinDir = dir
		c.state = ps
	}

	// 4. Commit the state.
	next := &State{Version: StateVersion, Lineage: s.Lineage, Serial: serial, Workspace: w.Name, Facts: stripFacts(out.Facts)}
	if next.Lineage == "" {
		next.Lineage = newLineage()
	}
	replaced := map[bpf.Address]*change{}
	for _, c := range changes {
		replaced[c.probe.Addr] = c
	}
	var oldDirs []string
	for _, p := range s.Probes {
		switch {
		case gone[p.Address]:
			oldDirs = append(oldDirs, p.PinDir)
		case replaced[p.Address] != nil:
			oldDirs = append(oldDirs, p.PinDir)
		default:
			next.Probes = append(next.Probes, p)
		}
	}
	for _, c := range changes {
		next.Probes = append(next.Probes, c.state)
		if c.old != nil {
			res.Replaced = append(res.Replaced, c.probe.Addr.String())
		} else {
			res.Created = append(res.Created, c.probe.Addr.String())
		}
	}
	sort.Slice(next.Probes, func(i, j int) bool { return next.Probes[i].Address.Less(next.Probes[j].Address) })
	if err := w.step("write state"); err != nil {
		return nil, nil, err
	}
	if err := writeState(w.statePath(), next); err != nil {
		return nil, nil, err
	}
	ok = true

	// 5. Committed: our file descriptors can go, the pins hold the objects.
	for _, c := range changes {
		for _, a := range c.links {
			_ = a.link.Close()
		}
		c.coll.Close()
	}
	// 6. Remove what was replaced or deleted. A failure here leaves orphans
	// the next command's Repair removes; the state is already right.
	res.Leftovers = w.removeDirs(oldDirs)
	return next, res, nil
}

func (w *Workspace) removeDirs(dirs []string) []string {
	var left []string
	for _, dir := range dirs {
		if err := w.step("remove %s", dir); err != nil {
			left = append(left, dir)
			continue
		}
		if err := os.RemoveAll(filepath.Join(w.PinDir(), dir)); err != nil {
			left = append(left, dir)
		}
	}
	return left
}

// Destroy removes the probes at addrs (all of them when addrs is empty):
// the state without them is committed first, then their pins go. The
// workspace must be locked.
func (w *Workspace) Destroy(s *State, addrs []bpf.Address) (*State, *Result, error) {
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
	for _, p := range s.Probes {
		if len(want) == 0 || want[p.Address] {
			dirs = append(dirs, p.PinDir)
			res.Deleted = append(res.Deleted, p.Address.String())
			continue
		}
		next.Probes = append(next.Probes, p)
	}
	if len(dirs) == 0 {
		return s, res, nil
	}
	if err := w.step("write state"); err != nil {
		return nil, nil, err
	}
	if err := writeState(w.statePath(), &next); err != nil {
		return nil, nil, err
	}
	res.Leftovers = w.removeDirs(dirs)
	return &next, res, nil
}

func needsBTF(p *compiler.Probe) bool {
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

// loadProbe loads a probe's maps and programs, mapping a verifier
// rejection to the program it belongs to.
func loadProbe(p *compiler.Probe, kernelBTF *btf.Spec) (*ebpf.Collection, error) {
	if p.Functions == nil && p.Addr.Kind != bpf.KindTracepoint {
		return nil, &LoadError{Probe: p, Err: errors.New("functions are not resolved; plan against the live kernel")}
	}
	cs, err := p.CollectionSpec(kernelBTF, p.Functions)
	if err != nil {
		return nil, &LoadError{Probe: p, Err: err}
	}
	coll, err := ebpf.NewCollectionWithOptions(cs, ebpf.CollectionOptions{Programs: ebpf.ProgramOptions{KernelTypes: kernelBTF}})
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			for _, prog := range p.Programs {
				// cilium/ebpf names the failing program: "program ROLE[:FUNCTION]: ...".
				if strings.Contains(err.Error(), "program "+prog.Role) {
					return nil, &LoadError{Probe: p, Program: prog, Err: err}
				}
			}
		}
		return nil, &LoadError{Probe: p, Err: err}
	}
	return coll, nil
}

// pinProbe pins a probe's maps and links into path and records them.
func (w *Workspace) pinProbe(c *change, path string) (*ProbeState, error) {
	p := c.probe
	ps := &ProbeState{
		Address: p.Addr, Digest: p.Digest(), Route: p.Route, Attach: p.Attach, Reason: p.Reason,
		Functions: p.Functions, Patterns: p.Patterns, Exclude: p.Exclude, Binary: p.Binary, PID: p.PID, Event: p.Event,
		EntryData: p.EntryData, Aggregations: p.Aggregations, Events: p.Events, Stats: p.Stats,
		AppliedAt: time.Now().UTC().Truncate(time.Second),
	}
	for _, m := range p.Maps {
		if err := w.step("pin %s map %s", p.Addr, m.Ref); err != nil {
			return nil, fmt.Errorf("%s: pin map %s: %w", p.Addr, m.Ref, err)
		}
		pin := filepath.Join(path, "map_"+m.Ref)
		km := c.coll.Maps[m.Ref]
		if err := km.Pin(pin); err != nil {
			return nil, fmt.Errorf("%s: pin map %s: %w", p.Addr, m.Ref, err)
		}
		info, err := km.Info()
		if err != nil {
			return nil, fmt.Errorf("%s: map info: %w", p.Addr, err)
		}
		id, _ := info.ID()
		ps.Maps = append(ps.Maps, MapState{Ref: m.Ref, Name: m.Name, ID: id, Pin: filepath.Base(pin)})
	}
	for i, a := range c.links {
		if err := w.step("pin %s link %d", p.Addr, i); err != nil {
			return nil, fmt.Errorf("%s: pin link: %w", p.Addr, err)
		}
		pin := filepath.Join(path, fmt.Sprintf("link_%d", i))
		if err := a.link.Pin(pin); err != nil {
			return nil, fmt.Errorf("%s: pin %s link: %w", p.Addr, a.family, err)
		}
		info, err := a.link.Info()
		if err != nil {
			return nil, fmt.Errorf("%s: link info: %w", p.Addr, err)
		}
		ps.Links = append(ps.Links, LinkState{Family: a.family, Function: a.function, ID: info.ID,
			Program: a.program, ProgramID: info.Program, Pin: filepath.Base(pin)})
	}
	return ps, nil
}

// stripFacts keeps the facts without the (long) function list.
func stripFacts(f *bpf.Facts) *bpf.Facts {
	c := *f
	c.Functions = nil
	c.Tracepoints = nil
	return &c
}
