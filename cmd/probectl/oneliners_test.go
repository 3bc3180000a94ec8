package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// olWork is the one-liners' workload (testdata/oneliners/olwork.c), built
// static under a name of the test's own: its comm.
type olWork struct{ path, comm string }

func buildOLWork(t *testing.T) olWork {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to load BPF")
	}
	comm := fmt.Sprintf("btol-%d", os.Getpid()%1000000)
	path := buildWorkload(t, comm, "-static", "-O1", "-fno-omit-frame-pointer", "testdata/oneliners/olwork.c")
	return olWork{path, comm}
}

// start starts the workload, which stops itself once it has printed its
// pid; the caller continues it (SIGCONT) and waits for it.
func (w olWork) start(t *testing.T, mode string, n int) *exec.Cmd {
	t.Helper()
	cmd := startWorkload(t, -1, exec.Command(w.path, mode, strconv.Itoa(n))).cmd
	// Stopped: /proc/PID/stat's state is T.
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		if i := bytes.LastIndexByte(b, ')'); i > 0 && len(b) > i+2 && b[i+2] == 'T' {
			return cmd
		}
		time.Sleep(time.Millisecond)
	}
}

// oneLiner is a bpftrace one-liner, as the tutorial and README write it
// (with a filter on the workload's comm or pid where the machine's other
// processes would add to its counts), the workload that makes known
// counts of what it counts, and the lines run must print.
type oneLiner struct {
	name string
	prog string // {comm}, {path} and {pid} are the workload's ({dir} in args its directory)
	mode string // the workload: olwork MODE N ("": none)
	n    int
	args []string // run's options besides -duration, -interval 0 and -e
	want []string // regexps, each matching a line run prints
	// check, when set, checks run's lines further.
	check func(t *testing.T, out []string)
	// fails: run must exit 1, and stderr match these.
	fails []string
}

// runOneLiner runs ol with probectl run -e, the workload continued once
// every probe is attached, and returns what run printed.
func runOneLiner(t *testing.T, w olWork, ol oneLiner) (out []string, stderr string, code int) {
	t.Helper()
	prog := strings.NewReplacer("{comm}", w.comm, "{path}", w.path).Replace(ol.prog)
	var work *exec.Cmd
	if ol.mode != "" && !withC(ol.args) {
		work = w.start(t, ol.mode, ol.n)
		prog = strings.ReplaceAll(prog, "{pid}", strconv.Itoa(work.Process.Pid))
	}
	args := []string{"-state-dir", filepath.Join(t.TempDir(), "btone-state"), "run", "-duration", "4s", "-interval", "0"}
	for _, a := range ol.args {
		args = append(args, strings.ReplaceAll(a, "{dir}", filepath.Dir(w.path)))
	}
	args = append(args, "-e", prog)
	pr, pw := io.Pipe()
	done := make(chan int)
	var errOut bytes.Buffer
	ended := make(chan struct{})
	go func() {
		code := run(args, pw, &errOut)
		close(ended)
		pw.Close()
		done <- code
	}()
	lines := bufio.NewScanner(pr)
	// A program without a workload (BEGIN alone) ends at Ctrl-C too,
	// once it has printed its first wanted line.
	begin := ol.mode == "" && ol.fails == nil && len(ol.want) > 0 && endsOnCtrlC(ol)
	for lines.Scan() {
		out = append(out, lines.Text())
		if begin && regexp.MustCompile(ol.want[0]).MatchString(lines.Text()) {
			begin = false
			go ctrlC(ended)
		}
		if work != nil && strings.HasPrefix(lines.Text(), "Running ") {
			if err := work.Process.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			if err := work.Wait(); err != nil {
				t.Fatalf("workload: %v", err)
			}
			work = nil
			if endsOnCtrlC(ol) {
				// Ctrl-C, as a user ends run once the workload is done:
				// what it did is in the maps (and the event buffer, which
				// run drains), so waiting out -duration adds nothing.
				go ctrlC(ended)
			}
		}
	}
	code = <-done
	return out, errOut.String(), code
}

