package runtime

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler/compiled"
)

// SavedPlan is what plan -out writes and apply PLANFILE applies: the plan,
// the full facts of the kernel it was made for, the spec sources, and the
// state it was made against. It is self-contained: applying it needs no
// other file.
type SavedPlan struct {
	Plan    *compiled.Plan    `json:"plan"`
	Facts   *bpf.Facts        `json:"facts"`
	Sources map[string]string `json:"sources"`
	// The state the plan was made against: apply refuses when it moved.
	Workspace    string `json:"workspace,omitempty"`
	StateLineage string `json:"state_lineage"`
	StateSerial  uint64 `json:"state_serial"`
	// Destroy marks a plan -destroy: it removes everything applied
	// (its sources are none). Replace are the probes -replace asked for,
	// replaced again when it is applied.
	Destroy bool          `json:"destroy,omitempty"`
	Replace []bpf.Address `json:"replace,omitempty"`
}

// NewSavedPlan records plan, made for facts from sources, against state s
// (nil for a target other than the live kernel).
func NewSavedPlan(plan *compiled.Plan, facts *bpf.Facts, sources map[string][]byte, s *State) *SavedPlan {
	sp := &SavedPlan{Plan: plan, Facts: facts, Sources: map[string]string{}}
	if s != nil {
		sp.Workspace, sp.StateLineage, sp.StateSerial = s.Workspace, s.Lineage, s.Serial
	}
	for name, src := range sources {
		sp.Sources[name] = string(src)
	}
	return sp
}

// maxSavedPlan bounds a saved plan file.
const maxSavedPlan = 256 << 20

// Write writes the plan to path, readable by its owner only.
func (sp *SavedPlan) Write(path string) error {
	b, err := json.MarshalIndent(sp, "", "  ")
	if err != nil {
		return err
	}
	return bpf.WriteNew(path, append(b, '\n'), 0o600)
}

// ReadSavedPlan reads path when it is a saved plan. It returns nil, nil for
// a file that is not JSON (a spec, which the spec reader then reads), and
// never blocks: only regular files are read.
func ReadSavedPlan(path string) (*SavedPlan, error) {
	f, err := bpf.OpenRegular(path)
	if err != nil {
		return nil, nil // a spec path, or unreadable: the spec reader says why
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSavedPlan+1))
	if err != nil || len(b) > maxSavedPlan || !json.Valid(b) {
		return nil, nil
	}
	// A saved plan is applied as it says: it must be what its owner wrote.
	if err := bpf.CheckOwned(f); err != nil {
		return nil, err
	}
	var sp SavedPlan
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&sp); err != nil || sp.Plan == nil || sp.Facts == nil {
		return nil, fmt.Errorf("%s is JSON but not a saved plan (make one with probectl plan -out FILE)", path)
	}
	if err := sp.validate(path); err != nil {
		return nil, err
	}
	return &sp, nil
}

// validate checks what a saved plan read from path names: a known arch and
// changes that each name a probe and an action.
func (sp *SavedPlan) validate(path string) error {
	if sp.Facts.Arch != bpf.ArchX86_64 && sp.Facts.Arch != bpf.ArchArm64 {
		return fmt.Errorf("%s: a saved plan for arch %q", path, sp.Facts.Arch)
	}
	for _, c := range sp.Plan.Changes {
		if c == nil || !c.Address.Kind.Valid() || c.Action == "" {
			return fmt.Errorf("%s is damaged: a change is empty or names no probe; plan again", path)
		}
	}
	return nil
}

// ErrStale says a saved plan no longer applies.
var ErrStale = errors.New("saved plan is stale")

// CheckKernel refuses the plan when live is not the kernel it was made for,
// or when it was made with kernel types (BTF from a facts file) that are
// not this kernel's.
func (sp *SavedPlan) CheckKernel(live *bpf.Facts) error {
	if d := live.Differences(sp.Facts); len(d) > 0 {
		return fmt.Errorf("%w: it was made for %s, and this kernel differs (%s); plan again", ErrStale, sp.Facts.Label(), strings.Join(d, "; "))
	}
	if len(sp.Facts.KernelBTF) == 0 {
		return nil
	}
	same, err := bpf.SameKernelBTF(sp.Facts.KernelBTF)
	if err != nil {
		return fmt.Errorf("saved plan: %w", err)
	}
	if !same {
		return fmt.Errorf("%w: it was made with the kernel types (BTF) of %s, and this kernel's differ: its offsets would be wrong here; plan again", ErrStale, sp.Facts.Label())
	}
	return nil
}

// CheckState refuses the plan when the state moved since it was made, or
// when the plan it makes now differs from the saved one.
func (sp *SavedPlan) CheckState(s *State, now *compiled.Plan) error {
	if sp.Workspace != "" && sp.Workspace != s.Workspace {
		return fmt.Errorf("saved plan is for workspace %q, not %q", sp.Workspace, s.Workspace)
	}
	if sp.stateMoved(s) {
		return fmt.Errorf("%w: the state moved since it was made (serial %d, now %d; lineage %s, now %s); plan again",
			ErrStale, sp.StateSerial, s.Serial, short(sp.StateLineage), short(s.Lineage))
	}
	return sp.samePlan(now)
}

// stateMoved says s is not the state the plan was made against. A plan
// made before the workspace's first write saw no lineage: the state it
// meant is one with no probes at serial 0.
func (sp *SavedPlan) stateMoved(s *State) bool {
	fresh := sp.StateLineage == "" && sp.StateSerial == 0 && s.Serial == 0 && len(s.Probes) == 0
	return !fresh && (sp.StateLineage != s.Lineage || sp.StateSerial != s.Serial)
}

// samePlan refuses the saved plan when now, the plan made from the same
// input now, changes other probes, or the same ones differently.
func (sp *SavedPlan) samePlan(now *compiled.Plan) error {
	if len(sp.Plan.Changes) != len(now.Changes) {
		return fmt.Errorf("%w: it no longer matches the kernel; plan again", ErrStale)
	}
	for i, c := range sp.Plan.Changes {
		if c.Address != now.Changes[i].Address || c.Action != now.Changes[i].Action || c.Digest != now.Changes[i].Digest {
			return fmt.Errorf("%w: %s now plans %s; plan again", ErrStale, c.Address, now.Changes[i].Action)
		}
	}
	return nil
}
