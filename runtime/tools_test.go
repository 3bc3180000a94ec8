package runtime_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/runtime"
	"golang.org/x/sys/unix"
)

// The bpftrace tools of examples/bpftrace, each applied as written but for
// a filter on the test's own workload (testdata/tools.c), which makes known
// system calls with known arguments and results. What the probes measured
// is compared exactly with what the workload did and what the kernel says
// it did. The workload runs its calls only once the probes are on (it
// waits for a line on stdin), under a task name of its own: other activity
// on the machine never changes a count.

var (
	toolsOnce sync.Once
	toolsPath string
	toolsErr  error
)

// toolsBin builds testdata/tools.c once, static.
func toolsBin(t testing.TB) string {
	t.Helper()
	toolsOnce.Do(func() {
		dir, err := os.MkdirTemp("", "probectl-tools-")
		if err != nil {
			toolsErr = err
			return
		}
		builtIn = append(builtIn, dir)
		toolsPath = filepath.Join(dir, "pctools")
		out, err := exec.Command("gcc", "-O0", "-static", "-o", toolsPath, "testdata/tools.c").CombinedOutput()
		if err != nil {
			toolsErr = fmt.Errorf("gcc (the tests need it; .ci/run installs it): %v\n%s", err, out)
		}
	})
	if toolsErr != nil {
		t.Fatal(toolsErr)
	}
	return toolsPath
}

// taskName is a task name (comm) no other process has: the tool's name
// and this test process's pid, at most 15 bytes.
func taskName(tool string) string { return fmt.Sprintf("%.8s-%d", tool, os.Getpid()%100000) }

// toolSpec reads examples/bpftrace/NAME.hcl and applies edits, pairs of
// (text, replacement): each text must occur exactly once, so that an
// example that changes breaks the test instead of silently testing
// something else.
func toolSpec(t testing.TB, name string, edits ...string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "examples", "bpftrace", name+".hcl"))
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	if strings.Contains(src, "WORK") {
		t.Fatalf("%s.hcl holds WORK, which compile replaces", name)
	}
	for i := 0; i+1 < len(edits); i += 2 {
		if n := strings.Count(src, edits[i]); n != 1 {
			t.Fatalf("%s.hcl: %q occurs %d times, want once", name, edits[i], n)
		}
		src = strings.Replace(src, edits[i], edits[i+1], 1)
	}
	return src
}

// tool is a running workload of testdata/tools.c.
type tool struct {
	t     testing.TB
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines *bufio.Scanner
	pid   int
	// setup are the lines it printed before "ready".
	setup []string
}

// startTool starts the workload and waits for its "ready PID".
func startTool(t testing.TB, name, mode string, args ...string) *tool {
	t.Helper()
	cmd := exec.Command(toolsBin(t), append([]string{name, mode}, args...)...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &tool{t: t, cmd: cmd, stdin: stdin, lines: bufio.NewScanner(stdout)}
	t.Cleanup(func() {
		if w.cmd.ProcessState == nil {
			w.cmd.Process.Kill()
			w.cmd.Wait()
		}
	})
	for {
		line := w.line()
		if pid, ok := strings.CutPrefix(line, "ready "); ok {
			if w.pid, err = strconv.Atoi(pid); err != nil || w.pid != cmd.Process.Pid {
				t.Fatalf("workload says %q, its pid is %d", line, cmd.Process.Pid)
			}
			return w
		}
		w.setup = append(w.setup, line)
	}
}

func (w *tool) line() string {
	w.t.Helper()
	if !w.lines.Scan() {
		w.t.Fatalf("workload ended early: %v", w.lines.Err())
	}
	return w.lines.Text()
}

// run lets the workload make its calls and returns the lines it printed
// about them.
func (w *tool) run() []string {
	w.t.Helper()
	if _, err := io.WriteString(w.stdin, "go\n"); err != nil {
		w.t.Fatal(err)
	}
	var out []string
	for {
		line := w.line()
		if line == "done" {
			return out
		}
		out = append(out, line)
	}
}

// start lets the workload make its calls, without waiting for them.
func (w *tool) start() {
	w.t.Helper()
	if _, err := io.WriteString(w.stdin, "go\n"); err != nil {
		w.t.Fatal(err)
	}
}

// finish lets the workload exit, and checks that it exited 0.
func (w *tool) finish() {
	w.t.Helper()
	w.stdin.Close()
	if err := w.cmd.Wait(); err != nil {
		w.t.Fatalf("workload: %v", err)
	}
}

// blockedInRead waits until the workload sleeps in read(2) of its stdin
// pipe, off the run queue: the kernel gives a task's wait channel only
// then (get_wchan: not running, not waking, not on a run queue).
func (w *tool) blockedInRead() {
	w.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/wchan", w.pid))
		if err != nil {
			w.t.Fatal(err)
		}
		if strings.HasSuffix(string(b), "pipe_read") {
			return
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("workload not blocked in pipe_read after 10 s: wchan %q", b)
		}
		time.Sleep(time.Millisecond) // polling a condition, not waiting for one
	}
}

// switches reads the task's voluntary and involuntary context switches.
func (w *tool) switches() (voluntary, involuntary int64) {
	w.t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", w.pid))
	if err != nil {
		w.t.Fatal(err)
	}
	found := 0
	for _, line := range strings.Split(string(b), "\n") {
		name, value, _ := strings.Cut(line, ":")
		n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
		switch {
		case name == "voluntary_ctxt_switches" && err == nil:
			voluntary = n
			found++
		case name == "nonvoluntary_ctxt_switches" && err == nil:
			involuntary = n
			found++
		}
	}
	if found != 2 {
		w.t.Fatalf("/proc/%d/status has no context switch counts", w.pid)
	}
	return voluntary, involuntary
}

