package compiler

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/internal/testenv"
)

func TestParseListPattern(t *testing.T) {
	for _, c := range []struct {
		arg                 string
		kind, binary, match string
	}{
		{"kprobe:vfs_*", "kprobe", "", "vfs_*"},
		{"k:vfs_read", "kprobe", "", "vfs_read"},
		{"kr:vfs_read", "kretprobe", "", "vfs_read"},
		{"kfunc:vfs_read", "fentry", "", "vfs_read"},
		{"fentry:vmlinux:vfs_*", "fentry", "", "vfs_*"},
		{"fr:*:tcp_*", "fexit", "", "tcp_*"},
		{"kernel:ksys_*", "kernel", "", "ksys_*"},
		{"tracepoint:syscalls:sys_enter_*", "tracepoint", "", "syscalls:sys_enter_*"},
		{"t:sched:*", "tracepoint", "", "sched:*"},
		{"uprobe:/bin/bash:readline", "uprobe", "/bin/bash", "readline"},
		{"ur:libc:malloc*", "uretprobe", "libc", "malloc*"},
		{"user:./a.out:main", "user", "./a.out", "main"},
		{"vfs_*", "", "", "vfs_*"},
		{"*:vfs_*", "", "", "vfs_*"},
		{"", "", "", "*"},
		{"  kprobe:vfs_read ", "kprobe", "", "vfs_read"},
	} {
		q, diags := ParseListPatterns(c.arg)
		if diags.HasErrors() || len(q) != 1 {
			t.Errorf("%q: %v", c.arg, diags)
			continue
		}
		if p := q[0]; p.Kind != c.kind || p.Binary != c.binary || p.Match != c.match {
			t.Errorf("%q: kind %q, binary %q, match %q; want %q, %q, %q", c.arg, p.Kind, p.Binary, p.Match, c.kind, c.binary, c.match)
		}
	}

	q, diags := ParseListPatterns("k:vfs_read, t:sched:sched_switch")
	if diags.HasErrors() || len(q) != 2 || q[1].Kind != "tracepoint" || q[1].Range.Start.Column != 13 {
		t.Fatalf("a list of two: %+v %v", q, diags)
	}
	if got := q.Events(); !slices.Equal(got, []string{"sched:sched_switch"}) || !q.KernelFunctions() {
		t.Errorf("events %q, functions %v", got, q.KernelFunctions())
	}
}

// TestParseListPatternHostile holds each bad pattern to its diagnostic:
// the summary, the column it points at, and the fix in the detail.
func TestParseListPatternHostile(t *testing.T) {
	for _, c := range []struct {
		arg, summary string
		column       int
		detail       string
	}{
		{":::", "Empty probe kind", 1, "A pattern is KIND:NAME"},
		{"kprob:vfs_read", "Unknown probe kind", 1, `Nearest: "kprobe"`},
		{"k:vfs_read,,t:sched:*", "Empty pattern", 12, "remove the extra comma"},
		{"k:vfs_read,", "Empty pattern", 12, "remove the extra comma"},
		{"kprobe:" + strings.Repeat("a", 5000), "Pattern too long", 1, "at most 1024"},
		{strings.Repeat("k:x,", 100), "Too many patterns", 1, "at most 64"},
		{"kprobe:vfs_\x1b[31m", "Pattern not printable", 12, `"kprobe:vfs_\x1b[31m"`},
		{"kprobe:vfs_[", "Bad glob", 8, "unclosed ["},
		{"kprobe:", "No function", 8, "kprobe:vfs_*"},
		{"kprobe:kvm:kvm_*", "Kernel module not listed by name", 8, "write kprobe:kvm_*"},
		{"t:sched_switch", "Bad tracepoint pattern", 3, "tracepoint:GROUP:EVENT"},
		{"t:ftrace:function", "Bad tracepoint pattern", 3, "cannot be attached"},
		{"tracepoint:a b:c", "Bad tracepoint pattern", 12, "letters, digits and underscores"},
		{"uprobe:readline", "No binary", 8, "uprobe:/bin/bash:readline"},
		{"uprobe:/bin/*:main", "Binary is a glob", 8, "Give its path"},
		{"uprobe:/bin/bash:", "No function", 18, "uprobe:/bin/bash:*"},
		{"usdt:/bin/x", "Bad USDT pattern", 6, "usdt:/usr/bin/python3:python:function__entry"},
		{"U:/bin/x:a:b:c", "Bad USDT pattern", 3, "usdt:/usr/bin/python3:* (every probe)"},
		{"usdt::t:pair", "No binary", 6, "usdt:/usr/bin/python3:*"},
		{"usdt:/bin/*:t:pair", "Binary is a glob", 6, "the USDT probes of one"},
		{"usdt:/bin/x:t:", "No probe", 13, "usdt:/bin/x:PROVIDER:NAME"},
		{"usdt:/bin/x:t:[", "Bad glob", 13, "unclosed ["},
		{"profile:hz:99", "Nothing to list", 1, "samples every CPU"},
		{"rt:sched_switch", "Nothing to list", 1, "tracepoint:GROUP:EVENT"},
		{"software:*", "Nothing to list", 1, "page-faults (faults)"},
		{"h:*", "Nothing to list", 1, "instructions"},
	} {
		_, diags := ParseListPatterns(c.arg)
		if len(diags) != 1 {
			t.Errorf("%q: %d diagnostics, want 1: %v", c.arg, len(diags), diags)
			continue
		}
		d := diags[0]
		if d.Severity != hcl.DiagError || d.Summary != c.summary || d.Subject == nil || d.Subject.Filename != ListSource ||
			d.Subject.Start.Column != c.column || !strings.Contains(d.Detail, c.detail) {
			t.Errorf("%q: %s at %v: %s\nwant %s at column %d, with %q", c.arg, d.Summary, d.Subject, d.Detail, c.summary, c.column, c.detail)
		}
	}
}

