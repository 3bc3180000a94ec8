package runtime_test

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/probectl/probectl/internal/testenv"
)

// buildUSDTWork builds testdata/usdt.c with gcc at an optimisation level
// (its arguments then take other operand forms) into a directory of the
// test's.
func buildUSDTWork(t *testing.T, opt string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "bt-usdt-"+opt)
	out, err := exec.Command("gcc", "-"+opt, "-o", bin, "testdata/usdt.c").CombinedOutput()
	if err != nil {
		if bytes.Contains(out, []byte("sys/sdt.h")) {
			testenv.Absent(t, "no sys/sdt.h (systemtap-sdt-dev)")
		}
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	return bin
}

// runUSDTWork runs the USDT workload for n iterations and returns how many
// saw work:tick's semaphore raised.
func runUSDTWork(t *testing.T, bin string, n int) string {
	t.Helper()
	out, err := exec.Command(bin, fmt.Sprint(n)).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", bin, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestUSDT applies USDT probes on the workload built at -O0 (arguments in
// memory below %rbp) and -O2 (registers of every size, base, index and
// scale) with the host's gcc, and checks what checkUSDTWork checks. The
// kernel matrix runs the same on both architectures (TestKernelUSDT).
func TestUSDT(t *testing.T) {
	requireRoot(t)
	if goruntime.GOARCH != "amd64" {
		t.Skip("the host's workload is x86-64; the kernel matrix runs arm64's (TestKernelUSDT)")
	}
	// -O0's probes attach as uprobes, one per site; -O2's as one
	// uprobe.multi link (attach = "auto" on the host's kernel).
	for opt, attach := range map[string]string{"O0": "uprobe", "O2": "auto"} {
		t.Run(opt, func(t *testing.T) { checkUSDTWork(t, buildUSDTWork(t, opt), attach) })
	}
}

// usdtWorkSpec probes every probe of testdata/usdt.c in BIN.
const usdtWorkSpec = `probe "user" "tick" {
  binary = "BIN"
  usdt   = "work:tick"
  on_entry {
    count "calls" {}
    sum "i" { value = arg0 }
    sum "neg" { value = arg1 }
  }
}

probe "user" "pick" {
  binary = "BIN"
  usdt   = "work:pick"
  on_entry {
    sum "a" { value = arg0 }
    sum "small" { value = arg1 }
    sum "neg" { value = arg2 }
    sum "five" { value = arg3 }
    count "low" { by = [arg4] }
  }
}

probe "user" "at" {
  binary = "BIN"
  usdt   = "work:at"
  on_entry {
    sum "v" { value = arg0 }
  }
}

probe "user" "many" {
  binary = "BIN"
  usdt   = "work:many"
  on_entry {
    sum "a6" { value = arg6 }
    sum "a11" { value = arg11 }
  }
}

probe "user" "two" {
  binary = "BIN"
  usdt   = "work:two"
  on_entry {
    count "calls" {}
    sum "v" { value = arg0 }
  }
}
`

// checkUSDTWork applies usdtWorkSpec to bin (testdata/usdt.c built for
// the machine) with attach, runs it n times, and reads exactly what its
// probes passed: signed and unsigned values of 1, 2, 4 and 8 bytes,
// constants, a probe whose two sites place their arguments apart, a
// probe's twelfth argument; its semaphores are raised while the probes
// are attached, and only then.
func checkUSDTWork(t *testing.T, bin, attach string) {
	const n = 100
	var sumI, sumA, sumV int64
	low := map[string]int64{}
	for i := int64(0); i < n; i++ {
		sumI += i
		sumA += 10 * (i%8 + 1)
		sumV += -(i%8 + 1)
		low[fmt.Sprint(uint8(i%8+250))]++
	}
	if got := runUSDTWork(t, bin, n); got != "0" {
		t.Fatalf("unattached, the semaphore was raised in %s iterations", got)
	}
	w := workspace(t)
	src := strings.ReplaceAll(usdtWorkSpec, "BIN", bin)
	src = strings.ReplaceAll(src, "  usdt   =", "  attach = \""+attach+"\"\n  usdt   =")
	out := compile(t, src)
	for _, p := range out.Probes {
		want := 1
		if p.Address.Name == "two" {
			want = 2
		}
		if len(p.Sites) != want || p.Sites[0].RefCtrOffset == 0 || p.Reason == "" {
			t.Fatalf("%s: sites %+v, reason %q: want %d with semaphores", p.Address, p.Sites, p.Reason, want)
		}
		t.Logf("%s: %s %+v", p.Address, p.Attach, p.Sites)
	}
	s, _ := apply(t, w, src)
	if got := runUSDTWork(t, bin, n); got != fmt.Sprint(n) {
		t.Errorf("attached, the semaphore was raised in %s of %d iterations", got, n)
	}
	for _, c := range []struct {
		probe, agg string
		want       map[string]int64
	}{
		{"user.tick", "calls", map[string]int64{"": n}},
		{"user.tick", "i", map[string]int64{"": sumI}},
		{"user.tick", "neg", map[string]int64{"": -sumI}},
		{"user.pick", "a", map[string]int64{"": sumA}},
		{"user.pick", "small", map[string]int64{"": 3 * sumI}},
		{"user.pick", "neg", map[string]int64{"": -sumI}},
		{"user.pick", "five", map[string]int64{"": 5 * n}},
		{"user.pick", "low", low},
		{"user.at", "v", map[string]int64{"": sumV}},
		{"user.two", "calls", map[string]int64{"": 2 * n}},
		{"user.many", "a6", map[string]int64{"": 7 * sumI}},
		{"user.many", "a11", map[string]int64{"": 12 * sumI}},
		{"user.two", "v", map[string]int64{"": sumI + n*1000000000000 + sumI}},
	} {
		got := values(aggregation(t, w, s, c.probe, c.agg))
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s %s: %v, want %v", c.probe, c.agg, got, c.want)
		}
	}
}

