package runtime

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler"
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
}

// ProbeState is one applied probe: its kernel objects and how to read them.
type ProbeState struct {
	Address   bpf.Address        `json:"address"`
	Digest    string             `json:"digest"`
	Route     compiler.Route     `json:"route"`
	Attach    []string           `json:"attach"`
	Reason    string             `json:"reason"`
	Functions []string           `json:"functions,omitempty"`
	Patterns  []string           `json:"patterns,omitempty"`
	Exclude   []string           `json:"exclude,omitempty"`
	Binary    string             `json:"binary,omitempty"`
	PID       int                `json:"pid,omitempty"`
	Event     string             `json:"event,omitempty"`
	EntryData compiler.EntryData `json:"entry_data"`
	// PinDir is the probe's directory under the workspace's bpffs root.
	PinDir       string                  `json:"pin_dir"`
	Maps         []MapState              `json:"maps"`
	Links        []LinkState             `json:"links"`
	Aggregations []*compiler.Aggregation `json:"aggregations"`
	Events       []*compiler.EventLayout `json:"events,omitempty"`
	Stats        compiler.Stats          `json:"stats"`
	AppliedAt    time.Time               `json:"applied_at"`
}

// MapState is a pinned map.
type MapState struct {
	Ref  string     `json:"ref"`
	Name string     `json:"name"`
	ID   ebpf.MapID `json:"id"`
	Pin  string     `json:"pin"`
}

// LinkState is a pinned link and the program behind it.
type LinkState struct {
	Family string `json:"family"`
	// Function is set for per-function links.
	Function  string         `json:"function,omitempty"`
	ID        link.ID        `json:"id"`
	Program   string         `json:"program"`
	ProgramID ebpf.ProgramID `json:"program_id"`
	Pin       string         `json:"pin"`
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

func newLineage() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// readState reads the state file; a missing file is an empty state.
func readState(path, workspace string) (*State, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &State{Version: StateVersion, Workspace: workspace}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read state: %w", err)
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("read state %s: %w (the file is damaged; move it away to start over, after destroying what it lists)", path, err)
	}
	if s.Version != StateVersion {
		return nil, fmt.Errorf("read state %s: version %d, this probectl reads %d", path, s.Version, StateVersion)
	}
	return &s, nil
}

// writeState replaces the state file atomically: a temp file in the same
// directory, fsync, rename, fsync of the directory.
func writeState(path string, s *State) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, ".state-*.tmp")
	if err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	defer os.Remove(tmp.Name()) // gone after the rename; cleans up on failure
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("write state: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write state: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
