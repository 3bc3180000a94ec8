package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/probectl/probectl/internal/testenv"
	"github.com/probectl/probectl/spec/bpftrace"
)

// The side-by-side harness: one of bpftrace's tools (the snapshot in
// spec/bpftrace/testdata/tools) runs under the installed bpftrace 0.17 and
// under probectl run at once, on one workload of exactly known calls;
// both are stopped with SIGINT and their lines compared.
//
// bpftrace 0.17 does not read the snapshot's newer dialect, so it is given
// the tool as bpftrace017 rewrites it; probectl runs the file as it is.
//
// The normalisation: a row is kept when its tool's filter says it is the
// workload's (its pid or comm), and a time of day (HH:MM:SS, with
// .ffffff) reads as "TIME": the two programs read the clock at different
// instants. A tool whose rows hold other times (sslsnoop's elapsed and
// latency) says how it normalises them (sideTool.norm), and one whose
// rows come from two processes at once how they are ordered (by process:
// two perf buffers need not agree on the order of two CPUs' events).
// Everything else must be equal, byte for byte, and equal to the rows the
// workload's calls make.

// bpftrace017 rewrites a tool of the snapshot into bpftrace 0.17's
// dialect: the config block and lruhash declarations go, args.F is
// args->F, interval:1s is interval:s:1, ppid is curtask's parent's tgid,
// delete(@m, k) is delete(@m[k]), has_key(@m, k) is @m[k] (the tools'
// tables hold start times, never 0) or, of killsnoop's table of signal
// names, @SIG_STR[k] != "". Nothing else changes.
func bpftrace017(src string) string {
	for _, r := range []struct {
		re   *regexp.Regexp
		with string
	}{
		{regexp.MustCompile(`(?s)\nconfig = \{.*?\n\}\n`), "\n"},
		{regexp.MustCompile(`(?m)^let @\w+ = \w+\(\d+\);\n`), ""},
		{regexp.MustCompile(`\bargs\.`), "args->"},
		{regexp.MustCompile(`\binterval:(\d+)(s|ms|us|hz)\b`), "interval:$2:$1"},
		{regexp.MustCompile(`([,(]\s*)ppid\b`), "${1}curtask->real_parent->tgid"},
		{regexp.MustCompile(`\bdelete\((@\w+), ([^()]+)\)`), "delete($1[$2])"},
		{regexp.MustCompile(`\bhas_key\((@SIG_STR), ([^()]+)\)`), `($1[$2] != "")`},
		{regexp.MustCompile(`\bhas_key\((@\w+), ([^()]+)\)`), "$1[$2]"},
	} {
		src = r.re.ReplaceAllString(src, r.with)
	}
	return src
}

// timeOfDay is a time as strftime's %H:%M:%S (and bpftrace's %f) print it.
var timeOfDay = regexp.MustCompile(`\b\d\d:\d\d:\d\d(\.\d{6})?\b`)

// sideLines is what a program writes to stdout or stderr, as lines, as
// it comes.
type sideLines struct {
	mu      sync.Mutex
	lines   []string
	partial []byte
	done    chan struct{} // closed when the program has exited
}

func newLines() *sideLines { return &sideLines{done: make(chan struct{})} }

func (s *sideLines) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.partial = append(s.partial, b...)
	for {
		i := bytes.IndexByte(s.partial, '\n')
		if i < 0 {
			return len(b), nil
		}
		s.lines = append(s.lines, string(s.partial[:i]))
		s.partial = s.partial[i+1:]
	}
}

func (s *sideLines) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.lines...)
}

func (s *sideLines) String() string { return strings.Join(s.all(), "\n") }

