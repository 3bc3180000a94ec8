package main

import (
	"fmt"
	"github.com/probectl/probectl/internal/testenv"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// pprofBin is go tool pprof's binary: pprof's own reader of the format,
// as a person (and Pyroscope's and Parca's parsers, which are
// github.com/google/pprof/profile) reads it. Go's distribution builds it
// into the build cache at the first go tool pprof (minutes on a busy
// machine): built once per test process, then run directly.
var pprofBin = sync.OnceValues(func() (string, error) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("go is not on $PATH: go tool pprof reads the profiles")
	}
	out, err := exec.Command(goCmd, "tool", "-n", "pprof").Output()
	if err != nil {
		return "", fmt.Errorf("go tool -n pprof: %v", err)
	}
	return strings.TrimSpace(string(out)), nil
})

// pprofTop runs go tool pprof -top -nodecount=1 on src (a file or a URL)
// and returns the hottest function by flat samples and its samples.
func pprofTop(t *testing.T, src string) (string, int64) {
	t.Helper()
	bin, err := pprofBin()
	if err != nil {
		testenv.Absent(t, "%v", err)
	}
	start := time.Now()
	cmd := exec.Command(bin, "-top", "-nodecount=1", src)
	cmd.Env = append(os.Environ(), "PPROF_TMPDIR="+t.TempDir(), "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go tool pprof -top %s: %v\n%s", src, err, out)
	}
	// "      flat  flat%   sum%        cum   cum%" then one row:
	// "       449 89.98% 89.98%        449 89.98%  stk_hot"
	row := regexp.MustCompile(`(?m)^\s*(\d+)\s+[\d.]+%\s+[\d.]+%\s+\d+\s+[\d.]+%\s+(.+)$`).FindStringSubmatch(string(out))
	if row == nil {
		t.Fatalf("go tool pprof -top %s: no row\n%s", src, out)
	}
	n, _ := strconv.ParseInt(row[1], 10, 64)
	t.Logf("go tool pprof -top %s (%v):\n%s", src, time.Since(start).Round(time.Millisecond), out)
	return strings.TrimSpace(row[2]), n
}

// foldedHottest is the leaf with the most samples in show -folded's
// output, and its samples.
func foldedHottest(t *testing.T, folded string) (string, int64) {
	t.Helper()
	flat := map[string]int64{}
	for _, l := range strings.Split(strings.TrimSpace(folded), "\n") {
		i := strings.LastIndexByte(l, ' ')
		n, err := strconv.ParseInt(l[i+1:], 10, 64)
		if err != nil {
			t.Fatalf("folded line %q", l)
		}
		frames := strings.Split(l[:i], ";")
		flat[strings.TrimSuffix(frames[len(frames)-1], "_[k]")] += n
	}
	best := ""
	for f, n := range flat {
		if best == "" || n > flat[best] {
			best = f
		}
	}
	return best, flat[best]
}

// A real profile probe on a busy loop of the test's own (stk_hot, 9 parts
// of 10): show -pprof writes a profile that go tool pprof reads with the
// same hottest function, and as many samples of it, as show -folded
// prints; serve answers the same at /debug/pprof/probectl/ADDRESS, which
// go tool pprof fetches over HTTP as a scraper does. (Parca and Pyroscope
// cannot be installed here: their parsers are this same package.)
func TestPprofProfile(t *testing.T) {
	path, comm := buildStackWork(t, "ppf")
	c := newStkCLI(t)
	c.apply(burnProfileSpec(comm))
	// The workload stays (it exits at the end): serve symbolizes a
	// running process's stacks through its maps, as a scraper finds it.
	exit := startWork(t, -1, path, "burn", "3")
	defer exit()
	syms := filepath.Dir(path)
	folded := c.must("show", "-folded", "-symbols", syms)
	want, wantN := foldedHottest(t, folded)
	if want != "stk_hot" {
		t.Fatalf("the folded output's hottest function is %q, not stk_hot:\n%s", want, folded)
	}
	file := filepath.Join(t.TempDir(), "burn.pb.gz")
	c.must("show", "-pprof", file, "-symbols", syms)
	if got, n := pprofTop(t, file); got != want || n != wantN {
		t.Errorf("go tool pprof -top: %s %d samples, the folded output %s %d", got, n, want, wantN)
	}

	url := strings.TrimSuffix(startServe(t, "probectl", "-state-dir", c.state, "-workspace", c.ws), "/metrics")
	if got, n := pprofTop(t, url+"/debug/pprof/probectl/profile.burn"); got != want || n != wantN {
		t.Errorf("go tool pprof -top of serve: %s %d samples, the folded output %s %d", got, n, want, wantN)
	}
	// What no probe is: 404 and why, as text.
	for path, why := range map[string]string{
		"/debug/pprof/probectl/nodot":                      "want KIND.NAME",
		"/debug/pprof/probectl/profile.absent":             "is not applied in workspace",
		"/debug/pprof/probectl/profile.burn?aggregation=x": `no aggregation "x"`,
	} {
		resp, err := http.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), why) ||
			!strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
			t.Errorf("GET %s: %d %q (%s), want 404 saying %q", path, resp.StatusCode, body, resp.Header.Get("Content-Type"), why)
		}
	}
}

// burnProfileSpec profiles the workload of task name comm at 499 Hz, by
// comm, user and kernel stack.
func burnProfileSpec(comm string) string {
	return fmt.Sprintf(`
probe "profile" "burn" {
  frequency = 499
  on_entry {
    when = comm == %q
    count "samples" {
      by = [comm, ustack, kstack]
    }
  }
}
`, comm)
}

// run -pprof writes the profile at the end, and run (without -v) prints
// the aggregation's summary and its largest stacks, not all of them.
func TestPprofRun(t *testing.T) {
	path, comm := buildStackWork(t, "ppr")
	spec := filepath.Join(t.TempDir(), "burn.hcl")
	if err := os.WriteFile(spec, []byte(burnProfileSpec(comm)), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "run.pb.gz")
	out := runWhileWorking(t, spec, path, []string{"burn", "2"}, "-duration", "4s", "-interval", "0", "-pprof", file, "-symbols", filepath.Dir(path))
	text := strings.Join(out, "\n")
	if !regexp.MustCompile(`(?m)^    [1-9][0-9]* samples, [0-9]+ lost, [1-9][0-9]* distinct stacks`).MatchString(text) {
		t.Errorf("run printed no summary of the stacks:\n%s", text)
	}
	if n := strings.Count(text, "    count: "); n < 1 || n > runTopStacks {
		t.Errorf("run printed %d stacks: want 1 to %d\n%s", n, runTopStacks, text)
	}
	if got, _ := pprofTop(t, file); got != "stk_hot" {
		t.Errorf("go tool pprof -top of run -pprof: %s, want stk_hot", got)
	}
}