// listFacts are a facts file's: a function list, events, and the
// linux-6.12-amd64 profile's tracepoint formats.
func listFacts(t *testing.T) *bpf.Facts {
	t.Helper()
	f, err := bpf.Profile("linux-6.12-amd64")
	if err != nil {
		t.Fatal(err)
	}
	f.Functions = []string{"ksys_read", "kthread_create_on_node", "vfs_read", "vfs_readv", "vfs_write"}
	return f
}

func listLines(t *testing.T, arg string, f *bpf.Facts, verbose bool) ([]string, hcl.Diagnostics) {
	t.Helper()
	q, diags := ParseListPatterns(arg)
	if diags.HasErrors() {
		t.Fatalf("%q: %v", arg, diags)
	}
	points, diags := List(q, f, verbose)
	var lines []string
	for _, p := range points {
		lines = append(lines, p.String())
		for _, fl := range p.Fields {
			lines = append(lines, "    "+fl)
		}
	}
	return lines, diags
}

func TestListMatches(t *testing.T) {
	f := listFacts(t)
	for _, c := range []struct {
		arg  string
		want []string
	}{
		{"kprobe:vfs_*", []string{"kprobe:vfs_read", "kprobe:vfs_readv", "kprobe:vfs_write"}},
		{"kr:vfs_read", []string{"kretprobe:vfs_read"}},
		{"kernel:*read", []string{"kernel:ksys_read", "kernel:vfs_read"}},
		{"k:vfs_read,kprobe:vfs_rea?", []string{"kprobe:vfs_read"}},
		{"t:sched:sched_switch", []string{"tracepoint:sched:sched_switch"}},
		{"tracepoint:syscalls:sys_enter_open*", []string{"tracepoint:syscalls:sys_enter_open", "tracepoint:syscalls:sys_enter_open_by_handle_at",
			"tracepoint:syscalls:sys_enter_open_tree", "tracepoint:syscalls:sys_enter_openat", "tracepoint:syscalls:sys_enter_openat2"}},
		// Bare: every tracepoint, then every kernel function (as kprobes).
		{"*sys_enter_readv", []string{"tracepoint:syscalls:sys_enter_readv"}},
		{"vfs_readv", []string{"kprobe:vfs_readv"}},
		{"*read", []string{"tracepoint:i2c:i2c_read", "tracepoint:maple_tree:ma_read", "tracepoint:regmap:regmap_bulk_read",
			"tracepoint:regmap:regmap_reg_read", "tracepoint:smbus:smbus_read", "tracepoint:syscalls:sys_enter_read",
			"tracepoint:syscalls:sys_exit_read", "tracepoint:xdp:xdp_cpumap_kthread", "kprobe:ksys_read", "kprobe:vfs_read"}},
	} {
		got, diags := listLines(t, c.arg, f, false)
		if diags.HasErrors() || !slices.Equal(got, c.want) {
			t.Errorf("%q:\n got %q\nwant %q\n%v", c.arg, got, c.want, diags)
		}
	}

	// -v: a tracepoint's fields as its format declares them.
	got, diags := listLines(t, "t:syscalls:sys_enter_openat,t:sched:sched_switch", f, true)
	want := []string{"tracepoint:syscalls:sys_enter_openat", "    int __syscall_nr", "    int dfd", "    const char * filename", "    int flags", "    umode_t mode",
		"tracepoint:sched:sched_switch", "    char prev_comm[16]", "    pid_t prev_pid", "    int prev_prio", "    long prev_state",
		"    char next_comm[16]", "    pid_t next_pid", "    int next_prio"}
	if diags.HasErrors() || !slices.Equal(got, want) {
		t.Errorf("-v:\n got %q\nwant %q\n%v", got, want, diags)
	}

	// Nothing matched: an error at the pattern, with the nearest names.
	_, diags = listLines(t, "k:vfs_raed", f, false)
	if len(diags) != 1 || diags[0].Summary != "Pattern matches nothing" || !strings.Contains(diags[0].Detail, `Nearest: "vfs_read"`) {
		t.Errorf("typo: %v", diags)
	}
}