// waitFor waits until ok holds of the lines written so far, or the
// program ends, or two minutes pass (the machine may be loaded: no
// tighter bound).
func (s *sideLines) waitFor(ok func([]string) bool) bool {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if ok(s.all()) {
			return true
		}
		select {
		case <-s.done:
			return ok(s.all())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return false
}

// sideTool is one tool's comparison: the workload to run (it returns the
// rows both programs must print, normalised), and which rows are the
// workload's.
type sideTool struct {
	tool string
	// work runs the workload and returns the rows it makes, as the tool
	// prints them after normalisation, in order.
	work func(t *testing.T) []string
	// mine says whether a normalised row is the workload's.
	mine func(row string) bool
	// norm, when set, is the tool's own normalisation of a row (after
	// the times of day), and order of the workload's rows.
	norm  func(row string) string
	order func(rows []string) []string
}

// sideProgram is a running program of a side-by-side run.
type sideProgram struct {
	name      string
	cmd       *exec.Cmd
	out, errs *sideLines
	exited    chan error
}

// startSide starts a program and waits until ready holds of its stdout
// (onStderr: of its stderr).
func startSide(t *testing.T, name string, ready func([]string) bool, onStderr bool, path string, args ...string) *sideProgram {
	t.Helper()
	p := &sideProgram{name: name, cmd: exec.Command(path, args...), out: newLines(), errs: newLines(), exited: make(chan error, 1)}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.errs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.exited <- p.cmd.Wait()
		close(p.out.done)
		close(p.errs.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.out.done:
		default:
			p.cmd.Process.Kill()
			<-p.out.done
		}
	})
	watch := p.out
	if onStderr {
		watch = p.errs
	}
	if !watch.waitFor(ready) {
		t.Fatalf("%s did not attach:\n%s\n%s", name, p.out, p.errs)
	}
	return p
}

// stop sends SIGINT and waits for the program's exit; its stdout lines.
func (p *sideProgram) stop(t *testing.T) []string {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-p.exited:
		if err != nil {
			t.Errorf("%s: %v\n%s", p.name, err, p.errs)
		}
	case <-time.After(time.Minute):
		// Once in a CI run, bpftrace 0.17 took SIGINT and did not exit
		// for 23 minutes. A program that does not stop is killed and
		// said to have hung: what it printed is still compared.
		p.cmd.Process.Kill()
		<-p.exited
		t.Logf("%s did not exit in a minute after SIGINT: killed", p.name)
		if p.name != "bpftrace" {
			t.Errorf("%s did not exit in a minute after SIGINT", p.name)
		}
	}
	return p.out.all()
}

// startBoth starts tool under bpftrace (rewritten by bpftrace017) and
// under probectl run (as it is), and waits until both are attached. With
// asJSON, bpftrace prints JSON (-f json) and run NDJSON (-json).
func startBoth(t *testing.T, tool string, asJSON bool) (b, p *sideProgram) {
	t.Helper()
	bt, err := exec.LookPath("bpftrace")
	if err != nil {
		testenv.Absent(t, "bpftrace is not installed")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to load BPF")
	}
	file := filepath.Join("../../spec/bpftrace/testdata/tools", tool+".bt")
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	old := filepath.Join(dir, tool+".bt")
	if err := os.WriteFile(old, []byte(rewrite017(t, tool, src)), 0o644); err != nil {
		t.Fatal(err)
	}
	// bpftrace's BEGIN runs once every probe is attached: its first line
	// after "Attaching N probes..." (JSON: attached_probes) says so.
	attached := "Attaching "
	btArgs, pcArgs := []string{old}, []string{"-state-dir", filepath.Join(dir, "state"), "run", "-interval", "0"}
	if asJSON {
		attached = `{"type": "attached_probes"`
		btArgs, pcArgs = append([]string{"-f", "json"}, btArgs...), append(pcArgs, "-json")
	}
	btReady := func(l []string) bool {
		for i, s := range l {
			if strings.HasPrefix(s, attached) {
				return i+1 < len(l)
			}
		}
		return false
	}
	pcReady := func(l []string) bool {
		for _, s := range l {
			if strings.HasPrefix(s, "Running ") {
				return true
			}
		}
		return false
	}
	b = startSide(t, "bpftrace", btReady, false, bt, btArgs...)
	p = startSide(t, "probectl run", pcReady, asJSON, "probectl", append(pcArgs, file)...)
	return b, p
}

