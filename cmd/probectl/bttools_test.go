package main

import (
	"fmt"
	"os"
	"strings"
	"testing"
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
