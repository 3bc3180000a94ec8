package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/internal/testenv"
)

// The bpftrace tools probectl import now imports, run as probectl run
// runs a .bt file, on a workload whose calls are known exactly.

// naptime.bt as bpftrace ships it: the exit probe reads tv_sec and
// tv_nsec through the pointer the entry probe kept, a struct
// __kernel_timespec in the sleeper's memory (the format of
// sys_enter_nanosleep names it). The workload asks nanosleep for
// 0.012456789 s and clock_nanosleep for 1.012456789 s: two lines, its
// own, "0.012" and "1.012", under this test as its parent.
func TestRunImportedNaptime(t *testing.T) {
	path, comm := buildStackWork(t, "nap")
	out := runWhileWorking(t, "../../spec/bpftrace/testdata/tools/naptime.bt", path, []string{"nap", "12"}, "-v", "-duration", "4s", "-interval", "0")
	pcomm, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	pid := ""
	for _, l := range out {
		// [TIME] PPID PCOMM PID COMM SECONDS: the time() column, when
		// run prints it, is the moment's.
		f := strings.Fields(l)
		if len(f) == 6 {
			f = f[1:]
		}
		if len(f) != 5 || f[3] != comm {
			continue
		}
		if pid == "" {
			pid = f[2]
		}
		if f[2] != pid {
			t.Errorf("two pids for one single-threaded workload: %s and %s", pid, f[2])
		}
		got = append(got, strings.Join([]string{f[0], f[1], f[3], f[4]}, " "))
	}
	want := []string{
		fmt.Sprintf("%d %s %s 0.012", os.Getpid(), strings.TrimSpace(string(pcomm)), comm),
		fmt.Sprintf("%d %s %s 1.012", os.Getpid(), strings.TrimSpace(string(pcomm)), comm),
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("naptime printed, of the workload:\n%s\nwant:\n%s\nall of it:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), strings.Join(out, "\n"))
	}
}

// tracefsFile reads a file of tracefs (where it is mounted).
func tracefsFile(t *testing.T, rel string) string {
	t.Helper()
	for _, dir := range []string{"/sys/kernel/tracing", "/sys/kernel/debug/tracing"} {
		if b, err := os.ReadFile(filepath.Join(dir, rel)); err == nil {
			return string(b)
		}
	}
	testenv.Absent(t, "tracefs is not mounted")
	return ""
}

// Enum constants and offsetof() resolved through the running kernel's
// BTF, checked against what tracefs says independently: the values
// kfree_skb's print fmt gives SKB_DROP_REASON_NOT_SPECIFIED and
// SKB_DROP_REASON_NO_SOCKET ({ 2, "NOT_SPECIFIED" }), the offset of
// sched_switch's next_pid in its record (struct
// trace_event_raw_sched_switch is that record), and the UAPI layout of
// struct __kernel_timespec (tv_nsec at 8). The enum constants are what
// bpftrace prints for them too. Three getppid calls: three lines.
func TestRunImportedKernelConstants(t *testing.T) {
	path, comm := buildStackWork(t, "kc")
	kfree := tracefsFile(t, "events/skb/kfree_skb/format")
	reason := func(name string) string {
		m := regexp.MustCompile(`\{ (\d+), "` + name + `" \}`).FindStringSubmatch(kfree)
		if m == nil {
			testenv.Absent(t, "kfree_skb's format names no reason %s", name)
		}
		return m[1]
	}
	sw, err := bpf.ParseTracepointFormat("sched:sched_switch", tracefsFile(t, "events/sched/sched_switch/format"))
	if err != nil {
		t.Fatal(err)
	}
	nextPid := sw.Field("next_pid")
	if nextPid == nil {
		t.Fatal("sched_switch has no next_pid")
	}
	want := fmt.Sprintf("%s %s %d 8", reason("NOT_SPECIFIED"), reason("NO_SOCKET"), nextPid.Offset)
	prog := `tracepoint:syscalls:sys_exit_getppid /comm == "` + comm + `"/ { printf("kc %d %d %d %d\n", SKB_DROP_REASON_NOT_SPECIFIED, SKB_DROP_REASON_NO_SOCKET, ` +
		`offsetof(struct trace_event_raw_sched_switch, next_pid), offsetof(struct __kernel_timespec, tv_nsec)); }`
	out := runWhileWorking(t, prog, path, []string{"getppid", "3"}, "-v", "-duration", "3s", "-interval", "0", "-e")
	var got []string
	for _, l := range out {
		if v, ok := strings.CutPrefix(l, "kc "); ok {
			got = append(got, v)
		}
	}
	if strings.Join(got, "\n") != strings.Join([]string{want, want, want}, "\n") {
		t.Errorf("run printed:\n%s\nwant three lines %q; all of it:\n%s", strings.Join(got, "\n"), want, strings.Join(out, "\n"))
	}
	bt := bpftraceLines(t, `tracepoint:syscalls:sys_exit_getppid /comm == "`+comm+`"/ { printf("kc %d %d\n", SKB_DROP_REASON_NOT_SPECIFIED, SKB_DROP_REASON_NO_SOCKET); }`, path, "getppid", "1")
	if want := "kc " + reason("NOT_SPECIFIED") + " " + reason("NO_SOCKET"); len(bt) != 1 || bt[0] != want {
		t.Errorf("bpftrace printed %q, want [%q]", bt, want)
	}
}

// buf() and %r print what bpftrace 0.17 prints, byte for byte: the
// workload writes 16 bytes, some that do not print (\x01 \xff, a tab,
// DEL, a newline), then the bytes 0 to 99, of which buf keeps 64; twice.
// Its "ready PID" and "done" lines are writes too: "done" is the same in
// both runs, the ready line (its pid differs) is left out.
func TestRunImportedBuf(t *testing.T) {
	path, comm := buildStackWork(t, "bf")
	prog := `tracepoint:syscalls:sys_enter_write /comm == "` + comm + `"/ { printf("w %d [%r]\n", args->count, buf(args->buf, args->count)); }`
	writes := func(lines []string) []string {
		var out []string
		for _, l := range lines {
			if strings.HasPrefix(l, "w ") && !strings.Contains(l, "[ready ") {
				out = append(out, l)
			}
		}
		return out
	}
	want := writes(bpftraceLines(t, prog, path, "write", "2"))
	if len(want) != 5 {
		t.Fatalf("bpftrace printed %d lines, want 5 (two of each write, done):\n%s", len(want), strings.Join(want, "\n"))
	}
	got := writes(runWhileWorking(t, prog, path, []string{"write", "2"}, "-v", "-duration", "3s", "-interval", "0", "-e"))
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("run printed:\n%s\nbpftrace:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
