package runtime_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/spec"
	"github.com/probectl/probectl/spec/bpftrace"
	"golang.org/x/sys/unix"
)

// biostacksBT is the program of bpftrace's tools/biostacks.bt
// (spec/bpftrace/testdata/tools), its comments left out: the VM has
// no source tree.
const biostacksBT = `BEGIN
{
  printf("Tracing block I/O with init stacks. Hit Ctrl-C to end.\n");
}

tracepoint:block:block_io_start
{
  $key = (args.dev, args.sector);
  @reqstack[$key] = kstack;
  @reqts[$key] = nsecs;
}

tracepoint:block:block_rq_issue
/@reqts[args.dev, args.sector]/
{
  $key = (args.dev, args.sector);
  @usecs[@reqstack[$key]] = hist(nsecs - @reqts[$key]);
  delete(@reqstack, $key);
  delete(@reqts, $key);
}

END
{
  clear(@reqstack);
  clear(@reqts);
}
`

// TestKernelBiostacks plans bpftrace's tools/biostacks.bt, imported
// unmodified, on the VM's kernel: where the kernel has no
// block:block_io_start (before 6.5) the plan refuses it by name; where it
// has, the two probes load with the stack maps of @reqstack (taken at
// block_io_start, read at block_rq_issue) and read back without error.
// With a loop device (CONFIG_BLK_DEV_LOOP built in) on a file of the VM's
// memory, 64 direct writes of 4 KiB are counted 64 in the histograms of
// the stacks that wrote them.
func TestKernelBiostacks(t *testing.T) {
	f := kernelFacts(t)
	hclText, diags := bpftrace.Import("biostacks.bt", []byte(biostacksBT))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	cfg, diags := spec.Parse(map[string][]byte{"biostacks.hcl": hclText})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if err := f.LoadTracepoints([]string{"block:block_io_start", "block:block_rq_issue"}); err != nil {
		t.Fatal(err)
	}
	out, diags := compiler.Compile(cfg, f)
	if _, err := f.Tracepoint("block:block_io_start"); errors.Is(err, bpf.ErrNoTracepoint) {
		if len(diags) == 0 || diags[0].Summary != "Tracepoint not found" || !strings.Contains(fmt.Sprint(diags), "block_io_start") {
			t.Fatalf("%s has no block:block_io_start; the plan says %v, want Tracepoint not found naming it", f.Label(), diags)
		}
		t.Logf("%s: refused at plan, as it must be: %v", f.Label(), diags[0])
		return
	}
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	var stackMaps []string
	for _, tb := range out.Tables {
		for _, m := range tb.Maps {
			if strings.HasPrefix(m.Ref, "kstack_") {
				stackMaps = append(stackMaps, tb.Address.Name+"/"+m.Ref)
			}
		}
	}
	if len(stackMaps) == 0 {
		t.Fatalf("no table keeps the stacks: %+v", out.Tables)
	}
	t.Logf("%s: stack maps %v", f.Label(), stackMaps)
	w := namedWorkspace(t, "bstack-bio")
	s, err := kapply(t, w, out)
	if err != nil {
		t.Fatal(err)
	}
	read := func() (total uint64) {
		for _, pr := range w.Read(s.Probes) {
			if pr.Error != "" {
				t.Fatal(pr.Error)
			}
			for _, ar := range pr.Aggregations {
				for _, e := range ar.Entries {
					for _, b := range e.Buckets {
						total += b.Count
					}
				}
			}
		}
		return total
	}
	before := read()
	dev := loopDevice(t)
	if dev == "" {
		// Debian's kernels build loop and virtio-blk as modules, which
		// the VM cannot load: there is no block device to write to. What
		// holds here is the plan, the shared stack maps, the load and the
		// read above; the exact I/O count is cmd/probectl's
		// TestStackBiostacksImported on the host (200 writes, 200 counted).
		t.Logf("%s: no block device in the VM: probes loaded and read; the I/O count is checked on the host", f.Label())
		return
	}
	fd, err := unix.Open(dev, unix.O_WRONLY|unix.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	const writes = 64
	buf, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS) // page-aligned, for O_DIRECT
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(buf)
	for i := range writes {
		if _, err := unix.Pwrite(fd, buf, int64(i)*4096); err != nil {
			t.Fatal(err)
		}
	}
	if got := read() - before; got != writes {
		t.Errorf("%d I/Os measured, want %d", got, writes)
	}
}

// loopDevice attaches a loop device to a 1 MiB file of the VM's memory,
// or says "" when the kernel has no loop driver (a module the VM cannot
// load).
func loopDevice(t *testing.T) string {
	ctl, err := unix.Open("/dev/loop-control", unix.O_RDWR, 0)
	if err != nil { // no devtmpfs node: make one (misc 10:237)
		if err = unix.Mknod("/dev/bstack-loop-control", unix.S_IFCHR|0o600, int(unix.Mkdev(10, 237))); err == nil {
			ctl, err = unix.Open("/dev/bstack-loop-control", unix.O_RDWR, 0)
		}
		if err != nil {
			return ""
		}
	}
	defer unix.Close(ctl)
	n, err := unix.IoctlRetInt(ctl, unix.LOOP_CTL_GET_FREE)
	if err != nil {
		return ""
	}
	dev := fmt.Sprintf("/dev/bstack-loop%d", n)
	if err := unix.Mknod(dev, unix.S_IFBLK|0o600, int(unix.Mkdev(7, uint32(n)))); err != nil && !errors.Is(err, unix.EEXIST) {
		t.Fatal(err)
	}
	back := filepath.Join(t.TempDir(), "bstack-loop.img")
	if err := os.WriteFile(back, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	bfd, err := unix.Open(back, unix.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(bfd)
	lfd, err := unix.Open(dev, unix.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(lfd)
	if err := unix.IoctlSetInt(lfd, unix.LOOP_SET_FD, bfd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if fd, err := unix.Open(dev, unix.O_RDWR, 0); err == nil {
			_, _ = unix.IoctlRetInt(fd, unix.LOOP_CLR_FD)
			unix.Close(fd)
		}
	})
	return dev
}
