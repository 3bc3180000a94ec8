package runtime

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler/compiled"
)

// StateVersion is the version of the state file's format.
const StateVersion = 1

// State is what probectl has put in the kernel for one workspace. It is
// written whole, atomically (temp file, fsync, rename); Serial grows by one
// with each write, and Lineage names the workspace's history.
type State struct {
	Version   int           `json:"version"`
	Lineage   string        `json:"lineage"`
	Serial    uint64        `json:"serial"`
	Workspace string        `json:"workspace"`
	Facts     *bpf.Facts    `json:"facts,omitempty"`
	Probes    []*ProbeState `json:"probes"`
	Tables    []*TableState `json:"tables,omitempty"`
	Events    *EventsState  `json:"events,omitempty"`
}

// ProbeState is one applied probe: its description (as the plan gave it),
// its kernel objects and how to read them.
type ProbeState struct {
	compiled.Description
	// PinDir is the probe's directory under the workspace's pin directory.
	PinDir string      `json:"pin_dir"`
	Maps   []MapState  `json:"maps"`
	Links  []LinkState `json:"links"`
	// Programs are the probe's programs, pinned so that their run
	// statistics (the kernel's recursion misses) can be read through the
	// pin: reading a program by id needs CAP_SYS_ADMIN, which a hardened
	// agent lacks. Empty in states written before they were pinned.
	Programs     []ProgramState          `json:"programs,omitempty"`
	Aggregations []*compiled.Aggregation `json:"aggregations"`
	Events       []*compiled.EventLayout `json:"events,omitempty"`
	Stats        compiled.Stats          `json:"stats"`
	AppliedAt    time.Time               `json:"applied_at"`
	// BootID is the boot the probe's pins were made in: they cannot
	// outlive it.
	BootID string `json:"boot_id,omitempty"`
	// BinaryFile identifies the file a user probe is attached to.
	BinaryFile *FileID `json:"binary_file,omitempty"`
	// MetaID is the map that holds this description in the pin directory,
	// for probectl state recover (the description itself leaves it out).
	MetaID ebpf.MapID `json:"meta_id,omitempty"`
}

// newProbeState describes a compiled probe for reading, before it is pinned.
func newProbeState(p *compiled.Probe) *ProbeState {
	return &ProbeState{Description: p.Description, Aggregations: p.Aggregations, Events: p.Events, Stats: p.Stats,
		AppliedAt: time.Now().UTC().Truncate(time.Second)}
}

// MapState is a pinned map.
type MapState struct {
	Ref  string     `json:"ref"`
	Name string     `json:"name"`
	ID   ebpf.MapID `json:"id"`
	Pin  string     `json:"pin"`
	// Match is a pod map's predicate (compiled.Map.Match).
	Match *compiled.PodMatch `json:"match,omitempty"`
}

// LinkState is a pinned link and the program behind it.
type LinkState struct {
	Family compiled.Family `json:"family"`
	// Function is set for per-function links.
	Function  string         `json:"function,omitempty"`
	ID        link.ID        `json:"id"`
	Program   string         `json:"program"`
	ProgramID ebpf.ProgramID `json:"program_id"`
	Pin       string         `json:"pin"`
}

// ProgramState is a pinned program.
type ProgramState struct {
	Name string         `json:"name"`
	ID   ebpf.ProgramID `json:"id"`
	Pin  string         `json:"pin"`
}

// Probe returns the state of addr, or nil.
func (s *State) Probe(addr bpf.Address) *ProbeState {
	for _, p := range s.Probes {
		if p.Address == addr {
			return p
		}
	}
	return nil
}

// recordedDirs are the pin directories the state records: its probes',
// its tables' and its event buffer's. A set: status and repair look up
// every directory of the workspace's pins, thousands (issue 22).
func (s *State) recordedDirs() map[string]bool {
	dirs := make(map[string]bool, len(s.Probes)+len(s.Tables)+1)
	for _, p := range s.Probes {
		dirs[p.PinDir] = true
	}
	for _, t := range s.Tables {
		dirs[t.PinDir] = true
	}
	if s.Events != nil {
		dirs[s.Events.PinDir] = true
	}
	return dirs
}

