package runtime_test

import (
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

// workload builds testdata/work.c once; its comm is "pcwork". It is static,
// so no dynamic loader makes system calls of its own.
func workload(t testing.TB) string {
	t.Helper()
	workOnce.Do(func() {
		dir, err := os.MkdirTemp("", "probectl-work-")
		if err != nil {
			workErr = err
			return
		}
		workPath = filepath.Join(dir, "pcwork")
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

// compile compiles src for the live kernel; WORK in src is the workload's path.
func compile(t testing.TB, src string) *compiler.Output {
	t.Helper()
	src = strings.ReplaceAll(src, "WORK", workload(t))
	cfg, diags := spec.Parse(map[string][]byte{"test.hcl": []byte(src)})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	f := liveFacts(t)
	var events []string
	for _, p := range cfg.Probes {
		if p.Event != "" {
			events = append(events, p.Event)
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

// workspace opens a fresh workspace whose probes are destroyed, and whose
// pins are removed, when the test ends.
func workspace(t testing.TB) *runtime.Workspace {
	t.Helper()
	wsCount++
	w, err := runtime.Open(t.TempDir(), fmt.Sprintf("test-%d-%d", os.Getpid(), wsCount))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Lock(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if s, err := w.State(); err == nil && len(s.Probes) > 0 {
			if _, _, err := w.Destroy(s, nil); err != nil {
				t.Errorf("cleanup destroy: %v", err)
			}
		}
		w.Unlock()
		os.RemoveAll(w.PinDir())
	})
	return w
}

// apply plans src against w's state and applies it.
func apply(t testing.TB, w *runtime.Workspace, src string) (*runtime.State, *compiler.Plan) {
	t.Helper()
	s, err := w.State()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Repair(s); err != nil {
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
	res, err := w.Read(s, []*runtime.ProbeState{p})
	if err != nil {
		t.Fatal(err)
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

// objects are the BPF objects in the kernel, by ID.
type objects struct{ progs, maps, links map[uint32]bool }

func snapshot(t testing.TB) objects {
	t.Helper()
	o := objects{map[uint32]bool{}, map[uint32]bool{}, map[uint32]bool{}}
	for id := ebpf.ProgramID(0); ; {
		next, err := ebpf.ProgramGetNextID(id)
		if err != nil {
			break
		}
		o.progs[uint32(next)] = true
		id = next
	}
	for id := ebpf.MapID(0); ; {
		next, err := ebpf.MapGetNextID(id)
		if err != nil {
			break
		}
		o.maps[uint32(next)] = true
		id = next
	}
	it := new(link.Iterator)
	for it.Next() {
		o.links[uint32(it.ID)] = true
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return o
}

// added lists the objects of now that were not in before.
func (before objects) added(now objects) []string {
	var out []string
	for _, c := range []struct {
		kind string
		a, b map[uint32]bool
	}{{"prog", before.progs, now.progs}, {"map", before.maps, now.maps}, {"link", before.links, now.links}} {
		for id := range c.b {
			if !c.a[id] {
				out = append(out, fmt.Sprintf("%s %d", c.kind, id))
			}
		}
	}
	sort.Strings(out)
	return out
}

// noLeaks fails when objects other than those in keep appeared since before.
func noLeaks(t testing.TB, before objects, keep *runtime.State) {
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
		}
	}
	// The kernel frees links (and so their programs) from a work queue:
	// give it a moment before calling anything a leak.
	var leaked []string
	for try := 0; try < 40; try++ {
		leaked = leaked[:0]
		for _, o := range before.added(snapshot(t)) {
			if !allowed[o] {
				leaked = append(leaked, o)
			}
		}
		if len(leaked) == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("leaked kernel objects: %v", leaked)
}

func pid() int { return os.Getpid() }
