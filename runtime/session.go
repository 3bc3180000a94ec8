package runtime

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/probectl/probectl/bpf/symbols"
	"github.com/probectl/probectl/compiler/compiled"
	"golang.org/x/sys/unix"
)

// Session holds probes that live exactly as long as this process: they are
// loaded and attached all or nothing, like Apply, but never pinned, so the
// kernel detaches them when the process's descriptors close, however it
// ends (kill -9 included). probectl run uses it.
type Session struct {
	probes []*live
	tables map[string]*liveTable
	buffer *liveBuffer // the event buffer, when a probe emits events
	// States describe the probes for reading, as an apply's state would.
	States []*ProbeState

	// Symbols say where Read finds the files of user stacks, as a
	// workspace's do for show.
	Symbols SymbolOptions
	syms    *symbols.UserSymbols // symbolizes user stacks, once per session
}

// Attach loads and attaches every probe of out. On any failure nothing is
// left attached.
func Attach(out *compiled.Output) (*Session, error) {
	if err := raiseMemlock(); err != nil {
		return nil, err
	}
	w := &Workspace{} // its load and attach steps, without pins or state
	t := &txn{}
	ok := false
	defer func() {
		if !ok {
			t.rollback()
		}
	}()
	var kernelBTF *btf.Spec
	s := &Session{tables: map[string]*liveTable{}}
	if err := s.makeShared(w, t, out); err != nil {
		return nil, err
	}
	for _, p := range out.Probes {
		l := &live{probe: p, shared: withBuffer(sharedMaps(p, s.tables), p, s.buffer)}
		if err := w.loadOne(t, l, &kernelBTF); err != nil {
			return nil, err
		}
		s.probes = append(s.probes, l)
	}
	for _, l := range s.probes {
		if err := w.attach(t, l); err != nil {
			return nil, err
		}
	}
	for _, l := range s.probes {
		s.States = append(s.States, newProbeState(l.probe))
	}
	ok = true
	return s, nil
}

func (s *Session) maps(i int) mapSource {
	coll := s.probes[i].coll
	return func(ref string) (*ebpf.Map, func(), error) {
		m := coll.Maps[ref]
		if m == nil {
			return nil, nil, fmt.Errorf("%s: no map %s", s.States[i].Address, ref)
		}
		return m, func() {}, nil
	}
}

// Read returns what the probes measured.
func (s *Session) Read() []ProbeResult {
	out := make([]ProbeResult, len(s.States))
	for i, p := range s.States {
		if s.syms == nil {
			s.syms = symbols.NewUserSymbols(buildIDIndexFile(), s.Symbols.Dirs)
		}
		out[i] = readProbe(p, s.maps(i), nil, s.syms, readMode{sorted: true})
	}
	return out
}

// Tables returns what the session's tables hold.
func (s *Session) Tables() []TableResult {
	var out []TableResult
	for _, name := range sortedNames(s.tables) {
		l := s.tables[name]
		out = append(out, readTable(l.table, func(ref string) (*ebpf.Map, func(), error) {
			m := l.maps[ref]
			if m == nil {
				return nil, nil, fmt.Errorf("%s: no map %s", l.table.Address, ref)
			}
			return m, func() {}, nil
		}))
	}
	return out
}

// Counters returns each probe's counters (hits and drops), as status does.
func (s *Session) Counters() ([]ProbeStatus, error) {
	out := make([]ProbeStatus, len(s.States))
	for i, p := range s.States {
		counts, err := stats(p, s.maps(i))
		if err != nil {
			return nil, err
		}
		out[i] = ProbeStatus{Description: p.Description}
		out[i].fill(p, counts)
	}
	return out, nil
}

// Detach closes every link: the probes stop firing, their maps stay
// readable until Close.
func (s *Session) Detach() error {
	var errs []error
	for _, l := range s.probes {
		for _, a := range l.links {
			errs = append(errs, a.link.Close())
		}
		l.links = nil
	}
	return errors.Join(errs...)
}

// Close detaches everything and frees the maps and programs.
func (s *Session) Close() error {
	err := s.Detach()
	for _, l := range s.probes {
		l.coll.Close()
	}
	for _, l := range s.tables {
		l.close()
	}
	s.buffer.close()
	s.probes, s.tables, s.buffer = nil, nil, nil
	return err
}

// makeShared makes what the session's probes share: out's tables and
// event buffer.
func (s *Session) makeShared(w *Workspace, t *txn, out *compiled.Output) error {
	for _, tb := range out.Tables {
		l, err := w.makeTable(t, tb)
		if err != nil {
			return err
		}
		s.tables[tb.Address.Name] = l
	}
	if out.Events == nil {
		return nil
	}
	b, err := w.makeBuffer(t, out.Events)
	if err != nil {
		return err
	}
	s.buffer = b
	return nil
}

// CleanRuns removes what probectl run of earlier versions left behind when
// it was killed: pin directories run-<pid> under the pin root and their
// temporary state directories, for processes that are gone. It returns
// what it removed.
func CleanRuns() []string {
	var removed []string
	if root, err := openPath(PinRoot, false); err == nil {
		names, _ := root.list()
		for _, n := range names {
			if pid, ok := runPID(n); ok && !alive(pid) && root.removeAll(n) == nil {
				removed = append(removed, filepath.Join(PinRoot, n))
			}
		}
		root.close()
	}
	tmps, _ := filepath.Glob(filepath.Join(os.TempDir(), "probectl-run-*"))
	for _, t := range tmps {
		if leftByDeadRun(t) && os.RemoveAll(t) == nil {
			removed = append(removed, t)
		}
	}
	return removed
}

// leftByDeadRun says t is a temporary state directory of a run that is
// gone: a directory of ours (no symlink) holding one entry, run-<pid>,
// whose process is not alive.
func leftByDeadRun(t string) bool {
	var st unix.Stat_t
	if unix.Lstat(t, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Uid != uint32(os.Geteuid()) {
		return false
	}
	entries, err := os.ReadDir(t)
	if err != nil || len(entries) != 1 {
		return false
	}
	pid, ok := runPID(entries[0].Name())
	return ok && !alive(pid)
}

func runPID(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, "run-")
	if !ok {
		return 0, false
	}
	pid, err := strconv.Atoi(rest)
	return pid, err == nil && pid > 0
}

func alive(pid int) bool {
	return unix.Kill(pid, 0) != unix.ESRCH
}
