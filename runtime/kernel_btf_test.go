package runtime_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/examples"
	"github.com/probectl/probectl/runtime"
	"golang.org/x/sys/unix"
)

// Kernel data through BTF on kernels that attach kernel functions (the VM
// matrix): struct fields through pointers at tcp_connect, file names from
// struct file, ppid, and a table joining two functions. Every test makes
// its own workload and compares exactly.

// do runs fn on the worker's thread and waits for it.
func (w *worker) do(t *testing.T, fn func() error) {
	t.Helper()
	done := make(chan error)
	w.jobs <- func() { done <- fn() }
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// entryFamilies are the attach values of the entry-only families f offers:
// each reads arguments its own way (pt_regs, or the trampoline's slots).
func entryFamilies(f *bpf.Facts) []string {
	out := []string{"auto"}
	if f.Links.KprobeMulti {
		out = append(out, "kprobe.multi")
	}
	if f.Links.Fentry && f.BTF && f.Helpers.FuncArg { // bpf_get_func_arg (5.17)
		out = append(out, "fentry")
	}
	if f.Links.Kprobe {
		out = append(out, "kprobe")
	}
	return out
}

// loopbackUp brings the loopback interface up: a VM's init leaves it
// down.
func loopbackUp(t *testing.T) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		t.Fatalf("lo: %v", err)
	}
	if flags := ifr.Uint16(); flags&unix.IFF_UP == 0 {
		ifr.SetUint16(flags | unix.IFF_UP)
		if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
			t.Fatalf("bring lo up: %v", err)
		}
	}
}

// listen accepts and closes connections on a loopback port of its own
// (network "tcp4" or "tcp6").
func listen(t *testing.T, network string) int {
	t.Helper()
	loopbackUp(t)
	addr := map[string]string{"tcp4": "127.0.0.1:0", "tcp6": "[::1]:0"}[network]
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// tcpconnect: the destination address and port, and the source address,
// read from struct sock at tcp_connect, for connections the test makes to
// two IPv4 ports and an IPv6 one it listens on (the IPv6 address a
// __u8[16], read as bytes).
func TestKernelTCPConnect(t *testing.T) {
	f := kernelFacts(t)
	p1, p2, p3 := listen(t, "tcp4"), listen(t, "tcp4"), listen(t, "tcp6")
	const n1, n2, n3 = 7, 4, 3
	for _, attach := range entryFamilies(f) {
		t.Run(attach, func(t *testing.T) {
			src := `probe "kernel" "tcpconnect" {
  functions = ["tcp_connect"]
  attach    = "` + attach + `"
  on_entry {
    when = pid == PID
    count "connections" {
      when = args.sk.__sk_common.skc_family == 2
      by   = [ntohl(args.sk.__sk_common.skc_rcv_saddr), ntohl(args.sk.__sk_common.skc_daddr), ntohs(args.sk.__sk_common.skc_dport)]
    }
    count "v6" {
      when = args.sk.__sk_common.skc_family == 10
      by   = [args.sk.__sk_common.skc_v6_daddr.in6_u.u6_addr8, ntohs(args.sk.__sk_common.skc_dport)]
    }
  }
}`
			out := kcompile(t, f, src, 0)
			w := workspace(t)
			k := khold(t, w, out)
			for i := 0; i < n1+n2+n3; i++ {
				addr := fmt.Sprintf("127.0.0.1:%d", p1)
				switch {
				case i >= n1+n2:
					addr = fmt.Sprintf("[::1]:%d", p3)
				case i >= n1:
					addr = fmt.Sprintf("127.0.0.1:%d", p2)
				}
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				c.Close()
			}
			const loopback = 127<<24 | 1 // 2130706433
			got := values(k.agg(t, "kernel.tcpconnect", "connections"))
			want := map[string]int64{fmt.Sprintf("%d,%d,%d", loopback, loopback, p1): n1, fmt.Sprintf("%d,%d,%d", loopback, loopback, p2): n2}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("connections = %v, want %v", got, want)
			}
			v6 := values(k.agg(t, "kernel.tcpconnect", "v6"))
			if want := map[string]int64{fmt.Sprintf("%032x,%d", 1, p3): n3}; fmt.Sprint(v6) != fmt.Sprint(want) {
				t.Errorf("v6 connections = %v, want %v", v6, want)
			}
			t.Logf("%s via %s %v: %v, v6 %v", f.Label(), out.Probes[0].Route, out.Probes[0].Attach, got, v6)
			k.done(t)
		})
	}
}

