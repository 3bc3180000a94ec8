package main

import (
	"strings"
	"testing"
)

// TestRunCat runs a tracepoint program that prints /proc/loadavg with
// cat() after a printf, as oomkill.bt does: each of the workload's 3
// getppid calls prints its line and then the file as the kernel formats
// it, read when the event printed; a path outside the allowlist stops
// run before anything attaches.
func TestRunCat(t *testing.T) {
	w := buildOLWork(t)
	ol := oneLiner{
		prog: `tracepoint:syscalls:sys_enter_getppid /comm == "{comm}"/ { printf("getppid %d, loadavg: ", pid); cat("/proc/loadavg"); }`,
		mode: "getppid", n: 3,
		check: countLines(`^getppid [0-9]+, loadavg: [0-9]+\.[0-9]{2} [0-9]+\.[0-9]{2} [0-9]+\.[0-9]{2} [0-9]+/[0-9]+ [0-9]+$`, 3),
	}
	out, stderr, code := runOneLiner(t, w, ol)
	if code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, strings.Join(out, "\n"), stderr)
	}
	ol.check(t, out)
	t.Logf("run printed:\n%s", strings.Join(out, "\n"))

	// -f json: each cat a line of its own, as bpftrace 0.17 writes it
	// ({"type": "cat", "data": "11.77 13.49 10.06 4/896 26341\n"}).
	// run says "Running" on stderr here: -c starts the workload.
	t.Setenv("OLWORK_NOSTOP", "1")
	ol.prog = strings.Replace(ol.prog, `comm == "{comm}"`, "pid == cpid", 1)
	ol.args = []string{"-f", "json", "-c", w.path + " getppid 3"}
	ol.check = countLines(`^\{"type": "cat", "data": "[0-9]+\.[0-9]{2} [0-9]+\.[0-9]{2} [0-9]+\.[0-9]{2} [0-9]+/[0-9]+ [0-9]+\\n"\}$`, 3)
	out, stderr, code = runOneLiner(t, w, ol)
	if code != 0 {
		t.Fatalf("run -f json: exit %d\n%s\n%s", code, strings.Join(out, "\n"), stderr)
	}
	ol.check(t, out)
	countLines(`^\{"type": "printf", "data": "getppid [0-9]+, loadavg: "\}$`, 3)(t, out)

	bad := oneLiner{prog: `tracepoint:syscalls:sys_enter_getppid { printf("x "); cat("/etc/shadow"); }`}
	out, stderr, code = runOneLiner(t, w, bad)
	if code != 1 || !strings.Contains(stderr, `Refused cat() of "/etc/shadow"`) || !strings.Contains(stderr, "-e:1:59: error:") {
		t.Fatalf("run of cat(/etc/shadow): exit %d, stdout %q, stderr:\n%s", code, out, stderr)
	}
}

// TestRunProbeExit runs exit() in a tracepoint probe, after its printf:
// of the workload's 5 getppid calls exactly the first prints, and the
// run stops there (within -duration's 60s: it ends at the exit), as
// bpftrace stops at the first event that calls exit().
func TestRunProbeExit(t *testing.T) {
	w := buildOLWork(t)
	ol := oneLiner{
		prog: `tracepoint:syscalls:sys_enter_getppid /comm == "{comm}"/ { printf("getppid %d\n", pid); exit(); }`,
		mode: "getppid", n: 5, args: []string{"-duration", "60s"},
		check: countLines(`^getppid [0-9]+$`, 1),
	}
	out, stderr, code := runOneLiner(t, w, ol)
	if code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, strings.Join(out, "\n"), stderr)
	}
	ol.check(t, out)
}