// runSide runs tool under bpftrace and probectl run at once, runs its
// workload once both are attached, waits until both have printed its
// rows (or two minutes), stops both, and compares: the workload's rows
// of each, normalised, must be the rows the workload made.
func runSide(t *testing.T, st sideTool) {
	t.Helper()
	b, p := startBoth(t, st.tool, false)
	want := st.work(t)
	rows := func(l []string) []string {
		var out []string
		for _, s := range l {
			s = timeOfDay.ReplaceAllString(s, "TIME")
			if st.norm != nil {
				s = st.norm(s)
			}
			if st.mine(s) {
				out = append(out, s)
			}
		}
		if st.order != nil {
			out = st.order(out)
		}
		return out
	}
	complete := func(l []string) bool { return len(rows(l)) >= len(want) }
	b.out.waitFor(complete)
	p.out.waitFor(complete)
	btLines, pcLines := b.stop(t), p.stop(t)
	head := sideHeader(t, st.tool)
	for _, o := range []struct {
		name, after string
		lines       []string
	}{{"bpftrace", "Attaching ", btLines}, {"probectl run", "Running ", pcLines}} {
		got := []string{}
		for i, l := range o.lines {
			if strings.HasPrefix(l, o.after) {
				got = o.lines[i+1 : min(len(o.lines), i+1+len(head))]
				break
			}
		}
		if strings.Join(got, "\n") != strings.Join(head, "\n") {
			t.Errorf("%s's header:\n%s\nwant BEGIN's:\n%s", o.name, strings.Join(got, "\n"), strings.Join(head, "\n"))
		}
	}
	btRows, pcRows := rows(btLines), rows(pcLines)
	w := strings.Join(want, "\n")
	if got := strings.Join(btRows, "\n"); got != w {
		t.Errorf("bpftrace printed %d rows of the workload, want %d:\n%s\nwant:\n%s", len(btRows), len(want), got, w)
	}
	if got := strings.Join(pcRows, "\n"); got != w {
		t.Errorf("probectl run printed %d rows of the workload, want %d (bpftrace's):\n%s\nwant:\n%s", len(pcRows), len(want), got, w)
	}
}