// The tcpconnlat example as it is: a table joins tcp_connect (the SYN
// sent) and tcp_rcv_state_process (the SYN-ACK received, in SYN_SENT) by
// the socket; every connection the test makes is one latency, and the
// table is left empty.
func TestKernelTCPConnLatExample(t *testing.T) {
	f := kernelFacts(t)
	needPerfLinks(t, f) // its kprobes are applied and pinned
	src, err := examples.BPFtrace.ReadFile("bpftrace/tcpconnlat.hcl")
	if err != nil {
		t.Fatal(err)
	}
	port := listen(t, "tcp4")
	out := kcompile(t, f, string(src), 0)
	w := workspace(t)
	s, err := kapply(t, w, out)
	if err != nil {
		t.Fatal(err)
	}
	const n = 6
	for i := 0; i < n; i++ {
		c, err := net.Dial("tcp4", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	comm, _ := os.ReadFile("/proc/self/comm")
	me := strings.TrimSpace(string(comm))
	calls := map[string]uint64{}
	for _, e := range aggregation(t, w, s, "kernel.syn_acked", "connect_latency_us").Entries {
		for _, b := range e.Buckets {
			calls[fmt.Sprint(e.Key[0].Value)] += b.Count
		}
	}
	if calls[me] != n {
		t.Errorf("latencies by comm %v, want %s: %d", calls, me, n)
	}
	if tables := w.ReadTables(s.Tables); len(tables) != 1 || len(tables[0].Entries) != 0 {
		t.Errorf("connect_start holds %+v, want nothing: every SYN-ACK deletes its socket", tables)
	}
	t.Logf("%s: via %s and %s, latencies %v", f.Label(), out.Probes[0].Route, out.Probes[1].Route, calls)
}

// vfs latency keyed by file name: the name read at entry through
// args.file.f_path.dentry.d_name.name, saved for the exit; reads and
// writes of files the test names, and reads that fail.
func TestKernelVFSLatencyByName(t *testing.T) {
	f := kernelFacts(t)
	needCookies(t, f)
	wk := newWorker(t)
	src := `probe "kernel" "vfs_by_name" {
  functions = ["vfs_read", "vfs_write"]
  on_entry {
    when = tid == TID
    save = {
      file  = str(args.file.f_path.dentry.d_name.name)
      start = ktime
    }
  }
  on_exit {
    hist "latency_ns" {
      value = ktime - entry.start
      by    = [func, entry.file]
    }
    sum "bytes" {
      when  = ret > 0
      value = ret
      by    = [func, entry.file]
    }
    count "errors" {
      when = ret < 0
      by   = [entry.file, ret]
    }
  }
}`
	out := kcompile(t, f, src, wk.tid)
	w := workspace(t)
	k := khold(t, w, out)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "probectl-a.txt"), filepath.Join(dir, "probectl-bb.data")
	wk.do(t, func() error {
		fa, err := unix.Open(a, unix.O_CREAT|unix.O_RDWR, 0o600)
		if err != nil {
			return err
		}
		defer unix.Close(fa)
		for i := 0; i < 5; i++ { // 5 writes of 3 bytes
			if _, err := unix.Write(fa, []byte("abc")); err != nil {
				return err
			}
		}
		fb, err := unix.Open(b, unix.O_CREAT|unix.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		defer unix.Close(fb)
		if _, err := unix.Write(fb, make([]byte, 100)); err != nil {
			return err
		}
		buf := make([]byte, 4)
		for i := 0; i < 3; i++ { // 3 reads of a write-only file: EBADF
			if _, err := unix.Read(fb, buf); !errors.Is(err, unix.EBADF) {
				return fmt.Errorf("read of a write-only file: %v, want EBADF", err)
			}
		}
		if _, err := unix.Seek(fa, 0, io.SeekStart); err != nil {
			return err
		}
		for i := 0; i < 4; i++ { // 4 reads: 4, 4, 4, 3 bytes
			if _, err := unix.Read(fa, buf); err != nil {
				return err
			}
		}
		return nil
	})
	calls := map[string]uint64{}
	for _, e := range k.agg(t, "kernel.vfs_by_name", "latency_ns").Entries {
		key := fmt.Sprint(e.Key[0].Value, ",", e.Key[1].Value)
		for _, bk := range e.Buckets {
			calls[key] += bk.Count
		}
	}
	wantCalls := map[string]uint64{"vfs_write,probectl-a.txt": 5, "vfs_write,probectl-bb.data": 1, "vfs_read,probectl-bb.data": 3, "vfs_read,probectl-a.txt": 4}
	if fmt.Sprint(calls) != fmt.Sprint(wantCalls) {
		t.Errorf("latency histograms hold %v calls, want %v", calls, wantCalls)
	}
	bytes := values(k.agg(t, "kernel.vfs_by_name", "bytes"))
	wantBytes := map[string]int64{"vfs_write,probectl-a.txt": 15, "vfs_write,probectl-bb.data": 100, "vfs_read,probectl-a.txt": 15}
	if fmt.Sprint(bytes) != fmt.Sprint(wantBytes) {
		t.Errorf("bytes = %v, want %v", bytes, wantBytes)
	}
	errs := values(k.agg(t, "kernel.vfs_by_name", "errors"))
	if want := map[string]int64{"probectl-bb.data,-9": 3}; fmt.Sprint(errs) != fmt.Sprint(want) {
		t.Errorf("errors = %v, want %v", errs, want)
	}
	t.Logf("%s via %s %v: calls %v, bytes %v, errors %v", f.Label(), out.Probes[0].Route, out.Probes[0].Attach, calls, bytes, errs)
}

// exitChild is a child process of TestKernelPPID: it exits with the
// status PROBECTL_TEST_EXIT_CODE says.
func exitChild() error {
	var code int
	if _, err := fmt.Sscan(os.Getenv("PROBECTL_TEST_EXIT_CODE"), &code); err != nil {
		return err
	}
	os.Exit(code)
	return nil
}

// ppid: children of this process exit with known statuses; do_exit counts
// them by their parent's pid and their status (args.code by its BTF name).
// The children run this binary under another name, so that their comm,
// every thread's, says what they are.
func TestKernelPPID(t *testing.T) {
	f := kernelFacts(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	child := filepath.Join(t.TempDir(), "probectl-exit")
	if err := os.Symlink(self, child); err != nil {
		t.Fatal(err)
	}
	src := `probe "kernel" "exits" {
  functions = ["do_exit"]
  on_entry {
    count "exits" {
      when = comm == "probectl-exit" && pid == tid
      by   = [ppid, band(shr(args.code, 8), 255)]
    }
    count "parents" {
      when = comm == "probectl-exit" && pid == tid
      by   = [task.real_parent.tgid, task.real_parent.real_parent.tgid]
    }
  }
}`
	out := kcompile(t, f, src, 0)
	w := workspace(t)
	k := khold(t, w, out)
	codes := []int{3, 3, 5, 7, 3, 42}
	for _, code := range codes {
		cmd := exec.Command(child)
		cmd.Env = append(os.Environ(), "PROBECTL_TEST_CHILD=exit", fmt.Sprintf("PROBECTL_TEST_EXIT_CODE=%d", code))
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != code {
			t.Fatalf("child: %v, want exit status %d", err, code)
		}
	}
	me := os.Getpid()
	want := map[string]int64{}
	for _, code := range codes {
		want[fmt.Sprintf("%d,%d", me, code)]++
	}
	got := values(k.agg(t, "kernel.exits", "exits"))
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("exits = %v, want %v", got, want)
	}
	parents := values(k.agg(t, "kernel.exits", "parents"))
	if want := map[string]int64{fmt.Sprintf("%d,%d", me, os.Getppid()): int64(len(codes))}; fmt.Sprint(parents) != fmt.Sprint(want) {
		t.Errorf("parents = %v, want %v", parents, want)
	}
	t.Logf("%s via %s %v: exits %v, parents %v", f.Label(), out.Probes[0].Route, out.Probes[0].Attach, got, parents)
}

// A table joins two kernel functions: vfs_write's entry stores the size it
// was asked to write, keyed by thread; vfs_read's entry reads it, and
// deletes it.
func TestKernelTableJoin(t *testing.T) {
	f := kernelFacts(t)
	needPerfLinks(t, f) // a table joins applied probes
	wk := newWorker(t)
	src := `table "write_size" {
  max_keys = 1024
}

probe "kernel" "mark" {
  functions = ["vfs_write"]
  on_entry {
    store "write_size" {
      when  = tid == TID
      key   = [tid]
      value = args.count
    }
  }
}

probe "kernel" "join" {
  functions = ["vfs_read"]
  on_entry {
    sum "joined" {
      when  = tid == TID && has(write_size, [tid])
      value = write_size[tid]
    }
    count "unjoined" {
      when = tid == TID && !has(write_size, [tid])
    }
    delete "write_size" {
      when = tid == TID
      key  = [tid]
    }
  }
}`
	out := kcompile(t, f, src, wk.tid)
	w := workspace(t)
	s, err := kapply(t, w, out)
	if err != nil {
		t.Fatal(err)
	}
	wk.do(t, func() error {
		null, err := unix.Open("/dev/null", unix.O_WRONLY, 0)
		if err != nil {
			return err
		}
		defer unix.Close(null)
		zero, err := unix.Open("/dev/zero", unix.O_RDONLY, 0)
		if err != nil {
			return err
		}
		defer unix.Close(zero)
		buf := make([]byte, 64)
		// A read with no write before it, then six writes of 1 to 6
		// bytes, each followed by a read; a last write with no read.
		if _, err := unix.Read(zero, buf[:1]); err != nil {
			return err
		}
		for k := 1; k <= 6; k++ {
			if _, err := unix.Write(null, buf[:k]); err != nil {
				return err
			}
			if _, err := unix.Read(zero, buf[:1]); err != nil {
				return err
			}
		}
		_, err = unix.Write(null, buf[:50])
		return err
	})
	if v := values(aggregation(t, w, s, "kernel.join", "joined"))[""]; v != 21 {
		t.Errorf("joined = %d, want 1+2+...+6 = 21", v)
	}
	if v := values(aggregation(t, w, s, "kernel.join", "unjoined"))[""]; v != 1 {
		t.Errorf("unjoined = %d, want 1", v)
	}
	// What the table holds: the last write's size, for the worker's thread.
	tables := w.ReadTables(s.Tables)
	if len(tables) != 1 || len(tables[0].Entries) != 1 ||
		fmt.Sprint(tables[0].Entries[0].Key[0].Value, "=", tables[0].Entries[0].Value[0].Value) != fmt.Sprint(wk.tid, "=", 50) {
		t.Errorf("the table holds %+v, want %d: 50", tables, wk.tid)
	}
	t.Logf("%s: joined via %s and %s; the table holds %+v", f.Label(), out.Probes[0].Route, out.Probes[1].Route, tables[0].Entries)
}

// A plan made against a profile carries no BTF: its probe reads kernel
// data resolved at apply, and is never loaded.
func TestDeferredProbeNeverLoads(t *testing.T) {
	requireRoot(t)
	f := liveFacts(t)
	profile, err := bpf.Profile("linux-7.2-amd64")
	if err != nil {
		t.Fatal(err)
	}
	profile.Arch, profile.Functions = f.Arch, []string{"vfs_read"}
	src := `probe "kernel" "deferred" {
  functions = ["vfs_read"]
  on_entry {
    count "c" { by = [args.count] }
  }
}`
	out := kcompile(t, profile, src, 0)
	if d := out.Probes[0].Deferred; len(d) != 1 || d[0] != "args.count" {
		t.Fatalf("deferred %v, want [args.count]", d)
	}
	w := workspace(t)
	_, err = kapply(t, w, out)
	var le *runtime.LoadError
	if !errors.As(err, &le) || !strings.Contains(err.Error(), "resolved at apply") {
		t.Fatalf("apply of a deferred probe: %v, want a load error saying it is resolved at apply", err)
	}
	t.Log(err)
	leakFree(t, w, nil)
}

// A saved plan made with a facts file's BTF applies only on the kernel
// whose BTF it is: offsets from another build would be wrong.
func TestSavedPlanKernelTypes(t *testing.T) {
	requireRoot(t)
	live := liveFacts(t)
	gz, err := bpf.ReadKernelBTF()
	if err != nil {
		t.Fatal(err)
	}
	saved := *live
	saved.Source, saved.KernelBTF = "file", gz
	sp := &runtime.SavedPlan{Facts: &saved}
	if err := sp.CheckKernel(live); err != nil {
		t.Errorf("the running kernel's own BTF: %v", err)
	}
	raw, err := os.ReadFile(bpf.VmlinuxBTF)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)-2] ^= 1 // a letter of the last name in the string table
	other := saved
	if other.KernelBTF, err = bpf.GzipBTF(raw); err != nil {
		t.Fatal(err)
	}
	sp = &runtime.SavedPlan{Facts: &other}
	if err := sp.CheckKernel(live); !errors.Is(err, runtime.ErrStale) {
		t.Errorf("another kernel's BTF: %v, want ErrStale", err)
	} else {
		t.Log(err)
	}
}
