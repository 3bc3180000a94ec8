package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/probectl/probectl/bpf/symbols"
	"github.com/probectl/probectl/internal/testenv"
	"github.com/probectl/probectl/runtime"
	"github.com/probectl/probectl/spec/bpftrace"
)

// btWork builds testdata/btmaps/work.c: a process that makes a fixed set
// of system calls once told to (its comment lists them).
func btWork(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Absent(t, "running probes needs root")
	}
	if _, err := exec.LookPath("bpftrace"); err != nil {
		testenv.Absent(t, "bpftrace is not installed")
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Fatal("gcc (the side-by-side tests build their workload with it; .ci/run installs it)")
	}
	return buildWorkload(t, fmt.Sprintf("bm-w%d", os.Getpid()%1000000), "-O1", "testdata/btmaps/work.c")
}

// btLive is btOne for a workload that lives while the maps print (its
// symbols resolve only then): both end at an interval probe's exit()
// 6s after they start (bpftrace 0.17 sees a SIGINT only when an event
// comes), the workload done long before.
func btLive(t *testing.T, path, prog, ready string, bpftrace bool) string {
	t.Helper()
	w := startWorkload(t, -1, exec.Command(path, "stay"))
	defer w.end(t)
	src := fmt.Sprintf(prog, w.pid, path) + " interval:s:6 { exit(); }"
	if bpftrace {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bpftrace", "-e", src)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		got := untilReady(t, bufio.NewReader(out), ready, "text", func() { w.work(t) })
		if err := cmd.Wait(); err != nil {
			t.Fatalf("bpftrace: %v", err)
		}
		return got
	}
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	var errOut strings.Builder
	go func() {
		code := run([]string{"-state-dir", t.TempDir(), "run", "-e", src}, pw, &errOut)
		pw.Close()
		done <- code
	}()
	got := untilReady(t, bufio.NewReader(pr), ready, "text", func() { w.work(t) })
	if code := <-done; code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, got, errOut.String())
	}
	return strings.TrimSuffix(got, "\nDetached and removed every probe.\n")
}

// btSide runs prog (%[1]d in it is the workload's pid, %[2]s its path) with the installed
// bpftrace -p PID and with probectl run -p PID, each on a workload of its
// own (btOne).
func btSide(t *testing.T, path, prog, ready, format string) (bt, pc string) {
	t.Helper()
	return btOne(t, path, prog, ready, format, true), btOne(t, path, prog, ready, format, false)
}

// btOne runs prog with bpftrace or probectl run on a workload started
// once the tool has printed the line ready (BEGIN's). It returns what the
// tool printed on stdout after that line, up to its exit (the workload's
// exit ends it); of probectl's text, its own lines ("Process N exited.",
// "Detached ...") left out. format is text or json; with json the whole
// stdout, bpftrace's first line and all.
func btOne(t *testing.T, path, prog, ready, format string, bpftrace bool) string {
	t.Helper()
	w := startWorkload(t, -1, exec.Command(path))
	src := fmt.Sprintf(prog, w.pid, path)
	if bpftrace {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bpftrace", "-f", format, "-p", strconv.Itoa(w.pid), "-e", src)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		got := untilReady(t, bufio.NewReader(out), ready, format, func() { w.workExit(t) })
		if err := cmd.Wait(); err != nil {
			t.Fatalf("bpftrace: %v", err)
		}
		return got
	}
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	var errOut strings.Builder
	go func() {
		code := run([]string{"-state-dir", t.TempDir(), "run", "-f", format, "-p", strconv.Itoa(w.pid), "-e", src}, pw, &errOut)
		pw.Close()
		done <- code
	}()
	got := untilReady(t, bufio.NewReader(pr), ready, format, func() { w.workExit(t) })
	if code := <-done; code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, got, errOut.String())
	}
	if format == "text" {
		got = strings.Replace(got, fmt.Sprintf("Process %d exited.\n", w.pid), "", 1)
		got = strings.TrimSuffix(got, "\nDetached and removed every probe.\n")
	}
	return got
}

