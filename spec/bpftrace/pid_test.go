package bpftrace

import (
	"strings"
	"testing"
	"time"

	"github.com/probectl/probectl/spec"
)

// TestImportPID: with -p, user probes attach to the process's binary
// only and every kernel-side probe counts its events only, ahead of the
// program's own filter; the spec checks.
func TestImportPID(t *testing.T) {
	for _, tc := range []struct{ name, bt, want string }{
		{"a tracepoint with a filter", `tracepoint:syscalls:sys_enter_openat /comm == "a" || comm == "b"/ { @[comm] = count(); }`,
			`when = pid == 4242 && (comm == "a" || comm == "b")`},
		{"a tracepoint without one", `tracepoint:syscalls:sys_enter_openat { @n = count(); }`, `when = pid == 4242`},
		{"a user probe", `uprobe:/bin/sh:main { @n = count(); }`, `pid       = 4242`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, diags := ImportWith("p.bt", []byte(tc.bt), Options{PID: 4242})
			if diags.HasErrors() {
				t.Fatalf("import: %v", diags)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Errorf("want %q in\n%s", tc.want, out)
			}
			if !strings.Contains(string(out), "# - Limited to process 4242 (bpftrace -p 4242).") {
				t.Errorf("the spec does not say it is limited:\n%s", out)
			}
			if _, diags := spec.Parse(map[string][]byte{"p.hcl": out}); diags.HasErrors() {
				t.Errorf("the spec does not check: %v\n%s", diags, out)
			}
			plain, _ := Import("p.bt", []byte(tc.bt))
			if strings.Contains(string(plain), "4242") {
				t.Errorf("without -p the spec names the pid:\n%s", plain)
			}
		})
	}
}

// TestImportCPID: cpid is the child's pid with -c, an error naming the
// fix without.
func TestImportCPID(t *testing.T) {
	bt := `tracepoint:syscalls:sys_enter_openat /pid == cpid/ { @n = count(); }`
	out, diags := ImportWith("c.bt", []byte(bt), Options{CPID: 777})
	if diags.HasErrors() {
		t.Fatalf("import: %v", diags)
	}
	if !strings.Contains(string(out), "when = pid == 777") {
		t.Errorf("cpid is not the child's pid:\n%s", out)
	}
	_, diags = Import("c.bt", []byte(bt))
	if !diags.HasErrors() || diags[0].Summary != "Unsupported cpid" || !strings.Contains(diags[0].Detail, "run -c") {
		t.Errorf("without -c, want Unsupported cpid naming run -c, got %v", diags)
	}
}

// TestImportStopAfter: an interval probe calling exit() is when run
// stops (the shortest, of several); without one, nothing stops it.
func TestImportStopAfter(t *testing.T) {
	for _, tc := range []struct {
		bt   string
		want time.Duration
	}{
		{`tracepoint:sched:sched* { @[probe] = count(); } interval:s:5 { exit(); }`, 5 * time.Second},
		{`t:raw_syscalls:sys_enter { @ = count(); } interval:s:3 { exit(); } interval:ms:250 { exit(); }`, 250 * time.Millisecond},
		{`t:raw_syscalls:sys_enter { @ = count(); } interval:s:1 { print(@); }`, 0},
	} {
		r, diags := ImportRun("s.bt", []byte(tc.bt), Options{})
		if diags.HasErrors() {
			t.Fatalf("%s: %v", tc.bt, diags)
		}
		if r.StopAfter != tc.want {
			t.Errorf("%s: stops after %v, want %v", tc.bt, r.StopAfter, tc.want)
		}
	}
}