// sideHeader is what the tool's BEGIN prints (its printfs of literals),
// as lines.
func sideHeader(t *testing.T, tool string) []string {
	t.Helper()
	file := filepath.Join("../../spec/bpftrace/testdata/tools", tool+".bt")
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	imp, diags := bpftrace.ImportRun(file, src, bpftrace.Options{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if imp.BeginText == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(imp.BeginText, "\n"), "\n")
}

// sideWork builds testdata/btside/work.c as bs-wPID (a comm of this test
// process's own) once per test.
func sideWork(t *testing.T) (path, comm string) {
	t.Helper()
	comm = fmt.Sprintf("bs-w%d", os.Getpid()%1000000)
	return buildWorkload(t, comm, "-O0", "testdata/btside/work.c", "-lpthread"), comm
}

// doWork runs the workload's work and returns its pid.
func doWork(t *testing.T, path string, args ...string) int {
	pid, _ := doWorkSaid(t, path, args...)
	return pid
}

// doWorkSaid runs the workload's work and returns its pid and the lines
// it printed as it worked; it exits when the test ends.
func doWorkSaid(t *testing.T, path string, args ...string) (int, []string) {
	t.Helper()
	w := startWorkload(t, -1, exec.Command(path, args...))
	said := w.work(t)
	// The process lives until the test ends: bpftrace names a user
	// address from the process's maps when it prints the line.
	t.Cleanup(func() {
		w.stdin.Close()
		if err := w.cmd.Wait(); err != nil {
			t.Errorf("workload %v: %v", args, err)
		}
	})
	return w.pid, said
}

// repeat is n copies of rows, in order.
func repeat(n int, rows ...string) []string {
	var out []string
	for i := 0; i < n; i++ {
		out = append(out, rows...)
	}
	return out
}

// hasComm is a row filter: the row shows the comm as a word.
func hasComm(comm string) func(string) bool {
	re := regexp.MustCompile(`(^|\s)` + regexp.QuoteMeta(comm) + `(\s|$)`)
	return re.MatchString
}

// killsnoop: 20 kill(self, 0) (0, no signal: "N/A") and 20 kill of a pid
// past PID_MAX with SIGTERM (-3, ESRCH), in order.
func TestSideKillsnoop(t *testing.T) {
	path, comm := sideWork(t)
	runSide(t, sideTool{tool: "killsnoop", mine: hasComm(comm), work: func(t *testing.T) []string {
		pid := doWork(t, path, "kill", "20")
		return repeat(20,
			fmt.Sprintf("TIME %8d %-16s %10s %8d %6d", pid, comm, "N/A", pid, 0),
			fmt.Sprintf("TIME %8d %-16s %10s %8d %6d", pid, comm, "SIGTERM", 4194305, -3))
	}})
}

// syncsnoop: 10 rounds of fsync, fdatasync, syncfs and sync_file_range
// of a file of the workload's own, in order; the line is time()'s and the
// printf's.
func TestSideSyncsnoop(t *testing.T) {
	path, comm := sideWork(t)
	runSide(t, sideTool{tool: "syncsnoop", mine: hasComm(comm), work: func(t *testing.T) []string {
		pid := doWork(t, path, "sync", "10", t.TempDir())
		var want []string
		for i := 0; i < 10; i++ {
			for _, sc := range []string{"fsync", "fdatasync", "syncfs", "sync_file_range"} {
				want = append(want, fmt.Sprintf("TIME  %-6d %-16s tracepoint:syscalls:sys_enter_%s", pid, comm, sc))
			}
		}
		return want
	}})
}

// setuids: 10 rounds of setuid(0), setfsuid(0) and setresuid(0, 0, 0)
// by root, in order.
func TestSideSetuids(t *testing.T) {
	path, comm := sideWork(t)
	runSide(t, sideTool{tool: "setuids", mine: hasComm(comm), work: func(t *testing.T) []string {
		pid := doWork(t, path, "setuid", "10")
		return repeat(10,
			fmt.Sprintf("TIME %-6d %-16s %-6d setuid    uid=%d (%d)", pid, comm, 0, 0, 0),
			fmt.Sprintf("TIME %-6d %-16s %-6d setfsuid  uid=%d (prevuid=%d)", pid, comm, 0, 0, 0),
			fmt.Sprintf("TIME %-6d %-16s %-6d setresuid ruid=%d euid=%d suid=%d (%d)", pid, comm, 0, 0, 0, 0, 0))
	}})
}

// statsnoop: 10 rounds of stat, lstat and statx of a missing file (ENOENT)
// and statfs of the directory (0), in order.
func TestSideStatsnoop(t *testing.T) {
	path, comm := sideWork(t)
	runSide(t, sideTool{tool: "statsnoop", mine: hasComm(comm), work: func(t *testing.T) []string {
		dir := t.TempDir()
		pid := doWork(t, path, "stat", "10", dir)
		var want []string
		for i := 0; i < 10; i++ {
			missing := fmt.Sprintf("%s/missing-%d", dir, i)
			want = append(want,
				fmt.Sprintf("%-6d %-16s %3d %s", pid, comm, 2, missing),
				fmt.Sprintf("%-6d %-16s %3d %s", pid, comm, 2, missing),
				fmt.Sprintf("%-6d %-16s %3d %s", pid, comm, 2, missing),
				fmt.Sprintf("%-6d %-16s %3d %s", pid, comm, 0, dir))
		}
		return want
	}})
}

// execsnoop: 10 children of the workload, one at a time, each exec of
// "/bin/true btside I"; rows of other processes are left out by their
// parent.
func TestSideExecsnoop(t *testing.T) {
	path, _ := sideWork(t)
	var parent string
	runSide(t, sideTool{tool: "execsnoop",
		mine: func(row string) bool { f := strings.Fields(row); return len(f) > 2 && f[2] == parent },
		work: func(t *testing.T) []string {
			pid, said := doWorkSaid(t, path, "exec", "10")
			parent = fmt.Sprint(pid)
			var want []string
			for i, l := range said {
				var child int
				fmt.Sscanf(l, "child %d", &child)
				want = append(want, fmt.Sprintf("TIME %-7d %-7d true btside %d", child, pid, i))
			}
			if len(want) != 10 {
				t.Fatalf("the workload said %q, not 10 children", said)
			}
			return want
		}})
}

// threadsnoop: 10 threads of the workload started in bs_thread, one at a
// time (the uprobe is on libc's pthread_create).
func TestSideThreadsnoop(t *testing.T) {
	path, comm := sideWork(t)
	runSide(t, sideTool{tool: "threadsnoop", mine: hasComm(comm), work: func(t *testing.T) []string {
		pid := doWork(t, path, "threads", "10")
		return repeat(10, fmt.Sprintf("TIME %7d %-16s %s", pid, comm, "bs_thread"))
	}})
}

// bashreadline: an interactive bash of the test's own (bash -i, its
// commands on stdin: readline reads them) runs three commands and ends at
// the end of its input, where readline returns NULL (an empty line).
// Rows of other shells are left out by the pid.
func TestSideBashreadline(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil || bash != "/bin/bash" && bash != "/usr/bin/bash" {
		testenv.Absent(t, "bash is not /bin/bash")
	}
	var pid string
	runSide(t, sideTool{tool: "bashreadline",
		mine: func(row string) bool { f := strings.Fields(row); return len(f) > 1 && f[1] == pid },
		work: func(t *testing.T) []string {
			home := t.TempDir()
			cmd := exec.Command("/bin/bash", "--norc", "--noprofile", "-i")
			cmd.Env = []string{"HOME=" + home, "HISTFILE=/dev/null", "PATH=/usr/bin:/bin", "TERM=dumb"}
			cmd.Stdin = strings.NewReader("true bs-one\ntrue bs-two 2\n: bs-three\n")
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("bash: %v", err)
			}
			pid = fmt.Sprint(cmd.Process.Pid)
			return []string{
				fmt.Sprintf("TIME  %-6s %s", pid, "true bs-one"),
				fmt.Sprintf("TIME  %-6s %s", pid, "true bs-two 2"),
				fmt.Sprintf("TIME  %-6s %s", pid, ": bs-three"),
				fmt.Sprintf("TIME  %-6s ", pid),
			}
		}})
}