// untilReady reads r to the ready line, calls work, and returns what r
// holds after the line, to its end (with json: from the start).
func untilReady(t *testing.T, r *bufio.Reader, ready, format string, work func()) string {
	t.Helper()
	var before strings.Builder
	want := ready + "\n"
	if format == "json" {
		want = `{"type": "printf", "data": "` + strings.ReplaceAll(ready, `"`, `\"`) + `\n"}` + "\n"
	}
	for {
		l, err := r.ReadString('\n')
		before.WriteString(l)
		if l == want {
			break
		}
		if err != nil {
			t.Fatalf("no ready line %q in:\n%s", want, before.String())
		}
	}
	work()
	rest, _ := io.ReadAll(r)
	if format == "json" {
		return before.String() + string(rest)
	}
	return string(rest)
}

// bpftrace and probectl run print the same maps at the end, byte for
// byte, on the same workload (15 writes of five sizes, 7 getppid, and
// exit_group, of one process): no normalisation, the programs filter
// the workload's pid, so no other process's row is there to leave out.
func TestRunMapsAsBpftrace(t *testing.T) {
	path := btWork(t)
	begin := `BEGIN { printf("btmaps-ready\n"); } `
	w := `tracepoint:syscalls:sys_enter_write /pid == %[1]d/ `
	syscount, err := os.ReadFile("testdata/btmaps/syscount-0.17.bt")
	if err != nil {
		t.Fatal(err)
	}
	current, err := os.ReadFile("../../spec/bpftrace/testdata/tools/syscount.bt")
	if err != nil {
		t.Fatal(err)
	}
	const enter = "tracepoint:raw_syscalls:sys_enter\n"
	filter := func(src []byte) string {
		return strings.Replace(string(src), enter, enter+"/pid == %[1]d/\n", 1)
	}
	cases := []struct {
		name, prog, ready string
		json              bool
	}{
		{"count", begin + w + `{ @c[comm] = count(); @n[args->count] = count(); @ = count(); }`, "", true},
		{"hist", begin + w + `{ @h = hist(args->count); @hk[comm] = hist(args->count); @b[args->count / 600] = hist(args->count); }`, "", true},
		{"lhist", begin + w + `{ @l = lhist(args->count, 0, 2000, 250); @lk[args->count > 1000] = lhist(args->count, 0, 4096, 1024); }`, "", false},
		{"stats", begin + w + `{ @s = sum(args->count); @a = avg(args->count); @mn = min(args->count); @mx = max(args->count); @st = stats(args->count); @sk[args->count] = sum(args->count); @ak[args->count] = avg(args->count / 7); @stk[args->count] = stats(args->count); @mnk[args->count] = min(args->count); @mxk[args->count] = max(args->count); }`, "", false},
		{"two keys", begin + w + `{ @two[comm, args->count] = count(); @pair[args->count, args->count * 2] = sum(args->count); }`, "", false},
		{"print clear zero", begin + w + `{ @c[args->count] = count(); @z[comm] = count(); @n = count(); @nk[pid == 1] = count(); @ns = sum(pid == 1 ? 1 : 0); @nh[pid == 1] = hist(1); @sc = sum(args->count); @ac = avg(args->count); @hc = hist(args->count); @g[args->count] = sum(1); @h = hist(args->count); } tracepoint:syscalls:sys_enter_kill /pid == %[1]d/ { @never = count(); @nevers = sum(1); } END { printf("top 2:\n"); print(@c, 2); clear(@c); zero(@z); printf("h %%d %%s\n", 3, "x"); print(@h); clear(@h); print(@g, 3, 2); clear(@n); clear(@sc); clear(@ac); zero(@hc); }`, "", false},
		{"syscount 0.17", filter(syscount), "Counting syscalls... Hit Ctrl-C to end.", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ready := c.ready
			if ready == "" {
				ready = "btmaps-ready"
			}
			formats := []string{"text"}
			if c.json {
				formats = append(formats, "json")
			}
			for _, f := range formats {
				bt, pc := btSide(t, path, c.prog, ready, f)
				if !strings.Contains(bt, "@") {
					t.Errorf("-f %s: bpftrace printed no map:\n%s", f, bt)
				}
				if bt != pc {
					t.Errorf("-f %s: run printed\n%s\nbpftrace\n%s", f, pc, bt)
				} else if testing.Verbose() {
					t.Logf("-f %s: both printed\n%s", f, bt)
				}
			}
		})
	}
	// usym() and func name a function of a process while it lives: the
	// workload lives on until both have printed.
	t.Run("usym and func", func(t *testing.T) {
		prog := begin + `uprobe:%[2]s:bm_call /pid == %[1]d/ { @u[usym(arg0)] = count(); @fu[func, usym(arg0)] = count(); } uprobe:%[2]s:bm_one, uprobe:%[2]s:bm_two /pid == %[1]d/ { @f[func] = count(); }`
		bt := btLive(t, path, prog, "btmaps-ready", true)
		pc := btLive(t, path, prog, "btmaps-ready", false)
		if !strings.Contains(bt, "@u[bm_two]: 2") {
			t.Errorf("bpftrace printed no @u[bm_two]: 2:\n%s", bt)
		}
		if bt != pc {
			t.Errorf("run printed\n%s\nbpftrace\n%s", pc, bt)
		}
	})
	// A stack key prints as bpftrace prints it: a newline, a frame a line
	// (func+off), "]"; a kernel stack of a uprobe, which the kernel does
	// not record, as an empty key. The workload is built static with frame
	// pointers: every frame is its own, the same for both. Three frames:
	// the fourth, a return address into static libc's frame that has no
	// frame pointer, is the zero-size __do_global_dtors_aux, which
	// probectl's symbols name and bpftrace's (bcc's) print in hex.
	t.Run("stacks", func(t *testing.T) {
		static := path + "-static"
		if out, err := exec.Command("gcc", "-static", "-O1", "-fno-omit-frame-pointer", "-o", static, "testdata/btmaps/work.c").CombinedOutput(); err != nil {
			t.Fatalf("gcc: %v\n%s", err, out)
		}
		prog := begin + `uprobe:%[2]s:bm_one /pid == %[1]d/ { @[ustack(3)] = count(); @k[kstack] = count(); @u2[ustack(2)] = count(); }`
		bt := btLive(t, static, prog, "btmaps-ready", true)
		pc := btLive(t, static, prog, "btmaps-ready", false)
		if !strings.Contains(bt, "@[\n    bm_one+0\n    main+") || !strings.Contains(bt, "@k[]: 1\n") {
			t.Errorf("bpftrace printed no bm_one stack and no empty kstack:\n%s", bt)
		}
		if bt != pc {
			t.Errorf("run printed\n%s\nbpftrace\n%s", pc, bt)
		}
	})
	// The tool as the importer's testdata has it (bpftrace's current
	// syscount.bt, which 0.17 cannot run) prints as 0.17's does.
	t.Run("syscount", func(t *testing.T) {
		ready := "Counting syscalls... Hit Ctrl-C to end."
		bt := btOne(t, path, filter(syscount), ready, "text", true)
		pc := btOne(t, path, filter(current), ready, "text", false)
		if bt != pc {
			t.Errorf("run printed\n%s\nbpftrace\n%s", pc, bt)
		}
	})
}