func newLineage() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

const stateFile = "state.json"

// maxState bounds what is read of a state file.
const maxState = 256 << 20

// State reads the workspace's state; a missing file is an empty state.
// It changes nothing and takes no lock: the file is only ever replaced
// whole, by rename.
func (w *Workspace) State() (*State, error) {
	d := w.state
	if d == nil {
		var err error
		d, err = openPath(w.dir(), false)
		if errors.Is(err, os.ErrNotExist) {
			return &State{Version: StateVersion, Workspace: w.Name}, nil
		}
		if err != nil {
			return nil, fmt.Errorf("state directory: %w", err)
		}
		defer d.close()
	}
	b, err := d.readFile(stateFile, maxState)
	if errors.Is(err, os.ErrNotExist) {
		return &State{Version: StateVersion, Workspace: w.Name}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read state: %w", err)
	}
	return parseState(b, filepath.Join(w.dir(), stateFile), w.Name)
}

// parseState decodes and validates a state file. It decodes with
// encoding/json/v2's implementation (github.com/go-json-experiment/json,
// until the standard library's leaves GOEXPERIMENT): the same State from
// any file probectl wrote, in half the time, and status and show read the
// whole state, megabytes for thousands of probes (issue 22). Where v2 is
// stricter than encoding/json (a member named twice, names matched in
// their case, text that is not UTF-8), the file was not written by
// probectl, and is refused as damaged.
func parseState(b []byte, path, workspace string) (*State, error) {
	s, err := decodeState(b)
	if err != nil {
		return nil, fmt.Errorf("read state %s: %w (the file is damaged; move it away to start over, after destroying what it lists)", path, err)
	}
	if s.Version != StateVersion {
		return nil, fmt.Errorf("read state %s: version %d, this probectl reads %d", path, s.Version, StateVersion)
	}
	if err := s.validate(workspace); err != nil {
		return nil, fmt.Errorf("read state %s: %w; the file was edited or damaged, and probectl will not act on it", path, err)
	}
	return s, nil
}

// rawState is a state file as decodeState reads it first: its probes
// left as text, each to be decoded on its own.
type rawState struct {
	State
	Probes []jsontext.Value `json:"probes"`
}

// decodeState decodes a state file: the file once through to cut out its
// probes, then the probes, the bulk of it, in parallel.
func decodeState(b []byte) (*State, error) {
	var f rawState
	if err := jsonv2.Unmarshal(b, &f); err != nil {
		return nil, err
	}
	s := &f.State
	if f.Probes == nil {
		return s, nil
	}
	s.Probes = make([]*ProbeState, len(f.Probes))
	errs := make([]error, len(f.Probes))
	parallel(len(f.Probes), func(i int) {
		errs[i] = jsonv2.Unmarshal(f.Probes[i], &s.Probes[i])
	})
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("probe %d: %w", i, err)
		}
	}
	return s, nil
}

// validate checks everything in a state file that names a file: each must
// be one path element of probectl's own vocabulary, inside the workspace's
// pin directory. Nothing the file says can make probectl reach elsewhere.
func (s *State) validate(workspace string) error {
	if s.Workspace != "" && s.Workspace != workspace {
		return fmt.Errorf("it is the state of workspace %q, not %q", s.Workspace, workspace)
	}
	if s.Serial > MaxSerial {
		return fmt.Errorf("serial %d is beyond %d", s.Serial, uint64(MaxSerial))
	}
	seen := map[bpf.Address]bool{}
	for _, p := range s.Probes {
		if err := p.validate(seen); err != nil {
			return err
		}
	}
	for _, t := range s.Tables {
		if err := t.validate(); err != nil {
			return err
		}
	}
	if s.Events != nil {
		if err := s.Events.validate(); err != nil {
			return err
		}
	}
	return nil
}

