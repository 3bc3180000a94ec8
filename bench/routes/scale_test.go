package routes

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/runtime"
	"github.com/probectl/probectl/spec"
)

// scaleGlob is "[a-X]*" for the first letter X from which the kernel has
// 5,000 functions or more starting with a to X.
func scaleGlob(functions []string) (string, []string) {
	for x := 'a'; x <= 'z'; x++ {
		g := fmt.Sprintf("[a-%c]*", x)
		var fns []string
		for _, fn := range functions {
			if ok, _ := path.Match(g, fn); ok {
				fns = append(fns, fn)
			}
		}
		if len(fns) >= 5000 {
			return g, fns
		}
	}
	return "", nil
}

// TestScaleKprobeMulti: probectl's apply of a probe over a glob of
// thousands of functions, one kprobe.multi link, against the bare
// link-create of a trivial program for the same list (cilium/ebpf's
// link.KprobeMulti), in interleaved rounds. Prints the medians, spreads
// and the ratio (goal: apply ≤ 1.2× the bare link-create).
func TestScaleKprobeMulti(t *testing.T) {
	f := kernelFacts(t)
	if !f.Links.KprobeMulti {
		t.Skipf("%s has no kprobe.multi", f.Label())
	}
	glob, fns := scaleGlob(f.Functions)
	if glob == "" {
		t.Fatalf("the kernel has fewer than 5,000 functions from a to z (%d in all)", len(f.Functions))
	}
	src := fmt.Sprintf(`probe "kernel" "scale" {
  functions = [%q]
  attach    = "kprobe.multi"
  on_entry {
    count "calls" {}
  }
}`, glob)
	cfg, diags := spec.Parse(map[string][]byte{"scale.hcl": []byte(src)})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	start := time.Now()
	out, diags := compiler.Compile(cfg, f)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	compileTime := time.Since(start)
	resolved := out.Probes[0].Functions
	t.Logf("glob %q: %d functions (%d resolved by the compiler), compiled in %v", glob, len(fns), len(resolved), compileTime)

	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.Kprobe, AttachType: ebpf.AttachTraceKprobeMulti, Instructions: trivial, License: "GPL"})
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()

	w, err := runtime.Open(t.TempDir(), fmt.Sprintf("routes-scale-%d", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.Begin(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		w.Unlock()
		os.RemoveAll(w.PinDir())
		os.Remove(filepath.Dir(w.PinDir())) // the pin root, if empty
	}()

	rounds := envInt("PROBECTL_TEST_ROUTES_SCALE_ROUNDS", 15)
	var bareCreate, bareClose, apply, destroy, cookies, load []float64
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	bare := func() {
		start := time.Now()
		lk, err := link.KprobeMulti(prog, link.KprobeMultiOptions{Symbols: resolved})
		if err != nil {
			t.Fatal(err)
		}
		mid := time.Now()
		lk.Close()
		bareCreate = append(bareCreate, ms(mid.Sub(start)))
		bareClose = append(bareClose, ms(time.Since(mid)))
	}
	// Where apply's time goes: the same link with probectl's cookies (the
	// index of each function), and the load of its programs and maps.
	cookieList := make([]uint64, len(resolved))
	for i := range cookieList {
		cookieList[i] = uint64(i)
	}
	withCookies := func() {
		start := time.Now()
		lk, err := link.KprobeMulti(prog, link.KprobeMultiOptions{Symbols: resolved, Cookies: cookieList})
		if err != nil {
			t.Fatal(err)
		}
		cookies = append(cookies, ms(time.Since(start)))
		lk.Close()
	}
	loadOnly := func() {
		cs, err := out.Probes[0].CollectionSpec(nil, resolved)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		coll, err := ebpf.NewCollection(cs)
		if err != nil {
			t.Fatal(err)
		}
		load = append(load, ms(time.Since(start)))
		coll.Close()
	}
	// settle waits until every program loaded since before is gone: a
	// link released by unpinning (destroy) is torn down by a kernel
	// worker after the call returns, and would otherwise run into the
	// next measurement.
	progIDs := func() map[ebpf.ProgramID]bool {
		ids := map[ebpf.ProgramID]bool{}
		var id ebpf.ProgramID
		for {
			next, err := ebpf.ProgramGetNextID(id)
			if err != nil {
				return ids
			}
			ids[next], id = true, next
		}
	}
	settle := func(before map[ebpf.ProgramID]bool) {
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) {
			fresh := false
			for id := range progIDs() {
				if !before[id] {
					fresh = true
				}
			}
			if !fresh {
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
		t.Fatal("probectl's programs still loaded a minute after destroy")
	}
	probectl := func() {
		s, err := w.State()
		if err != nil {
			t.Fatal(err)
		}
		before := progIDs()
		start := time.Now()
		next, _, err := w.Apply(s, out, runtime.Diff(s, out, nil))
		if err != nil {
			t.Fatal(err)
		}
		mid := time.Now()
		if _, _, err := w.Destroy(next, nil); err != nil {
			t.Fatal(err)
		}
		settle(before)
		apply = append(apply, ms(mid.Sub(start)))
		destroy = append(destroy, ms(time.Since(mid)))
	}
	// PROBECTL_TEST_ROUTES_PROFILE=1: a CPU profile of probectl's apply
	// and destroy (the rounds' probectl steps), printed base64 between
	// PROBECTL-PPROF lines for go tool pprof on the host.
	var prof bytes.Buffer
	if os.Getenv("PROBECTL_TEST_ROUTES_PROFILE") != "" {
		inner := probectl
		probectl = func() {
			if err := pprof.StartCPUProfile(&prof); err != nil {
				t.Fatal(err)
			}
			inner()
			pprof.StopCPUProfile()
			fmt.Printf("\nPROBECTL-PPROF %s\n", base64.StdEncoding.EncodeToString(prof.Bytes()))
			prof.Reset()
		}
	}
	steps := []func(){bare, probectl, withCookies}
	for r := range rounds {
		for i := range steps {
			steps[(i+r)%len(steps)]()
		}
		loadOnly()
	}
	spread := func(xs []float64) string {
		lo, hi := minMax(xs)
		return fmt.Sprintf("median %.0f ms (%.0f..%.0f)", median(xs), lo, hi)
	}
	var ratios, ratiosAll []float64
	for i := range apply {
		ratios = append(ratios, apply[i]/bareCreate[i])
		ratiosAll = append(ratiosAll, (apply[i]+destroy[i])/(bareCreate[i]+bareClose[i]))
	}
	lo, hi := minMax(ratios)
	loAll, hiAll := minMax(ratiosAll)
	t.Logf("bare link-create: %s; close: %s", spread(bareCreate), spread(bareClose))
	t.Logf("probectl apply:   %s; destroy (until the kernel released its programs): %s", spread(apply), spread(destroy))
	t.Logf("parts: the link with probectl's cookies %s; loading probectl's programs and maps %s", spread(cookies), spread(load))
	t.Logf("ratio apply / bare link-create: median %.2f× (%.2f..%.2f) over %d rounds (goal ≤ 1.2×)", median(ratios), lo, hi, rounds)
	t.Logf("ratio apply+destroy / bare create+close: median %.2f× (%.2f..%.2f)", median(ratiosAll), loAll, hiAll)
	fmt.Printf("\nPROBECTL-SCALE glob=%q functions=%d ratio=%.2f min=%.2f max=%.2f\n", glob, len(resolved), median(ratios), lo, hi)
}
