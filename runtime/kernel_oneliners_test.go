package runtime_test

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/runtime"
	"github.com/probectl/probectl/spec"
	"github.com/probectl/probectl/spec/bpftrace"
	"golang.org/x/sys/unix"
)

// TestKernelOneLiners runs the kernel-function one-liners of bpftrace's
// tutorial and README (kprobe:, kretprobe:, kfunc:) as probectl import
// writes them, in the VM matrix, each limited to the worker's thread
// (/tid == TID/, which the tutorial's have not: the VM runs other reads)
// on a workload of known counts, and checks the counts exactly.
func TestKernelOneLiners(t *testing.T) {
	f := kernelFacts(t)
	if !f.HasFunction("vfs_read") || !f.HasFunction("vfs_open") || !f.HasFunction("do_nanosleep") {
		t.Fatal("the kernel has no vfs_read, vfs_open or do_nanosleep to probe")
	}
	wk := newWorker(t)
	dir := t.TempDir()
	name := filepath.Join(dir, "btone-vfs-open")
	if err := os.WriteFile(name, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// doSyscalls opens /dev/null and /dev/zero, then writes and reads 5
	// bytes; then 4 sleeps and 5 opens of our file.
	const reads, writes, sleeps, opens = 7, 3, 4, 5
	work := func() error {
		if err := doSyscalls(0, writes, reads); err != nil {
			return err
		}
		for range sleeps {
			if err := unix.Nanosleep(&unix.Timespec{Nsec: 1000}, nil); err != nil {
				return err
			}
		}
		for range opens {
			fd, err := unix.Open(name, unix.O_RDONLY, 0)
			if err != nil {
				return err
			}
			unix.Close(fd)
		}
		return nil
	}
	for _, tc := range []struct {
		name, bt string
		check    func(t *testing.T, res map[string]runtime.AggregationResult, events []*runtime.EventRecord)
	}{
		{"lesson 6: read bytes", `kretprobe:vfs_read /tid == TID/ { @bytes = lhist(retval, 0, 2000, 200); }`,
			func(t *testing.T, res map[string]runtime.AggregationResult, _ []*runtime.EventRecord) {
				if got := bucketCount(res["bytes"], 0, 200); got != reads {
					t.Errorf("[0, 200): %d, want %d: %+v", got, reads, res["bytes"])
				}
			}},
		{"lesson 7: read latency", `kprobe:vfs_read /tid == TID/ { @start[tid] = nsecs; } kretprobe:vfs_read /@start[tid]/ { @ns[comm] = hist(nsecs - @start[tid]); delete(@start, tid); }`,
			func(t *testing.T, res map[string]runtime.AggregationResult, _ []*runtime.EventRecord) {
				if got := totalCount(res["ns"]); got != reads {
					t.Errorf("%d latencies, want %d: %+v", got, reads, res["ns"])
				}
			}},
		{"README: kfunc read bytes", `kfunc:vfs_read /tid == TID/ { @[comm] = sum(args->count); }`,
			func(t *testing.T, res map[string]runtime.AggregationResult, _ []*runtime.EventRecord) {
				if got := sumValues(res); got != 5*reads {
					t.Errorf("sum of count %d, want %d: %+v", got, 5*reads, res)
				}
			}},
		{"README: vfs functions", `kprobe:vfs_* /tid == TID/ { @[func] = count(); }`,
			func(t *testing.T, res map[string]runtime.AggregationResult, _ []*runtime.EventRecord) {
				for _, ar := range res {
					v := values(ar)
					t.Logf("vfs_read %d, vfs_write %d, vfs_open %d of %d functions counted", v["vfs_read"], v["vfs_write"], v["vfs_open"], len(v))
					if v["vfs_read"] != reads || v["vfs_write"] != writes || v["vfs_open"] != opens+2 {
						t.Errorf("vfs_read %d, vfs_write %d, vfs_open %d; want %d, %d, %d: %v", v["vfs_read"], v["vfs_write"], v["vfs_open"], reads, writes, opens+2, v)
					}
				}
			}},
		{"README: sleeping", `kprobe:do_nanosleep /tid == TID/ { printf("PID %d sleeping...\n", pid); }`,
			func(t *testing.T, _ map[string]runtime.AggregationResult, events []*runtime.EventRecord) {
				if len(events) != sleeps {
					t.Errorf("%d events, want %d", len(events), sleeps)
				}
			}},
		{"lesson 12: open path", `kprobe:vfs_open /tid == TID/ { printf("open path: %s\n", str(((struct path *)arg0)->dentry->d_name.name)); }`,
			func(t *testing.T, _ map[string]runtime.AggregationResult, events []*runtime.EventRecord) {
				names := map[string]int{}
				for _, ev := range events {
					for _, fl := range ev.Fields {
						names[fmt.Sprint(fl.Value)]++
					}
				}
				if want := map[string]int{"btone-vfs-open": opens, "null": 1, "zero": 1}; !maps.Equal(names, want) {
					t.Errorf("paths opened %v, want %v", names, want)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bt := strings.ReplaceAll(tc.bt, "TID", fmt.Sprint(wk.tid))
			hclText, diags := bpftrace.Import("one.bt", []byte(bt))
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			cfg, diags := spec.Parse(map[string][]byte{"one.hcl": hclText})
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			out, diags := compiler.Compile(cfg, f)
			if diags.HasErrors() {
				if why := refusedOneLiner(f, diags); why != "" {
					t.Logf("%s: refused at plan, as it must be: %s", f.Label(), why)
					return
				}
				t.Fatal(diags)
			}
			for _, p := range out.Probes {
				t.Logf("%s: %s on %s: %s", f.Label(), p.Address, p.Route, p.Reason)
			}
			w := namedWorkspace(t, "btone-ol")
			s, err := kapply(t, w, out)
			if err != nil {
				if !f.Perf.Link && strings.Contains(err.Error(), "cannot pin") {
					// 5.10: no BPF links on perf events (5.15); apply
					// refuses what it cannot keep, before loading.
					leakFree(t, w, nil)
					t.Logf("%s: apply refused, as it must: %v", f.Label(), err)
					return
				}
				t.Fatal(err)
			}
			var events []*runtime.EventRecord
			var st *runtime.EventStream
			if s.Events != nil {
				if st, err = w.OpenEvents(s); err != nil {
					t.Fatal(err)
				}
				defer st.Close()
			}
			wk.do(t, work)
			if st != nil {
				if err := st.ReadBuffered(func(ev *runtime.EventRecord) error {
					events = append(events, ev)
					return nil
				}); err != nil {
					t.Fatal(err)
				}
			}
			res := map[string]runtime.AggregationResult{}
			for _, pr := range w.Read(s.Probes) {
				if pr.Error != "" {
					t.Fatal(pr.Error)
				}
				for _, ar := range pr.Aggregations {
					res[ar.Name] = ar
				}
			}
			tc.check(t, res, events)
		})
	}
}

// bucketCount is the count of the bucket [lo, hi) in every entry.
func bucketCount(ar runtime.AggregationResult, lo, hi int64) int {
	n := 0
	for _, e := range ar.Entries {
		for _, b := range e.Buckets {
			if b.Low == lo && b.High == hi {
				n += int(b.Count)
			}
		}
	}
	return n
}

// totalCount is the observations of every bucket of every entry.
func totalCount(ar runtime.AggregationResult) int {
	n := 0
	for _, e := range ar.Entries {
		for _, b := range e.Buckets {
			n += int(b.Count)
		}
	}
	return n
}

// sumValues adds up every entry's value of every aggregation.
func sumValues(res map[string]runtime.AggregationResult) int64 {
	var n int64
	for _, ar := range res {
		for _, v := range values(ar) {
			n += v
		}
	}
	return n
}

// refusedOneLiner is why the plan refuses a one-liner on this kernel, when
// the refusal is what the kernel lacks: attach cookies (5.15) for func over
// a glob. "" for any other error: where kernel functions go through
// trampolines (6.1-amd64, 6.12-arm64), the compiler copies a vfs_* glob
// matches (vfs_kern_mount.part.0) take the probe to legacy kprobes, so it
// runs and counts there.
func refusedOneLiner(f *bpf.Facts, diags hcl.Diagnostics) string {
	for _, d := range diags {
		if d.Summary == "No attach cookies" && !f.Helpers.AttachCookie {
			return d.Summary
		}
	}
	return ""
}