// An interval probe that prints a map and clears it prints what each
// period added, as bpftrace does, although the kernel's map keeps its
// totals: the values at clear() are the map's zero, and a key that added
// nothing since is left out. zero() keeps the keys, at 0.
func TestBtOutputClearEachInterval(t *testing.T) {
	imp := bpftrace.Run{
		Maps: []bpftrace.Map{
			{Name: "@a", Kind: "avg", Parts: []bpftrace.MapPart{{Probe: "tracepoint.a", Aggregation: "a_count", Role: "count"}, {Probe: "tracepoint.a", Aggregation: "a_sum", Role: "sum"}}},
			{Name: "@c", Kind: "count", Keyed: true, Parts: []bpftrace.MapPart{{Probe: "tracepoint.a", Aggregation: "c"}, {Probe: "tracepoint.b", Aggregation: "c"}}},
		},
	}
	b := newBtOutput(imp, false)
	var totals map[string][2]int64 // key: the totals of c in probe a and b
	var avgCount, avgSum int64
	read := func() []runtime.ProbeResult {
		pa := runtime.ProbeResult{Address: "tracepoint.a"}
		pb := runtime.ProbeResult{Address: "tracepoint.b"}
		ca := runtime.AggregationResult{Name: "c"}
		cb := runtime.AggregationResult{Name: "c"}
		for k, v := range totals {
			ca.Entries = append(ca.Entries, runtime.Entry{Key: runtime.OrderedKey{{Name: "comm", Value: k}}, Value: &v[0]})
			cb.Entries = append(cb.Entries, runtime.Entry{Key: runtime.OrderedKey{{Name: "comm", Value: k}}, Value: &v[1]})
		}
		n, s := avgCount, avgSum
		pa.Aggregations = []runtime.AggregationResult{ca,
			{Name: "a_count", Entries: []runtime.Entry{{Value: &n}}},
			{Name: "a_sum", Entries: []runtime.Entry{{Value: &s}}}}
		pb.Aggregations = []runtime.AggregationResult{cb}
		return []runtime.ProbeResult{pa, pb}
	}
	tick := []bpftrace.Step{{Op: "print", Map: "@c"}, {Op: "clear", Map: "@c"}, {Op: "print", Map: "@a"}, {Op: "clear", Map: "@a"}}
	var out strings.Builder
	totals, avgCount, avgSum = map[string][2]int64{"x": {2, 1}, "y": {1, 0}}, 2, 10
	b.steps(&out, tick, read)
	totals, avgCount, avgSum = map[string][2]int64{"x": {2, 1}, "y": {5, 0}, "z": {0, 2}}, 5, 31
	b.steps(&out, tick, read)
	b.steps(&out, []bpftrace.Step{{Op: "zero", Map: "@c"}}, read)
	b.finish(&out, read, 0)
	want := "@c[y]: 1\n@c[x]: 3\n@a: 5\n\n" + // the first period
		"@c[z]: 2\n@c[y]: 4\n@a: 7\n\n" + // x added nothing; (31-10)/(5-2)
		"\n\n" + "\n\n" + // at the end: @a cleared, nothing since
		"@c[x]: 0\n@c[y]: 0\n@c[z]: 0\n" // zeroed: the keys stay
	if out.String() != want {
		t.Errorf("printed\n%q\nwant\n%q", out.String(), want)
	}
}

