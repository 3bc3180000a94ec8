package main

import (
	"fmt"
	"github.com/probectl/probectl/internal/testenv"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// unitsWork calls observe with five known nanosecond values; observe
// returns -2 (ENOENT) for the first two and 0 for the others.
const unitsWork = `__attribute__((noinline)) long observe(long ns, long i) { return i < 2 ? -2 : 0; }
int main(void) {
	long v[] = {1000, 1000, 3000, 1L << 20, 2500000000L};
	long s = 0;
	for (long i = 0; i < 5; i++) s += observe(v[i], i);
	return s == 12345;
}
`

const unitsSpec = `probe "user" "u23" {
  binary    = "@WORK@"
  functions = ["observe"]
  on_entry {
    hist "lat" {
      value = arg0
      unit  = "ns"
    }
    sum "spent" {
      value = u64(arg0)
      unit  = "ns"
    }
    count "by_stack" { by = [comm, ustack] }
    count "stacks" {
      by            = [ustack]
      export_stacks = true
    }
  }
  on_exit {
    count "errs" { by = [errno_name(ret)] }
    count "named" { by = { why = errno_name(ret) } }
  }
}

probe "profile" "p23" {
  frequency = 99
  on_entry {
    count "samples" { by = [comm, ustack, kstack] }
  }
}
`

// Issue 23: metrics that read well. A real Prometheus scrapes probectl
// serve: a unit = "ns" histogram is served in seconds, its le the exact
// bounds (2^k-1)/1e9 and its _sum the sum of the observations; a sum in
// ns is a _seconds_total counter; errno_name(ret) is the label errno, or
// the name a by object gives it; stacks are not series (the count is
// served added up over them) unless export_stacks says so, and a
// profile's samples are one series per comm.
func TestServeUnitsLabelsStacks(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("applying probes needs root")
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		testenv.Absent(t, "the workload is built with gcc")
	}
	prometheusBinary(t, "prometheus")
	dir := t.TempDir()
	work := buildC(t, dir, "u23-work", unitsWork)
	specFile := filepath.Join(dir, "spec.hcl")
	if err := os.WriteFile(specFile, []byte(strings.ReplaceAll(unitsSpec, "@WORK@", work)), 0o644); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	ws := fmt.Sprintf("srv-u23-%d", os.Getpid())
	probectl := workspaceCLI(t, state, ws)
	plan := probectl("plan", specFile)
	for _, want := range []string{
		`hist "lat", in seconds as probectl_hist_user_u23_lat_seconds`,
		`sum "spent", served as a counter, in seconds as probectl_sum_user_u23_spent_seconds_total`,
	} {
		if !strings.Contains(plan, want) {
			t.Errorf("the plan does not say %q:\n%s", want, plan)
		}
	}
	probectl("apply", "-auto-approve", specFile)
	t.Cleanup(func() { probectl("destroy", "-auto-approve") })
	if out, err := exec.Command(work).CombinedOutput(); err != nil {
		t.Fatalf("workload: %v\n%s", err, out)
	}
	url := startServe(t, "probectl", "-state-dir", state, "-workspace", ws)
	body := scrape(t, url)
	checkScrapeLabels(t, body)
	promtoolCheckMetrics(t, filepath.Join(dir, "scrape.txt"), body)

	prom := startPrometheus(t, dir, strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/metrics"))
	prom.waitSeries(t, `probectl_hist_user_u23_lat_seconds_count`)
	const sumNS = 1000 + 1000 + 3000 + 1<<20 + 2500000000
	for _, c := range []struct {
		q    string
		want string
	}{
		{`probectl_hist_user_u23_lat_seconds_count`, "{} 5"},
		{`probectl_hist_user_u23_lat_seconds_sum`, fmt.Sprintf("{} %v", float64(sumNS)/1e9)},
		// 1000 ns is in [512, 1024): le 1023 ns; 3000 in [2048, 4096);
		// 2^20 in [2^20, 2^21); 2.5e9 in [2^31, 2^32).
		{`probectl_hist_user_u23_lat_seconds_bucket{le="5.11e-07"}`, `{le="5.11e-07"} 0`},
		{`probectl_hist_user_u23_lat_seconds_bucket{le="1.023e-06"}`, `{le="1.023e-06"} 2`},
		{`probectl_hist_user_u23_lat_seconds_bucket{le="4.095e-06"}`, `{le="4.095e-06"} 3`},
		{`probectl_hist_user_u23_lat_seconds_bucket{le="0.002097151"}`, `{le="0.002097151"} 4`},
		{`probectl_hist_user_u23_lat_seconds_bucket{le="4.294967295"}`, `{le="4.294967295"} 5`},
		{`probectl_sum_user_u23_spent_seconds_total`, fmt.Sprintf("{} %v", float64(sumNS)/1e9)},
		{`probectl_count_user_u23_errs_total`, `{errno="0"} 3 {errno="ENOENT"} 2`},
		{`probectl_count_user_u23_named_total`, `{why="0"} 3 {why="ENOENT"} 2`},
		{`probectl_count_user_u23_by_stack_total`, `{comm="u23-work"} 5`},
		// One loop, one stack: exported, it is the label.
		{`sum(probectl_count_user_u23_stacks_total{ustack!=""})`, `{} 5`},
		{`count(probectl_count_user_u23_stacks_total)`, `{} 1`},
	} {
		got, err := prom.query(c.q)
		if err != nil {
			t.Fatal(err)
		}
		if text := samplesText(got); text != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.q, text, c.want)
		}
	}
	// The profile's samples, every task on the machine's: one series per
	// comm, the stacks added up.
	prom.waitSeries(t, `probectl_count_profile_p23_samples_total`)
	got, err := prom.query(`probectl_count_profile_p23_samples_total`)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range got {
		if s.Metric["comm"] == "" || s.Metric["ustack"] != "" || s.Metric["kstack"] != "" {
			t.Errorf("profile sample series %v: want a comm label, no stack", s.Metric)
		}
	}
}

