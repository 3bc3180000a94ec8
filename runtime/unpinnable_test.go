package runtime_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/runtime"
	"github.com/probectl/probectl/spec"
)

// On a kernel without BPF links on perf events (below 5.15: Debian 11's
// 5.10), a uprobe is a perf event that nothing can pin. The plan says so,
// apply refuses it before loading anything, and a session (probectl run)
// holds it and counts exactly. The host has perf links: the facts are its
// own with them taken away, which is what 5.10 reports (its profile).
func TestApplyRefusesUnpinnable(t *testing.T) {
	requireRoot(t)
	f := liveFacts(t)
	f.Perf.Link = false
	src := expectComm(strings.ReplaceAll(`probe "user" "held" {
  binary    = "WORK"
  functions = ["target"]
  attach    = "uprobe"
  on_entry {
    count "calls" { when = comm == "pcruntime" }
  }
}`, "WORK", workload(t)))
	cfg, diags := spec.Parse(map[string][]byte{"held.hcl": []byte(src)})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	out, diags := compiler.Compile(cfg, f)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	why := out.Probes[0].Unpinnable
	if !strings.Contains(why, "uprobe links are perf events") || !strings.Contains(why, "Linux 5.15") || !strings.Contains(why, "probectl run") {
		t.Fatalf("the plan's unpinnable = %q, want why and the fix", why)
	}

	w := workspace(t)
	if _, err := kapply(t, w, out); err == nil || !strings.Contains(err.Error(), "user.held: cannot apply: "+why) {
		t.Fatalf("apply = %v, want the refusal", err)
	}
	leakFree(t, w, nil)

	sess, err := runtime.Attach(out)
	if err != nil {
		t.Fatal(err)
	}
	const n = 17
	runWork(t, n)
	res := sess.Read()
	if len(res) != 1 || len(res[0].Aggregations) != 1 {
		t.Fatalf("session results %+v", res)
	}
	if got := values(res[0].Aggregations[0])[""]; got != n {
		t.Errorf("calls = %d, want %d", got, n)
	}
	held := &objects{}
	for _, o := range sess.Objects() {
		var kind string
		var id uint32
		if _, err := fmt.Sscanf(o, "%s %d", &kind, &id); err != nil {
			t.Fatal(err)
		}
		held.add(kind, id)
	}
	if err := sess.Close(); err != nil {
		t.Fatal(err)
	}
	noLeaks(t, held, nil, nil) // the kernel frees them once closed
}