// A stack key's frames come from the ELF files a process maps, anyone's:
// a symbol that does not print is quoted, so that no frame forges a row
// ("]: 999") or writes an escape sequence; a frame without a symbol is
// its address; stacks lost for different reasons are one key, @[], as
// bpftrace prints them.
func TestBtOutputHostileStackSymbol(t *testing.T) {
	imp := bpftrace.Run{Maps: []bpftrace.Map{{Name: "@", Kind: "count", Keyed: true, Keys: []string{"ustack"},
		Parts: []bpftrace.MapPart{{Probe: "user.p", Aggregation: "u"}}}}}
	b := newBtOutput(imp, false)
	n1, n2, n3 := int64(1), int64(2), int64(4)
	evil := &runtime.Stack{User: true, Frames: []symbols.Frame{{Symbol: "f\n]: 999\n@[\x1b[2J", Offset: 3}, {Addr: 0x4015e0}, {Symbol: "main", Offset: 17}}}
	read := func() []runtime.ProbeResult {
		return []runtime.ProbeResult{{Address: "user.p", Aggregations: []runtime.AggregationResult{{Name: "u", Entries: []runtime.Entry{
			{Key: runtime.OrderedKey{{Name: "stack", Value: evil}}, Value: &n1},
			{Key: runtime.OrderedKey{{Name: "stack", Value: &runtime.Stack{User: true, ID: -14, Err: "no user stack"}}}, Value: &n2},
			{Key: runtime.OrderedKey{{Name: "stack", Value: &runtime.Stack{User: true, ID: -17, Err: "stack lost: hash collision in the stack map"}}}, Value: &n3},
		}}}}}
	}
	var out strings.Builder
	b.finish(&out, read, 0)
	want := "\n\n@[\n    \"f\\n]: 999\\n@[\\x1b[2J\"+3\n    0x4015e0\n    main+17\n]: 1\n@[]: 6\n"
	if out.String() != want {
		t.Errorf("printed\n%s\nwant\n%s", out.String(), want)
	}
}

// A ksym's or usym's text prints as the symbol's name alone, as bpftrace
// prints it.
func TestSymbolName(t *testing.T) {
	for in, want := range map[string]string{
		"vfs_read+0x12":               "vfs_read",
		"ext4_readdir+0x0 [ext4]":     "ext4_readdir",
		"worker [sym-work]":           "worker",
		"bm_two":                      "bm_two",
		"0xffffffffc0001234":          "0xffffffffc0001234",
		"0x7f0000001000 (no process)": "0x7f0000001000",
		"operator+0x10":               "operator",
	} {
		if got := symbolName(in); got != want {
			t.Errorf("symbolName(%q) = %q, want %q", in, got, want)
		}
	}
}