// sslWork builds testdata/btside/ssl.c as bs-sPID and makes its
// certificate and key (EC).
func sslWork(t *testing.T) (path, cert, key, comm string) {
	t.Helper()
	if _, err := exec.LookPath("openssl"); err != nil {
		testenv.Absent(t, "openssl is not installed")
	}
	if _, err := os.Stat("/usr/include/openssl/ssl.h"); err != nil {
		testenv.Absent(t, "OpenSSL's headers are not installed (libssl-dev)")
	}
	comm = fmt.Sprintf("bs-s%d", os.Getpid()%1000000)
	path = buildWorkload(t, comm, "-O0", "testdata/btside/ssl.c", "-lssl", "-lcrypto")
	dir := filepath.Dir(path)
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if out, err := exec.Command("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
		"-subj", "/CN=btside", "-keyout", key, "-out", cert, "-days", "1").CombinedOutput(); err != nil {
		t.Fatalf("openssl req: %v\n%s", err, out)
	}
	return path, cert, key, comm
}

// sslsnoop: a TLS client and server of the test's own over a socketpair,
// one SSL_do_handshake each (both return 1), then 10 SSL_write of 5 bytes
// by the client and 10 SSL_read of them by the server. The key is an EC
// key: neither program finds the libcrypto functions the tool traces
// besides (they are local symbols, or RSA's). A row is compared as its
// words with the elapsed and latency columns (times) as "-"; the client's
// rows come first, then the server's, each in their order.
func TestSideSslsnoop(t *testing.T) {
	path, cert, key, comm := sslWork(t)
	var client, server string
	runSide(t, sideTool{tool: "sslsnoop",
		norm: func(row string) string {
			f := strings.Fields(row)
			if len(f) != 6 {
				return row
			}
			f[0], f[3] = "-", "-"
			return strings.Join(f, " ")
		},
		mine: func(row string) bool {
			f := strings.Fields(row)
			return len(f) == 6 && f[0] == "-" && (f[1] == client || f[1] == server)
		},
		order: func(rows []string) []string {
			var c, s []string
			for _, r := range rows {
				if strings.Fields(r)[1] == client {
					c = append(c, r)
				} else {
					s = append(s, r)
				}
			}
			// A thread that moves between CPUs has its events in two of
			// bpftrace's per-CPU buffers, read one after the other: the
			// server's handshake was once printed after three of its reads.
			// Each side's handshake goes first, the rest keep their order.
			for _, side := range [][]string{c, s} {
				sort.SliceStable(side, func(i, j int) bool {
					return strings.HasSuffix(side[i], " SSL_do_handshake") && !strings.HasSuffix(side[j], " SSL_do_handshake")
				})
			}
			return append(c, s...)
		},
		work: func(t *testing.T) []string {
			pid, said := doWorkSaid(t, path, cert, key, "10")
			client = fmt.Sprint(pid)
			if len(said) != 1 {
				t.Fatalf("the workload said %q, not its server", said)
			}
			server = strings.TrimPrefix(said[0], "server ")
			want := []string{fmt.Sprintf("- %s %s - 1 SSL_do_handshake", client, comm)}
			want = append(want, repeat(10, fmt.Sprintf("- %s %s - 5 SSL_write", client, comm))...)
			want = append(want, fmt.Sprintf("- %s %s - 1 SSL_do_handshake", server, comm))
			return append(want, repeat(10, fmt.Sprintf("- %s %s - 5 SSL_read", server, comm))...)
		}})
}