// applyTool applies src in a fresh workspace.
func applyTool(t *testing.T, src string) (*runtime.Workspace, *runtime.State) {
	t.Helper()
	w := workspace(t)
	s, _ := apply(t, w, src)
	return w, s
}

// eventLog collects the workspace's events as they arrive, so that the
// buffer never fills however busy the machine is; each probe's log shows
// its records. One stream reads the workspace's buffer: a second reader
// would be refused.
type eventLog struct {
	st      *runtime.EventStream
	stop    atomic.Bool
	done    chan struct{}
	drained bool
	records []*runtime.EventRecord
	err     error
}

// eventView is one probe's events in a workspace's log.
type eventView struct {
	log  *eventLog
	addr string
}

var eventLogs sync.Map // *runtime.Workspace → *eventLog

func collectEvents(t *testing.T, w *runtime.Workspace, s *runtime.State, addr string) *eventView {
	t.Helper()
	if a, err := bpf.ParseAddress(addr); err != nil || s.Probe(a) == nil {
		t.Fatalf("%s not applied", addr)
	}
	if l, ok := eventLogs.Load(w); ok {
		return &eventView{log: l.(*eventLog), addr: addr}
	}
	st, err := w.OpenEvents(s)
	if err != nil {
		t.Fatalf("%s: events: %v", addr, err)
	}
	l := &eventLog{st: st, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for !l.stop.Load() {
			rec, err := st.Next(time.Now().Add(50 * time.Millisecond))
			switch {
			case err == nil:
				l.records = append(l.records, rec)
			case !errors.Is(err, runtime.ErrIdle):
				l.err = err
				return
			}
		}
	}()
	eventLogs.Store(w, l)
	t.Cleanup(func() {
		l.stop.Store(true)
		<-l.done
		st.Close()
		eventLogs.Delete(w)
	})
	return &eventView{log: l, addr: addr}
}

// all returns every record the buffer held, of every probe. The
// workload's events are in the buffer before its calls return.
func (l *eventLog) all(t *testing.T) []*runtime.EventRecord {
	t.Helper()
	if !l.drained {
		l.drained = true
		l.stop.Store(true)
		<-l.done
		if l.err == nil {
			l.err = l.st.ReadBuffered(func(r *runtime.EventRecord) error {
				l.records = append(l.records, r)
				return nil
			})
		}
	}
	if l.err != nil {
		t.Fatal(l.err)
	}
	return l.records
}

// drain returns the probe's events, as "name: field=value, ...".
func (v *eventView) drain(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, ev := range v.log.all(t) {
		if ev.Type != runtime.RecordEvent {
			t.Errorf("a record of layout %s is %s", ev.Layout, ev.Type)
		}
		if ev.Probe == v.addr {
			out = append(out, eventText(ev))
		}
	}
	return out
}

func eventText(ev *runtime.EventRecord) string {
	var fields []string
	for _, f := range ev.Fields {
		fields = append(fields, fmt.Sprintf("%s=%v", f.Name, f.Value))
	}
	return ev.Name + ": " + strings.Join(fields, ", ")
}

// nothingDropped checks that no probe dropped an event or a key, and no
// table a store.
func nothingDropped(t *testing.T, w *runtime.Workspace, s *runtime.State) {
	t.Helper()
	for _, st := range w.Status(s) {
		if st.DroppedEvents != 0 || st.DroppedKeys != 0 || len(st.Drift) != 0 {
			t.Errorf("%s: %d events and %d keys dropped, drift %v", st.Address, st.DroppedEvents, st.DroppedKeys, st.Drift)
		}
	}
	for _, tr := range w.ReadTables(s.Tables) {
		if tr.Dropped != 0 || tr.Error != "" {
			t.Errorf("%s: %d stores dropped %s", tr.Address, tr.Dropped, tr.Error)
		}
	}
}

// tableHolds reports whether the table holds a key whose first part is k.
func tableHolds(t *testing.T, w *runtime.Workspace, s *runtime.State, table string, k int64) bool {
	t.Helper()
	ts := s.Table(table)
	if ts == nil {
		t.Fatalf("table %s not applied", table)
	}
	res := w.ReadTables([]*runtime.TableState{ts})[0]
	if res.Error != "" {
		t.Fatal(res.Error)
	}
	for _, e := range res.Entries {
		if len(e.Key) > 0 && e.Key[0].Value == k {
			return true
		}
	}
	return false
}

func sameLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\n got %d:\n  %s\nwant %d:\n  %s", what, len(got), strings.Join(got, "\n  "), len(want), strings.Join(want, "\n  "))
	}
}

func histTotal(ar runtime.AggregationResult) (total uint64) {
	for _, e := range ar.Entries {
		for _, b := range e.Buckets {
			total += b.Count
		}
	}
	return total
}

