package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/bpf/symbols"
	"github.com/probectl/probectl/internal/flamegraph/flamegraphtest"
	"github.com/probectl/probectl/internal/testenv"
	"github.com/probectl/probectl/internal/views"
	"github.com/probectl/probectl/runtime"
	"golang.org/x/sys/unix"
)

// Stacks on the host, for real: testdata/stacks/work.c runs under a task
// name of its own; probes filter on it, so other activity on the machine
// never changes a count.

// stkWork builds the workload into a directory of its own, named so that
// its task name is unique to this test process.
func stkWork(t *testing.T) (path, comm string) { return buildStackWork(t, "stk") }

// buildStackWork builds testdata/stacks/work.c as PREFIX-wPID: the task
// name of one group of tests in this process.
func buildStackWork(t *testing.T, prefix string) (path, comm string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to load BPF")
	}
	comm = fmt.Sprintf("%s-w%d", prefix, os.Getpid()%1000000)
	// A build id of its own: the user's build-id index (and any copy of
	// this test running beside it) must not name another build's file.
	// 20 bytes, as the kernel's stack map reports build ids.
	id := fmt.Sprintf("-Wl,--build-id=0x%016x%08x%016x", time.Now().UnixNano(), os.Getpid(), rand.Uint64())
	return buildWorkload(t, comm, "-O0", "-fno-omit-frame-pointer", id, "testdata/stacks/work.c"), comm
}

// stkCLI runs probectl in a workspace of the test's own.
type stkCLI struct {
	t     *testing.T
	state string
	ws    string
}

func newStkCLI(t *testing.T) *stkCLI {
	c := &stkCLI{t: t, state: t.TempDir(), ws: fmt.Sprintf("stk-%d-%d", os.Getpid(), time.Now().UnixNano()%1000000)}
	t.Cleanup(func() { c.run("destroy", "-auto-approve") })
	return c
}

func (c *stkCLI) run(args ...string) (string, string, int) {
	var stdout, stderr bytes.Buffer
	code := run(append([]string{"-state-dir", c.state, "-workspace", c.ws}, args...), &stdout, &stderr)
	return stdout.String(), stderr.String(), code
}

