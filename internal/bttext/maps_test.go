package bttext

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// testdata/maps.bt fills one map of each kind (scalars, keys of strings,
// of integers, of two parts, cleared and zeroed maps, a key that is not
// ASCII); maps.txt and maps.json are what bpftrace 0.17 printed for it
// (bpftrace maps.bt, bpftrace -f json maps.bt), the Attaching line left
// out of maps.txt. mapsBt is the same maps as Map values.
func mapsBt() []Map {
	h := func(vs ...int64) []uint64 {
		b := make([]uint64, 34)
		for _, v := range vs {
			b[HistIndex(v)]++
		}
		return b
	}
	l := func(min, max, step int64, vs ...int64) []uint64 {
		b := make([]uint64, LhistIndex(max, min, max, step)+1)
		for _, v := range vs {
			b[LhistIndex(v, min, max, step)]++
		}
		return b
	}
	k := func(parts ...any) []any { return parts }
	return []Map{
		{Name: "@a", Kind: Avg, Entries: []MapEntry{{Count: 2, Total: 15}}},
		{Name: "@ak", Kind: Avg, Keyed: true, Entries: []MapEntry{{Key: k(int64(3)), Count: 1, Total: 100}, {Key: k(int64(5)), Count: 2, Total: -5}}},
		{Name: "@big", Kind: HistMap, Entries: []MapEntry{{Buckets: h(5000000000, 3000000000)}}},
		{Name: "@c", Kind: Count, Keyed: true, Entries: []MapEntry{{Key: k("zsh"), Value: 3}, {Key: k("bash"), Value: 1}, {Key: k("sh"), Value: 2}}},
		{Name: "@e", Kind: Count, Entries: []MapEntry{{Value: 0}}},
		{Name: "@gone", Kind: Count, Keyed: true},
		{Name: "@h", Kind: HistMap, Entries: []MapEntry{{Buckets: h(5, 0, -1, 1, 1500, 1500, 3000000)}}},
		{Name: "@hk", Kind: HistMap, Keyed: true, Entries: []MapEntry{{Key: k("w"), Buckets: h(300, 4096)}, {Key: k("r"), Buckets: h(3)}}},
		{Name: "@l", Kind: LhistMap, Min: 0, Max: 4096, Step: 1024, Entries: []MapEntry{{Buckets: l(0, 4096, 1024, 5, 2048, 5000, -3)}}},
		{Name: "@lk", Kind: LhistMap, Keyed: true, Min: 10, Max: 20, Step: 5, Entries: []MapEntry{{Key: k(int64(1)), Buckets: l(10, 20, 5, 11, 12)}, {Key: k(int64(2)), Buckets: l(10, 20, 5, 15)}}},
		{Name: "@mn", Kind: Min, Keyed: true, Entries: []MapEntry{{Key: k(int64(2)), Value: 4}, {Key: k(int64(1)), Value: -8}}},
		{Name: "@mx", Kind: Max, Keyed: true, Entries: []MapEntry{{Key: k("b", int64(1)), Value: 30}, {Key: k("a", int64(2)), Value: 9}}},
		{Name: "@s", Kind: Sum, Entries: []MapEntry{{Value: -7}}},
		{Name: "@st", Kind: Stats, Entries: []MapEntry{{Count: 2, Total: 31}}},
		{Name: "@stk", Kind: Stats, Keyed: true, Entries: []MapEntry{{Key: k("y", int64(7)), Count: 2, Total: 101}, {Key: k("x", int64(-1)), Count: 1, Total: 5}}},
		{Name: "@two", Kind: Count, Keyed: true, Entries: []MapEntry{{Key: k(int64(2), "x"), Value: 2}, {Key: k(uint64(1), "x"), Value: 1}}},
		{Name: "@u", Kind: Count, Keyed: true, Entries: []MapEntry{{Key: k("é\"q"), Value: 1}}},
		{Name: "@z", Kind: Count, Keyed: true, Entries: []MapEntry{{Key: k(int64(1))}}},
		{Name: "@zh", Kind: HistMap, Keyed: true, Entries: []MapEntry{{Key: k(int64(1)), Buckets: make([]uint64, 34)}}},
	}
}

// TestMapsText prints mapsBt as bpftrace prints its maps at exit (two
// newlines, then each map) and compares it byte for byte with what
// bpftrace 0.17 printed.
func TestMapsText(t *testing.T) {
	want, err := os.ReadFile("testdata/maps.txt")
	if err != nil {
		t.Fatal(err)
	}
	got := "\n\n"
	for _, m := range mapsBt() {
		got += m.Text(0)
	}
	compareLines(t, got, string(want))
}

