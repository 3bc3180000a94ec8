package runtime

import (
	"path/filepath"
	goruntime "runtime"
	"sync"
	"sync/atomic"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/probectl/probectl/compiler/compiled"
)

// ProbeStatus is one applied probe's health: the stable JSON of
// "probectl status -json".
type ProbeStatus struct {
	compiled.Description
	Links []LinkStatus `json:"links"`
	// EntryHits and ExitHits count program runs; Missed is the kernel's
	// count of hits it could not deliver: where the link type reports one
	// (recursion, full rethook pools), and the runs of the probe's programs
	// it skipped because another BPF program was running on the CPU.
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
	Family    compiled.Family `json:"family"`
	Function  string          `json:"function,omitempty"`
	ID        link.ID         `json:"id"`
	ProgramID ebpf.ProgramID  `json:"program_id"`
}

// Status checks every probe of s against the kernel. It changes nothing.
func (w *Workspace) Status(s *State) []ProbeStatus {
	out := make([]ProbeStatus, len(s.Probes))
	parallel(len(s.Probes), func(i int) {
		p := s.Probes[i]
		st := ProbeStatus{Description: p.Description, AppliedAtUnix: p.AppliedAt.Unix(), PinDir: filepath.Join(w.PinDir(), p.PinDir)}
		var counts []uint64
		st.Drift, st.Missed, counts = w.checkProbe(p, true)
		for _, l := range p.Links {
			st.Links = append(st.Links, LinkStatus{Family: l.Family, Function: l.Function, ID: l.ID, ProgramID: l.ProgramID})
		}
		if len(st.Drift) == 0 && counts != nil {
			st.fill(p, counts)
		}
		out[i] = st
	})
	return out
}

// parallel runs f(0) ... f(n-1) on up to 2×GOMAXPROCS goroutines: checking
// a probe is a dozen system calls, and a workspace may hold thousands.
func parallel(n int, f func(i int)) { parallelN(n, 2*goruntime.GOMAXPROCS(0), f) }

// parallelN runs f(0) ... f(n-1) on up to workers goroutines.
func parallelN(n, workers int, f func(i int)) {
	workers = min(n, workers)
	if workers <= 1 {
		for i := 0; i < n; i++ {
			f(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				f(i)
			}
		}()
	}
	wg.Wait()
}

func (st *ProbeStatus) fill(p *ProbeState, counts []uint64) {
	for _, agg := range p.Aggregations {
		st.DroppedKeys += counts[agg.DroppedIndex]
	}
	st.DroppedEvents = counts[p.Stats.EventsDropped]
	st.EntryHits, st.ExitHits = counts[p.Stats.EntryHits], counts[p.Stats.ExitHits]
}
