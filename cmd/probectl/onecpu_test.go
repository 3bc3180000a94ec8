package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/probectl/probectl/bpf"
)

// TestProfileOneCPU: a profile probe with one_cpu = true is a timer on
// the first online CPU only, as bpftrace's interval probes are: every
// sample it counts ran there (one key of count by cpu), and the plan
// says "on one CPU".
func TestProfileOneCPU(t *testing.T) {
	cpus, err := bpf.OnlineCPUs()
	if err != nil {
		t.Fatal(err)
	}
	c := &stkCLI{t: t, state: t.TempDir(), ws: fmt.Sprintf("kaddr-onecpu-%d", os.Getpid())}
	t.Cleanup(func() { c.run("destroy", "-auto-approve") })
	src := `
probe "profile" "tick" {
  event     = "cpu-clock"
  period_ns = 10000000
  one_cpu   = true
  on_entry {
    count "ticks" { by = [cpu] }
  }
}
`
	file := filepath.Join(t.TempDir(), "kaddr-onecpu.hcl")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if plan := c.must("plan", file); !strings.Contains(plan, "every 10000000 ns on one CPU") || !strings.Contains(plan, "perf_event (1 link)") {
		t.Fatalf("the plan does not say one CPU:\n%s", plan)
	}
	c.must("apply", "-auto-approve", file)
	_, out := waitAggregation[int64](t, c)
	t.Logf("%s", out)
	time.Sleep(500 * time.Millisecond)
	e, out := oneAggregation[int64](t, c)
	if len(e) != 1 || e[0].Key["cpu"] != int64(cpus[0]) {
		t.Fatalf("one_cpu sampled on CPUs other than cpu%d (online %v):\n%s", cpus[0], cpus, out)
	}
	t.Logf("%d ticks, all on cpu%d (online %v)", e[0].Value, cpus[0], cpus)
}

// showEntry is one entry of a show -json aggregation, its key's fields
// decoded as K.
type showEntry[K any] struct {
	Key   map[string]K `json:"key"`
	Value int64        `json:"value"`
}

// oneAggregation reads show -json of c's workspace: the entries of its one
// probe's one aggregation, and show's text; nil entries when the probe has
// none yet.
func oneAggregation[K any](t *testing.T, c *stkCLI) ([]showEntry[K], string) {
	t.Helper()
	var res struct {
		Probes []struct {
			Aggregations []struct {
				Entries []showEntry[K] `json:"entries"`
			} `json:"aggregations"`
		} `json:"probes"`
	}
	out := c.must("show", "-json")
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(res.Probes) != 1 || len(res.Probes[0].Aggregations) != 1 {
		return nil, out
	}
	return res.Probes[0].Aggregations[0].Entries, out
}

// waitAggregation polls oneAggregation until the probe has entries (a
// sample arrived; not a timing assert: 60 s is a bound for a stuck run).
func waitAggregation[K any](t *testing.T, c *stkCLI) ([]showEntry[K], string) {
	t.Helper()
	for i := 0; ; i++ {
		e, out := oneAggregation[K](t, c)
		if len(e) > 0 {
			return e, out
		}
		if i == 600 {
			t.Fatalf("no sample in 60 s:\n%s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