// opensnoop: one event per open, openat and openat2 of the workload, with
// the working directory (the workload's, which it chdirs into), the path
// as given (relative, too long), the descriptor or the errno.
func TestToolOpensnoop(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "exists"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	name := taskName("opensnoop")
	wl := startTool(t, name, "open", dir)
	w, s := applyTool(t, toolSpec(t, "opensnoop",
		`when = has(filename, [tid])`, fmt.Sprintf(`when = has(filename, [tid]) && pid == %d`, wl.pid)))
	log := collectEvents(t, w, s, "tracepoint.open_exit")
	calls := wl.run()
	long := strings.Repeat("n", 255) // 300 bytes given, str(..., 256) keeps 255 and the NUL
	cwd, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	var want, wantCalls []string
	ev := func(fd, err int, path string) {
		want = append(want, fmt.Sprintf("open: pid=%d, comm=%s, fd=%d, err=%d, cwd=%s, path=%s", wl.pid, name, fd, err, cwd, path))
	}
	if goruntime.GOARCH == "amd64" { // open(2) exists on x86-64 only
		ev(3, 0, "exists")
		wantCalls = append(wantCalls, "open exists 3")
	}
	ev(-1, 2, "missing")
	ev(-1, 20, "exists/x")
	ev(-1, 21, ".")
	ev(-1, 36, long)
	ev(3, 0, "exists")
	wantCalls = append(wantCalls, "openat missing -2", "openat exists/x -20", "openat . -21", "openat long -36", "openat2 exists 3")
	sameLines(t, "the workload's calls", calls, wantCalls)
	sameLines(t, "events", log.drain(t), want)
	nothingDropped(t, w, s)
	if tableHolds(t, w, s, "filename", int64(wl.pid)) {
		t.Errorf("filename still holds the workload's thread after its calls returned")
	}
	wl.finish()
}

// joined is what join(argv) shows: at most 16 strings, each with its NUL,
// in 256 bytes; the last one that does not fit is cut.
func joined(argv []string) string {
	var out []string
	pos := 0
	for _, a := range argv[:min(len(argv), 16)] {
		if pos >= 255 {
			break
		}
		a = a[:min(len(a), 256-pos-1)]
		out = append(out, a)
		pos += len(a) + 1
	}
	return strings.Join(out, " ")
}