// TestMapsJSON compares the -f json lines of mapsBt with bpftrace's.
func TestMapsJSON(t *testing.T) {
	want, err := os.ReadFile("testdata/maps.json")
	if err != nil {
		t.Fatal(err)
	}
	got := AttachedJSON(1) + "\n\n"
	for _, m := range mapsBt() {
		got += m.JSON(0)
	}
	compareLines(t, got, string(want))
}

// TestMapsTop: print(@m, N) keeps the N largest, a stats all of its rows.
func TestMapsTop(t *testing.T) {
	ms := mapsBt()
	for _, c := range []struct {
		m    Map
		want string
	}{
		{ms[3], "@c[sh]: 2\n@c[zsh]: 3\n"},
		{ms[1], "@ak[3]: 100\n\n"},
		{ms[7], "@hk[w]: \n" + Hist(mapsBt()[7].Entries[0].Buckets) + "\n"},
		{ms[14], "@stk[x, -1]: count 1, average 5, total 5\n@stk[y, 7]: count 2, average 50, total 101\n\n"},
	} {
		top := 2
		if c.m.Kind != Count {
			top = 1
		}
		if got := c.m.Text(top); got != c.want {
			t.Errorf("%s top %d:\n%q\nwant\n%q", c.m.Name, top, got, c.want)
		}
	}
}

// TestMapsCaptureCurrent runs testdata/maps.bt with the installed
// bpftrace: the captures the tests above compare with are still what it
// prints.
func TestMapsCaptureCurrent(t *testing.T) {
	src, err := os.ReadFile("testdata/maps.bt")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("testdata/maps.txt")
	if err != nil {
		t.Fatal(err)
	}
	compareLines(t, bpftrace(t, string(src)), string(want))
	wantJSON, err := os.ReadFile("testdata/maps.json")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("bpftrace", "-f", "json", "-e", string(src)).Output()
	if err != nil {
		t.Fatal(err)
	}
	compareLines(t, string(out), string(wantJSON))
}

func compareLines(t *testing.T, got, want string) {
	t.Helper()
	if got == want {
		return
	}
	gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range max(len(gl), len(wl)) {
		var g, w string
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if g != w {
			t.Errorf("line %d:\ngot  %q\nwant %q", i+1, g, w)
		}
	}
}

// A stack key part prints in the layout bpftrace 0.17 printed for a
// uprobe's @[ustack(3)] and @k[kstack] (the kernel records no kernel
// stack there) and a tracepoint's @kc[kstack(2), comm]: a newline, a
// frame a line indented by four spaces; a lost stack as nothing. The
// side-by-side test is cmd/probectl's TestRunMapsAsBpftrace/stacks.
func TestStackKeys(t *testing.T) {
	st := Stack{"bm_one+0", "main+242", "__libc_start_call_main+100"}
	for _, c := range []struct {
		m    Map
		want string
	}{
		{Map{Name: "@", Kind: Count, Keyed: true, Entries: []MapEntry{{Key: []any{st}, Value: 1}}},
			"@[\n    bm_one+0\n    main+242\n    __libc_start_call_main+100\n]: 1\n"},
		{Map{Name: "@k", Kind: Count, Keyed: true, Entries: []MapEntry{{Key: []any{Stack{}}, Value: 2}}},
			"@k[]: 2\n"},
		{Map{Name: "@kc", Kind: Count, Keyed: true, Entries: []MapEntry{
			{Key: []any{Stack{"vfs_read+5", "ksys_read+103"}, "cat"}, Value: 3},
			{Key: []any{Stack{"0xffffffff81000010"}, "sh"}, Value: 3}}},
			"@kc[\n    0xffffffff81000010\n, sh]: 3\n@kc[\n    vfs_read+5\n    ksys_read+103\n, cat]: 3\n"},
	} {
		if got := c.m.Text(0); got != c.want {
			t.Errorf("%s: got\n%q\nwant\n%q", c.m.Name, got, c.want)
		}
	}
}

// -f json names a stack key by the same text, escaped: bpftrace 0.17
// printed this line for a tracepoint's @kc[kstack(2), comm].
func TestStackKeysJSON(t *testing.T) {
	m := Map{Name: "@kc", Kind: Count, Keyed: true, Entries: []MapEntry{
		{Key: []any{Stack{"perf_syscall_enter+475", "syscall_trace_enter+384"}, "python3"}, Value: 3}}}
	want := `{"type": "map", "data": {"@kc": {"\n    perf_syscall_enter+475\n    syscall_trace_enter+384\n,python3": 3}}}` + "\n"
	if got := m.JSON(0); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