// TestListProfile: a profile has tracepoints but no function list, nor
// BTF; what needs them says so.
func TestListProfile(t *testing.T) {
	f, _ := bpf.Profile("linux-7.2-arm64")
	for arg, summary := range map[string]string{
		"kprobe:vfs_read": "No kernel functions to list",
		"t:nope:*":        "Pattern matches nothing",
	} {
		if _, diags := listLines(t, arg, f, false); len(diags) != 1 || diags[0].Summary != summary {
			t.Errorf("%q: %v, want %s", arg, diags, summary)
		}
	}
	got, diags := listLines(t, "*sys_enter_openat", f, false)
	if !slices.Equal(got, []string{"tracepoint:syscalls:sys_enter_openat"}) || len(diags) != 1 ||
		diags[0].Severity != hcl.DiagWarning || diags[0].Summary != "Kernel functions not searched" {
		t.Errorf("bare on a profile: %q %v", got, diags)
	}
	f = listFacts(t)
	if _, diags := listLines(t, "fentry:vfs_read", f, false); len(diags) != 1 || diags[0].Summary != "No BTF to list fentry with" {
		t.Errorf("fentry without BTF: %v", diags)
	}
}

// TestListPrototypes reads this machine's kernel BTF: the prototypes of
// vfs_read in each kind's style.
func TestListPrototypes(t *testing.T) {
	if _, err := os.Stat(bpf.VmlinuxBTF); err != nil {
		testenv.Absent(t, "no kernel BTF: %v", err)
	}
	f := listFacts(t)
	f.LocalBTF = true
	for arg, want := range map[string][]string{
		"kprobe:vfs_read":    {"kprobe:vfs_read", "    struct file * arg0", "    char * arg1", "    size_t arg2", "    loff_t * arg3"},
		"kretprobe:vfs_read": {"kretprobe:vfs_read", "    ssize_t retval"},
		"fentry:vfs_read":    {"fentry:vmlinux:vfs_read", "    struct file * file", "    char * buf", "    size_t count", "    loff_t * pos", "    ssize_t retval"},
		"kernel:vfs_read":    {"kernel:vfs_read", "    struct file * file", "    char * buf", "    size_t count", "    loff_t * pos", "    ssize_t ret"},
		// A function pointer and a variadic function: C's spelling, and
		// kprobe's argN only for what registers hold.
		"fentry:kthread_create_on_node": {"fentry:vmlinux:kthread_create_on_node", "    int (*)(void *) threadfn", "    void * data", "    int node",
			"    const char * namefmt", "    ...", "    struct task_struct * retval"},
		"k:kthread_create_on_node": {"kprobe:kthread_create_on_node", "    int (*)(void *) arg0", "    void * arg1", "    int arg2", "    const char * arg3"},
	} {
		got, diags := listLines(t, arg, f, true)
		if diags.HasErrors() || !slices.Equal(got, want) {
			t.Errorf("%q:\n got %q\nwant %q\n%v", arg, got, want, diags)
		}
	}
	// A bare pattern lists kernel functions as kprobes, prototypes too.
	got, _ := listLines(t, "vfs_read", f, true)
	if want := []string{"kprobe:vfs_read", "    struct file * arg0", "    char * arg1", "    size_t arg2", "    loff_t * arg3"}; !slices.Equal(got, want) {
		t.Errorf("bare -v: %q, want %q", got, want)
	}
	got, _ = listLines(t, "fentry:vfs_*", f, false)
	if want := []string{"fentry:vmlinux:vfs_read", "fentry:vmlinux:vfs_readv", "fentry:vmlinux:vfs_write"}; !slices.Equal(got, want) {
		t.Errorf("fentry glob: %q, want %q", got, want)
	}
}