// validate checks one probe of a state file: its address (not in seen,
// which it joins), its pin directory and pins, its counters and layouts.
func (p *ProbeState) validate(seen map[bpf.Address]bool) error {
	if err := p.validateAddress(seen); err != nil {
		return err
	}
	prefix := fmt.Sprintf("%s-%s-", p.Address.Kind, p.Address.Name)
	if !isPinDirOf(p.PinDir, prefix) {
		return fmt.Errorf("%s: pin_dir %q is not a pin directory of this probe", p.Address, p.PinDir)
	}
	if err := validMapPins(p.Address, p.Maps); err != nil {
		return err
	}
	if err := p.validateLinks(); err != nil {
		return err
	}
	if err := p.validateStats(); err != nil {
		return err
	}
	for _, e := range p.Events {
		if e == nil {
			return fmt.Errorf("%s: an event layout is null", p.Address)
		}
	}
	return nil
}

// validateAddress checks that p is a probe whose address is one and not
// in seen, which it joins.
func (p *ProbeState) validateAddress(seen map[bpf.Address]bool) error {
	if p == nil {
		return errors.New("a probe is null")
	}
	if !p.Address.Kind.Valid() || !bpf.ValidName(p.Address.Name) {
		return fmt.Errorf("probe %q is not a probe address", p.Address)
	}
	if seen[p.Address] {
		return fmt.Errorf("probe %s is listed twice", p.Address)
	}
	seen[p.Address] = true
	return nil
}

// validateLinks checks that every link pin is named as one.
func (p *ProbeState) validateLinks() error {
	for _, l := range p.Links {
		if !isLinkPin(l.Pin) {
			return fmt.Errorf("%s: link pin %q is not a link pin", p.Address, l.Pin)
		}
	}
	return nil
}

// validateStats checks that every counter indexes the stats map.
func (p *ProbeState) validateStats() error {
	st := p.Stats
	if st.Size < 0 || st.Size > maxStats {
		return fmt.Errorf("%s: %d stats counters", p.Address, st.Size)
	}
	in := func(i int) bool { return i >= 0 && i < st.Size }
	if !in(st.EventsDropped) || !in(st.EntryHits) || !in(st.ExitHits) {
		return fmt.Errorf("%s: a stats counter is out of the stats map", p.Address)
	}
	for _, a := range p.Aggregations {
		if a == nil || !in(a.DroppedIndex) {
			return fmt.Errorf("%s: an aggregation is null or counts drops out of the stats map", p.Address)
		}
	}
	return nil
}

// validate checks one table of a state file: its address, its pin
// directory and its pins.
func (t *TableState) validate() error {
	if t == nil {
		return errors.New("a table is null")
	}
	if t.Address.Kind != bpf.KindTable || !bpf.ValidName(t.Address.Name) {
		return fmt.Errorf("table %q is not a table address", t.Address)
	}
	if !isPinDirOf(t.PinDir, "table-"+t.Address.Name+"-") {
		return fmt.Errorf("%s: pin_dir %q is not a pin directory of this table", t.Address, t.PinDir)
	}
	return validMapPins(t.Address, t.Pins)
}

// isPinDirOf says name is a pin directory whose name starts with prefix.
func isPinDirOf(name, prefix string) bool {
	return isProbeDir(name) && strings.HasPrefix(name, prefix)
}

// validMapPins checks that each map pin is named for its map.
func validMapPins(addr bpf.Address, maps []MapState) error {
	for _, m := range maps {
		if !isMapRef(m.Ref) || m.Pin != "map_"+m.Ref {
			return fmt.Errorf("%s: map pin %q is not a map pin", addr, m.Pin)
		}
	}
	return nil
}

// MaxSerial bounds a state's serial: a write a second for 30 million years,
// and pin directory names stay short.
const MaxSerial = 1e15

// maxStats bounds a probe's stats counters: one per aggregation, and three.
const maxStats = 1 << 16

// writeState commits s: the state file is replaced atomically (a new
// temporary file, fsync, rename, fsync of the directory). The workspace
// must be locked.
func (w *Workspace) writeState(s *State) error {
	if !w.locked {
		return errors.New("write state: the workspace is not locked")
	}
	// Compact: a state of thousands of probes is megabytes, written at
	// every apply and read by every command (jq shows it indented).
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	if err := w.state.writeFile(stateFile, append(b, '\n')); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	return nil
}
