package main

import (
	"bufio"
	"fmt"
	"github.com/probectl/probectl/internal/testenv"
	"math"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/probectl/probectl/internal/buildinfo"
)

// prometheusBinary finds a program of Debian's prometheus package
// (prometheus, promtool), installing the package when missing. It skips
// only when it cannot be installed, never under CI=true.
func prometheusBinary(t *testing.T, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	out, err := exec.Command("sh", "-c", "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus)").CombinedOutput()
	if p, lerr := exec.LookPath(name); lerr == nil {
		return p
	}
	testenv.Absent(t, "%s is missing and the prometheus package cannot be installed: %v\n%s", name, err, out)
	return ""
}

// TestDeployPrometheus checks deploy/'s example Prometheus config and alert
// rules with promtool, and runs the rules' unit tests.
func TestDeployPrometheus(t *testing.T) {
	promtool := prometheusBinary(t, "promtool")
	for _, args := range [][]string{
		{"check", "config", "prometheus.yml"},
		{"check", "rules", "probectl-alerts.yml"},
		{"test", "rules", "probectl-alerts_test.yml"},
	} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = "../../deploy"
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// freePort returns a loopback port nothing listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

const serveWork = `__attribute__((noinline)) long target(long x) { return x * 2; }
int main(int argc, char **argv) {
	long n = 0, s = 0;
	for (char *p = argv[1]; *p; p++) n = n * 10 + (*p - '0');
	for (long i = 0; i < n; i++) s += target(i);
	return s == 0;
}
`

const serveSpec = `probe "user" "srv" {
  binary    = "@WORK@/srv-work"
  functions = ["target"]
  on_entry {
    count "calls" { by = [comm, func] }
    sum "total" { value = arg0 }
    min "low" { value = arg0 }
    max "high" { value = arg0 }
    hist "args" { value = arg0 }
    lhist "lin" {
      value = arg0
      by    = [comm]
      min   = 0
      max   = 100
      step  = 10
    }
  }
}
`

// buildC builds src (C) into a static binary dir/name with gcc, for a
// user probe's workload.
func buildC(tb testing.TB, dir, name, src string) string {
	tb.Helper()
	c := filepath.Join(dir, name+".c")
	if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
		tb.Fatal(err)
	}
	bin := filepath.Join(dir, name)
	if out, err := exec.Command("gcc", "-O0", "-static", "-o", bin, c).CombinedOutput(); err != nil {
		tb.Fatalf("gcc: %v\n%s", err, out)
	}
	return bin
}