// TestListUser lists the functions of this machine's bash and libc, as
// user probes read them: a library by name through ld.so.cache.
func TestListUser(t *testing.T) {
	const bash, libc = "/bin/bash", "/lib/x86_64-linux-gnu/libc.so.6"
	for _, file := range []string{bash, libc} {
		if _, err := os.Stat(file); err != nil {
			testenv.Absent(t, "%s: %v", file, err)
		}
	}
	f := listFacts(t)
	f.Arch = bpf.ArchX86_64
	for arg, want := range map[string][]string{
		"uprobe:/bin/bash:readline,ur:/bin/bash:rl_set_prom?t": {"uprobe:/bin/bash:readline", "uretprobe:/bin/bash:rl_set_prompt"},
		"user:libc:mallo?": {"user:" + libc + ":malloc"},
	} {
		got, diags := listLines(t, arg, f, false)
		if diags.HasErrors() || !slices.Equal(got, want) {
			t.Errorf("%q: got %q, want %q: %v", arg, got, want, diags)
		}
	}
	for arg, summary := range map[string]string{
		"uprobe:/nonexistent-bt-list:main": "Cannot read binary",
		"uprobe:libnonexistent-bt-list:x":  "Library not found",
		"uprobe:/bin/bash:readlin":         "Pattern matches nothing",
	} {
		if _, diags := listLines(t, arg, f, false); len(diags) != 1 || diags[0].Summary != summary {
			t.Errorf("%q: %v, want %s", arg, diags, summary)
		}
	}
}

// FuzzParseListPatterns: whatever the argument, parsing never panics,
// and every diagnostic points into the argument.
func FuzzParseListPatterns(f *testing.F) {
	for _, s := range []string{"", ":::", "k:vfs_*,t:sched:*", "uprobe:/bin/bash:readline", "t:a:[", "é:\x00", strings.Repeat(",", 70)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, arg string) {
		q, diags := ParseListPatterns(arg)
		for _, d := range diags {
			if d.Subject == nil || d.Subject.Start.Byte < 0 || d.Subject.End.Byte > len(arg) || d.Subject.Start.Byte > d.Subject.End.Byte {
				t.Fatalf("%q: %s at %+v", arg, d.Summary, d.Subject)
			}
		}
		if !diags.HasErrors() && len(q) == 0 {
			t.Fatalf("%q: no patterns and no error", arg)
		}
	})
}

// TestListUSDT: a binary's USDT probes, one line each however many sites
// it has, in bpftrace's three forms; -v shows the argument specifiers.
func TestListUSDT(t *testing.T) {
	bin := buildListUSDT(t)
	f := listFacts(t)
	f.Arch = bpf.ArchX86_64
	for arg, want := range map[string][]string{
		"usdt:" + bin + ":*":                         {"usdt:" + bin + ":t:pair", "usdt:" + bin + ":t:glob"},
		"U:" + bin + ":t:pair":                       {"usdt:" + bin + ":t:pair"},
		"usdt:" + bin + ":gl*":                       {"usdt:" + bin + ":t:glob"},
		"usdt:" + bin + ":*:*":                       {"usdt:" + bin + ":t:pair", "usdt:" + bin + ":t:glob"},
		"usdt:" + bin + ":t:pair,U:" + bin + ":pair": {"usdt:" + bin + ":t:pair"},
	} {
		got, diags := listLines(t, arg, f, false)
		if diags.HasErrors() || !slices.Equal(got, want) {
			t.Errorf("%q: got %q, want %q: %v", arg, got, want, diags)
		}
	}
	q, diags := ParseListPatterns("usdt:" + bin + ":t:pair")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	pts, diags := List(q, f, true)
	if diags.HasErrors() || len(pts) != 1 || len(pts[0].Fields) != 2 {
		t.Fatalf("-v: %+v, want the two sites' specifiers: %v", pts, diags)
	}
	for _, line := range pts[0].Fields {
		if specs := strings.Fields(line); len(specs) != 2 || !strings.Contains(line, "@") {
			t.Errorf("-v: %q, want two specifiers", line)
		}
	}
	for arg, summary := range map[string]string{
		"usdt:" + bin + ":t:nope":     "Pattern matches nothing",
		"usdt:/nonexistent-bt-lu:*":   "Cannot read binary",
		"usdt:libnonexistent-bt-lu:*": "Library not found",
		"usdt:/bin/sh:*":              "No USDT probes",
	} {
		if _, diags := listLines(t, arg, f, false); len(diags) != 1 || diags[0].Summary != summary {
			t.Errorf("%q: %v, want %s", arg, diags, summary)
		}
	}
}