// ctrlC sends this process SIGINT every 50 ms until ended is closed:
// run prints "Running" just before its signal.NotifyContext holds
// SIGINT, so the first may come before it does (TestRunOneLiners holds
// SIGINT too: the process never dies of it). No test of this package
// runs beside the one-liners (none is t.Parallel), so no other run
// takes it.
func ctrlC(ended chan struct{}) {
	for {
		syscall.Kill(os.Getpid(), syscall.SIGINT)
		select {
		case <-ended:
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// endsOnCtrlC: run of ol ends at Ctrl-C once its workload is done, not
// by itself (exit(), an interval's exit, a -duration of the one-liner's
// own) or at -c's command's exit.
func endsOnCtrlC(ol oneLiner) bool {
	return !strings.Contains(ol.prog, "exit()") && !slices.Contains(ol.args, "-duration") && !withC(ol.args)
}

// TestRunOneLiners runs 30 one-liners of bpftrace's one-liner tutorial
// and README with probectl run -e on this host, each on a workload of its
// own with known counts, and checks the counts run prints: exact where
// the kernel makes them exact, at least the workload's where it adds its
// own (a process's context switches, CPU samples). The
// kernel-function ones (kprobe:, kretprobe:, kfunc:) run in the VM
// matrix: runtime's TestKernelOneLiners. bash's readline is our
// workload's ol_func, and the block I/O ones are left to the tools'
// tests (a disk's requests are not ours to count here).
func TestRunOneLiners(t *testing.T) {
	w := buildOLWork(t)
	held := make(chan os.Signal, 1)
	signal.Notify(held, os.Interrupt) // ctrlC's SIGINT never ends the test process
	defer signal.Stop(held)
	c := w.comm
	for _, ol := range []oneLiner{
		{name: "hello world", prog: `BEGIN { printf("hello world\n"); }`,
			args: []string{}, want: []string{`^hello world$`}},
		{name: "hello world exit", prog: `BEGIN { printf("hello %s\n", "world"); exit(); }`,
			want: []string{`^hello world$`}},
		{name: "file opens", prog: `tracepoint:syscalls:sys_enter_openat /comm == "{comm}"/ { printf("%s %s\n", comm, str(args.filename)); }`,
			mode: "open", n: 7, want: []string{`^` + c + ` /nonexistent/btone-ol$`},
			check: countLines(`^`+c+` /nonexistent/btone-ol$`, 7)},
		{name: "syscalls by process", prog: `tracepoint:raw_syscalls:sys_enter /comm == "{comm}"/ { @[comm] = count(); }`,
			mode: "getppid", n: 500, want: []string{`^@\[` + c + `\]: 501$`}}, // and exit_group
		{name: "read bytes of a pid", prog: `tracepoint:syscalls:sys_exit_read /pid == {pid}/ { @bytes = hist(args.ret); }`,
			mode: "read", n: 9, want: []string{`^@bytes: $`, `^\[64, 128\) +9 \|@+\|$`}},
		{name: "sched events", prog: `tracepoint:sched:sched* /comm == "{comm}"/ { @[probe] = count(); } interval:s:5 { exit(); }`,
			mode: "fork", n: 6, args: []string{"-duration", "5s"},
			want: []string{`^@\[sched:sched_process_fork\]: 6$`, `^@\[sched:sched_process_exit\]: 7$`}},
		{name: "on-CPU kernel stacks", prog: `profile:hz:99 /comm == "{comm}"/ { @[kstack] = count(); }`,
			mode: "burn", n: 1, want: []string{`^@\[\]: [0-9]+$`}, check: stackSamples(1)}, // in user mode: no kernel stack
		{name: "scheduler stacks", prog: `tracepoint:sched:sched_switch /comm == "{comm}"/ { @[kstack] = count(); }`,
			mode: "sleep", n: 20, want: []string{`^    schedule\+[0-9]+$`}, check: stackSamples(20)},
		{name: "read bytes by process", prog: `tracepoint:syscalls:sys_exit_read /args.ret && comm == "{comm}"/ { @[comm] = sum(args.ret); }`,
			mode: "read", n: 9, want: []string{`^@\[` + c + `\]: 900$`}},
		{name: "read size by process", prog: `tracepoint:syscalls:sys_exit_read /comm == "{comm}"/ { @[comm] = hist(args.ret); }`,
			mode: "read", n: 11, want: []string{`^@\[` + c + `\]: $`, `^\[64, 128\) +11 \|@+\|$`}},
		{name: "new processes", prog: `tracepoint:syscalls:sys_enter_execve /comm == "{comm}"/ { printf("%s -> %s\n", comm, str(args.filename)); }`,
			mode: "exec", n: 4, check: countLines(`^`+c+` -> /nonexistent/btone-exec$`, 4)},
		{name: "opens of -c's command", prog: `tracepoint:syscalls:sys_enter_openat /pid == cpid/ { @[comm] = count(); }`,
			mode: "open", n: 7, args: []string{"-c", w.path + " open 7"}, want: []string{`^@\[` + c + `\]: 7$`}},
		{name: "per-second syscalls", prog: `tracepoint:raw_syscalls:sys_enter /comm == "{comm}"/ { @ = count(); } interval:s:1 { print(@); clear(@); }`,
			mode: "getppid", n: 300, check: countSum(`^@: ([0-9]+)$`, 301)}, // the calls may straddle an interval
		{name: "exec arguments", prog: `tracepoint:syscalls:sys_enter_execve /comm == "{comm}"/ { join(args.argv); }`,
			mode: "exec", n: 3, args: []string{"-v"}, check: countLines(`btone-exec a b`, 3)},
		{name: "kill -9", prog: `t:syscalls:sys_enter_kill /args.sig == 9/ { @kills[comm, args.pid] = count(); }`,
			mode: "kill", n: 5, want: []string{`^@kills\[` + c + `, 1073741808\]: 5$`}},
		{name: "every syscall", prog: `tracepoint:syscalls:sys_enter_* /comm == "{comm}"/ { @[probe] = count(); }`,
			mode: "getppid", n: 40, want: []string{`^@\[syscalls:sys_enter_getppid\]: 40$`, `^@\[syscalls:sys_enter_exit_group\]: 1$`}},
		{name: "uprobe calls and returns", prog: `uprobe:{path}:ol_func { @calls = count(); } uretprobe:{path}:ol_func { @lines[pid] = count(); }`,
			mode: "call", n: 13, want: []string{`^@calls: 13$`, `^@lines\[[0-9]+\]: 13$`}},
		{name: "uretprobe string", prog: `uretprobe:{path}:ol_name { printf("%s\n", str(retval)); }`,
			mode: "call", n: 6, check: countLines(`^btone-name$`, 6)},
		{name: "uprobe argument", prog: `uprobe:{path}:ol_func { @[arg0] = count(); }`,
			mode: "call", n: 4, want: []string{`^@\[0\]: 1$`, `^@\[3\]: 1$`}},
		{name: "page faults", prog: `software:faults:1 /comm == "{comm}"/ { @[comm] = count(); }`,
			mode: "pages", n: 300, want: []string{`^@\[` + c + `\]: 300$`}}, // a fault per page (MADV_NOHUGEPAGE)
		{name: "minor faults", prog: `software:minor-faults:1 /comm == "{comm}"/ { @ = count(); }`,
			mode: "pages", n: 200, want: []string{`^@: 200$`}},
		{name: "context switches", prog: `software:cs:1 /comm == "{comm}"/ { @[comm] = count(); }`,
			mode: "sleep", n: 25, check: countAtLeast(`^@\[`+c+`\]: ([0-9]+)$`, 25)},
		{name: "cpu clock", prog: `software:cpu-clock:10000000 /comm == "{comm}"/ { @[comm] = count(); }`,
			mode: "burn", n: 1, check: countAtLeast(`^@\[`+c+`\]: ([0-9]+)$`, 1)},
		{name: "user stacks of a pid", prog: `profile:hz:99 /pid == {pid}/ { @[ustack] = count(); }`,
			mode: "burn", n: 1, args: []string{"-v", "-symbols", "{dir}"}, want: []string{`^    ol_burn\+[0-9]+$`, `^    main\+[0-9]+$`}, check: stackSamples(1)},
		{name: "syscalls by pid and comm", prog: `tracepoint:raw_syscalls:sys_enter /comm == "{comm}"/ { @[pid, comm] = count(); }`,
			mode: "getppid", n: 70, want: []string{`^@\[[0-9]+, ` + c + `\]: 71$`}},
		{name: "sleeping", prog: `tracepoint:syscalls:sys_enter_nanosleep /comm == "{comm}"/ { printf("PID %d sleeping...\n", pid); }`,
			mode: "sleep", n: 8, check: countLines(`^PID [0-9]+ sleeping\.\.\.$`, 8)},
		{name: "open errors", prog: `tracepoint:syscalls:sys_exit_openat /comm == "{comm}"/ { @[args.ret] = count(); }`,
			mode: "open", n: 9, want: []string{`^@\[-2\]: 9$`}},
		{name: "read sizes linear", prog: `tracepoint:syscalls:sys_exit_read /comm == "{comm}"/ { @bytes = lhist(args.ret, 0, 2000, 200); }`,
			mode: "read", n: 12, want: []string{`^@bytes: $`, `^\[0, 200\) +12 \|@+\|$`}},
		{name: "interval exit", prog: `tracepoint:syscalls:sys_enter_getppid /comm == "{comm}"/ { @n = count(); } interval:s:2 { exit(); }`,
			mode: "getppid", n: 33, args: []string{"-duration", "0"}, want: []string{`^Running for 2s\.$`, `^@n: 33$`}},
		{name: "cache misses without a PMU", prog: `hardware:cache-misses:1000000 { @[comm, pid] = count(); }`,
			fails: []string{`profile\.cache_misses: attach perf_event to cpu0: perf_event_open cache-misses on cpu 0: no such file or directory \(hardware event cache-misses: this machine has no PMU`,
				`Nothing was changed`}},
	} {
		t.Run(ol.name, func(t *testing.T) {
			if ol.fails != nil && pmuCountsCacheMisses() {
				ol.fails, ol.mode, ol.n = nil, "burn", 1
				ol.prog = `hardware:cache-misses:1000 /comm == "{comm}"/ { @[comm, pid] = count(); }`
				ol.check = countAtLeast(`^@\[`+c+`, [0-9]+\]: ([0-9]+)$`, 1)
			}
			if withC(ol.args) {
				t.Setenv("OLWORK_NOSTOP", "1")
			}
			out, stderr, code := runOneLiner(t, w, ol)
			text := strings.Join(out, "\n")
			if ol.fails != nil {
				if code != 1 {
					t.Fatalf("run: exit %d, want 1\n%s\n%s", code, text, stderr)
				}
				for _, re := range ol.fails {
					if !regexp.MustCompile(re).MatchString(stderr) {
						t.Errorf("stderr lacks %q:\n%s", re, stderr)
					}
				}
				return
			}
			if code != 0 {
				t.Fatalf("run: exit %d\n%s\n%s", code, text, stderr)
			}
			for _, re := range ol.want {
				if !regexp.MustCompile("(?m)" + re).MatchString(text) {
					t.Errorf("no line matches %q:\n%s", re, text)
				}
			}
			if ol.check != nil {
				ol.check(t, out)
			}
		})
	}
}

// countLines: exactly n lines match re.
func countLines(re string, n int) func(*testing.T, []string) {
	return func(t *testing.T, out []string) {
		t.Helper()
		got := 0
		for _, l := range out {
			if regexp.MustCompile(re).MatchString(l) {
				got++
			}
		}
		if got != n {
			t.Errorf("%d lines match %q, want %d:\n%s", got, re, n, strings.Join(out, "\n"))
		}
	}
}

// countSum: the numbers of the lines matching re add up to n, however
// the intervals cut them.
func countSum(re string, n int) func(*testing.T, []string) {
	return func(t *testing.T, out []string) {
		t.Helper()
		sum := 0
		for _, l := range out {
			if m := regexp.MustCompile(re).FindStringSubmatch(l); m != nil {
				v, _ := strconv.Atoi(m[1])
				sum += v
			}
		}
		if sum != n {
			t.Errorf("lines matching %q add up to %d, want %d:\n%s", re, sum, n, strings.Join(out, "\n"))
		}
	}
}

// countAtLeast: a line matches re, whose number is at least n.
func countAtLeast(re string, n int) func(*testing.T, []string) {
	return func(t *testing.T, out []string) {
		t.Helper()
		for _, l := range out {
			if m := regexp.MustCompile(re).FindStringSubmatch(l); m != nil {
				if v, _ := strconv.Atoi(m[1]); v < n {
					t.Errorf("%q: %d, want at least %d", l, v, n)
				}
				return
			}
		}
		t.Errorf("no line matches %q:\n%s", re, strings.Join(out, "\n"))
	}
}

// stackSamples: the maps keyed by a stack print as bpftrace prints them
// ("@[", a frame a line: four spaces and func+off or an address in hex,
// then "]: N"; a lost stack "@[]: N"), and their counts add up to at
// least n.
func stackSamples(n int) func(*testing.T, []string) {
	frame := regexp.MustCompile(`^    ([^ ]+\+[0-9]+|0x[0-9a-f]+)$`)
	end := regexp.MustCompile(`^(@\[)?\]: ([0-9]+)$`)
	return func(t *testing.T, out []string) {
		t.Helper()
		total, in := 0, false
		for _, l := range out {
			switch {
			case l == "@[":
				in = true
			case in && frame.MatchString(l):
			case end.MatchString(l) && (in || strings.HasPrefix(l, "@[]")):
				v, _ := strconv.Atoi(end.FindStringSubmatch(l)[2])
				total += v
				in = false
			case in:
				t.Errorf("%q: no frame as bpftrace prints one:\n%s", l, strings.Join(out, "\n"))
				return
			}
		}
		if total < n {
			t.Errorf("the stacks count %d, want at least %d:\n%s", total, n, strings.Join(out, "\n"))
		}
	}
}

// pmuCountsCacheMisses says whether this machine's PMU counts cache
// misses: where it does, the one-liner counts them instead of being
// refused.
func pmuCountsCacheMisses() bool {
	attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_HARDWARE, Config: unix.PERF_COUNT_HW_CACHE_MISSES, Sample: 1000000}
	attr.Size = uint32(unsafe.Sizeof(attr))
	fd, err := unix.PerfEventOpen(&attr, -1, 0, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// withC says whether run's options include -c CMD.
func withC(args []string) bool { return slices.Contains(args, "-c") }