// TestUSDTPython counts a real Debian program's USDT probes, both
// behind semaphores (Python evaluates them only while a uprobe is
// attached): python3's python:function__entry by the function's name,
// read from user memory through its second argument (8@%r12), and
// python:gc__start by the generation collected (-4@112(%rsp): memory
// above the stack pointer).
func TestUSDTPython(t *testing.T) {
	requireRoot(t)
	python, err := filepath.EvalSymlinks("/usr/bin/python3")
	if err != nil {
		testenv.Absent(t, "no python3: %v", err)
	}
	if out, _ := exec.Command("readelf", "-n", python).Output(); !bytes.Contains(out, []byte("function__entry")) {
		testenv.Absent(t, "%s has no python:function__entry probe (built without --with-dtrace; Debian's python3 has it)", python)
	}
	w := workspace(t)
	s, _ := apply(t, w, `probe "user" "py" {
  binary = "`+python+`"
  usdt   = "python:function__entry"
  on_entry {
    count "calls" { by = [str(arg1, 32)] }
  }
}

probe "user" "gc" {
  binary = "`+python+`"
  usdt   = "python:gc__start"
  on_entry {
    count "collections" { by = [arg0] }
  }
}`)
	const n, gen1 = 37, 5
	// Python 3.11 fires function__entry on its tracing path only: a
	// profile function (sys.setprofile) puts every call on it. With
	// automatic collection off, only gc.collect(1) collects generation 1
	// (the interpreter collects 0 and 2 as it exits).
	script := fmt.Sprintf(`import gc, sys
gc.disable()
for i in range(%d):
    gc.collect(1)
def bt_usdt_f(x):
    return x + 1
sys.setprofile(lambda *a: None)
for i in range(%d):
    bt_usdt_f(i)
sys.setprofile(None)
`, gen1, n)
	if out, err := exec.Command(python, "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	if got := values(aggregation(t, w, s, "user.py", "calls")); got["bt_usdt_f"] != n {
		t.Errorf("bt_usdt_f entered %d times, want %d; functions seen: %v", got["bt_usdt_f"], n, got)
	}
	got := values(aggregation(t, w, s, "user.gc", "collections"))
	if got["1"] != gen1 {
		t.Errorf("%d collections of generation 1, want %d: %v", got["1"], gen1, got)
	}
	t.Logf("collections by generation: %v", got)
}

