package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/probectl/probectl/internal/engine"
)

// agentStatus is /status as the agent serves it.
type agentStatus = engine.DirStatus

// agentProc is a probectl agent running as its own process.
type agentProc struct {
	t    testing.TB
	cmd  *exec.Cmd
	base string // http://ADDR
	log  *syncWriter
	done chan error
}

func startAgent(t testing.TB, state, ws, config string, extra ...string) *agentProc {
	t.Helper()
	args := append([]string{"-state-dir", state, "-workspace", ws, "agent", "-config", config,
		"-listen", "127.0.0.1:0", "-debounce", "200ms", "-log-json"}, extra...)
	return startAgentCmd(t, exec.Command("probectl", args...))
}

// startAgentCmd starts an agent's command line (through a shell that sets
// limits, say) and reads the address it prints.
func startAgentCmd(t testing.TB, cmd *exec.Cmd) *agentProc {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	log := &syncWriter{w: &strings.Builder{}}
	cmd.Stderr = log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	a := &agentProc{t: t, cmd: cmd, log: log, done: make(chan error, 1)}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		t.Fatalf("agent: %v\n%s", err, log)
	}
	go func() { a.done <- cmd.Wait() }()
	i := strings.Index(line, "http://")
	if i < 0 {
		cmd.Process.Kill()
		t.Fatalf("agent said %q\n%s", line, log)
	}
	a.base = strings.TrimSuffix(strings.Fields(line[i:])[0], "/metrics,")
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-a.done
		}
	})
	return a
}

// syncWriter lets the test read the log while the process writes it.
type syncWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.String()
}

func (a *agentProc) get(path string) string {
	a.t.Helper()
	resp, err := http.Get(a.base + path)
	if err != nil {
		a.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		a.t.Fatalf("GET %s: %s\n%s", path, resp.Status, b)
	}
	return string(b)
}

func (a *agentProc) status() agentStatus {
	a.t.Helper()
	var s agentStatus
	if err := json.Unmarshal([]byte(a.get("/status")), &s); err != nil {
		a.t.Fatal(err)
	}
	return s
}

// metric returns the value of the series written exactly as SERIES in
// /metrics, or -1 when there is none.
func (a *agentProc) metric(series string) float64 {
	a.t.Helper()
	for _, line := range strings.Split(a.get("/metrics"), "\n") {
		if v, ok := strings.CutPrefix(withoutApplied(line), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				a.t.Fatal(err)
			}
			return f
		}
	}
	return -1
}

// appliedLabel is the label of the apply that made a probe (metrics.AppliedLabel).
var appliedLabel = regexp.MustCompile(`applied="[0-9]*",?`)

// withoutApplied is a series' line without its applied label, so that a
// test names series as it means them.
func withoutApplied(line string) string {
	line = appliedLabel.ReplaceAllString(line, "")
	line = strings.Replace(line, ",}", "}", 1)
	return strings.Replace(line, "{}", "", 1)
}