// scrape GETs the metrics at url.
func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %v %v\n%s", url, resp.Status, err, body)
	}
	return string(body)
}

// checkScrapeLabels checks the label names of the u23 and p23 families: no
// stack label but where export_stacks asks, errno for errno_name(ret).
func checkScrapeLabels(t *testing.T, body string) {
	t.Helper()
	var stackLines int
	for _, l := range strings.Split(body, "\n") {
		if !strings.HasPrefix(l, "probectl_count_user_u23_") && !strings.HasPrefix(l, "probectl_count_profile_p23_") {
			continue
		}
		if strings.Contains(l, "stack=") {
			if !strings.HasPrefix(l, "probectl_count_user_u23_stacks_total{") {
				t.Errorf("a stack is a series without export_stacks: %s", l)
			}
			stackLines++
		}
		if strings.Contains(l, "errno_name") {
			t.Errorf("a label named for the expression's text: %s", l)
		}
	}
	if stackLines == 0 {
		t.Errorf("export_stacks: no series with a ustack label in\n%s", body)
	}
}

// promtoolCheckMetrics writes body to file and runs promtool check
// metrics on it, which must find nothing.
func promtoolCheckMetrics(t *testing.T, file, body string) {
	t.Helper()
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	check := exec.Command(prometheusBinary(t, "promtool"), "check", "metrics")
	in, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	check.Stdin = in
	if out, err := check.CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("promtool check metrics (%s): %v\n%s", file, err, out)
	}
}

// samplesText writes samples sorted, each as its labels (without
// __name__, instance, job and applied) and value.
func samplesText(samples []promSample) string {
	var out []string
	for _, s := range samples {
		var labels []string
		for k, v := range s.Metric {
			switch k {
			case "__name__", "instance", "job", "applied":
				continue
			}
			labels = append(labels, fmt.Sprintf("%s=%q", k, v))
		}
		sort.Strings(labels)
		out = append(out, fmt.Sprintf("{%s} %v", strings.Join(labels, ","), s.Value))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}
