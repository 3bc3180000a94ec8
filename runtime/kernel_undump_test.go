package runtime_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/spec"
	"github.com/probectl/probectl/spec/bpftrace"
	"golang.org/x/sys/unix"
)

// undumpProbes are the probes of bpftrace's tools/undump.bt that dump
// what a unix stream socket receives (the VM has no source tree to read
// the tool from), as probectl import takes them.
const undumpProbes = `
kprobe:unix_stream_recvmsg { @start_recv[tid] = 1; }
kretprobe:unix_stream_recvmsg { delete(@start_recv, tid); }
kprobe:skb_copy_datagram_iter /has_key(@start_recv, tid)/ { @skbs[tid] = (struct sk_buff*)arg0; }
kretprobe:skb_copy_datagram_iter /has_key(@skbs, tid)/ {
  if (retval == 0) {
    $skb = @skbs[tid];
    printf("%-16s %-8d %-8d %r\n", comm, pid, $skb.len, buf($skb.data, $skb.len));
  }
  delete(@skbs, tid);
}
`

// undump, imported, on a kernel of the matrix: a message of 80 bytes
// (some that do not print) through a unix stream socket pair shows as one
// event of this process with len=80 and the first 64 bytes as bpftrace's
// %r prints them.
func TestKernelImportedUndump(t *testing.T) {
	f := kernelFacts(t)
	src, diags := bpftrace.Import("undump.bt", []byte(undumpProbes))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	cfg, diags := spec.Parse(map[string][]byte{"undump.hcl": src})
	if diags.HasErrors() {
		t.Fatalf("%v\n%s", diags, src)
	}
	out, diags := compiler.Compile(cfg, f)
	if diags.HasErrors() {
		t.Fatalf("%v\n%s", diags, src)
	}
	w := workspace(t)
	s, err := kapply(t, w, out)
	if err != nil && !f.Perf.Link && strings.Contains(err.Error(), "cannot pin") {
		// 5.10: no BPF links on perf events (5.15): apply refuses the
		// kprobes it cannot keep, before loading anything.
		leakFree(t, w, nil)
		t.Logf("%s: apply refused, as it must: %v", f.Label(), err)
		return
	}
	if err != nil {
		t.Fatalf("apply on %s: %v", f.Label(), err)
	}
	// Registered before the event stream's: cleanups run last first, so
	// the stream is closed when the leak check looks.
	t.Cleanup(func() {
		if _, _, err := w.Destroy(s, nil); err != nil {
			t.Fatal(err)
		}
		leakFree(t, w, nil)
	})
	log := collectEvents(t, w, s, "kernel.skb_copy_datagram_iter_2")
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	msg := make([]byte, 80)
	for i := range msg {
		msg[i] = byte('A' + i%26)
	}
	copy(msg, "un\x01\xff\t\n")
	if n, err := unix.Write(fds[0], msg); err != nil || n != len(msg) {
		t.Fatalf("write: %d, %v", n, err)
	}
	got := make([]byte, 128)
	if n, err := unix.Read(fds[1], got); err != nil || n != len(msg) {
		t.Fatalf("read: %d, %v", n, err)
	}
	var shown strings.Builder
	for _, c := range msg[:64] {
		if c >= 0x20 && c < 0x7f {
			shown.WriteByte(c)
		} else {
			fmt.Fprintf(&shown, "\\x%02x", c)
		}
	}
	var mine []string
	prefix := fmt.Sprintf("skb_copy_datagram_iter_2: comm=%s, pid=%d, ", strings.TrimSpace(selfComm(t)), os.Getpid())
	for _, ev := range log.drain(t) {
		if strings.HasPrefix(ev, prefix) {
			mine = append(mine, ev)
		}
	}
	want := prefix + "len=80, data=" + shown.String()
	if len(mine) != 1 || mine[0] != want {
		t.Errorf("events of this process:\n%s\nwant:\n%s", strings.Join(mine, "\n"), want)
	}
}

// selfComm is this process's task name.
func selfComm(t *testing.T) string {
	b, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
