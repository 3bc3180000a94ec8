package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// initAllocBudget is what one of probectl's own packages may allocate in
// its package init, in allocations. Every command pays every linked
// package's init before it parses its arguments: a table built or a file
// decoded there (the route-cost JSON was 1,275) belongs behind a
// sync.OnceValue, built when first used.
const initAllocBudget = 300

// TestInitWork builds probectl, runs probectl version with
// GODEBUG=inittrace=1 (the runtime's own count of each package init's
// allocations), and holds probectl's packages to initAllocBudget. Counts,
// not times: they hold on a loaded machine. bench/startup.sh measures the
// time and the pages.
func TestInitWork(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "probectl")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "version")
	// The runtime reads the first GODEBUG of the environment: one only.
	godebug := "inittrace=1"
	for _, kv := range os.Environ() {
		if v, ok := strings.CutPrefix(kv, "GODEBUG="); ok && v != "" {
			godebug = v + "," + godebug
		} else if !ok {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "GODEBUG="+godebug)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("probectl version: %v\n%s", err, stderr.Bytes())
	}
	const own = "github.com/probectl/probectl/"
	var seen, total int
	sc := bufio.NewScanner(bytes.NewReader(stderr.Bytes()))
	for sc.Scan() {
		// init PKG @T ms, C ms clock, B bytes, A allocs
		f := strings.Fields(sc.Text())
		if len(f) != 11 || f[0] != "init" || f[10] != "allocs" {
			continue
		}
		allocs, err := strconv.Atoi(f[9])
		if err != nil {
			t.Fatalf("inittrace line %q: %v", sc.Text(), err)
		}
		total += allocs
		if !strings.HasPrefix(f[1], own) {
			continue
		}
		seen++
		if allocs > initAllocBudget {
			t.Errorf("package %s allocates %d times in its init (budget %d): build its tables when first used", f[1], allocs, initAllocBudget)
		}
	}
	// The trace must have been read: a format change would pass silently.
	if seen == 0 {
		t.Fatalf("no init line of a probectl package in GODEBUG=inittrace=1's output:\n%s", stderr.Bytes())
	}
	t.Logf("%d probectl packages with init work; every package's inits: %d allocations", seen, total)
}