// btMapCounts reads bpftrace's -f json map objects (hist, stats, map) of
// the map named name: for each key, the count (a stats' count, the sum of
// a hist's buckets, a map's value). bpftrace prints a key once for each
// of its values' sources (a func named from two processes' maps is two
// keys of one name): the counts of one name are summed.
func btMapCounts(t *testing.T, lines []string, name string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, l := range lines {
		var obj struct {
			Type string          `json:"type"`
			Data json.RawMessage `json:"data"`
		}
		if json.Unmarshal([]byte(l), &obj) != nil || (obj.Type != "hist" && obj.Type != "stats" && obj.Type != "map" && obj.Type != "lhist") {
			continue
		}
		d := json.NewDecoder(bytes.NewReader(obj.Data))
		d.Token() // {
		for d.More() {
			tok, _ := d.Token()
			var keys json.RawMessage
			if err := d.Decode(&keys); err != nil {
				t.Fatalf("bpftrace's JSON: %v: %s", err, l)
			}
			if tok != name {
				continue
			}
			kd := json.NewDecoder(bytes.NewReader(keys))
			kd.Token()
			for kd.More() {
				k, _ := kd.Token()
				var v json.RawMessage
				if err := kd.Decode(&v); err != nil {
					t.Fatalf("bpftrace's JSON: %v: %s", err, l)
				}
				var n int64
				var stats struct{ Count int64 }
				var buckets []struct{ Count int64 }
				switch {
				case json.Unmarshal(v, &n) == nil:
				case json.Unmarshal(v, &buckets) == nil:
					for _, b := range buckets {
						n += b.Count
					}
				case json.Unmarshal(v, &stats) == nil:
					n = stats.Count
				}
				out[fmt.Sprint(k)] += n
			}
		}
	}
	return out
}

// runCounts reads probectl run -json's last results: for each key (its
// one field's value) of the aggregation named name, the count (a count's
// value, the sum of a histogram's buckets).
func runCounts(t *testing.T, lines []string, name string) map[string]int64 {
	t.Helper()
	var last string
	for _, l := range lines {
		if strings.HasPrefix(l, `{"type":"results"`) {
			last = l
		}
	}
	var res struct {
		Probes []struct {
			Aggregations []struct {
				Name    string
				Entries []struct {
					Key     map[string]any
					Value   int64
					Buckets []struct{ Count int64 }
				}
			}
		}
	}
	if err := json.Unmarshal([]byte(last), &res); err != nil {
		t.Fatalf("run's results: %v: %q", err, last)
	}
	out := map[string]int64{}
	for _, p := range res.Probes {
		for _, a := range p.Aggregations {
			if a.Name != name {
				continue
			}
			for _, e := range a.Entries {
				var k string
				for _, v := range e.Key {
					k = fmt.Sprint(v)
				}
				n := e.Value
				for _, b := range e.Buckets {
					n += b.Count
				}
				out[k] += n
			}
		}
	}
	return out
}