// execsnoop: one event per execve and execveat of the workload's children,
// with their parent (the workload) and the argument vector exactly: a plain one, one of 18 arguments (16
// shown), one of 307 bytes (cut at 256), and one through execveat.
func TestToolExecsnoop(t *testing.T) {
	requireRoot(t)
	name := taskName("execsnoop")
	wl := startTool(t, name, "exec")
	w, s := applyTool(t, toolSpec(t, "execsnoop",
		`event "exec" {`, fmt.Sprintf("event \"exec\" {\n      when = comm == %q", name)))
	log := collectEvents(t, w, s, "tracepoint.exec")
	calls := wl.run()
	argvs := [][]string{
		{"pcexec", "exit", "one", "two words", "-x=3"},
		{"pcexec", "exit", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15", "16", "17", "18"},
		{"pcexec", "exit", strings.Repeat("a", 100), strings.Repeat("b", 100), strings.Repeat("c", 100)},
		{"pcexec", "exit", "at"},
	}
	if len(calls) != len(argvs) {
		t.Fatalf("workload: %q", calls)
	}
	var want []string
	for i, argv := range argvs {
		pid, ok := strings.CutPrefix(calls[i], "child ")
		if !ok {
			t.Fatalf("workload: %q", calls[i])
		}
		syscall := "execve"
		if i == 3 {
			syscall = "execveat"
		}
		want = append(want, fmt.Sprintf("exec: pid=%s, ppid=%d, syscall=syscalls:sys_enter_%s, args=%s", pid, wl.pid, syscall, joined(argv)))
	}
	if got := joined(argvs[2]); len(got) != 255 || !strings.HasSuffix(got, " "+strings.Repeat("c", 41)) {
		t.Fatalf("joined: %d bytes", len(got))
	}
	sameLines(t, "events", log.drain(t), want)
	nothingDropped(t, w, s)
	wl.finish()
}

// killsnoop: kill, tkill and tgkill of the workload, entry and exit joined
// through the table: to a child that ignores SIGUSR1 and SIGUSR2, to no
// process (ESRCH), with a signal that does not exist (EINVAL), to a thread
// of the wrong process (ESRCH), and SIGKILL.
func TestToolKillsnoop(t *testing.T) {
	requireRoot(t)
	name := taskName("killsnoop")
	wl := startTool(t, name, "kill")
	w, s := applyTool(t, toolSpec(t, "killsnoop",
		`when = has(sent, [tid])`, fmt.Sprintf(`when = has(sent, [tid]) && pid == %d`, wl.pid)))
	log := collectEvents(t, w, s, "tracepoint.kill_exit")
	calls := wl.run()
	if len(calls) == 0 || !strings.HasPrefix(calls[0], "child ") {
		t.Fatalf("workload: %q", calls)
	}
	child, _ := strconv.Atoi(strings.TrimPrefix(calls[0], "child "))
	const none = 2147483647
	var want, wantCalls []string
	call := func(syscall, sig string, tpid, result int) {
		want = append(want, fmt.Sprintf("kill: pid=%d, comm=%s, syscall=syscalls:sys_exit_%s, sig=%s, tpid=%d, result=%d", wl.pid, name, syscall, sig, tpid, result))
		wantCalls = append(wantCalls, fmt.Sprintf("%s %d", syscall, result))
	}
	// Signals by name, through signal_name; 0 (no signal: a check) as
	// killsnoop.bt prints it, N/A; 99 (no such signal) as a number.
	call("kill", "N/A", child, 0)
	call("kill", "SIGUSR1", child, 0) // ignored
	call("kill", "N/A", none, -3)     // ESRCH
	call("kill", "signal 99", child, -22)
	call("tkill", "SIGUSR2", child, 0) // ignored
	call("tgkill", "N/A", child, 0)
	call("tgkill", "N/A", child, -3) // the child is not a thread of the workload
	call("kill", "SIGKILL", child, 0)
	sameLines(t, "the workload's calls", calls[1:], wantCalls)
	sameLines(t, "events", log.drain(t), want)
	nothingDropped(t, w, s)
	if tableHolds(t, w, s, "sent", int64(wl.pid)) {
		t.Errorf("sent still holds the workload's thread after its calls returned")
	}
	wl.finish()
}

// capable: the capability checks of the workload, by name, with their
// results: three lower nice values (CAP_SYS_NICE granted), capset dropping
// CAP_SYS_NICE (the kernel checks CAP_SETPCAP), a lower nice value again
// (CAP_SYS_NICE refused: EPERM). The host has no kernel-function probes:
// the spec's probe moves to the capability:cap_capable tracepoint (the
// same cap, and the result instead of opts), with a count by named
// columns. The events, in order, and the counts, exactly.
func TestToolCapable(t *testing.T) {
	requireRoot(t)
	if _, err := os.Stat("/sys/kernel/tracing/events/capability/cap_capable"); err != nil {
		t.Skipf("no capability:cap_capable tracepoint (Linux 6.15 and later): %v", err)
	}
	name := taskName("capable")
	wl := startTool(t, name, "capable")
	filter := fmt.Sprintf("\n      when = pid == %d", wl.pid)
	w, s := applyTool(t, toolSpec(t, "capable",
		"probe \"kernel\" \"cap_capable\" {\n  functions = [\"cap_capable\"]", "probe \"tracepoint\" \"cap_capable\" {\n  event = \"capability:cap_capable\"",
		"opts = args.opts", "result = errno_name(args.ret)",
		"event \"capable\" {", "event \"capable\" {"+filter,
		"  on_entry {\n", "  on_entry {\n    count \"checks\" {"+filter+"\n      by = { comm = comm, cap = labels(capability, args.cap), result = errno_name(args.ret) }\n    }\n"))
	log := collectEvents(t, w, s, "tracepoint.cap_capable")
	calls := wl.run()
	sameLines(t, "the workload's calls", calls, []string{"setpriority 0", "setpriority 0", "setpriority 0", "setpriority -13"})
	var want []string
	for _, c := range []string{"CAP_SYS_NICE, result=0", "CAP_SYS_NICE, result=0", "CAP_SYS_NICE, result=0", "CAP_SETPCAP, result=0", "CAP_SYS_NICE, result=EPERM"} {
		want = append(want, fmt.Sprintf("capable: uid=0, pid=%d, comm=%s, cap=%s", wl.pid, name, c))
	}
	sameLines(t, "events", log.drain(t), want)
	res := w.Read(s.Probes)[0]
	if res.Error != "" || len(res.Aggregations) != 1 {
		t.Fatalf("read: %+v", res)
	}
	var got []string
	for _, e := range res.Aggregations[0].Entries {
		var key []string
		for _, f := range e.Key {
			key = append(key, fmt.Sprintf("%s=%v", f.Name, f.Value))
		}
		got = append(got, fmt.Sprintf("%s: %d", strings.Join(key, ", "), *e.Value))
	}
	sort.Strings(got)
	sameLines(t, "checks", got, []string{
		fmt.Sprintf("comm=%s, cap=CAP_SETPCAP, result=0: 1", name),
		fmt.Sprintf("comm=%s, cap=CAP_SYS_NICE, result=0: 3", name),
		fmt.Sprintf("comm=%s, cap=CAP_SYS_NICE, result=EPERM: 1", name),
	})
	nothingDropped(t, w, s)
	wl.finish()
}

// setuids: setuid, setresuid and setfsuid of the workload, as root, with
// the caller's uid before each call, the arguments as passed (-1 is
// 4294967295, a uid_t) and the results: a refusal (EPERM) once the
// effective uid is not 0, setfsuid's previous fsuid.
func TestToolSetuids(t *testing.T) {
	requireRoot(t)
	name := taskName("setuids")
	wl := startTool(t, name, "setuid")
	var edits []string
	for _, table := range []string{"setuid_args", "setresuid_args"} {
		for _, probe := range []string{"setuid", "setfsuid", "setresuid"} {
			if (table == "setresuid_args") != (probe == "setresuid") {
				continue
			}
			old := fmt.Sprintf("event %q {\n      when   = has(%s, [tid])", probe, table)
			if probe == "setresuid" {
				old = fmt.Sprintf("event %q {\n      when = has(%s, [tid])", probe, table)
			}
			edits = append(edits, old, old+fmt.Sprintf(" && pid == %d", wl.pid))
		}
	}
	w, s := applyTool(t, toolSpec(t, "setuids", edits...))
	logs := map[string]*eventView{}
	for _, p := range []string{"setuid_exit", "setfsuid_exit", "setresuid_exit"} {
		logs[p] = collectEvents(t, w, s, "tracepoint."+p)
	}
	calls := wl.run()
	const unchanged = 4294967295 // (uid_t)-1
	head := fmt.Sprintf("pid=%d, comm=%s", wl.pid, name)
	var setuid, setfsuid, setresuid []string
	// all is every probe's events in the order of the calls: the
	// workspace's one buffer keeps that order across probes.
	var all []string
	fs := func(uid, target, prev int) {
		setfsuid = append(setfsuid, fmt.Sprintf("setfsuid: %s, uid=%d, target=%d, prev_fsuid=%d", head, uid, target, prev))
		all = append(all, setfsuid[len(setfsuid)-1])
	}
	res := func(uid, r, e, s, ret int) {
		setresuid = append(setresuid, fmt.Sprintf("setresuid: %s, uid=%d, ruid=%d, euid=%d, suid=%d, ret=%d", head, uid, r, e, s, ret))
		all = append(all, setresuid[len(setresuid)-1])
	}
	su := func(uid, target, ret int) {
		setuid = append(setuid, fmt.Sprintf("setuid: %s, uid=%d, target=%d, ret=%d", head, uid, target, ret))
		all = append(all, setuid[len(setuid)-1])
	}
	fs(0, 1234, 0)
	fs(0, 0, 1234)
	res(0, 1000, unchanged, unchanged, 0)
	res(1000, unchanged, 2000, unchanged, 0)
	su(1000, 3000, -1) // EPERM: the effective uid is 2000
	fs(1000, 5000, 2000)
	res(1000, unchanged, 0, unchanged, 0) // back through the saved uid
	su(1000, 1000, 0)
	sameLines(t, "the workload's calls", calls, []string{
		"setfsuid 0", "setfsuid 1234", "setresuid 0", "setresuid 0", "setuid -1", "setfsuid 2000", "setresuid 0", "setuid 0"})
	sameLines(t, "setuid events", logs["setuid_exit"].drain(t), setuid)
	sameLines(t, "setfsuid events", logs["setfsuid_exit"].drain(t), setfsuid)
	sameLines(t, "setresuid events", logs["setresuid_exit"].drain(t), setresuid)
	var got []string
	for _, ev := range logs["setuid_exit"].log.all(t) {
		if strings.HasPrefix(ev.Probe, "tracepoint.set") {
			got = append(got, eventText(ev))
		}
	}
	sameLines(t, "every probe's events, in order", got, all)
	nothingDropped(t, w, s)
	wl.finish()
}

// statsnoop: stat, lstat, newfstatat, statx and statfs of the workload,
// of paths that exist (relative), do not (ENOENT) and are not directories
// (ENOTDIR).
func TestToolStatsnoop(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "exists"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	name := taskName("statsnoop")
	wl := startTool(t, name, "stat", dir)
	w, s := applyTool(t, toolSpec(t, "statsnoop",
		`when = has(filename, [tid])`, fmt.Sprintf(`when = has(filename, [tid]) && pid == %d`, wl.pid)))
	log := collectEvents(t, w, s, "tracepoint.stat_exit")
	calls := wl.run()
	var want, wantCalls []string
	call := func(syscall string, errno int, path string) {
		want = append(want, fmt.Sprintf("stat: pid=%d, comm=%s, syscall=syscalls:sys_exit_%s, err=%d, path=%s", wl.pid, name, syscall, errno, path))
		wantCalls = append(wantCalls, fmt.Sprintf("%s %d", syscall, -errno))
	}
	if goruntime.GOARCH == "amd64" { // stat(2) and lstat(2) exist on x86-64 only
		call("newstat", 0, "exists")
		call("newlstat", 2, "missing")
	}
	call("newfstatat", 0, "exists")
	call("statx", 20, "exists/x")
	call("statfs", 0, ".")
	call("statfs", 2, "missing")
	sameLines(t, "the workload's calls", calls, wantCalls)
	sameLines(t, "events", log.drain(t), want)
	nothingDropped(t, w, s)
	if tableHolds(t, w, s, "filename", int64(wl.pid)) {
		t.Errorf("filename still holds the workload's thread after its calls returned")
	}
	wl.finish()
}

// naptime: the workload asks nanosleep for 1.002345678 s and
// clock_nanosleep for 0.007654321 s; the exit probe reads each request's
// struct __kernel_timespec in the workload's memory (user_cast, at the
// pointer the entry probe kept) and reports exactly those fields.
func TestToolNaptime(t *testing.T) {
	requireRoot(t)
	name := taskName("naptime")
	wl := startTool(t, name, "nap")
	w, s := applyTool(t, toolSpec(t, "naptime",
		`when = has(rqtp, [tid]) && args.ret == 0`, fmt.Sprintf(`when = has(rqtp, [tid]) && args.ret == 0 && pid == %d`, wl.pid)))
	log := collectEvents(t, w, s, "tracepoint.nap_exit")
	calls := wl.run()
	sameLines(t, "the workload's calls", calls, []string{"nanosleep 0", "clock_nanosleep 0"})
	pcomm, err := os.ReadFile("/proc/self/comm") // the workload's parent: this test
	if err != nil {
		t.Fatal(err)
	}
	ev := func(sec, nsec int) string {
		return fmt.Sprintf("nap: ppid=%d, pcomm=%s, pid=%d, comm=%s, sec=%d, nsec=%d",
			os.Getpid(), strings.TrimSpace(string(pcomm)), wl.pid, name, sec, nsec)
	}
	sameLines(t, "events", log.drain(t), []string{ev(1, 2345678), ev(0, 7654321)})
	nothingDropped(t, w, s)
	if tableHolds(t, w, s, "rqtp", int64(wl.pid)) {
		t.Errorf("rqtp still holds the workload's thread after its sleeps returned")
	}
	wl.finish()
}

// runqlat: the workload sleeps n times in read(2), each time woken by the
// test's write once it sleeps off the run queue (and once more by the line
// that starts it), then runs for 50 ms in user mode and 50 ms in the
// kernel, on a CPU where another task spins. (Timers would wake it in
// interrupts, where the kernel skips a BPF program that interrupts another
// one, from any user of BPF on the machine: status counts it as missed,
// but of no task in particular.)
//
// The kernel counts the workload's switches out in /proc/PID/status
// (voluntary: it slept; involuntary: preempted), read while it sleeps
// before and after: the probe sees exactly as many, and those that left it
// queued are the involuntary ones, preemptions on the way to user mode
// (prev_state 0) and in the kernel (0x100, which runqlat.bt misses), both
// seen. Every wakeup is counted: n+1. Every switch in is in the histogram,
// having found the time it was queued; a switch in the kernel did not
// deliver to the tracepoint's users (it does not, at times, for some tasks
// switched out: tracefs misses the same ones) shows as a switch out with no
// switch in before it, and is accounted for as such.
func TestToolRunqlat(t *testing.T) {
	requireRoot(t)
	const sleeps = 100
	var cpus unix.CPUSet
	if err := unix.SchedGetaffinity(0, &cpus); err != nil {
		t.Fatal(err)
	}
	cpu := 0
	for !cpus.IsSet(cpu) {
		cpu++
	}
	hog := startTool(t, taskName("runqhog"), "spin", fmt.Sprint(cpu))
	hog.start()
	wl := startTool(t, taskName("runqlat"), "sleep", fmt.Sprint(sleeps), "50", fmt.Sprint(cpu))
	wl.blockedInRead()
	v0, nv0 := wl.switches()
	pid := wl.pid
	w, s := applyTool(t, toolSpec(t, "runqlat",
		`table "queued_at" {`, "table \"test_on_cpu\" {\n  max_keys = 16\n}\n\ntable \"queued_at\" {",
		`when  = args.next_pid != 0 && has(queued_at, [args.next_pid])`,
		fmt.Sprintf(`when  = args.next_pid != 0 && has(queued_at, [args.next_pid]) && args.next_pid == %d`, pid),
		"event = [\"sched:sched_wakeup\", \"sched:sched_wakeup_new\"]\n\n  on_entry {",
		fmt.Sprintf("event = [\"sched:sched_wakeup\", \"sched:sched_wakeup_new\"]\n\n  on_entry {\n    count \"test_wakeups\" {\n      when = args.pid == %d\n    }", pid),
		"event = \"sched:sched_switch\"\n\n  on_entry {",
		fmt.Sprintf(`event = "sched:sched_switch"

  on_entry {
    count "test_switch_ins" {
      when = args.next_pid == %[1]d
    }
    count "test_unqueued" {
      when = args.next_pid == %[1]d && !has(queued_at, [args.next_pid])
    }
    count "test_switch_outs" {
      when = args.prev_pid == %[1]d
      by   = [args.prev_state]
    }
    count "test_unseen_switch_ins" {
      when = args.prev_pid == %[1]d && !has(test_on_cpu, [args.prev_pid])
    }
    delete "test_on_cpu" {
      when = args.prev_pid == %[1]d
      key  = [args.prev_pid]
    }
    store "test_on_cpu" {
      when  = args.next_pid == %[1]d
      key   = [args.next_pid]
      value = 1
    }`, pid)))
	wl.start()
	for i := 0; i < sleeps; i++ {
		wl.blockedInRead()
		if _, err := io.WriteString(wl.stdin, "x"); err != nil {
			t.Fatal(err)
		}
	}
	if line := wl.line(); line != "done" {
		t.Fatalf("workload: %q", line)
	}
	wl.blockedInRead()
	v1, nv1 := wl.switches()
	count := func(addr, name string) int64 { return values(aggregation(t, w, s, addr, name))[""] }
	wakeups := count("tracepoint.wakeup", "test_wakeups")
	switchIns := count("tracepoint.switch", "test_switch_ins")
	unqueued := count("tracepoint.switch", "test_unqueued")
	unseen := count("tracepoint.switch", "test_unseen_switch_ins")
	outs := values(aggregation(t, w, s, "tracepoint.switch", "test_switch_outs"))
	var switchOuts, blocked int64
	for state, n := range outs {
		switchOuts += n
		if state != "0" && state != "256" {
			blocked += n
		}
	}
	running, preempted := outs["0"], outs["256"]
	total := histTotal(aggregation(t, w, s, "tracepoint.switch", "runq_latency_us"))
	t.Logf("%d sleeps: %d wakeups; switches out %v (the kernel: %d voluntary, %d involuntary); %d switches in seen, %d not delivered; %d in the histogram; %d runs of the probes missed",
		sleeps, wakeups, outs, v1-v0, nv1-nv0, switchIns, unseen, total, missedRuns(w, s))
	if wakeups != sleeps+1 {
		t.Errorf("%d wakeups, want %d: %d sleeps and the line that started them", wakeups, sleeps+1, sleeps)
	}
	if switchOuts != (v1-v0)+(nv1-nv0) || blocked != v1-v0 {
		t.Errorf("%d switches out, %d of them asleep; the kernel counted %d voluntary and %d involuntary", switchOuts, blocked, v1-v0, nv1-nv0)
	}
	// Preempted on its way back to user mode, a task is switched out as
	// TASK_RUNNING (0); preempted in the kernel, as TASK_REPORT_MAX (0x100).
	if running+preempted != nv1-nv0 || running == 0 || preempted == 0 {
		t.Errorf("switched out queued %d times on the way to user mode and %d times in the kernel, want both, %d in all (the involuntary switches)", running, preempted, nv1-nv0)
	}
	if switchIns+unseen != switchOuts {
		t.Errorf("%d switches in seen and %d not delivered, want %d (one before each switch out)", switchIns, unseen, switchOuts)
	}
	if unqueued != 0 || total != uint64(switchIns) {
		t.Errorf("histogram holds %d, want %d (every switch in seen); %d switches in found no time queued", total, switchIns, unqueued)
	}
	nothingDropped(t, w, s)
	wl.finish()
}

// missedRuns is what status says the probes missed: the runs the kernel
// skipped.
func missedRuns(w *runtime.Workspace, s *runtime.State) (n uint64) {
	for _, st := range w.Status(s) {
		n += st.Missed
	}
	return n
}

// bioDir finds a directory on ext4 or XFS over a disk or a partition,
// where FIEMAP gives a file's place on the device and the block layer
// queues bios at those sectors; it returns the directory and the first
// sector of its partition (0 on a whole disk).
func bioDir(t *testing.T) (string, int64) {
	t.Helper()
	wd, _ := os.Getwd()
	var tried []string
	for _, dir := range []string{os.TempDir(), "/var/tmp", wd} {
		var fs unix.Statfs_t
		var st unix.Stat_t
		if unix.Statfs(dir, &fs) != nil || unix.Stat(dir, &st) != nil {
			continue
		}
		sys := fmt.Sprintf("/sys/dev/block/%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev))
		if fs.Type != unix.EXT4_SUPER_MAGIC && fs.Type != unix.XFS_SUPER_MAGIC {
			tried = append(tried, fmt.Sprintf("%s: file system 0x%x", dir, fs.Type))
			continue
		}
		if _, err := os.Stat(sys); err != nil {
			tried = append(tried, dir+": not on a block device")
			continue
		}
		if _, err := os.Stat(sys + "/dm"); err == nil {
			tried = append(tried, dir+": on device-mapper, which queues again at other sectors")
			continue
		}
		start := int64(0)
		if b, err := os.ReadFile(sys + "/start"); err == nil {
			if start, err = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err != nil {
				t.Fatal(err)
			}
		}
		d, err := os.MkdirTemp(dir, "probectl-bio-")
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s: %v", dir, err))
			continue
		}
		t.Cleanup(func() { os.RemoveAll(d) })
		return d, start
	}
	t.Skipf("no directory on ext4 or XFS over a disk or partition: %s", strings.Join(tried, "; "))
	return "", 0
}

// biolatency: the workload makes n direct 4 KiB writes (O_DIRECT: one bio
// each, written before write returns) to a file it wrote and synced before
// the probes were on. The bios queued by the workload's task name at the
// file's sectors are stored; their completions are found by the table:
// exactly n writes of 8 sectors, one at each of the n blocks' sectors, and
// n latencies (but for completions the kernel did not run the probe for,
// which it counts, and whose sectors stay in the table). (O_DSYNC would
// add a cache flush per write and, as the timestamps' granularity
// decides, journal writes.)
func TestToolBiolatency(t *testing.T) {
	requireRoot(t)
	const writes = 64
	dir, partStart := bioDir(t)
	name := taskName("biolatency")
	wl := startTool(t, name, "bio", filepath.Join(dir, "file"), fmt.Sprint(writes))
	// The file's extents: logical and physical bytes, length.
	type extent struct{ logical, physical, length int64 }
	var extents []extent
	for _, line := range wl.setup {
		var e extent
		if n, _ := fmt.Sscanf(line, "extent %d %d %d", &e.logical, &e.physical, &e.length); n == 3 {
			extents = append(extents, e)
		}
	}
	wantQueued := map[string]int64{}
	var ranges []string
	for i := int64(0); i < writes; i++ {
		found := false
		for _, e := range extents {
			if off := i * 4096; off >= e.logical && off < e.logical+e.length {
				sector := partStart + (e.physical+off-e.logical)/512
				wantQueued[fmt.Sprintf("WS,8,%d", sector)] = 1
				found = true
			}
		}
		if !found {
			t.Fatalf("block %d of the file is in no extent: %q", i, wl.setup)
		}
	}
	for _, e := range extents {
		lo := partStart + e.physical/512
		ranges = append(ranges, fmt.Sprintf("(args.sector >= %d && args.sector < %d)", lo, lo+e.length/512))
	}
	filter := fmt.Sprintf("args.comm == %q && (%s)", name, strings.Join(ranges, " || "))
	w, s := applyTool(t, toolSpec(t, "biolatency",
		`store "queued_at" {`, fmt.Sprintf("store \"queued_at\" {\n      when  = %s", filter),
		"event = \"block:block_bio_queue\"\n\n  on_entry {",
		fmt.Sprintf("event = \"block:block_bio_queue\"\n\n  on_entry {\n    count \"test_queued\" {\n      when = %s\n      by   = [args.rwbs, args.nr_sector, args.sector]\n    }", filter)))
	if calls := wl.run(); len(calls) != 0 {
		t.Fatalf("workload: %q", calls)
	}
	if got := values(aggregation(t, w, s, "tracepoint.queue", "test_queued")); fmt.Sprint(got) != fmt.Sprint(wantQueued) {
		t.Errorf("queued %v, want %v", got, wantQueued)
	}
	// A completion runs in an interrupt: if it interrupted a BPF program
	// (of any user of BPF on the machine), the kernel skipped the probe and
	// counted a miss. Its sector then stays in the table: account for it.
	var left int64
	for key := range wantQueued {
		var sector int64
		fmt.Sscanf(key, "WS,8,%d", &sector)
		if tableHolds(t, w, s, "queued_at", sector) {
			left++
		}
	}
	total := histTotal(aggregation(t, w, s, "tracepoint.complete", "usecs"))
	missed := missedRuns(w, s)
	if left > 0 {
		t.Logf("%d completions not seen: the kernel skipped %d runs of the probes", left, missed)
	}
	if total+uint64(left) != writes || uint64(left) > missed {
		t.Errorf("histogram holds %d and the table %d, want %d in all; the kernel skipped %d runs", total, left, writes, missed)
	}
	nothingDropped(t, w, s)
	wl.finish()
}

// bashreadline: an interactive bash, driven through a pseudo-terminal
// (script(1)), reads known lines; each is an event, as readline returned
// it, a long one cut at 255 bytes. The bash runs through a symbolic link
// of its own name, so that its task name is the test's: the uretprobe is
// on /bin/bash's file all the same.
func TestToolBashreadline(t *testing.T) {
	requireRoot(t)
	bash, err := filepath.EvalSymlinks("/bin/bash")
	if err != nil {
		t.Skipf("no /bin/bash to probe: %v", err)
	}
	scriptPath, err := exec.LookPath("script")
	if err != nil {
		t.Skipf("no script(1) (util-linux) to give bash a terminal: %v", err)
	}
	name := taskName("bashreadline")
	link := filepath.Join(t.TempDir(), name)
	if err := os.Symlink(bash, link); err != nil {
		t.Fatal(err)
	}
	w, s := applyTool(t, toolSpec(t, "bashreadline", `when   = comm == "bash"`, fmt.Sprintf(`when   = comm == %q`, name)))
	log := collectEvents(t, w, s, "user.readline")

	const prompt = "pc-prompt> "
	cmd := exec.Command(scriptPath, "-qec", link+" --norc --noprofile -i", "/dev/null")
	cmd.Env = []string{"PS1=" + prompt, "TERM=dumb", "PATH=/usr/bin:/bin", "HOME=/"}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	// What the terminal shows, as it comes.
	var mu sync.Mutex
	var shown strings.Builder
	more := make(chan struct{}, 1)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := stdout.Read(buf)
			mu.Lock()
			shown.Write(buf[:n])
			mu.Unlock()
			select {
			case more <- struct{}{}:
			default:
			}
			if err != nil {
				close(more)
				return
			}
		}
	}()
	// waitFor waits until the terminal has shown text n times.
	waitFor := func(text string, n int) string {
		t.Helper()
		timeout := time.After(20 * time.Second)
		for {
			mu.Lock()
			out := shown.String()
			mu.Unlock()
			if strings.Count(out, text) >= n {
				return out
			}
			select {
			case _, ok := <-more:
				if !ok {
					t.Fatalf("the terminal closed before showing %q %d times:\n%s", text, n, out)
				}
			case <-timeout:
				t.Fatalf("the terminal did not show %q %d times in 20 s:\n%s", text, n, out)
			}
		}
	}
	long := "echo " + strings.Repeat("x", 300)
	lines := []string{"echo pid=$$", "true  two   spaces", long, "exit"}
	for i, line := range lines {
		waitFor(prompt, i+1)
		if _, err := io.WriteString(stdin, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("script: %v", err)
	}
	out := waitFor(prompt, len(lines))
	var pid int
	for _, f := range strings.Fields(out) {
		if n, err := fmt.Sscanf(f, "pid=%d", &pid); n == 1 && err == nil {
			break
		}
	}
	if pid == 0 {
		t.Fatalf("bash did not say its pid:\n%s", out)
	}
	var want []string
	for _, line := range lines {
		want = append(want, fmt.Sprintf("line: pid=%d, line=%s", pid, line[:min(len(line), 255)]))
	}
	sameLines(t, "events", log.drain(t), want)
	nothingDropped(t, w, s)
}

