package runtime_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/runtime"
)

// kheld is a kernel test's probes, applied, or held by a session where
// the kernel cannot pin their links (below 5.15: perf-event kprobes):
// there apply must refuse them, leaving nothing, as the plan says.
type kheld struct {
	w    *runtime.Workspace
	s    *runtime.State
	sess *runtime.Session
}

func khold(t *testing.T, w *runtime.Workspace, out *compiler.Output) *kheld {
	t.Helper()
	why := ""
	for _, p := range out.Probes {
		if p.Unpinnable != "" {
			why = p.Unpinnable
		}
	}
	if why == "" {
		s, err := kapply(t, w, out)
		if err != nil {
			t.Fatal(err)
		}
		return &kheld{w: w, s: s}
	}
	if _, err := kapply(t, w, out); err == nil || !strings.Contains(err.Error(), "cannot apply: "+why) {
		t.Fatalf("apply of unpinnable probes = %v, want the plan's refusal: %s", err, why)
	}
	leakFree(t, w, nil)
	t.Logf("held by a session, as probectl run holds them: %s", why)
	sess, err := runtime.Attach(out)
	if err != nil {
		t.Fatal(err)
	}
	return &kheld{w: w, sess: sess}
}

// agg reads the aggregation name of the probe at addr.
func (k *kheld) agg(t *testing.T, addr, name string) runtime.AggregationResult {
	t.Helper()
	if k.sess == nil {
		return aggregation(t, k.w, k.s, addr, name)
	}
	for _, r := range k.sess.Read() {
		if r.Address != addr {
			continue
		}
		if r.Error != "" {
			t.Fatal(r.Error)
		}
		for _, ar := range r.Aggregations {
			if ar.Name == name {
				return ar
			}
		}
	}
	t.Fatalf("%s has no aggregation %s", addr, name)
	return runtime.AggregationResult{}
}

// done destroys (or closes) the probes and checks that nothing is left.
func (k *kheld) done(t *testing.T) {
	t.Helper()
	if k.sess == nil {
		if _, _, err := k.w.Destroy(k.s, nil); err != nil {
			t.Fatal(err)
		}
		leakFree(t, k.w, nil)
		return
	}
	held := &objects{}
	for _, o := range k.sess.Objects() {
		var kind string
		var id uint32
		if _, err := fmt.Sscanf(o, "%s %d", &kind, &id); err != nil {
			t.Fatal(err)
		}
		held.add(kind, id)
	}
	if err := k.sess.Close(); err != nil {
		t.Fatal(err)
	}
	noLeaks(t, held, nil, nil)
}

// needCookies skips a test whose probes cover several functions (or
// events) and so key by the attach cookie, on a kernel without
// bpf_get_attach_cookie (5.15; Debian 11's 5.10): the plan refuses them
// there, as TestGolden's linux-5.10-*.refused shows.
func needCookies(t *testing.T, f *bpf.Facts) {
	t.Helper()
	if !f.Helpers.AttachCookie {
		t.Skipf("%s has no bpf_get_attach_cookie (5.15): a probe over several functions is refused at plan", f.Label())
	}
}

// needPerfLinks skips a test of apply itself (its pins, its atomicity)
// over kprobes on a kernel that cannot pin them (BPF links on perf
// events, 5.15): apply refuses them there (khold checks that).
func needPerfLinks(t *testing.T, f *bpf.Facts) {
	t.Helper()
	if !f.Perf.Link {
		t.Skipf("%s has no BPF links on perf events (5.15): apply cannot pin kprobes there", f.Label())
	}
}
