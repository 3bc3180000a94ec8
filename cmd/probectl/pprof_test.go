package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// goTool is the go command that runs go tool pprof: pprof's own reader
// of the format, as a person (and Pyroscope's and Parca's parsers, which
// are github.com/google/pprof/profile) reads it.
func goTool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("go")
	if err != nil {
		missingTool(t, "go is not on $PATH: go tool pprof reads the profiles")
	}
	return p
}

// pprofTop runs go tool pprof -top -nodecount=1 on src (a file or a URL)
// and returns the hottest function by flat samples and its samples.
func pprofTop(t *testing.T, src string) (string, int64) {
	t.Helper()
	cmd := exec.Command(goTool(t), "tool", "pprof", "-top", "-nodecount=1", src)
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
	t.Logf("go tool pprof -top %s:\n%s", src, out)
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
	c.apply(fmt.Sprintf(`
probe "profile" "burn" {
  frequency = 499
  on_entry {
    when = comm == %q
    count "samples" {
      by = [comm, ustack, kstack]
    }
  }
}
`, comm))
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
}