// cgroup_path(cgroup): the workload, moved into a cgroup of its own on the
// cgroup2 hierarchy, is counted under that cgroup's path.
func TestCgroupPath(t *testing.T) {
	requireRoot(t)
	root := ""
	for _, dir := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		var fs unix.Statfs_t
		if unix.Statfs(dir, &fs) == nil && fs.Type == unix.CGROUP2_SUPER_MAGIC {
			root = dir
			break
		}
	}
	if root == "" {
		t.Skip("no cgroup2 hierarchy mounted")
	}
	group := fmt.Sprintf("key-cgroup-%d", os.Getpid())
	dir := filepath.Join(root, group)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatalf("make a cgroup: %v", err)
	}
	t.Cleanup(func() { // after the workload's own cleanup, which kills it
		if err := os.Remove(dir); err != nil {
			t.Errorf("remove %s: %v", dir, err)
		}
	})
	name := taskName("cgroup")
	wl := startTool(t, name, "capable")
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(wl.pid)), 0o644); err != nil {
		t.Fatalf("move the workload into %s: %v", dir, err)
	}
	w, s := applyTool(t, fmt.Sprintf(`probe "tracepoint" "setpriority" {
  event = "syscalls:sys_enter_setpriority"
  on_entry {
    count "calls" {
      when = pid == %d
      by   = { group = cgroup_path(cgroup), comm = comm }
    }
  }
}`, wl.pid))
	wl.run()
	res := w.Read(s.Probes)[0]
	if res.Error != "" || len(res.Aggregations) != 1 {
		t.Fatalf("read: %+v", res)
	}
	var got []string
	for _, e := range res.Aggregations[0].Entries {
		got = append(got, fmt.Sprintf("%s=%v, %s=%v: %d", e.Key[0].Name, e.Key[0].Value, e.Key[1].Name, e.Key[1].Value, *e.Value))
	}
	sameLines(t, "calls", got, []string{fmt.Sprintf("group=/%s, comm=%s: 4", group, name)})
	wl.finish()
}
