package runtime_test

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/spec"
)

// uworkTarget is the user function the kernel matrix probes: the test
// binary's own uwork.Target (see PROBECTL_TEST_CHILD=ucalls).
const uworkTarget = "github.com/probectl/probectl/runtime/internal/uwork.Target.abi0"

// TestKernelUserSessionRoute probes a user function with entry and exit on
// each kernel of the matrix (and the host): uprobe.session where the
// kernel has it (6.13), uprobe.multi + uretprobe.multi before (6.6), a
// uprobe and a uretprobe before that, as the route table says, and every
// route counts the calls exactly: entry data
// through the session cookie or the slot map, the entry's when skipping
// the exit. A family insisted on that the kernel lacks is refused in the
// plan, with the version it needs.
func TestKernelUserSessionRoute(t *testing.T) {
	requireRoot(t)
	f, err := bpf.Detect(bpf.DetectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if fns, err := compiler.BinaryFunctions(self); err != nil || !slices.Contains(fns, uworkTarget) {
		if inVM() {
			t.Fatalf("the test binary has no symbol %s (%v): make vmtest builds it with -ldflags=-s=false", uworkTarget, err)
		}
		t.Skipf("the test binary has no symbol table (go test strips it unless -ldflags=-s=false, as make test passes), so %s cannot be probed", uworkTarget)
	}
	const calls = 41
	run := func(t *testing.T) {
		t.Helper()
		cmd := exec.Command(self)
		cmd.Env = append(os.Environ(), "PROBECTL_TEST_CHILD=ucalls", fmt.Sprintf("PROBECTL_TEST_N=%d", calls), "GODEBUG=asyncpreemptoff=1", "GOGC=off")
		out, err := cmd.CombinedOutput()
		// Target(i) = i+1: the sum of 1..calls.
		if err != nil || strings.TrimSpace(string(out)) != fmt.Sprint(calls*(calls+1)/2) {
			t.Fatalf("workload: %v\n%s", err, out)
		}
	}
	for _, attach := range []string{"auto", "uprobe.multi", "uprobe.session"} {
		t.Run(attach, func(t *testing.T) {
			src := `probe "user" "us" {
  binary    = "` + self + `"
  functions = ["` + uworkTarget + `"]
  attach    = "` + attach + `"
  on_entry {
    when = pid != 1
    save = { start = ktime }
  }
  on_exit {
    count "calls" {}
    count "ordered" { when = ktime >= entry.start && entry.start > 0 }
  }
}`
			cfg := kcompileUser(t, f, src)
			for _, c := range []struct {
				family, needs string
				have          bool
			}{{"uprobe.session", "needs Linux 6.13", f.Links.UprobeSession}, {"uprobe.multi", "needs Linux 6.6", f.Links.UprobeMulti}} {
				if attach == c.family && !c.have {
					if cfg.err == "" || !strings.Contains(cfg.err, c.needs) {
						t.Fatalf("attach = %s on %s: %q, want a refusal: %s", attach, f.Label(), cfg.err, c.needs)
					}
					return
				}
			}
			if cfg.err != "" {
				t.Fatal(cfg.err)
			}
			p := cfg.out.Probes[0]
			want := "uprobe.multi + uretprobe.multi"
			switch {
			case attach == "uprobe.session" || attach == "auto" && f.Links.UprobeSession:
				want = "uprobe.session"
			case attach == "auto" && !f.Links.UprobeMulti:
				want = "uprobe + uretprobe" // before 6.6: a perf link per function
			}
			if got := compiler.JoinFamilies(p.Attach); got != want {
				t.Fatalf("%s on %s: families %s, want %s", attach, f.Label(), got, want)
			}
			if p.Unpinnable != "" {
				needPerfLinks(t, f) // uprobe perf links, which this test applies
			}
			if want == "uprobe.session" && p.EntryData.Storage != compiler.StorageCookie {
				t.Errorf("entry data in %s, want the session cookie", p.EntryData.Storage)
			}
			w := workspace(t)
			s, err := kapply(t, w, cfg.out)
			if err != nil {
				t.Fatal(err)
			}
			run(t)
			for _, agg := range []string{"calls", "ordered"} {
				if v := values(aggregation(t, w, s, "user.us", agg))[""]; v != calls {
					t.Errorf("%s: %s = %d, want %d", want, agg, v, calls)
				}
			}
			st := w.Status(s)
			if st[0].EntryHits != calls || st[0].ExitHits != calls || len(st[0].Drift) != 0 {
				t.Errorf("%s: hits %d entry, %d exit (want %d each), drift %v", want, st[0].EntryHits, st[0].ExitHits, calls, st[0].Drift)
			}
			if _, _, err := w.Destroy(s, nil); err != nil {
				t.Fatal(err)
			}
			leakFree(t, w, nil)
		})
	}
}

type compiled struct {
	out *compiler.Output
	err string
}

// kcompileUser compiles a user probe's spec for f, returning the error
// text when it does not compile.
func kcompileUser(t *testing.T, f *bpf.Facts, src string) compiled {
	t.Helper()
	cfg, diags := spec.Parse(map[string][]byte{"user.hcl": []byte(src)})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	out, d := compiler.Compile(cfg, f)
	if d.HasErrors() {
		return compiled{err: d.Error()}
	}
	return compiled{out: out}
}
