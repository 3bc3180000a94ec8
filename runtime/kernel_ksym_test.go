package runtime_test

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
)

// ksym of a kernel function pointer, exactly: the worker's writes to
// /dev/null reach vfs_write with a file whose f_op->write is write_null
// (drivers/char/mem.c). The key names it, and hex shows the address
// /proc/kallsyms gives write_null.
func TestKernelKsym(t *testing.T) {
	f := kernelFacts(t)
	const oks = 11
	wk := newWorker(t)
	w := workspace(t)
	out := kcompile(t, f, `probe "kernel" "sym" {
  functions = ["vfs_write"]
  on_entry {
    count "writes" {
      when = tid == TID
      by   = { fn = ksym(args.file.f_op.write), addr = hex(args.file.f_op.write) }
    }
  }
}`, wk.tid)
	k := khold(t, w, out)
	wk.syscalls(t, 0, oks, 0)
	agg := k.agg(t, "kernel.sym", "writes")
	if len(agg.Entries) != 1 {
		for _, e := range agg.Entries {
			t.Logf("%v: %d", e.Key, *e.Value)
		}
		t.Fatalf("%d keys, want 1", len(agg.Entries))
	}
	e := agg.Entries[0]
	fn, addr := fmt.Sprint(e.Key[0].Value), fmt.Sprint(e.Key[1].Value)
	t.Logf("%s (%s): %d writes", fn, addr, *e.Value)
	if fn != "write_null" || *e.Value != oks {
		t.Errorf("fn=%s count %d, want fn=write_null count %d", fn, *e.Value, oks)
	}
	kallsyms, err := os.Open("/proc/kallsyms")
	if err != nil {
		t.Fatal(err)
	}
	defer kallsyms.Close()
	var at []string
	sc := bufio.NewScanner(kallsyms)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 3 && "0x"+strings.TrimLeft(f[0], "0") == addr {
			at = append(at, f[2])
		}
	}
	if len(at) == 0 || !strings.Contains(" "+strings.Join(at, " ")+" ", " write_null ") {
		t.Errorf("kallsyms at %s: %v, want write_null", addr, at)
	}
	k.done(t)
}
