package runtime_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/runtime"
	"github.com/probectl/probectl/spec"
)

// requireRoot skips when the test cannot use BPF: root is needed to load,
// attach and pin. CI runs as root.
func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("applying probes needs root (CAP_BPF, CAP_PERFMON)")
	}
}

var (
	workOnce sync.Once
	workPath string
	workErr  error
)

// builtIn are the directories of the programs the tests built, removed
// when they end.
var builtIn []string

// workComm is the workload's comm: "pcr" and the test process's pid, so that
// two runs of these tests at once (two checkouts on one machine) never count
// each other's calls. Specs and expectations write "pcruntime"; compile and
// expectComm put workComm in its place.
var workComm = fmt.Sprintf("pcr%d", os.Getpid())

// expectComm returns s with "pcruntime" replaced by the workload's comm.
func expectComm(s string) string { return strings.ReplaceAll(s, "pcruntime", workComm) }

// workload builds testdata/work.c once; its comm is workComm. It is static,
// so no dynamic loader makes system calls of its own.
func workload(t testing.TB) string {
	t.Helper()
	workOnce.Do(func() {
		dir, err := os.MkdirTemp("", "probectl-work-")
		if err != nil {
			workErr = err
			return
		}
		builtIn = append(builtIn, dir)
		workPath = filepath.Join(dir, workComm)
		out, err := exec.Command("gcc", "-O0", "-static", "-o", workPath, "testdata/work.c").CombinedOutput()
		if err != nil {
			workErr = fmt.Errorf("gcc (the tests need it; .ci/run installs it): %v\n%s", err, out)
		}
	})
	if workErr != nil {
		t.Fatal(workErr)
	}
	return workPath
}

// runWork runs the workload with n iterations.
func runWork(t testing.TB, n int) {
	t.Helper()
	out, err := exec.Command(workload(t), fmt.Sprint(n)).CombinedOutput()
	if err != nil {
		t.Fatalf("workload: %v\n%s", err, out)
	}
}

var (
	factsOnce sync.Once
	facts     *bpf.Facts
	factsErr  error
)

func liveFacts(t testing.TB) *bpf.Facts {
	t.Helper()
	factsOnce.Do(func() { facts, factsErr = bpf.Detect(bpf.DetectOptions{}) })
	if factsErr != nil {
		t.Fatal(factsErr)
	}
	f := *facts
	return &f
}

// compile compiles src for the live kernel; WORK in src is the workload's
// path (built only then: the kernel matrix's VMs have no gcc).
func compile(t testing.TB, src string) *compiler.Output {
	t.Helper()
	if strings.Contains(src, "WORK") {
		src = strings.ReplaceAll(src, "WORK", workload(t))
	}
	src = expectComm(src)
	cfg, diags := spec.Parse(map[string][]byte{"test.hcl": []byte(src)})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	f := liveFacts(t)
	var events []string
	for _, p := range cfg.Probes {
		for _, e := range p.Events {
			events = append(events, e.Text)
		}
	}
	if err := f.LoadTracepoints(events); err != nil {
		t.Fatal(err)
	}
	out, diags := compiler.Compile(cfg, f)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return out
}

var wsCount int

// workspace opens a fresh workspace, locked (Begin), whose probes are
// destroyed and whose pins are removed when the test ends; then every
// kernel object it created must be gone.
func workspace(t testing.TB) *runtime.Workspace {
	t.Helper()
	return namedWorkspace(t, "test")
}

// namedWorkspace is workspace with its name (and so its pins) starting
// with prefix.
func namedWorkspace(t testing.TB, prefix string) *runtime.Workspace {
	t.Helper()
	wsCount++
	w, err := runtime.Open(t.TempDir(), fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), wsCount))
	if err != nil {
		t.Fatal(err)
	}
	objs := track(w)
	trackers[w] = objs
	if _, _, err := w.Begin(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !w.Locked() {
			if _, _, err := w.Begin(); err != nil {
				t.Errorf("cleanup: %v", err)
				return
			}
		}
		if s, err := w.State(); err == nil && len(s.Probes) > 0 {
			if _, _, err := w.Destroy(s, nil); err != nil {
				t.Errorf("cleanup destroy: %v", err)
			}
		}
		if err := w.RemovePins(); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		w.Unlock()
		noLeaks(t, objs, nil, nil)
	})
	return w
}

// apply plans src against w's state and applies it. w must be locked.
func apply(t testing.TB, w *runtime.Workspace, src string) (*runtime.State, *compiler.Plan) {
	t.Helper()
	s, err := w.State()
	if err != nil {
		t.Fatal(err)
	}
	out := compile(t, src)
	plan := runtime.Diff(s, out, nil)
	next, _, err := w.Apply(s, out, plan)
	if err != nil {
		t.Fatal(err)
	}
	return next, plan
}