// TestUSDTLibraryRunning probes a shared library's USDT probe in a
// process already running when the probe is applied, with pid: the
// kernel raises the library's semaphore in that process, and not in
// another running the library, the probe counts that process's calls
// only, and a process started after the destroy finds it lowered.
func TestUSDTLibraryRunning(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	lib := filepath.Join(dir, "libbtusdt.so")
	bin := filepath.Join(dir, "bt-usdt-lib")
	for _, args := range [][]string{
		{"-O2", "-shared", "-fPIC", "-o", lib, "testdata/usdtlib.c"},
		{"-O2", "-DMAIN", "-o", bin, "testdata/usdtlib.c", lib, "-Wl,-rpath," + dir},
	} {
		if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
			if bytes.Contains(out, []byte("sys/sdt.h")) {
				testenv.Absent(t, "no sys/sdt.h (systemtap-sdt-dev)")
			}
			t.Fatalf("gcc: %v\n%s", err, out)
		}
	}
	const n = 50
	start := func() (*exec.Cmd, io.WriteCloser, *bytes.Buffer) {
		cmd := exec.Command(bin, fmt.Sprint(n))
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		cmd.Stdout = &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, in, &out
	}
	finish := func(cmd *exec.Cmd, in io.WriteCloser, out *bytes.Buffer) string {
		in.Write([]byte("\n"))
		in.Close()
		if err := cmd.Wait(); err != nil {
			t.Fatalf("%s: %v", bin, err)
		}
		return strings.TrimSpace(out.String())
	}
	cmd, in, out := start()
	other, otherIn, otherOut := start() // not the probe's pid
	// The library is mapped once the process waits on stdin: the probe's
	// uprobe and semaphore go into a running process.
	for i := 0; ; i++ {
		maps, _ := os.ReadFile(fmt.Sprintf("/proc/%d/maps", cmd.Process.Pid))
		if bytes.Contains(maps, []byte(lib)) {
			break
		}
		if i == 200 {
			t.Fatalf("%s never mapped %s", bin, lib)
		}
		time.Sleep(10 * time.Millisecond)
	}
	w := workspace(t)
	s, _ := apply(t, w, fmt.Sprintf(`probe "user" "lib" {
  binary = %q
  usdt   = "lib:tick"
  pid    = %d
  on_entry {
    count "calls" {}
    sum "v" { value = arg0 }
  }
}`, lib, cmd.Process.Pid))
	if got := finish(cmd, in, out); got != fmt.Sprint(n) {
		t.Errorf("the running process saw the semaphore raised in %s of %d calls", got, n)
	}
	// The kernel puts the uprobe, and raises the semaphore, only in
	// pid's process.
	if got := finish(other, otherIn, otherOut); got != "0" {
		t.Errorf("another process saw the semaphore raised in %s calls", got)
	}
	want := map[string]int64{"": n}
	if got := values(aggregation(t, w, s, "user.lib", "calls")); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("calls: %v, want %v", got, want)
	}
	if got := values(aggregation(t, w, s, "user.lib", "v")); got[""] != 7*n*(n-1)/2 {
		t.Errorf("sum of arg0: %v, want %d", got, 7*n*(n-1)/2)
	}
	if _, _, err := w.Destroy(s, nil); err != nil {
		t.Fatal(err)
	}
	cmd, in, out = start()
	if got := finish(cmd, in, out); got != "0" {
		t.Errorf("after destroy, the semaphore was raised in %s calls", got)
	}
}