// TestServePrometheus: a real Prometheus scrapes probectl serve after a
// workload of known counts; PromQL returns exactly those counts.
func TestServePrometheus(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("applying probes needs root")
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("the workload is built with gcc")
	}
	prometheusBinary(t, "prometheus")
	dir := t.TempDir()
	buildC(t, dir, "srv-work", serveWork)
	specFile := filepath.Join(dir, "spec.hcl")
	if err := os.WriteFile(specFile, []byte(strings.ReplaceAll(serveSpec, "@WORK@", dir)), 0o644); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	ws := fmt.Sprintf("srv-prom-%d", os.Getpid())
	probectl := workspaceCLI(t, state, ws)
	probectl("apply", "-auto-approve", specFile)
	t.Cleanup(func() { probectl("destroy", "-auto-approve") })
	if out, err := exec.Command(filepath.Join(dir, "srv-work"), "25").CombinedOutput(); err != nil {
		t.Fatalf("workload: %v\n%s", err, out)
	}

	// probectl serve, as its own process (the test binary runs as probectl).
	target := strings.TrimSuffix(strings.TrimPrefix(startServe(t, "probectl", "-state-dir", state, "-workspace", ws), "http://"), "/metrics")

	prom := startPrometheus(t, dir, target)

	// query runs an instant query and returns its samples by their labels.
	query := func(q string) (map[string]float64, error) {
		samples, err := prom.query(q)
		if err != nil {
			return nil, err
		}
		out := map[string]float64{}
		for _, s := range samples {
			var labels []string
			for _, k := range []string{"le", "comm", "func", "handler"} {
				if s.Metric[k] != "" {
					labels = append(labels, k+"="+s.Metric[k])
				}
			}
			out[strings.Join(labels, ",")] = s.Value
		}
		return out, nil
	}
	prom.waitSeries(t, `probectl_count_user_srv_calls_total`)
	expect := func(q string, want map[string]float64) {
		t.Helper()
		got, err := query(q)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s:\n got %v\nwant %v", q, got, want)
		}
	}
	expect(`up{job="probectl"}`, map[string]float64{"": 1})
	expect(`probectl_count_user_srv_calls_total`, map[string]float64{"comm=srv-work,func=target": 25})
	expect(`probectl_sum_user_srv_total`, map[string]float64{"": 300}) // 0+1+...+24; arg0 is untyped: a gauge
	expect(`probectl_min_user_srv_low`, map[string]float64{"": 0})
	expect(`probectl_max_user_srv_high`, map[string]float64{"": 24})
	// hist: le is the highest integer of each log2 bucket; cumulative.
	expect(`probectl_hist_user_srv_args_bucket`, map[string]float64{
		"le=-1": 0, "le=0": 1, "le=1": 2, "le=3": 4, "le=7": 8, "le=15": 16, "le=31": 25, "le=+Inf": 25,
	})
	expect(`probectl_hist_user_srv_args_count`, map[string]float64{"": 25})
	// _sum is the kernel's sum of the observations: 0+1+...+24.
	expect(`probectl_hist_user_srv_args_sum`, map[string]float64{"": 300})
	expect(`probectl_lhist_user_srv_lin_sum`, map[string]float64{"comm=srv-work": 300})
	expect(`probectl_lhist_user_srv_lin_bucket`, map[string]float64{
		"le=-1,comm=srv-work": 0, "le=9,comm=srv-work": 10, "le=19,comm=srv-work": 20, "le=29,comm=srv-work": 25,
		"le=39,comm=srv-work": 25, "le=49,comm=srv-work": 25, "le=59,comm=srv-work": 25, "le=69,comm=srv-work": 25,
		"le=79,comm=srv-work": 25, "le=89,comm=srv-work": 25, "le=99,comm=srv-work": 25, "le=+Inf,comm=srv-work": 25,
	})
	// histogram_quantile interpolates inside the bucket that holds the
	// rank: 12.5 of 25 lies in (7, 15] between cumulative 8 and 16.
	for _, c := range []struct {
		q      float64
		lo, hi float64
		rank   float64
		cumLo  float64
		cumHi  float64
	}{{0.5, 7, 15, 12.5, 8, 16}, {0.9, 15, 31, 22.5, 16, 25}} {
		got, err := query(fmt.Sprintf(`histogram_quantile(%g, probectl_hist_user_srv_args_bucket)`, c.q))
		if err != nil {
			t.Fatal(err)
		}
		want := c.lo + (c.hi-c.lo)*(c.rank-c.cumLo)/(c.cumHi-c.cumLo)
		if v := got[""]; math.Abs(v-want) > 1e-9 || v <= c.lo || v > c.hi {
			t.Errorf("histogram_quantile(%g) = %v, want %v, in (%g, %g]", c.q, v, want, c.lo, c.hi)
		}
	}
	expect(`probectl_probe_hits_total{probe="user.srv"}`, map[string]float64{"handler=entry": 25, "handler=exit": 0})
	expect(`probectl_probe_missed_hits_total{probe="user.srv"}`, map[string]float64{"": 0})
	expect(`probectl_probe_dropped_events_total{probe="user.srv"}`, map[string]float64{"": 0})
	expect(`sum(probectl_probe_dropped_keys_total{probe="user.srv"})`, map[string]float64{"": 0})
	expect(`count(probectl_probe_dropped_keys_total{probe="user.srv"})`, map[string]float64{"": 6})
	expect(`probectl_probe_info{probe="user.srv",route="uprobe",attach!="",digest!=""}`, map[string]float64{"": 1})
	expect(`probectl_scrape_series_cut`, map[string]float64{"": 0})
	expect(`probectl_up`, map[string]float64{"": 1})
	expect(`probectl_probe_drift`, map[string]float64{"": 0})
	// The build serving: here the test binary's (go test stamps no commit).
	bi := buildinfo.Read()
	expect(fmt.Sprintf(`count(probectl_build_info{version=%q,commit=%q,goversion=%q} == 1)`, bi.Version, bi.Commit, bi.GoVersion), map[string]float64{"": 1})

	// The maps are read at each scrape: more work shows at the next one.
	waitFor := func(q string, want map[string]float64) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			got, err := query(q)
			if err == nil && fmt.Sprint(got) == fmt.Sprint(want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: got %v (%v), want %v", q, got, err, want)
			}
			time.Sleep(300 * time.Millisecond)
		}
	}
	if out, err := exec.Command(filepath.Join(dir, "srv-work"), "25").CombinedOutput(); err != nil {
		t.Fatalf("workload: %v\n%s", err, out)
	}
	waitFor(`probectl_count_user_srv_calls_total`, map[string]float64{"comm=srv-work,func=target": 50})
	expect(`probectl_hist_user_srv_args_bucket{le="15"}`, map[string]float64{"le=15": 32})

	// probectl dashboard's panels for this spec: every query returns data
	// from this Prometheus (the variables given values), and the counter's
	// rate is keyed as the spec's by says.
	var dash, derr strings.Builder
	if code := run([]string{"dashboard", specFile}, &dash, &derr); code != 0 {
		t.Fatalf("probectl dashboard: exit %d\n%s", code, derr.String())
	}
	queries := dashboardQueries(t, []byte(dash.String()))
	if len(queries) != 6+4 {
		t.Errorf("dashboard: %d queries, want 10 (6 aggregations, 4 probe counters)", len(queries))
	}
	for _, q := range queries {
		deadline := time.Now().Add(30 * time.Second)
		for {
			got, err := query(q)
			if err == nil && len(got) > 0 {
				if strings.Contains(q, "probectl_count_user_srv_calls_total") && fmt.Sprint(keys(got)) != "[comm=srv-work,func=target]" {
					t.Errorf("%s: %v, want one series of comm=srv-work,func=target", q, got)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("dashboard query %s: no data (%v)", q, err)
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
	}

	// Drift: a link pin removed. The probe's counters are left out (not
	// zeros, which would read as a counter reset) and the drift shows.
	links, _ := filepath.Glob("/sys/fs/bpf/probectl/" + ws + "/user-srv-*/link_0")
	if len(links) != 1 {
		t.Fatalf("link pins: %v", links)
	}
	if err := os.Remove(links[0]); err != nil {
		t.Fatal(err)
	}
	waitFor(`probectl_probe_drift{probe="user.srv"}`, map[string]float64{"": 1})
	expect(`probectl_probe_hits_total{probe="user.srv"}`, map[string]float64{})
}

// BenchmarkServeScrape scrapes /metrics over 10,000 aggregation series
// (one count keyed by 10,000 distinct arguments), read from the kernel's
// map at each scrape, gzipped as Prometheus asks. cpu-ms/scrape is
// probectl's own CPU (user and system: the map reads are system calls, and
// the garbage collector's threads count) per scrape.
func BenchmarkServeScrape(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("applying probes needs root")
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		b.Skip("the workload is built with gcc")
	}
	dir := b.TempDir()
	buildC(b, dir, "srv-work", serveWork)
	specFile := filepath.Join(dir, "spec.hcl")
	spec := fmt.Sprintf(`probe "user" "srvbench" {
  binary    = %q
  functions = ["target"]
  on_entry {
    count "by_arg" {
      by       = [comm, arg0]
      max_keys = 10240
    }
  }
}
`, filepath.Join(dir, "srv-work"))
	if err := os.WriteFile(specFile, []byte(spec), 0o644); err != nil {
		b.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	ws := fmt.Sprintf("srv-bench-%d", os.Getpid())
	probectl := func(args ...string) {
		var out strings.Builder
		if code := run(append([]string{"-state-dir", state, "-workspace", ws}, args...), &out, &out); code != 0 {
			b.Fatalf("probectl %v: exit %d\n%s", args, code, out.String())
		}
	}
	probectl("apply", "-auto-approve", specFile)
	defer probectl("destroy", "-auto-approve")
	if out, err := exec.Command(filepath.Join(dir, "srv-work"), "10000").CombinedOutput(); err != nil {
		b.Fatalf("workload: %v\n%s", err, out)
	}
	h := metricsHandler(state, ws, 100000)
	// As Prometheus asks: gzip, the text format.
	scrape := func(gzip bool) string {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/metrics", nil)
		if gzip {
			req.Header.Set("Accept-Encoding", "gzip")
		}
		h.ServeHTTP(rec, req)
		return rec.Body.String()
	}
	if n := strings.Count(scrape(false), "\nprobectl_count_user_srvbench_by_arg_total{"); n != 10000 {
		b.Fatalf("%d series, want 10000", n)
	}
	var before, after syscall.Rusage
	b.ResetTimer()
	syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	for i := 0; i < b.N; i++ {
		scrape(true)
	}
	syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	b.StopTimer()
	cpu := time.Duration(after.Utime.Nano() - before.Utime.Nano() + after.Stime.Nano() - before.Stime.Nano())
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/scrape")
	b.ReportMetric(10000, "series")
}

func keys(m map[string]float64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// A probe replaced starts its counters from 0: its series carry the
// serial of the apply that made it, so Prometheus sees new series, not a
// counter that went on (250 calls made, 100 then 150 counted: without the
// label, increase() would say 50).
func TestServeReplacedProbeIsNewSeries(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("applying probes needs root")
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("the workload is built with gcc")
	}
	dir := t.TempDir()
	work := buildC(t, dir, "rep-work", serveWork)
	state := filepath.Join(dir, "state")
	ws := fmt.Sprintf("srv-rep-%d", os.Getpid())
	specFile := filepath.Join(dir, "spec.hcl")
	probectl := func(args ...string) {
		t.Helper()
		var out strings.Builder
		if code := run(append([]string{"-state-dir", state, "-workspace", ws}, args...), &out, &out); code != 0 {
			t.Fatalf("probectl %v: exit %d\n%s", args, code, out.String())
		}
	}
	apply := func(when string) {
		t.Helper()
		spec := fmt.Sprintf("probe \"user\" \"rep\" {\n  binary    = %q\n  functions = [\"target\"]\n  on_entry {\n    count \"calls\" { when = %s }\n  }\n}\n", work, when)
		if err := os.WriteFile(specFile, []byte(spec), 0o644); err != nil {
			t.Fatal(err)
		}
		probectl("apply", "-auto-approve", specFile)
	}
	apply("arg0 >= 0")
	t.Cleanup(func() { probectl("destroy", "-auto-approve") })
	h := metricsHandler(state, ws, 1000)
	series := func() []string {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		var out []string
		for _, line := range strings.Split(rec.Body.String(), "\n") {
			if strings.HasPrefix(line, "probectl_count_user_rep_calls_total{") {
				out = append(out, line)
			}
		}
		return out
	}
	if out, err := exec.Command(work, "100").CombinedOutput(); err != nil {
		t.Fatalf("workload: %v\n%s", err, out)
	}
	before := series()
	apply("arg0 > -1") // another spec: the probe is replaced
	if out, err := exec.Command(work, "150").CombinedOutput(); err != nil {
		t.Fatalf("workload: %v\n%s", err, out)
	}
	after := series()
	if len(before) != 1 || len(after) != 1 || !strings.HasSuffix(before[0], " 100") || !strings.HasSuffix(after[0], " 150") {
		t.Fatalf("series before %q, after %q", before, after)
	}
	label := func(s string) string { return s[strings.Index(s, "{"):strings.Index(s, "}")] }
	if label(before[0]) == label(after[0]) || !strings.Contains(before[0], `applied="`) {
		t.Errorf("the replaced probe's series has the labels of the old one: %s → %s", before[0], after[0])
	}
}

// startServe starts bin's serve (the test binary runs as probectl) on a
// loopback port with the global flags args, and returns the metrics URL
// it printed; at the test's end it is stopped with SIGTERM and must exit 0.
func startServe(t *testing.T, bin string, args ...string) string {
	t.Helper()
	serve := exec.Command(bin, append(args, "serve", "-listen", "127.0.0.1:0")...)
	stdout, err := serve.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	serve.Stderr = os.Stderr
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		serve.Process.Signal(syscall.SIGTERM)
		if err := serve.Wait(); err != nil {
			t.Errorf("probectl serve on SIGTERM: %v (want exit 0)", err)
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.Contains(line, "http://") {
		t.Fatalf("serve said %q: %v", line, err)
	}
	return strings.TrimSpace(line[strings.Index(line, "http://"):])
}
