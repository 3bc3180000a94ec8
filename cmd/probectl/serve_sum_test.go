package main

import (
	"fmt"
	"github.com/probectl/probectl/internal/testenv"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// sumWork's delta returns 1 for even i and -3 for odd: a sum of its
// returns falls.
const sumWork = `__attribute__((noinline)) long delta(long i) { return i % 2 ? -3 : 1; }
int main(int argc, char **argv) {
	long n = 0, s = 0;
	for (char *p = argv[1]; *p; p++) n = n * 10 + (*p - '0');
	for (long i = 0; i < n; i++) s += delta(i);
	return s == 12345;
}
`

// Issue 18, defect 9: every sum was served as a counter, and rate() and
// increase() read a falling one as resets. A sum is a counter only where
// its values cannot be negative; a real scrape of probectl serve shows a
// sum of a signed ret, which falls, as a gauge (negative, without
// _total), and the sums that cannot fall as counters, with exact values.
func TestServeSignedSumIsGauge(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("applying probes needs root")
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		testenv.Absent(t, "the workload is built with gcc")
	}
	dir := t.TempDir()
	work := buildC(t, dir, "sum-work", sumWork)
	specFile := filepath.Join(dir, "spec.hcl")
	spec := fmt.Sprintf(`probe "user" "sums" {
  binary    = %q
  functions = ["delta"]
  on_exit {
    sum "net" {
      value = ret
    }
    sum "gains" {
      when  = ret > 0
      value = ret
    }
    sum "low" {
      value = u8(ret)
    }
  }
}
`, work)
	if err := os.WriteFile(specFile, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	ws := fmt.Sprintf("srv-sum-%d", os.Getpid())
	probectl := workspaceCLI(t, state, ws)
	// The plan says which.
	plan := probectl("plan", specFile)
	for _, want := range []string{`sum "net", served as a gauge`, `sum "gains", served as a counter`, `sum "low", served as a counter`} {
		if !strings.Contains(plan, want) {
			t.Errorf("the plan does not say %q:\n%s", want, plan)
		}
	}
	probectl("apply", "-auto-approve", specFile)
	t.Cleanup(func() { probectl("destroy", "-auto-approve") })
	if out, err := exec.Command(work, "10").CombinedOutput(); err != nil {
		t.Fatalf("workload: %v\n%s", err, out)
	}

	url := startServe(t, "probectl", "-state-dir", state, "-workspace", ws)
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %v %v\n%s", url, resp.Status, err, body)
	}
	types, values := map[string]string{}, map[string]string{}
	for _, l := range strings.Split(string(body), "\n") {
		if f := strings.Fields(l); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			types[f[2]] = f[3]
		} else if len(f) == 2 && strings.HasPrefix(l, "probectl_sum_user_sums_") {
			values[withoutApplied(f[0])] = f[1]
		}
	}
	// 10 calls: five return 1, five -3.
	for _, c := range []struct{ family, typ, value string }{
		{"probectl_sum_user_sums_net", "gauge", "-10"},
		{"probectl_sum_user_sums_gains_total", "counter", "5"},
		{"probectl_sum_user_sums_low_total", "counter", "1270"}, // 5*1 + 5*253
	} {
		if types[c.family] != c.typ || values[c.family] != c.value {
			t.Errorf("%s: TYPE %q, value %q; want %s %s", c.family, types[c.family], values[c.family], c.typ, c.value)
		}
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", body)
	}
}
