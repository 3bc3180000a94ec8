package main

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"fmt"
	"github.com/probectl/probectl/internal/testenv"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/probectl/probectl/bpf/symbols"
)

// Which file and which process show believes, tried as a local user would
// fool root's show: a file of theirs claiming the build id of root's
// program once it has exited, and the pid of root's process, got back.

// nobody is the unprivileged user the attacks run as.
const nobody = 65534

// forgeCopy writes the attacker's copy of the workload at path: every
// "stk_" of it made "atk_" (its functions' names; the code, offsets and
// build id unchanged), in a directory of uid nobody's, owned by them.
func forgeCopy(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "symtrust-atk-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	forged := filepath.Join(dir, fmt.Sprintf("atk-%d", os.Getpid()%1000000))
	if err := os.WriteFile(forged, bytes.ReplaceAll(data, []byte("stk_"), []byte("atk_")), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, forged} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	return forged
}

// startNobody starts path as uid nobody and waits for its "ready" line:
// it then waits on its stdin, mapping its file, until the test ends (or
// the function returned is called).
func startNobody(t *testing.T, path string, args ...string) (*exec.Cmd, func()) {
	t.Helper()
	cmd := exec.Command(path, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	return cmd, startWorkload(t, -1, cmd).kill
}

// Defect 4: root's program exits; a file of uid nobody's claims its build
// id (a copy whose functions are renamed atk_*), mapped by a process of
// theirs, named in the build-id index, or both. show, show -json,
// show -folded and the flame graph name no frame from it but as
// untrusted, and the index (root's cache) never names it. root's own
// file, once found, wins and is indexed.
func TestBuildIDSpoofing(t *testing.T) {
	// A build id of its own: the workload built elsewhere on the machine
	// (other tests, running) has the same code, and rightly names it.
	if os.Geteuid() != 0 {
		t.Skip("needs root to load BPF and to make files of another user")
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		testenv.Absent(t, "gcc is missing")
	}
	comm := fmt.Sprintf("spf-w%d", os.Getpid()%1000000)
	path := filepath.Join(t.TempDir(), comm)
	// 20 bytes, as the kernel records a build id (a shorter one padded).
	unique := fmt.Sprintf("%016x%08x%016x", time.Now().UnixNano(), os.Getpid(), time.Now().UnixNano())
	t.Logf("build id %s", unique)
	if out, err := exec.Command("gcc", "-O0", "-fno-omit-frame-pointer", "-Wl,--build-id=0x"+unique, "-o", path, "testdata/stacks/work.c").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	index := filepath.Join(cache, "probectl", "buildids.json")
	c := newStkCLI(t)
	c.apply(fmt.Sprintf(`
probe "tracepoint" "getppid" {
  event = "syscalls:sys_enter_getppid"
  on_entry {
    when = comm == %q
    count "calls" {
      by = [ustack(4)]
    }
  }
}
`, comm))
	const n = 41
	runWork(t, path, "getppid", fmt.Sprint(n))
	forged := forgeCopy(t, path)
	id := symbols.FileBuildID(path)
	if id != unique || symbols.FileBuildID(forged) != id {
		t.Fatalf("the forged file claims build id %q, the workload's is %q", symbols.FileBuildID(forged), id)
	}
	_, stopAttacker := startNobody(t, forged, "getppid", "1")
	mark := fmt.Sprintf("[untrusted: %s owned by uid %d]", forged, nobody)

	// check runs each view, before calls before each.
	check := func(phase string, before func()) {
		t.Helper()
		before()
		text := c.must("show")
		lines := 0
		for _, l := range strings.Split(text, "\n") {
			if strings.Contains(l, "atk_") {
				lines++
				if !strings.HasSuffix(l, " "+mark) {
					t.Errorf("%s: show names a frame from the forged file without %q: %q", phase, mark, l)
				}
			}
		}
		if lines == 0 || !strings.Contains(text, "atk_caller+0x") || strings.Contains(text, "stk_caller") || !strings.Contains(text, fmt.Sprintf("count: %d\n", n)) {
			t.Errorf("%s: show, want atk_caller marked %s and count %d:\n%s", phase, mark, n, text)
		}

		before()
		out := c.must("show", "-json")
		var raw struct {
			Probes []struct {
				Aggregations []struct {
					Entries []struct {
						Key map[string][]map[string]any `json:"key"`
					} `json:"entries"`
				} `json:"aggregations"`
			} `json:"probes"`
		}
		if err := json.Unmarshal([]byte(out), &raw); err != nil || len(raw.Probes) != 1 || len(raw.Probes[0].Aggregations) != 1 || len(raw.Probes[0].Aggregations[0].Entries) != 1 {
			t.Fatalf("show -json: want one stack (%v):\n%s", err, out)
		}
		named := 0
		for _, f := range raw.Probes[0].Aggregations[0].Entries[0].Key["ustack(4)"] {
			if sym, _ := f["symbol"].(string); strings.HasPrefix(sym, "atk_") {
				named++
				if f["note"] != mark[1:len(mark)-1] {
					t.Errorf("%s: show -json: frame %v, want note %q", phase, f, mark[1:len(mark)-1])
				}
			}
		}
		if named == 0 {
			t.Errorf("%s: show -json: no frame from the forged file, marked or not:\n%s", phase, out)
		}

		before()
		folded := c.must("show", "-folded")
		for _, fr := range strings.FieldsFunc(strings.TrimSpace(folded), func(r rune) bool { return r == ';' || r == '\n' }) {
			fr = strings.TrimSuffix(fr, fmt.Sprintf(" %d", n))
			if strings.Contains(fr, "atk_") && !strings.HasSuffix(fr, " "+mark) {
				t.Errorf("%s: show -folded names frame %q from the forged file without %q", phase, fr, mark)
			}
		}
		if !strings.Contains(folded, "atk_caller "+mark) {
			t.Errorf("%s: show -folded, want atk_caller %s:\n%s", phase, mark, folded)
		}

		svgPath := filepath.Join(t.TempDir(), "spoof.svg")
		before()
		c.must("show", "-flamegraph", svgPath)
		svg, err := os.ReadFile(svgPath)
		if err != nil {
			t.Fatal(err)
		}
		esc := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(mark)
		if bad := regexp.MustCompile(`atk_[a-z_]*`).FindAllIndex(svg, -1); len(bad) == 0 {
			t.Errorf("%s: the flame graph has no frame of the forged file", phase)
		} else {
			for _, b := range bad {
				if !bytes.HasPrefix(svg[b[1]:], []byte(" "+esc)) {
					t.Errorf("%s: the flame graph names %s without %q: %.80q", phase, svg[b[0]:b[1]], esc, svg[b[1]:])
				}
			}
		}

		if b, err := os.ReadFile(index); err == nil && bytes.Contains(b, []byte(forged)) {
			t.Errorf("%s: the build-id index names the forged file:\n%s", phase, b)
		}
	}
	// The forged file mapped by a running process of nobody's (show finds
	// it scanning /proc).
	check("mapped by nobody's process", func() {})

	// An index written before (by a probectl that indexed such files)
	// names it, and nobody's process is gone: each show names the frames
	// as untrusted, and drops the entry from the index.
	stopAttacker()
	if err := os.MkdirAll(filepath.Dir(index), 0o700); err != nil {
		t.Fatal(err)
	}
	check("named by the index", func() {
		if err := os.WriteFile(index, []byte(fmt.Sprintf(`{%q: %q}`, id, forged)), 0o600); err != nil {
			t.Fatal(err)
		}
	})

	// root's own file, in a -symbols directory: believed, named from, and
	// indexed; it then wins over the forged one, running again.
	text := c.must("show", "-symbols", filepath.Dir(path))
	if !strings.Contains(text, "stk_caller+0x") || strings.Contains(text, "atk_") || strings.Contains(text, "untrusted") {
		t.Errorf("show -symbols with root's file:\n%s", text)
	}
	if b, err := os.ReadFile(index); err != nil || !strings.Contains(string(b), strconv.Quote(path)) {
		t.Errorf("the build-id index, want %s in it: %v\n%s", path, err, b)
	}
	startNobody(t, forged, "getppid", "1")
	if text := c.must("show"); !strings.Contains(text, "stk_caller+0x") || strings.Contains(text, "atk_") {
		t.Errorf("show with root's file indexed and the forged one mapped:\n%s", text)
	}
}

// Defect 5: root's process is traced (usym of a function pointer, and
// its user stack, of a binary without a build id: both symbolized
// through /proc/PID/maps), exits, and uid nobody's process gets its pid
// (ns_last_pid), mapping at the same addresses a copy whose functions are
// renamed atk_*. show never prints nobody's functions: this probectl,
// which read root's process's maps while it ran, names its function
// still (issue 21); a symbolizer that never saw it run, and the stack's
// frames, print the addresses as of an exited process.
func TestPidReuse(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to load BPF and to set ns_last_pid")
	}
	if _, err := os.Stat("/proc/sys/kernel/ns_last_pid"); err != nil {
		t.Skipf("no ns_last_pid (a kernel without CONFIG_CHECKPOINT_RESTORE): %v", err)
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		testenv.Absent(t, "gcc is missing")
	}
	comm := fmt.Sprintf("spr-w%d", os.Getpid()%1000000)
	path := filepath.Join(t.TempDir(), comm)
	// No build id (the kernel records such frames by address) and no PIE
	// (the copy maps its code where the original did).
	if out, err := exec.Command("gcc", "-O0", "-fno-omit-frame-pointer", "-no-pie", "-Wl,--build-id=none", "-o", path, "testdata/stacks/work.c").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	c := newSymCLI(t)
	c.apply(fmt.Sprintf(`
probe "user" "call" {
  binary    = %q
  functions = ["stk_call"]
  on_entry {
    when = comm == %q
    count "calls" {
      by = { fn = usym(arg0) }
    }
    count "stacks" {
      by = [ustack(3)]
    }
  }
}
`, path, comm))
	const n = 57
	wk := startWorkload(t, -1, exec.Command(path, "call", fmt.Sprint(n)))
	wk.work(t)
	cmd := wk.cmd
	pid := cmd.Process.Pid
	started, err := symbols.StartTime(pid)
	if err != nil {
		t.Fatal(err)
	}
	recorded := symbols.Process{PID: pid, Start: symbols.ProcessStarted | uint32(started)&(symbols.ProcessStarted-1)}

	type entry struct {
		Key   map[string]json.RawMessage `json:"key"`
		Value int64                      `json:"value"`
	}
	type frame struct{ Addr, Symbol, Module, Note string }
	read := func() (fn string, stack []frame) {
		t.Helper()
		out := c.must("show", "-json")
		var res struct {
			Probes []struct {
				Aggregations []struct {
					Name    string  `json:"name"`
					Entries []entry `json:"entries"`
				} `json:"aggregations"`
			} `json:"probes"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		for _, a := range res.Probes[0].Aggregations {
			if len(a.Entries) != 1 || a.Entries[0].Value != n {
				t.Fatalf("aggregation %s: want one key counted %d:\n%s", a.Name, n, out)
			}
			var err error
			switch a.Name {
			case "calls":
				err = json.Unmarshal(a.Entries[0].Key["fn"], &fn)
			case "stacks":
				err = json.Unmarshal(a.Entries[0].Key["ustack(3)"], &stack)
			}
			if err != nil {
				t.Fatalf("%s: %v\n%s", a.Name, err, out)
			}
		}
		return fn, stack
	}
	// While it runs: its functions.
	if fn, stack := read(); fn != "stk_target ["+comm+"]" || len(stack) == 0 || stack[0].Symbol != "stk_call" {
		t.Fatalf("while the process runs: fn %q, stack %+v; want stk_target [%s], stk_call first", fn, stack, comm)
	}
	wk.end(t)
	// A process is told from the pid's next owner by its start time in
	// clock ticks (what /proc/PID/stat gives): one that started, ran and
	// exited within a tick is not told from a process started in that
	// same tick (README, "Addresses"). This workload can do all that in a
	// few milliseconds, so the attacker starts a tick later.
	time.Sleep(2 * symbols.ClockTickNS * time.Nanosecond)

	// nobody's copy, started as the pid's next owner.
	forged := forgeCopy(t, path)
	var atk *exec.Cmd
	for try := 0; ; try++ {
		if try == 2000 {
			t.Fatalf("pid %d not got back in %d tries (the machine forks too fast)", pid, try)
		}
		// Another's fork between our write and ours took the pid: wait
		// for it to go.
		for i := 0; i < 500 && fileExists(fmt.Sprintf("/proc/%d", pid)); i++ {
			time.Sleep(10 * time.Millisecond)
		}
		if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pid-1)), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd, stop := startNobody(t, forged, "call", "1")
		if cmd.Process.Pid == pid {
			atk = cmd
			t.Logf("pid %d got back on try %d", pid, try+1)
			break
		}
		stop()
	}
	// The attack is real: by its pid alone (as show read it before),
	// root's address is nobody's function now.
	if st, err := os.Stat(fmt.Sprintf("/proc/%d", atk.Process.Pid)); err != nil || st.Sys().(*syscall.Stat_t).Uid != nobody {
		t.Fatalf("/proc/%d: %v, want a process of uid %d", pid, err, nobody)
	}
	exited := fmt.Sprintf("[process %d exited]", pid)
	fn, stack := read()
	if want := "stk_target [" + comm + "]"; fn != want {
		t.Errorf("usym after the pid is nobody's: %q, want %q (the maps read while root's process ran)", fn, want)
	}
	// stk_target's address: the binary is not PIE, so the address is the
	// symbol's value.
	addr := elfSymbol(t, path, "stk_target")
	fresh := symbols.NewUserSymbols("", nil)
	if by := fresh.FrameAt(recorded, addr); by.Symbol != "" || "["+by.Note+"]" != exited {
		t.Errorf("a symbolizer that never saw it run: %+v, want the address and %q", by, exited)
	}
	if by := fresh.FrameAt(symbols.Process{PID: pid}, addr); by.Symbol != "atk_target" {
		t.Errorf("by pid alone the address is %+v, want nobody's atk_target (the attack did not take)", by)
	}
	// The workload's frames (no build id) are addresses of an exited
	// process; libc's, by build id, are libc's still.
	gone := 0
	for _, f := range stack {
		switch {
		case f.Note == exited[1:len(exited)-1] && f.Symbol == "":
			gone++
		case f.Note != "" || !strings.Contains(f.Module, "libc"):
			t.Errorf("user stack frame %+v, want its address and note %q, or a libc function", f, exited[1:len(exited)-1])
		}
	}
	if gone < 2 { // stk_call, its caller
		t.Errorf("user stack %+v: want the workload's frames noted %q", stack, exited[1:len(exited)-1])
	}
	text := c.must("show")
	if strings.Contains(text, "atk_") || !strings.Contains(text, exited) || !strings.Contains(text, "stk_target") {
		t.Errorf("show names nobody's functions, or not %q:\n%s", exited, text)
	}
	folded := c.must("show", "-folded", "-aggregation", "stacks")
	if strings.Contains(folded, "atk_") || !strings.Contains(folded, exited) {
		t.Errorf("show -folded names nobody's functions, or not %q:\n%s", exited, folded)
	}
}

// elfSymbol is the value of the symbol name in the ELF file at path.
func elfSymbol(t *testing.T, path, name string) uint64 {
	t.Helper()
	ef, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	syms, err := ef.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range syms {
		if s.Name == name {
			return s.Value
		}
	}
	t.Fatalf("%s has no symbol %s", path, name)
	return 0
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