// ssllatency: the workload of TestSideSslsnoop; the numbers of @stat
// (run: stat_count) and @hist (run: hist) by function are the calls: 2
// SSL_do_handshake, 10 SSL_write, 10 SSL_read that succeeded (no failed
// ones: @statF and @histF stay empty). Their latencies are times, read at
// different instants by the two programs: the hist's buckets are not
// compared, their totals are.
func TestSideSsllatency(t *testing.T) {
	path, cert, key, _ := sslWork(t)
	b, p := startBoth(t, "ssllatency", true)
	doWorkSaid(t, path, cert, key, "10")
	btLines, pcLines := b.stop(t), p.stop(t)
	want := map[string]int64{"SSL_do_handshake": 2, "SSL_write": 10, "SSL_read": 10}
	for _, m := range [][2]string{{"@stat", "stat_count"}, {"@hist", "hist"}, {"@statF", "statF_count"}, {"@histF", "histF"}} {
		w := want
		if strings.HasSuffix(m[1], "F") || strings.HasSuffix(m[1], "F_count") {
			w = map[string]int64{}
		}
		if got := btMapCounts(t, btLines, m[0]); !reflect.DeepEqual(got, w) {
			t.Errorf("bpftrace's %s: %v, want %v\n%s", m[0], got, w, strings.Join(btLines, "\n"))
		}
		if got := runCounts(t, pcLines, m[1]); !reflect.DeepEqual(got, w) {
			t.Errorf("run's %s: %v, want %v (bpftrace's %s)", m[1], got, w, m[0])
		}
	}
}

// btHist is bpftrace's -f json hist of the map named name at key: its
// buckets as "MIN:COUNT" (the lowest: "-:COUNT").
func btHist(t *testing.T, lines []string, name, key string) []string {
	t.Helper()
	var out []string
	for _, l := range lines {
		var obj struct {
			Type string
			Data map[string]map[string][]struct {
				Min   *int64
				Count int64
			}
		}
		if json.Unmarshal([]byte(l), &obj) != nil || obj.Type != "hist" {
			continue
		}
		for _, b := range obj.Data[name][key] {
			low := "-"
			if b.Min != nil {
				low = fmt.Sprint(*b.Min)
			}
			out = append(out, fmt.Sprintf("%s:%d", low, b.Count))
		}
	}
	return out
}

// runHist is probectl run -json's last results' histogram named name at
// the key whose one field is key: its buckets as "LOW:COUNT".
func runHist(t *testing.T, lines []string, name, key string) []string {
	t.Helper()
	var last string
	for _, l := range lines {
		if strings.HasPrefix(l, `{"type":"results"`) {
			last = l
		}
	}
	var res struct {
		Probes []struct {
			Aggregations []struct {
				Name    string
				Entries []struct {
					Key     map[string]any
					Buckets []struct {
						Low   *int64
						Count int64
					}
				}
			}
		}
	}
	if err := json.Unmarshal([]byte(last), &res); err != nil {
		t.Fatalf("run's results: %v: %q", err, last)
	}
	var out []string
	for _, p := range res.Probes {
		for _, a := range p.Aggregations {
			for _, e := range a.Entries {
				if a.Name != name || len(e.Key) != 1 {
					continue
				}
				for _, v := range e.Key {
					if fmt.Sprint(v) != key {
						continue
					}
					for _, b := range e.Buckets {
						low := "-"
						if b.Low != nil {
							low = fmt.Sprint(*b.Low)
						}
						out = append(out, fmt.Sprintf("%s:%d", low, b.Count))
					}
				}
			}
		}
	}
	return out
}

// bitesize: 10 writes of 4096 bytes and 10 reads of 8192 bytes with
// O_DIRECT of a file written and synced before either program starts:
// one block request each, issued by the workload, so its comm's hist has
// 10 in [4K, 8K) and 10 in [8K, 16K), in both.
func TestSideBitesize(t *testing.T) {
	path, comm := sideWork(t)
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "dio"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, 8192)); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	b, p := startBoth(t, "bitesize", true)
	doWork(t, path, "dio", "10", dir)
	btLines, pcLines := b.stop(t), p.stop(t)
	want := []string{"4096:10", "8192:10"}
	if got := btHist(t, btLines, "@", comm); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("bpftrace's @[%s]: %v, want %v\n%s", comm, got, want, strings.Join(btLines, "\n"))
	}
	if got := runHist(t, pcLines, "bytes", comm); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("run's bytes[%s]: %v, want %v (bpftrace's)\n%s", comm, got, want, strings.Join(pcLines, "\n"))
	}
}
