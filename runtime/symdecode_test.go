package runtime

import (
	"bufio"
	"fmt"
	"github.com/probectl/probectl/internal/testenv"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/probectl/probectl/bpf/symbols"
	"github.com/probectl/probectl/compiler"
)

// here is an address in this test binary's code.
var here = uint64(reflect.ValueOf(TestDecodeKsym).Pointer())

// usym of a process gone, of no process, and of 0. (An address of a
// live process is named in cmd/probectl's TestUsymFunctionPointer: the
// test binary here has no symbol table.)
func TestDecodeUsym(t *testing.T) {
	slot := func(addr uint64, pid int) []byte {
		return append(le(int64(addr)), le(int64(pid))...)
	}
	const addr = 0x401000
	cmd := exec.Command("/bin/true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	gone := cmd.ProcessState.Pid()
	if got, want := decodeUsym(compiler.KeyField{}, slot(addr, gone)), fmt.Sprintf("0x%x [process %d exited]", addr, gone); got != want {
		t.Errorf("usym of an exited process: %q, want %q", got, want)
	}

	// An address of this process, recorded with its start time: named
	// from its maps (its file). With another start time, as when the pid
	// is another process's now: its address, and that the process that
	// recorded it has exited.
	start, err := symbols.StartTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	tagged := func(start uint64) []byte {
		proc := uint64(os.Getpid()) | uint64(symbols.ProcessStarted|uint32(start)&(symbols.ProcessStarted-1))<<32
		return append(le(int64(here)), le(int64(proc))...)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := decodeUsym(compiler.KeyField{}, tagged(start)), "["+filepath.Base(self)+"]"; !strings.HasSuffix(got.(string), want) {
		t.Errorf("usym of this process: %q, want it in %s", got, want)
	}
	if got, want := decodeUsym(compiler.KeyField{}, tagged(start+1)), fmt.Sprintf("0x%x [process %d exited]", here, os.Getpid()); got != want {
		t.Errorf("usym of this pid with another start time: %q, want %q", got, want)
	}
	if got, want := decodeUsym(compiler.KeyField{}, slot(addr, 0)), fmt.Sprintf("0x%x (no process)", addr); got != want {
		t.Errorf("usym of pid 0: %q, want %q", got, want)
	}
	if got := decodeUsym(compiler.KeyField{}, slot(0, os.Getpid())); got != "0x0" {
		t.Errorf("usym of 0: %q", got)
	}
	if got := decodeUsym(compiler.KeyField{}, le(1)); got != "usym 0100000000000000" {
		t.Errorf("usym of a short slot: %q", got)
	}
}

// ksym of a kernel text symbol's address, and one byte into it.
func TestDecodeKsym(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("kallsyms shows addresses to root only")
	}
	f, err := os.Open("/proc/kallsyms")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var addr uint64
	var name string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 3 && fields[1] == "T" && fields[2] == "vfs_read" {
			addr, _ = strconv.ParseUint(fields[0], 16, 64)
			name = fields[2]
			break
		}
	}
	if addr == 0 {
		t.Fatal("no vfs_read in /proc/kallsyms")
	}
	if got := decodeKsym(compiler.KeyField{}, le(int64(addr))); got != name {
		t.Errorf("ksym of %#x: %q, want %q", addr, got, name)
	}
	if got := decodeKsym(compiler.KeyField{}, le(int64(addr+0x12))); got != name+"+0x12" {
		t.Errorf("ksym of %#x+0x12: %q, want %q", addr, got, name+"+0x12")
	}
	if got := decodeKsym(compiler.KeyField{}, le(0x1000)); got != "0x1000" {
		t.Errorf("ksym of 0x1000: %q", got)
	}
}

// usym of a process that has exited since its first address was shown:
// named as it was while it ran (issue 21: the first event named, the next
// ones "process exited"), across the symbolizer's refresh.
func TestDecodeUsymAfterExit(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	pid := cmd.Process.Pid
	var addr uint64
	for deadline := time.Now().Add(10 * time.Second); addr == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) == 6 && strings.Contains(f[1], "x") && strings.HasPrefix(filepath.Base(f[5]), "libc.so") {
				lo, _, _ := strings.Cut(f[0], "-")
				start, _ := strconv.ParseUint(lo, 16, 64)
				addr = start + 0x1000
			}
		}
	}
	if addr == 0 {
		testenv.Absent(t, "sleep maps no libc (a dynamically linked coreutils)")
	}
	start, err := symbols.StartTime(pid)
	if err != nil {
		t.Fatal(err)
	}
	proc := uint64(pid) | uint64(symbols.ProcessStarted|uint32(start)&(symbols.ProcessStarted-1))<<32
	slot := append(le(int64(addr)), le(int64(proc))...)
	live := decodeUsym(compiler.KeyField{}, slot).(string)
	if !strings.Contains(live, "[libc.so") {
		t.Fatalf("usym while it runs: %q, want it in libc", live)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if got := decodeUsym(compiler.KeyField{}, slot); got != live {
		t.Errorf("usym after it exited: %q, want %q", got, live)
	}
	userSyms.mu.Lock()
	userSyms.refreshed = time.Time{}
	userSyms.mu.Unlock()
	if got := decodeUsym(compiler.KeyField{}, slot); got != live {
		t.Errorf("usym after it exited and a refresh: %q, want %q", got, live)
	}
}
