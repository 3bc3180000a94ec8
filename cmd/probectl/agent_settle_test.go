package main

import (
	"fmt"
	"github.com/probectl/probectl/internal/testenv"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Issue 18, defect 8: a spec written in two parts 3 s apart was applied
// after the first part (the debounce was capped at 10 times its value, and
// a valid prefix parses): the probe after the cut was destroyed with its
// counts and made again from 0. The agent now applies only a set that no
// process holds open for writing and that is unchanged for -debounce; the
// probe after the cut keeps its counts.
func TestAgentHalfWrittenSpec(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("applying probes needs root")
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		testenv.Absent(t, "the workload is built with gcc")
	}
	dir := t.TempDir()
	work := buildC(t, dir, "cut-work", serveWork)
	runWork := func(n int) {
		t.Helper()
		if out, err := exec.Command(work, strconv.Itoa(n)).CombinedOutput(); err != nil {
			t.Fatalf("workload: %v\n%s", err, out)
		}
	}
	probe := func(name string) string {
		return fmt.Sprintf("probe \"user\" %q {\n  binary    = %q\n  functions = [\"target\"]\n  on_entry {\n    count \"calls\" {}\n  }\n}\n", name, work)
	}
	specs := filepath.Join(dir, "specs")
	if err := os.Mkdir(specs, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(specs, "a.hcl")
	if err := os.WriteFile(file, []byte(probe("cuta")+probe("cutb")), 0o644); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	ws := fmt.Sprintf("agtcut-%d", os.Getpid())
	t.Cleanup(func() {
		var out strings.Builder
		run([]string{"-state-dir", state, "-workspace", ws, "destroy", "-auto-approve"}, &out, &out)
	})
	a := startAgent(t, state, ws, specs, "-resync", "10m") // -debounce 200ms: the old cap was 2 s
	s := a.waitStatus("cuta and cutb", func(s agentStatus) bool { return probesOf(s) == "user.cuta,user.cutb" && s.LastError == nil })
	serial := s.Applied.Serial
	calls := func(p string) float64 { return a.metric("probectl_count_user_" + p + "_calls_total") }
	runWork(7)
	if got := calls("cutb"); got != 7 {
		t.Fatalf("cutb counted %v calls, want 7", got)
	}

	// The first part: a valid spec of cuta and a new cutc, without cutb.
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(probe("cuta") + probe("cutc")); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	a.waitStatus("the wait on a.hcl, or an apply", func(s agentStatus) bool {
		return s.Pending != nil && strings.Contains(s.Pending.Reason, file) || s.Applied.Serial != serial
	})
	time.Sleep(3 * time.Second) // the original gap, longer than the old cap
	s = a.status()
	if probesOf(s) != "user.cuta,user.cutb" || s.Applied.Serial != serial || s.LastError != nil || s.Pending == nil {
		t.Fatalf("3 s into a half-written a.hcl: probes %s, serial %d (want %d), last error %+v, pending %+v\n%s",
			probesOf(s), s.Applied.Serial, serial, s.LastError, s.Pending, a.log)
	}
	// The second part, and the file closed.
	if _, err := f.WriteString(probe("cutb")); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	s = a.waitStatus("cuta, cutb and cutc", func(s agentStatus) bool {
		return probesOf(s) == "user.cuta,user.cutb,user.cutc" && s.LastError == nil && s.Pending == nil
	})
	if at := s.LastAttempt; at.Created != 1 || at.Destroyed != 0 || at.Replaced != 0 || at.Unchanged != 2 {
		t.Errorf("the complete file's apply: %+v, want 1 created, 2 unchanged", at)
	}
	if got := a.metric(`probectl_applies_total{result="applied"}`); got != 2 {
		t.Errorf("probectl_applies_total{result=\"applied\"} = %v, want 2: the start and the complete file\n%s", got, a.log)
	}
	runWork(5)
	if a, b, c := calls("cuta"), calls("cutb"), calls("cutc"); a != 12 || b != 12 || c != 5 {
		t.Errorf("after the complete file: cuta %v, cutb %v, cutc %v calls; want 12, 12 (its 7 kept), 5", a, b, c)
	}
	if !strings.Contains(a.log.String(), "waiting for the specs to settle") {
		t.Errorf("the log does not say the agent waited:\n%s", a.log)
	}
}