func (c *stkCLI) must(args ...string) string {
	c.t.Helper()
	out, errOut, code := c.run(args...)
	if code != 0 {
		c.t.Fatalf("probectl %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

func (c *stkCLI) apply(src string) {
	c.t.Helper()
	path := filepath.Join(c.t.TempDir(), "stk.hcl")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		c.t.Fatal(err)
	}
	c.must("apply", "-auto-approve", path)
}

// runWork runs the workload to its end: it starts, says ready, works once
// told to, and exits.
func runWork(t *testing.T, path string, args ...string) { startWork(t, -1, path, args...)() }

// runWorkOn runs the workload to its end on one CPU.
func runWorkOn(t *testing.T, cpu int, path string, args ...string) {
	startWork(t, cpu, path, args...)()
}

// startWork starts the workload (on one CPU when cpu >= 0), tells it to
// work and waits until it has; the process lives until the function it
// returns is called, which waits for its exit.
func startWork(t *testing.T, cpu int, path string, args ...string) (exit func()) {
	t.Helper()
	w := startWorkload(t, cpu, exec.Command(path, args...))
	w.work(t)
	return func() {
		t.Helper()
		w.end(t)
	}
}

// A user stack of a process that exited before show: the kernel recorded
// build ids and file offsets, and show finds the file by its build id.
// getppid is called exactly n times from stk_caller, called from main.
func TestStackUserExited(t *testing.T) {
	path, comm := stkWork(t)
	c := newStkCLI(t)
	c.apply(fmt.Sprintf(`
probe "tracepoint" "getppid" {
  event = "syscalls:sys_enter_getppid"
  on_entry {
    when = comm == %q
    count "calls" {
      by = [ustack(4), kstack(3)]
    }
  }
}
`, comm))
	const n = 777
	runWork(t, path, "getppid", fmt.Sprint(n))
	out := c.must("show", "-json", "-symbols", filepath.Dir(path))
	var res struct {
		Probes []struct {
			Aggregations []struct {
				Entries []struct {
					Key   map[string][]map[string]any `json:"key"`
					Value int64                       `json:"value"`
				} `json:"entries"`
			} `json:"aggregations"`
		} `json:"probes"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	entries := res.Probes[0].Aggregations[0].Entries
	if len(entries) != 1 {
		t.Fatalf("want one stack, got %d:\n%s", len(entries), out)
	}
	e := entries[0]
	if e.Value != n {
		t.Errorf("count %d, want %d", e.Value, n)
	}
	var syms []string
	for _, f := range e.Key["ustack(4)"] {
		syms = append(syms, fmt.Sprint(f["symbol"]))
		if f["symbol"] == "stk_caller" || f["symbol"] == "main" {
			if f["module"] != path {
				t.Errorf("frame %v: module %v, want %s", f["symbol"], f["module"], path)
			}
		}
	}
	if len(syms) < 2 || syms[0] != "stk_caller" || syms[1] != "main" {
		t.Errorf("user stack %v, want stk_caller then main\n%s", syms, out)
	}
	if len(e.Key["kstack(3)"]) == 0 {
		t.Errorf("no kernel stack:\n%s", out)
	}

	// The text form prints the frames, one a line, innermost first.
	text := c.must("show", "-symbols", filepath.Dir(path))
	if !strings.Contains(text, "        stk_caller+0x") || !strings.Contains(text, fmt.Sprintf("count: %d\n", n)) {
		t.Errorf("show:\n%s", text)
	}
}

// A CPU profile of a workload that spends nine tenths of its time in
// stk_hot: in the flame graph show -flamegraph writes, stk_hot is the
// widest frame under the workload's process but for its callers.
func TestStackProfileFlameGraph(t *testing.T) {
	path, comm := stkWork(t)
	c := newStkCLI(t)
	c.apply(burnProfileSpec(comm))
	runWork(t, path, "burn", "3")
	svg := filepath.Join(t.TempDir(), "stk.svg")
	c.must("show", "-flamegraph", svg, "-symbols", filepath.Dir(path))
	f, err := os.Open(svg)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := flamegraphtest.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	var proc, hot *flamegraphtest.Rect
	for i := range doc.Frames {
		fr := &doc.Frames[i]
		switch {
		case fr.Depth == 1 && fr.Name == comm:
			proc = fr
		case fr.Name == "stk_hot" && (hot == nil || fr.Samples > hot.Samples):
			// The widest: a sample in stk_hot's prologue, before it
			// set its frame pointer, walks to main's caller and puts a
			// narrow stk_hot beside main.
			hot = fr
		}
	}
	if proc == nil || hot == nil {
		t.Fatalf("no frame %q at depth 1 or no stk_hot: %+v", comm, doc.Frames)
	}
	t.Logf("%s: %d samples, stk_hot %d", comm, proc.Samples, hot.Samples)
	if hot.Start < proc.Start || hot.Start+hot.Samples > proc.Start+proc.Samples {
		t.Fatalf("stk_hot %+v is not under %+v", *hot, *proc)
	}
	if proc.Samples < 50 {
		t.Fatalf("only %d samples of the workload", proc.Samples)
	}
	for _, fr := range doc.Frames {
		under := fr.Depth > proc.Depth && fr.Start >= proc.Start && fr.Start+fr.Samples <= proc.Start+proc.Samples
		caller := fr.Depth < hot.Depth && fr.Start <= hot.Start && fr.Start+fr.Samples >= hot.Start+hot.Samples
		if under && !caller && fr != *hot && fr.Samples >= hot.Samples {
			t.Errorf("%q (%d samples) is as wide as stk_hot (%d)", fr.Name, fr.Samples, hot.Samples)
		}
	}
	if hot.Samples*2 < proc.Samples {
		t.Errorf("stk_hot has %d of %d samples: want most", hot.Samples, proc.Samples)
	}

	// -folded: the same stacks, root first.
	folded := c.must("show", "-folded", "-symbols", filepath.Dir(path))
	if !strings.Contains(folded, comm+";") || !strings.Contains(folded, ";main;stk_hot") {
		t.Errorf("folded:\n%s", folded)
	}
}

// biostacks (examples/bpftrace/biostacks.hcl), filtered on a dd of the
// test's own name: its 200 direct writes of 4 KiB are 200 bios, each
// queued from the write system call and each completed once.
func TestStackBiostacks(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to load BPF")
	}
	dir, bin, comm := directWriter(t)
	src, err := os.ReadFile("../../examples/bpftrace/biostacks.hcl")
	if err != nil {
		t.Fatal(err)
	}
	const queued = `when  = event == "block:block_bio_queue"`
	if strings.Count(string(src), queued) != 1 {
		t.Fatalf("biostacks.hcl: %q does not occur once", queued)
	}
	spec := strings.Replace(string(src), queued, fmt.Sprintf(`when  = event == "block:block_bio_queue" && comm == %q`, comm), 1)
	c := newStkCLI(t)
	c.apply(spec)
	const writes = 200
	out, err := exec.Command(bin, "if=/dev/zero", "of="+filepath.Join(dir, "io"), "bs=4096", fmt.Sprint("count=", writes), "oflag=direct").CombinedOutput()
	if err != nil {
		t.Fatalf("dd: %v\n%s", err, out)
	}
	var res struct {
		Probes []struct {
			Aggregations []struct {
				Entries []struct {
					Key     map[string][]map[string]any `json:"key"`
					Buckets []struct{ Count int64 }     `json:"buckets"`
				} `json:"entries"`
			} `json:"aggregations"`
		} `json:"probes"`
		Tables []struct {
			Entries []json.RawMessage `json:"entries"`
		} `json:"tables"`
	}
	var total, left int64
	// A completion may lag the write's return by a moment. One that ran in
	// an interrupt while a BPF program (of anyone on the machine) ran on
	// that CPU was skipped by the kernel, which counts a miss: its bio
	// stays in the table.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		js := c.must("show", "-json")
		if err := json.Unmarshal([]byte(js), &res); err != nil {
			t.Fatalf("%v\n%s", err, js)
		}
		total = 0
		for _, e := range res.Probes[0].Aggregations[0].Entries {
			for _, b := range e.Buckets {
				total += b.Count
			}
		}
		left = int64(len(res.Tables[0].Entries))
		if total >= writes || time.Now().After(deadline) {
			break
		}
	}
	var status struct {
		Probes []struct{ Missed int64 } `json:"probes"`
	}
	if err := json.Unmarshal([]byte(c.must("status", "-json")), &status); err != nil {
		t.Fatal(err)
	}
	missed := status.Probes[0].Missed
	if left > 0 {
		t.Logf("%d completions not seen: the kernel skipped %d runs of the probe", left, missed)
	}
	if total+left != writes || left > missed {
		t.Errorf("%d I/Os measured and %d left in the table, want %d in all; the kernel skipped %d runs", total, left, writes, missed)
	}
	for _, e := range res.Probes[0].Aggregations[0].Entries {
		var syms []string
		for _, f := range e.Key["started[args.sector].stack"] {
			syms = append(syms, fmt.Sprint(f["symbol"]))
		}
		if !slices.Contains(syms, "vfs_write") || !slices.Contains(syms, "submit_bio_noacct_nocheck") && !slices.Contains(syms, "submit_bio_noacct") {
			t.Errorf("a stack that is not a write's bio submission: %v", syms)
		}
	}
}

// directWriter copies dd under a name of the test's own (comm), in a
// temporary directory on a block device, and runs it once: its pages and
// its libraries' come into the page cache, or a page fault of the counted
// run reads them from the disk, one bio more under its comm.
func directWriter(t *testing.T) (dir, bin, comm string) {
	dir = t.TempDir()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type == unix.TMPFS_MAGIC {
		t.Fatalf("%s is on tmpfs: direct I/O needs a block device (set TMPDIR)", dir)
	}
	dd, err := exec.LookPath("dd")
	if err != nil {
		t.Fatal(err)
	}
	comm = fmt.Sprintf("stk-d%d", os.Getpid()%1000000)
	bin = filepath.Join(dir, comm)
	if b, err := os.ReadFile(dd); err != nil {
		t.Fatal(err)
	} else if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "--version").CombinedOutput(); err != nil {
		t.Fatalf("%s --version: %v\n%s", bin, err, out)
	}
	return dir, bin, comm
}

// bpftrace's tools/biostacks.bt, imported unmodified but for a filter on
// the test's own dd where the stack is taken: block_io_start stores the
// stack in @reqstack, a table block_rq_issue reads to key its histogram,
// so the stack is taken in one probe and read in another (the table's
// stack maps). 200 direct writes of 4 KiB are 200 requests, each started
// from the write system call and each issued once: the histograms of the
// write's stacks count 200 in all (less the issues the kernel skipped,
// whose request stays in @reqts). Needs block:block_io_start (Linux 6.5).
func TestStackBiostacksImported(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Absent(t, "needs root to load BPF")
	}
	if _, err := os.Stat("/sys/kernel/tracing/events/block/block_io_start"); errors.Is(err, os.ErrNotExist) {
		testenv.Absent(t, "the kernel has no block:block_io_start tracepoint (Linux 6.5)")
	}
	dir, bin, comm := directWriter(t)
	c := newStkCLI(t)
	src := c.must("import", "../../spec/bpftrace/testdata/tools/biostacks.bt")
	const start = "  event = \"block:block_io_start\"\n\n  on_entry {\n"
	if strings.Count(src, start) != 1 {
		t.Fatalf("the imported biostacks has not one %q:\n%s", start, src)
	}
	src = strings.Replace(src, start, start+fmt.Sprintf("    when = comm == %q\n", comm), 1)
	c.apply(src)
	const writes = 200
	out, err := exec.Command(bin, "if=/dev/zero", "of="+filepath.Join(dir, "io"), "bs=4096", fmt.Sprint("count=", writes), "oflag=direct").CombinedOutput()
	if err != nil {
		t.Fatalf("dd: %v\n%s", err, out)
	}
	type entry struct {
		Key     map[string][]map[string]any `json:"key"`
		Buckets []struct{ Count int64 }     `json:"buckets"`
	}
	var res struct {
		Probes []struct {
			Address      string `json:"address"`
			Aggregations []struct {
				Entries []entry `json:"entries"`
			} `json:"aggregations"`
		} `json:"probes"`
		Tables []struct {
			Address string            `json:"address"`
			Entries []json.RawMessage `json:"entries"`
		} `json:"tables"`
	}
	var total, left int64
	var entries []entry
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		js := c.must("show", "-json")
		if err := json.Unmarshal([]byte(js), &res); err != nil {
			t.Fatalf("%v\n%s", err, js)
		}
		total, left, entries = 0, 0, nil
		for _, p := range res.Probes {
			for _, a := range p.Aggregations {
				entries = append(entries, a.Entries...)
			}
		}
		for _, e := range entries {
			for _, b := range e.Buckets {
				total += b.Count
			}
		}
		for _, tb := range res.Tables {
			if strings.HasSuffix(tb.Address, "reqts") {
				left = int64(len(tb.Entries))
			}
		}
		if total >= writes || time.Now().After(deadline) {
			break
		}
	}
	var status struct {
		Probes []struct{ Missed int64 } `json:"probes"`
	}
	if err := json.Unmarshal([]byte(c.must("status", "-json")), &status); err != nil {
		t.Fatal(err)
	}
	var missed int64
	for _, p := range status.Probes {
		missed += p.Missed
	}
	if total+left != writes || left > missed {
		t.Errorf("%d I/Os measured and %d left in @reqts, want %d in all; the kernel skipped %d runs", total, left, writes, missed)
	}
	if len(entries) == 0 {
		t.Fatal("no stacks")
	}
	for _, e := range entries {
		if len(e.Key) != 1 {
			t.Fatalf("a key of %d fields, want the stack: %v", len(e.Key), e.Key)
		}
		for name, frames := range e.Key {
			var syms []string
			for _, f := range frames {
				syms = append(syms, fmt.Sprint(f["symbol"]))
			}
			if !slices.Contains(syms, "vfs_write") || !slices.Contains(syms, "blk_account_io_start") && !slices.Contains(syms, "blk_mq_submit_bio") {
				t.Errorf("%s: a stack that is not a write's request: %v", name, syms)
			}
		}
	}
	t.Logf("%d writes: %d measured in %d stacks, %d left", writes, total, len(entries), left)
}

// tcpdrop (examples/bpftrace/tcpdrop.hcl): a socket filter that takes
// nothing makes the kernel drop what a loopback TCP connection sends, in
// tcp_v4_rcv, with a reason (SKB_DROP_REASON_SOCKET_FILTER), for an skb
// whose socket (set by early demux) is AF_INET. Drops elsewhere on the
// machine may be counted too: the test looks for its own.
func TestStackTcpdrop(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to load BPF")
	}
	src, err := os.ReadFile("../../examples/bpftrace/tcpdrop.hcl")
	if err != nil {
		t.Fatal(err)
	}
	c := newStkCLI(t)
	c.apply(string(src))
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	raw, err := server.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	dropAll := []unix.SockFilter{{Code: unix.BPF_RET | unix.BPF_K, K: 0}}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptSockFprog(int(fd), unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &unix.SockFprog{Len: 1, Filter: &dropAll[0]})
	}); err != nil || serr != nil {
		t.Fatal(err, serr)
	}
	if _, err := client.Write([]byte("dropped")); err != nil {
		t.Fatal(err)
	}
	var found bool
	var last string
	for deadline := time.Now().Add(30 * time.Second); !found && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		last = c.must("show", "-json", "tracepoint.tcpdrop")
		var res struct {
			Probes []struct {
				Aggregations []struct {
					Entries []struct {
						Key   map[string]json.RawMessage `json:"key"`
						Value int64                      `json:"value"`
					} `json:"entries"`
				} `json:"aggregations"`
			} `json:"probes"`
		}
		if err := json.Unmarshal([]byte(last), &res); err != nil {
			t.Fatalf("%v\n%s", err, last)
		}
		for _, e := range res.Probes[0].Aggregations[0].Entries {
			var frames []struct{ Symbol string }
			if err := json.Unmarshal(e.Key["kstack"], &frames); err != nil {
				t.Fatalf("kstack %s: %v", e.Key["kstack"], err)
			}
			for _, f := range frames {
				found = found || f.Symbol == "tcp_v4_rcv"
			}
		}
	}
	if !found {
		t.Errorf("no drop in tcp_v4_rcv:\n%s", last)
	}
}

// cpuwalk (examples/bpftrace/cpuwalk.hcl), filtered on a workload pinned
// to the last online CPU: every sample of it is in that CPU's bucket.
func TestStackCpuwalk(t *testing.T) {
	path, comm := stkWork(t)
	cpus, err := bpf.OnlineCPUs()
	if err != nil {
		t.Fatal(err)
	}
	cpu := cpus[len(cpus)-1]
	src, err := os.ReadFile("../../examples/bpftrace/cpuwalk.hcl")
	if err != nil {
		t.Fatal(err)
	}
	const when = "when  = pid != 0"
	if strings.Count(string(src), when) != 1 {
		t.Fatalf("cpuwalk.hcl: %q does not occur once", when)
	}
	c := newStkCLI(t)
	c.apply(strings.Replace(string(src), when, fmt.Sprintf("when  = pid != 0 && comm == %q", comm), 1))
	runWorkOn(t, cpu, path, "burn", "3")
	var res struct {
		Probes []struct {
			Aggregations []struct {
				Entries []struct {
					Buckets []struct{ Low, High, Count int64 } `json:"buckets"`
				} `json:"entries"`
			} `json:"aggregations"`
		} `json:"probes"`
	}
	out := c.must("show", "-json")
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var on, off int64
	for _, e := range res.Probes[0].Aggregations[0].Entries {
		for _, b := range e.Buckets {
			if b.Low == int64(cpu) && b.High == int64(cpu)+1 {
				on += b.Count
			} else {
				off += b.Count
			}
		}
	}
	t.Logf("%d samples on cpu %d, %d elsewhere", on, cpu, off)
	if on < 5 || off != 0 {
		t.Errorf("%d samples on cpu %d and %d elsewhere: want them all on it\n%s", on, cpu, off, out)
	}
}

// Stacks as event fields: run prints each event's stacks symbolized, the
// user stack of the workload by its build id and its maps while it runs.
func TestStackEvents(t *testing.T) {
	path, comm := stkWork(t)
	spec := filepath.Join(t.TempDir(), "ev.hcl")
	if err := os.WriteFile(spec, []byte(fmt.Sprintf(`
probe "tracepoint" "gp" {
  event = "syscalls:sys_enter_getppid"
  on_entry {
    event "call" {
      when   = comm == %q
      fields = { k = kstack(4), u = ustack(2) }
    }
  }
}
`, comm)), 0o644); err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	done := make(chan int)
	var errOut bytes.Buffer
	go func() {
		code := run([]string{"-state-dir", t.TempDir(), "run", "-v", "-duration", "4s", "-interval", "0", spec}, pw, &errOut)
		pw.Close()
		done <- code
	}()
	lines := bufio.NewScanner(pr)
	var out []string
	for lines.Scan() {
		out = append(out, lines.Text())
		if strings.HasPrefix(lines.Text(), "Running for") {
			break
		}
	}
	// The process lives until its events are printed: a user stack
	// frame the kernel could not give a build id is symbolized through
	// the process's maps.
	exit := startWork(t, -1, path, "getppid", "3")
	n := 0
	for n < 3 && lines.Scan() {
		out = append(out, lines.Text())
		if strings.Contains(lines.Text(), "tracepoint.gp call: ") {
			n++
		}
	}
	exit()
	for lines.Scan() {
		out = append(out, lines.Text())
	}
	if code := <-done; code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, strings.Join(out, "\n"), errOut.String())
	}
	n = 0
	for _, l := range out {
		if strings.Contains(l, "tracepoint.gp call: ") {
			n++
			if !strings.Contains(l, "u=stk_caller+0x") || !strings.Contains(l, "; main+0x") || !strings.Contains(l, "k=") {
				t.Errorf("event %q: want the user stack stk_caller; main", l)
			}
		}
	}
	if n != 3 {
		t.Errorf("%d events, want 3:\n%s", n, strings.Join(out, "\n"))
	}
}

// A user's ELF file names its functions (and its path) anything: escape
// sequences in a stack's frames reach root's terminal quoted, in events
// as in show.
func TestStackFramesPrintable(t *testing.T) {
	s := &runtime.Stack{User: true, Frames: []symbols.Frame{{Symbol: "\x1b]0;owned\x07", Offset: 1, Module: "/tmp/\x1b[2Jlib.so"}}}
	got := views.KeyText(runtime.OrderedKey{{Name: "ustack", Value: s}})
	if strings.ContainsAny(got, "\x1b\x07") {
		t.Errorf("events print %q", got)
	}
}

// A profile of a workload burning CPU in user mode: most samples have no
// kernel stack. show -json says so in each such key ({"lost": "no
// stack"}) and counts the samples by kind in stacks_lost, the same sums
// as the keys'.
func TestStackLostInJSON(t *testing.T) {
	path, comm := stkWork(t)
	c := newStkCLI(t)
	c.apply(burnProfileSpec(comm))
	runWork(t, path, "burn", "2")
	out := c.must("show", "-json", "-symbols", filepath.Dir(path))
	var res struct {
		Probes []struct {
			Aggregations []struct {
				Entries []struct {
					Key   map[string]json.RawMessage `json:"key"`
					Value int64                      `json:"value"`
				} `json:"entries"`
				StacksLost map[string]int64 `json:"stacks_lost"`
			} `json:"aggregations"`
		} `json:"probes"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(res.Probes) != 1 || len(res.Probes[0].Aggregations) != 1 {
		t.Fatalf("want one probe with one aggregation:\n%s", out)
	}
	agg := res.Probes[0].Aggregations[0]
	want := map[string]int64{}
	var samples int64
	for _, e := range agg.Entries {
		samples += e.Value
		for _, name := range []string{"ustack", "kstack"} {
			var frames []map[string]any
			if err := json.Unmarshal(e.Key[name], &frames); err != nil {
				t.Fatalf("key %s: %v\n%s", name, err, e.Key[name])
			}
			if len(frames) == 1 && frames[0]["lost"] != nil {
				kind, _ := frames[0]["lost"].(string)
				if reason, _ := frames[0]["reason"].(string); reason == "" {
					t.Errorf("key %s: a lost stack without its reason: %s", name, e.Key[name])
				}
				want[kind] += e.Value
			}
		}
	}
	t.Logf("%d samples; stacks lost %v", samples, agg.StacksLost)
	if want["no stack"] == 0 {
		t.Fatalf("no sample without a kernel stack, of %d: the workload burns in user mode\n%s", samples, out)
	}
	if len(agg.StacksLost) != len(want) {
		t.Fatalf("stacks_lost %v, the keys' %v", agg.StacksLost, want)
	}
	for k, n := range want {
		if agg.StacksLost[k] != n {
			t.Errorf("stacks_lost %v, the keys' %v", agg.StacksLost, want)
		}
	}
}

// A profile over 256 call paths (at least as many distinct user stacks,
// more with the leaf's addresses) at 499 Hz, 8 levels deep and 40 (past
// the 30 frames of the short stack map: the long one). Stored by content, the
// stack map a profile is sized for keeps every stack (< 1% lost, no
// collisions), and stack_entries = 64 loses samples and says so: by
// kind in show -json, as "[stack lost: stack map full]" in the text and
// folded views. Exact: the samples whose stack was kept plus those
// whose stack was lost are the samples the program counted. The plan
// shows each map's stacks and bytes when all are taken.
func TestProfileStacksNotLost(t *testing.T) {
	path, comm := stkWork(t)
	for _, tc := range []struct {
		work     string
		setting  string
		stacks   string // in the plan
		min, max float64
	}{
		{"paths", "", "65536 stacks, 64.0 MiB when all are taken", 0, 0.01},
		{"paths", "stack_entries = 64", "64 stacks, 64 KiB when all are taken", 0.05, 1},
		// Stacks of 40 levels: in the map of stacks of more than 30 frames.
		{"deep", "", "8192 stacks, 64.0 MiB when all are taken", 0, 0.01},
	} {
		c := newStkCLI(t)
		src := fmt.Sprintf(`
probe "profile" "paths" {
  frequency = 499
  %s
  on_entry {
    when = comm == %q
    count "samples" {
      by = [ustack]
    }
    count "hits" {}
  }
}
`, tc.setting, comm)
		file := filepath.Join(t.TempDir(), "stk.hcl")
		if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		plan := c.must("plan", file)
		if !strings.Contains(plan, tc.stacks) || !strings.Contains(plan, "stored by content") {
			t.Fatalf("%q: the plan does not say %q, stored by content:\n%s", tc.setting, tc.stacks, plan)
		}
		c.must("apply", "-auto-approve", file)
		runWork(t, path, tc.work, "3")
		out := c.must("show", "-json", "-symbols", filepath.Dir(path))
		var res struct {
			Probes []struct {
				Aggregations []struct {
					Name    string `json:"name"`
					Entries []struct {
						Key struct {
							Ustack []struct {
								Lost   string `json:"lost"`
								Symbol string `json:"symbol"`
							} `json:"ustack"`
						} `json:"key"`
						Value int64 `json:"value"`
					} `json:"entries"`
					StacksLost map[string]int64 `json:"stacks_lost"`
				} `json:"aggregations"`
			} `json:"probes"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if len(res.Probes) != 1 || len(res.Probes[0].Aggregations) != 2 {
			t.Fatalf("want one probe with two aggregations:\n%s", out)
		}
		var samples, kept, full, hits, deepest int64
		var agg = res.Probes[0].Aggregations[0]
		for _, a := range res.Probes[0].Aggregations {
			switch a.Name {
			case "samples":
				agg = a
			case "hits":
				if len(a.Entries) != 1 {
					t.Fatalf("hits: %d entries", len(a.Entries))
				}
				hits = a.Entries[0].Value
			}
		}
		for _, e := range agg.Entries {
			samples += e.Value
			switch {
			case len(e.Key.Ustack) == 1 && e.Key.Ustack[0].Lost == "full":
				full += e.Value
			case len(e.Key.Ustack) > 0 && e.Key.Ustack[0].Lost == "":
				kept += e.Value
				if e.Key.Ustack[0].Symbol == "stk_leaf" {
					deepest = max(deepest, int64(len(e.Key.Ustack)))
				}
			}
		}
		lost := agg.StacksLost["full"] + agg.StacksLost["collision"]
		frac := float64(lost) / float64(samples)
		t.Logf("%s %q: %d samples (%d counted), %d with their stack in %d keys (the deepest from stk_leaf: %d frames), stacks lost %v (%.2f%%)", tc.work, tc.setting, samples, hits, kept, len(agg.Entries), deepest, agg.StacksLost, 100*frac)
		if samples < 100 {
			t.Fatalf("%q: %d samples of 3 s of CPU at 499 Hz", tc.setting, samples)
		}
		if samples != hits || kept+lost+agg.StacksLost["no stack"] != hits || full != agg.StacksLost["full"] || agg.StacksLost["collision"] != 0 {
			t.Errorf("%q: %d samples, %d with a stack + %d lost (%d full in the keys) + %d without, want the %d the program counted, none collided",
				tc.setting, samples, kept, lost, full, agg.StacksLost["no stack"], hits)
		}
		if want := int64(map[string]int{"paths": 9, "deep": 41}[tc.work]); deepest < want {
			t.Errorf("%q %s: the deepest stack from stk_leaf has %d frames, want %d or more", tc.setting, tc.work, deepest, want)
		}
		if frac < tc.min || frac > tc.max {
			t.Errorf("%q: %.2f%% of samples lost their stack, want %.0f%% to %.0f%%", tc.setting, 100*frac, 100*tc.min, 100*tc.max)
		}
		if lost > 0 {
			text := c.must("show", "-symbols", filepath.Dir(path))
			folded := c.must("show", "-folded", "-symbols", filepath.Dir(path))
			for view, s := range map[string]string{"show": text, "show -folded": folded} {
				if !strings.Contains(s, "[stack lost: stack map full]") {
					t.Errorf("%q: %s does not mark the lost stacks:\n%s", tc.setting, view, s)
				}
			}
		}
		c.run("destroy", "-auto-approve")
	}
}