// waitStatus waits until ok holds for /status.
func (a *agentProc) waitStatus(what string, ok func(agentStatus) bool) agentStatus {
	a.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		s := a.status()
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			b, _ := json.MarshalIndent(s, "", "  ")
			a.t.Fatalf("waiting for %s; status:\n%s\nlog:\n%s", what, b, a.log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (a *agentProc) signal(sig syscall.Signal) error {
	a.t.Helper()
	a.cmd.Process.Signal(sig)
	select {
	case err := <-a.done:
		return err
	case <-time.After(60 * time.Second):
		a.t.Fatalf("agent did not stop on %v\n%s", sig, a.log)
		return nil
	}
}

func probesOf(s agentStatus) string {
	if s.Applied == nil {
		return "<none>"
	}
	return strings.Join(s.Applied.Probes, ",")
}

// TestAgent drives a real agent process through the transitions its users
// make: specs written, broken, fixed, and a git repository's commits
// checked out, with a workload of known calls counted after each.
func TestAgent(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("applying probes needs root")
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("the workload is built with gcc")
	}
	dir := t.TempDir()
	work := buildC(t, dir, "agt-work", serveWork)
	runWork := func(n int) {
		t.Helper()
		if out, err := exec.Command(work, strconv.Itoa(n)).CombinedOutput(); err != nil {
			t.Fatalf("workload: %v\n%s", err, out)
		}
	}
	probe := func(name, fn string) string {
		return fmt.Sprintf("probe \"user\" %q {\n  binary    = %q\n  functions = [%q]\n  on_entry {\n    count \"calls\" {}\n  }\n}\n", name, work, fn)
	}
	specs := filepath.Join(dir, "specs")
	if err := os.Mkdir(specs, 0o755); err != nil {
		t.Fatal(err)
	}
	// write puts a file into place by rename, as editors and git-sync do.
	write := func(name, text string) {
		t.Helper()
		tmp := filepath.Join(specs, "."+name+".tmp")
		if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(specs, name)); err != nil {
			t.Fatal(err)
		}
	}
	state := filepath.Join(dir, "state")
	ws := fmt.Sprintf("agent-%d", os.Getpid())
	pins := "/sys/fs/bpf/probectl/" + ws
	t.Cleanup(func() {
		var out strings.Builder
		run([]string{"-state-dir", state, "-workspace", ws, "destroy", "-auto-approve"}, &out, &out)
	})

	a := startAgent(t, state, ws, specs)
	calls := `probectl_count_user_agt_calls_total`
	errs := func(stage string) float64 { return a.metric(`probectl_apply_errors_total{stage="` + stage + `"}`) }

	// An empty directory is an error, not "destroy everything".
	s := a.waitStatus("the empty directory's error", func(s agentStatus) bool { return s.LastError != nil })
	if s.LastError.Stage != "read" || !strings.Contains(s.LastError.Diagnostics[0].Detail, "no *.hcl files") {
		t.Errorf("empty directory: %+v", s.LastError)
	}
	if got := errs("read"); got != 1 {
		t.Errorf("read errors %v, want 1", got)
	}
	if got := a.get("/healthz"); got != "ok\n" {
		t.Errorf("/healthz: %q", got)
	}

	// A spec written → applied; the workload's calls counted exactly.
	write("a.hcl", probe("agt", "target"))
	s = a.waitStatus("agt applied", func(s agentStatus) bool { return probesOf(s) == "user.agt" && s.LastError == nil })
	liveDigest := s.Applied.Digest
	runWork(7)
	if got := a.metric(calls); got != 7 {
		t.Errorf("%s = %v, want 7", calls, got)
	}
	if got := a.metric(`probectl_last_apply_ok`); got != 1 {
		t.Errorf("probectl_last_apply_ok = %v after an apply", got)
	}

	// Broken at line 3 → the error at its line; the old probe counts on.
	write("a.hcl", "probe \"user\" \"agt\" {\n  binary = \"/bin/true\"\n  functions = [target]\n}\n")
	s = a.waitStatus("the compile error", func(s agentStatus) bool { return s.LastError != nil && s.LastError.Stage == "compile" })
	if d := s.LastError.Diagnostics; len(d) == 0 || d[0].File != filepath.Join(specs, "a.hcl") || d[0].Line != 3 {
		t.Errorf("diagnostics %+v, want %s line 3", d, filepath.Join(specs, "a.hcl"))
	}
	if s.Applied == nil || s.Applied.Digest != liveDigest {
		t.Errorf("applied changed on a failed compile: %+v", s.Applied)
	}
	runWork(5)
	if got := a.metric(calls); got != 12 {
		t.Errorf("%s = %v after a broken spec, want 12: the old probe counts on", calls, got)
	}
	if got := errs("compile"); got != 1 {
		t.Errorf("compile errors %v, want 1", got)
	}
	if got := a.metric(`probectl_last_apply_ok`); got != 0 {
		t.Errorf("probectl_last_apply_ok = %v after a failure", got)
	}
	if !strings.Contains(a.log.String(), `"stage":"compile"`) || !strings.Contains(a.log.String(), `a.hcl:3:`) {
		t.Errorf("the log has no line with the compile error at a.hcl:3:\n%s", a.log)
	}

	// Fixed, and a second probe in a second file: the first is unchanged
	// (its count goes on), the second created.
	write("a.hcl", probe("agt", "target"))
	write("b.hcl", probe("agt2", "target"))
	a.waitStatus("agt and agt2", func(s agentStatus) bool { return probesOf(s) == "user.agt,user.agt2" && s.LastError == nil })
	runWork(3)
	if got, got2 := a.metric(calls), a.metric(`probectl_count_user_agt2_calls_total`); got != 15 || got2 != 3 {
		t.Errorf("after the fix: agt %v (want 15), agt2 %v (want 3)", got, got2)
	}

	// A git repository in the directory: commits and checkouts drive the
	// same transitions.
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Dir = specs
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q", "-b", "main")
	git("add", ".")
	git("commit", "-q", "-m", "two probes")
	git("rm", "-q", "b.hcl")
	git("commit", "-q", "-m", "one probe")
	a.waitStatus("git rm b.hcl", func(s agentStatus) bool { return probesOf(s) == "user.agt" && s.LastError == nil })
	// A function the binary lacks: refused at its line, nothing changes.
	if err := os.WriteFile(filepath.Join(specs, "c.hcl"), []byte(probe("agt3", "no_such_function")), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", "c.hcl")
	git("commit", "-q", "-m", "a probe of a missing function")
	s = a.waitStatus("the missing function", func(s agentStatus) bool { return s.LastError != nil })
	if d := s.LastError.Diagnostics; len(d) == 0 || d[0].File != filepath.Join(specs, "c.hcl") || d[0].Line == 0 {
		t.Errorf("missing function: %+v", s.LastError)
	}
	if probesOf(s) != "user.agt" {
		t.Errorf("probes %s after a failed change, want user.agt", probesOf(s))
	}
	git("checkout", "-q", "HEAD~2")
	a.waitStatus("checkout of two probes", func(s agentStatus) bool { return probesOf(s) == "user.agt,user.agt2" && s.LastError == nil })
	runWork(2)
	if got, got2 := a.metric(calls), a.metric(`probectl_count_user_agt2_calls_total`); got != 17 || got2 != 2 {
		t.Errorf("after the checkout: agt %v (want 17), agt2 %v (want 2, a new probe)", got, got2)
	}

	// SIGHUP re-reads and re-applies though nothing changed.
	a.cmd.Process.Signal(syscall.SIGHUP)
	a.waitStatus("SIGHUP", func(s agentStatus) bool {
		return s.LastAttempt != nil && s.LastAttempt.Reason == "SIGHUP" && s.LastAttempt.Result == "unchanged"
	})

	// A symlink planted in the directory is refused, never read through:
	// its target's text would reach the log and /status.
	if err := os.Symlink("/etc/passwd", filepath.Join(specs, "z.hcl")); err != nil {
		t.Fatal(err)
	}
	s = a.waitStatus("the symlink refused", func(s agentStatus) bool { return s.LastError != nil && s.LastError.Stage == "read" })
	if d := s.LastError.Diagnostics; len(d) != 1 || d[0].File != filepath.Join(specs, "z.hcl") || !strings.Contains(d[0].Detail, "symlink") {
		t.Errorf("symlink: %+v", s.LastError)
	}
	if strings.Contains(a.log.String(), "root:") {
		t.Errorf("the log shows /etc/passwd's text:\n%s", a.log)
	}
	os.Remove(filepath.Join(specs, "z.hcl"))
	a.waitStatus("the symlink removed", func(s agentStatus) bool { return s.LastError == nil && probesOf(s) == "user.agt,user.agt2" })

	// SIGTERM leaves the probes applied by default; a new agent takes
	// them over unchanged, and with -destroy-on-exit removes them.
	if err := a.signal(syscall.SIGTERM); err != nil {
		t.Fatalf("agent on SIGTERM: %v\n%s", err, a.log)
	}
	if _, err := os.Stat(pins); err != nil {
		t.Fatalf("SIGTERM without -destroy-on-exit removed the probes: %v", err)
	}
	runWork(4)
	b := startAgent(t, state, ws, specs, "-destroy-on-exit")
	b.waitStatus("the restarted agent", func(s agentStatus) bool {
		return s.LastAttempt != nil && s.LastAttempt.Result == "unchanged" && probesOf(s) == "user.agt,user.agt2"
	})
	if got := b.metric(calls); got != 21 {
		t.Errorf("after a restart: %v, want 21 (nothing lost)", got)
	}
	if err := b.signal(syscall.SIGTERM); err != nil {
		t.Fatalf("agent on SIGTERM: %v\n%s", err, b.log)
	}
	if _, err := os.Stat(pins); !os.IsNotExist(err) {
		t.Errorf("-destroy-on-exit left %s: %v", pins, err)
	}
}

// BenchmarkAgentIdle measures an idle agent's CPU: one iteration is one
// 15 s scrape interval (Prometheus's default) with one scrape of /metrics,
// the agent's process CPU (user and system, from /proc) over the whole run
// reported as a share of one CPU. Run it with -benchtime=4x (one minute).
func BenchmarkAgentIdle(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("applying probes needs root")
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		b.Skip("the workload is built with gcc")
	}
	dir := b.TempDir()
	work := buildC(b, dir, "idle-work", serveWork)
	specs := filepath.Join(dir, "specs")
	os.Mkdir(specs, 0o755)
	spec := fmt.Sprintf("probe \"user\" \"idle\" {\n  binary    = %q\n  functions = [\"target\"]\n  on_entry {\n    count \"calls\" { by = [comm] }\n    hist \"args\" { value = arg0 }\n  }\n}\n", work)
	if err := os.WriteFile(filepath.Join(specs, "a.hcl"), []byte(spec), 0o644); err != nil {
		b.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	ws := fmt.Sprintf("agent-idle-%d", os.Getpid())
	a := startAgent(b, state, ws, specs, "-destroy-on-exit")
	defer a.signal(syscall.SIGTERM)
	a.waitStatus("applied", func(s agentStatus) bool { return probesOf(s) == "user.idle" })
	if out, err := exec.Command(work, "1000").CombinedOutput(); err != nil {
		b.Fatalf("workload: %v\n%s", err, out)
	}
	cpu := func() time.Duration {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", a.cmd.Process.Pid))
		if err != nil {
			b.Fatal(err)
		}
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
		ut, _ := strconv.ParseInt(f[11], 10, 64) // utime, stime: fields 14 and 15 of stat
		st, _ := strconv.ParseInt(f[12], 10, 64)
		return time.Duration(ut+st) * time.Second / 100 // USER_HZ
	}
	time.Sleep(2 * time.Second) // let the start settle
	before, start := cpu(), time.Now()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		a.get("/metrics")
		time.Sleep(15 * time.Second)
	}
	b.StopTimer()
	used, wall := cpu()-before, time.Since(start)
	b.ReportMetric(100*used.Seconds()/wall.Seconds(), "cpu-%")
	b.ReportMetric(float64(used.Milliseconds()), "cpu-ms")
}
