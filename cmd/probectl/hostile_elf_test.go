package main

import (
	"debug/elf"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	goruntime "runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// hostileClaim is what the hostile file's .symtab header claims: 530 MB,
// a whole number of entries.
const hostileClaim = 22083334 * elf.Sym64Size

// hostileWork builds the stack workload and makes it a hostile file, as
// any local user may: its .symtab header claims 530 MB, and the file is
// made as long (sparse: its blocks stay the few KiB written).
func hostileWork(t *testing.T) (path, comm string) {
	t.Helper()
	path, comm = buildStackWork(t, "elf")
	ef, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	sec := ef.Section(".symtab")
	ef.Close()
	if sec == nil || ef.Class != elf.ELFCLASS64 {
		t.Fatalf("%s: no 64-bit .symtab (gcc strips?)", path)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var hdr [64]byte
	if _, err := f.ReadAt(hdr[:], 0); err != nil {
		t.Fatal(err)
	}
	shoff, shentsize := binary.LittleEndian.Uint64(hdr[0x28:]), binary.LittleEndian.Uint16(hdr[0x3a:])
	idx := -1
	ef, _ = elf.Open(path)
	for i, s := range ef.Sections {
		if s.Name == ".symtab" {
			idx = i
		}
	}
	ef.Close()
	var size [8]byte
	binary.LittleEndian.PutUint64(size[:], hostileClaim)
	if _, err := f.WriteAt(size[:], int64(shoff)+int64(idx)*int64(shentsize)+32); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(int64(sec.Offset) + hostileClaim); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d bytes long, %d KiB in blocks", path, st.Size, st.Blocks/2)
	return path, comm
}

// allocated runs fn and returns the bytes the process allocated meanwhile.
func allocated(fn func()) uint64 {
	var before, after goruntime.MemStats
	goruntime.ReadMemStats(&before)
	fn()
	goruntime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// peakRSS is the process's peak resident size (VmHWM), in KiB, or 0.
func peakRSS() int64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			var kb int64
			fmt.Sscan(v, &kb)
			return kb
		}
	}
	return 0
}

// The original failure, replayed: a local user runs a program from a
// sparse file whose .symtab claims 530 MB, and root's show of a ustack
// aggregation that hits it read and decoded the whole claim (30 s,
// 3.5 GB), as every /metrics scrape did (three at once: 9.36 GB). Now
// show, show -json, show -folded and three concurrent scrapes each
// allocate a bounded few MiB, and the program's frames print
// unsymbolized with the reason; libc's frames are still named.
func TestHostileSymbolTableShow(t *testing.T) {
	path, comm := hostileWork(t)
	c := newStkCLI(t)
	c.apply(fmt.Sprintf(`
probe "tracepoint" "getppid" {
  event = "syscalls:sys_enter_getppid"
  on_entry {
    when = comm == %q
    count "calls" {
      by            = [ustack(4)]
      export_stacks = true # the scrapes below read the stack too
    }
  }
}
`, comm))
	const n = 321
	exit := startWork(t, -1, path, "getppid", fmt.Sprint(n))
	defer exit()

	reason := "symbols not read: .symtab of 505 MiB is over the 256 MiB bound of a symbol table"
	want := fmt.Sprintf(" [%s] (%s)", comm, reason)
	const bound = 256 << 20 // before: 3.5 GB (the claim read, decoded)
	check := func(what string, alloc uint64) {
		t.Helper()
		t.Logf("%s: %d KiB allocated, peak RSS %d MiB", what, alloc>>10, peakRSS()>>10)
		if alloc > bound {
			t.Errorf("%s allocated %d MiB, bound %d MiB", what, alloc>>20, bound>>20)
		}
	}

	var text string
	check("show", allocated(func() { text = c.must("show") }))
	if !strings.Contains(text, want) || !strings.Contains(text, fmt.Sprintf("count: %d", n)) {
		t.Errorf("show: want frames ending %q and count %d in\n%s", want, n, text)
	}

	var js string
	check("show -json", allocated(func() { js = c.must("show", "-json") }))
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
	if err := json.Unmarshal([]byte(js), &res); err != nil {
		t.Fatalf("%v\n%s", err, js)
	}
	entries := res.Probes[0].Aggregations[0].Entries
	if len(entries) != 1 || entries[0].Value != n {
		t.Fatalf("want one stack counted %d:\n%s", n, js)
	}
	unsym, named := 0, 0
	for _, f := range entries[0].Key["ustack(4)"] {
		switch {
		case f["module"] == path && f["symbol"] == "" && f["reason"] == reason:
			unsym++
		case f["module"] != path && f["symbol"] != "":
			named++
		default:
			t.Errorf("frame %v", f)
		}
	}
	if unsym != 2 || named == 0 { // stk_caller, main; libc's
		t.Errorf("%d frames of %s unsymbolized with the reason, %d named, want 2 and libc's:\n%s", unsym, comm, named, js)
	}

	var folded string
	check("show -folded", allocated(func() { folded = c.must("show", "-folded") }))
	if !strings.Contains(folded, fmt.Sprintf("[%s] (%s)", comm, reason)) || !strings.HasSuffix(strings.TrimSpace(folded), fmt.Sprint(" ", n)) {
		t.Errorf("show -folded:\n%s", folded)
	}

	// Three scrapes at once, as Prometheus and two dashboards ask.
	h := metricsHandler(c.state, c.ws, 1000)
	var bodies [3]string
	check("three concurrent scrapes", allocated(func() {
		var wg sync.WaitGroup
		for i := range bodies {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
				bodies[i] = rec.Body.String()
			}()
		}
		wg.Wait()
	}))
	for i, b := range bodies {
		var line string
		for _, l := range strings.Split(b, "\n") {
			if strings.HasPrefix(l, "probectl_count_tracepoint_getppid_calls_total{") {
				line = l
			}
		}
		if !strings.Contains(line, want) || !strings.HasSuffix(line, fmt.Sprint(" ", n)) {
			t.Errorf("scrape %d: the stack's series %q, want frames ending %q and %d", i, line, want, n)
		}
	}
}