// buildListUSDT builds a program with the USDT probes t:pair (two
// sites, two arguments) and t:glob.
func buildListUSDT(t *testing.T) string {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		testenv.Absent(t, "no gcc: %v", err)
	}
	dir := t.TempDir()
	src := `#include <sys/sdt.h>
long bt_lu_global;
__attribute__((noinline)) void pair(int a, long b) { DTRACE_PROBE2(t, pair, a, b); }
int main(int argc, char **argv) { pair(argc, 2); DTRACE_PROBE2(t, pair, argc, 3L); DTRACE_PROBE1(t, glob, bt_lu_global); return 0; }
`
	if err := os.WriteFile(filepath.Join(dir, "p.c"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "bt-lu-usdt")
	if out, err := exec.Command("nice", "-n", "19", gcc, "-O2", "-o", bin, filepath.Join(dir, "p.c")).CombinedOutput(); err != nil {
		if bytes.Contains(out, []byte("sys/sdt.h")) {
			testenv.Absent(t, "no sys/sdt.h (systemtap-sdt-dev)")
		}
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	return bin
}

// TestListUSDTPostgres lists the USDT probes of a real Debian program,
// PostgreSQL 15's server (built with --enable-dtrace), and holds them to
// what readelf -n reads from the same notes: every probe once, in the
// notes' order, and with -v each distinct argument set of its sites
// (query__start's 8@%rbx, query__done's 8@-144(%rbp) on Debian's build).
func TestListUSDTPostgres(t *testing.T) {
	const bin = "/usr/lib/postgresql/15/bin/postgres"
	if _, err := os.Stat(bin); err != nil {
		testenv.Absent(t, "no PostgreSQL 15 (postgresql-15): %v", err)
	}
	out, err := exec.Command("readelf", "-n", bin).Output()
	if err != nil {
		testenv.Absent(t, "readelf (binutils): %v", err)
	}
	// readelf's Provider:, Name: and Arguments: lines, one set a site.
	var want []string
	args := map[string][]string{}
	var provider, key string
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "Provider: "):
			provider = strings.TrimPrefix(line, "Provider: ")
		case strings.HasPrefix(line, "Name: "):
			key = provider + ":" + strings.TrimPrefix(line, "Name: ")
			if _, ok := args[key]; !ok {
				want = append(want, key)
				args[key] = nil
			}
		case strings.HasPrefix(line, "Arguments:"):
			if a := strings.TrimSpace(strings.TrimPrefix(line, "Arguments:")); a != "" && !slices.Contains(args[key], a) {
				args[key] = append(args[key], a)
			}
		}
	}
	if len(want) == 0 || args["postgresql:query__start"] == nil {
		t.Fatalf("readelf -n %s shows no postgresql:query__start:\n%s", bin, out)
	}
	var wantLines []string
	for _, k := range want {
		wantLines = append(wantLines, "usdt:"+bin+":"+k)
		for _, a := range args[k] {
			wantLines = append(wantLines, "    "+a)
		}
	}
	got, diags := listLines(t, "usdt:"+bin+":*", listFacts(t), true)
	if diags.HasErrors() || !slices.Equal(got, wantLines) {
		t.Errorf("probectl list -v: %v\n got %q\nwant %q", diags, got, wantLines)
	}
	t.Logf("%d probes; query__start %q, query__done %q", len(want), args["postgresql:query__start"], args["postgresql:query__done"])
}