// aggregation reads one aggregation of one probe.
func aggregation(t testing.TB, w *runtime.Workspace, s *runtime.State, addr, name string) runtime.AggregationResult {
	t.Helper()
	a, err := bpf.ParseAddress(addr)
	if err != nil {
		t.Fatal(err)
	}
	p := s.Probe(a)
	if p == nil {
		t.Fatalf("%s not applied", addr)
	}
	res := w.Read([]*runtime.ProbeState{p})
	if res[0].Error != "" {
		t.Fatal(res[0].Error)
	}
	for _, ar := range res[0].Aggregations {
		if ar.Name == name {
			return ar
		}
	}
	t.Fatalf("%s has no aggregation %s", addr, name)
	return runtime.AggregationResult{}
}

// values maps each entry's key text to its value.
func values(ar runtime.AggregationResult) map[string]int64 {
	out := map[string]int64{}
	for _, e := range ar.Entries {
		var parts []string
		for _, f := range e.Key {
			parts = append(parts, fmt.Sprint(f.Value))
		}
		out[strings.Join(parts, ",")] = *e.Value
	}
	return out
}

// objects are the kernel objects a test's workspaces (and the probectl
// processes it starts) created, by "kind id". Leak checks look at these
// only: other processes on the machine load BPF too.
type objects struct {
	mu  sync.Mutex
	ids map[string]bool
}

func (o *objects) add(kind string, id uint32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ids == nil {
		o.ids = map[string]bool{}
	}
	o.ids[fmt.Sprintf("%s %d", kind, id)] = true
}

// track records every object w creates.
func track(w *runtime.Workspace) *objects {
	o := &objects{}
	w.SetObserver(o.add)
	return o
}

var trackers = map[*runtime.Workspace]*objects{}

// leakFree checks the objects of w's tracker (see noLeaks).
func leakFree(t testing.TB, w *runtime.Workspace, keep *runtime.State) {
	t.Helper()
	noLeaks(t, trackers[w], w, keep)
}

// exists reports whether the kernel still has the object.
func exists(kind string, id uint32) bool {
	var err error
	switch kind {
	case "prog":
		var p *ebpf.Program
		if p, err = ebpf.NewProgramFromID(ebpf.ProgramID(id)); err == nil {
			p.Close()
		}
	case "link":
		var l link.Link
		if l, err = link.NewFromID(link.ID(id)); err == nil {
			l.Close()
		}
	default: // map, identity
		var m *ebpf.Map
		if m, err = ebpf.NewMapFromID(ebpf.MapID(id)); err == nil {
			m.Close()
		}
	}
	return err == nil || !errors.Is(err, os.ErrNotExist)
}

// noLeaks fails when an object in objs still exists that neither keep
// records nor is w's identity (w may be nil when its pins are gone).
func noLeaks(t testing.TB, objs *objects, w *runtime.Workspace, keep *runtime.State) {
	t.Helper()
	allowed := map[string]bool{}
	if keep != nil {
		for _, p := range keep.Probes {
			for _, l := range p.Links {
				allowed[fmt.Sprintf("link %d", l.ID)] = true
				allowed[fmt.Sprintf("prog %d", l.ProgramID)] = true
			}
			for _, m := range p.Maps {
				allowed[fmt.Sprintf("map %d", m.ID)] = true
			}
			allowed[fmt.Sprintf("map %d", p.MetaID)] = true
		}
		for _, tb := range keep.Tables {
			for _, m := range tb.Pins {
				allowed[fmt.Sprintf("map %d", m.ID)] = true
			}
			allowed[fmt.Sprintf("map %d", tb.MetaID)] = true
		}
		if es := keep.Events; es != nil {
			for _, m := range es.Pins {
				allowed[fmt.Sprintf("map %d", m.ID)] = true
			}
			allowed[fmt.Sprintf("map %d", es.MetaID)] = true
		}
	}
	if w != nil {
		if id := w.IdentityID(); id != 0 {
			allowed[fmt.Sprintf("identity %d", id)] = true
		}
	}
	objs.mu.Lock()
	var ids []string
	for id := range objs.ids {
		ids = append(ids, id)
	}
	objs.mu.Unlock()
	sort.Strings(ids)
	// The kernel frees links (and so their programs) from a work queue and
	// after an RCU grace period, a trampoline after an RCU tasks period
	// each: give it up to 60 s before calling anything a leak (a busy TCG
	// guest took more than 10 s to free vfscount's 75 fentry programs on
	// 6.12 arm64). Nothing waits when nothing is left.
	var leaked []string
	for try := 0; try < 1200; try++ {
		leaked = leaked[:0]
		for _, o := range ids {
			var kind string
			var id uint32
			fmt.Sscanf(o, "%s %d", &kind, &id)
			if !allowed[o] && exists(kind, id) {
				leaked = append(leaked, o)
			}
		}
		if len(leaked) == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("leaked kernel objects (of %d this test created): %v", len(ids), leaked)
}

func pid() int { return os.Getpid() }
