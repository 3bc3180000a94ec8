package runtime

// Tests that need no privileges: state parsing and validation, key
// decoding, the JSON of results, and the checked directories.

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler"
)

func validState() *State {
	return &State{Version: StateVersion, Lineage: "abc", Serial: 4, Workspace: "ws", Probes: []*ProbeState{{
		Description:  compiler.Description{Address: bpf.Address{Kind: bpf.KindTracepoint, Name: "opens"}},
		PinDir:       "tracepoint-opens-4",
		Maps:         []MapState{{Ref: "agg_0", Pin: "map_agg_0"}, {Ref: "stats", Pin: "map_stats"}},
		Links:        []LinkState{{Family: "tracepoint", Pin: "link_0"}},
		Stats:        compiler.Stats{EventsDropped: 1, EntryHits: 2, ExitHits: 3, Size: 4},
		Aggregations: []*compiler.Aggregation{{Name: "n", Kind: "count", MapRef: "agg_0", DroppedIndex: 0}},
	}}}
}

// Every path a state file names must be one element of probectl's own
// vocabulary: a tampered state cannot make probectl reach elsewhere.
func TestStateValidation(t *testing.T) {
	if err := validState().validate("ws"); err != nil {
		t.Fatalf("a valid state: %v", err)
	}
	for name, mutate := range map[string]func(*State){
		"pin_dir escapes":      func(s *State) { s.Probes[0].PinDir = "../../../../tmp/x" },
		"pin_dir absolute":     func(s *State) { s.Probes[0].PinDir = "/etc" },
		"pin_dir of another":   func(s *State) { s.Probes[0].PinDir = "tracepoint-other-4" },
		"pin_dir with a slash": func(s *State) { s.Probes[0].PinDir = "tracepoint-opens-4/../x" },
		"map pin escapes":      func(s *State) { s.Probes[0].Maps[0].Pin = "../map_x" },
		"map pin not its ref":  func(s *State) { s.Probes[0].Maps[0].Pin = "map_stats" },
		"map ref odd":          func(s *State) { s.Probes[0].Maps[0].Ref = "a/b"; s.Probes[0].Maps[0].Pin = "map_a/b" },
		"link pin escapes":     func(s *State) { s.Probes[0].Links[0].Pin = "../../link_0" },
		"address invalid":      func(s *State) { s.Probes[0].Address.Name = "a.b" },
		"probe twice":          func(s *State) { s.Probes = append(s.Probes, s.Probes[0]) },
		"another workspace":    func(s *State) { s.Workspace = "other" },
		"huge stats":           func(s *State) { s.Probes[0].Stats.Size = 1 << 40 },
		"hits out of stats":    func(s *State) { s.Probes[0].Stats.EntryHits = 9 },
		"drops out of stats":   func(s *State) { s.Probes[0].Aggregations[0].DroppedIndex = -1 },
		"null aggregation":     func(s *State) { s.Probes[0].Aggregations[0] = nil },
		"serial at 20 digits":  func(s *State) { s.Serial = 9999999999999999999 },
	} {
		s := validState()
		mutate(s)
		if err := s.validate("ws"); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestParseState(t *testing.T) {
	b, _ := json.Marshal(validState())
	if _, err := parseState(b, "state.json", "ws"); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{
		"damaged":       `{"version": 1, "probes": [`,
		"version":       `{"version": 99}`,
		"bad pin_dir":   strings.Replace(string(b), "tracepoint-opens-4", "../../x", 1),
		"wrong type":    `{"version": 1, "serial": "x"}`,
		"null probe":    `{"version": 1, "probes": [null]}`,
		"huge number":   `{"version": 1, "serial": 1e400}`,
		"not an object": `[]`,
		"member twice":  `{"version": 1, "serial": 1, "serial": 2}`,
	} {
		if _, err := parseState([]byte(text), "state.json", "ws"); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// parseState decodes with encoding/json/v2's implementation: a state file
// written by an earlier probectl (testdata/state-v1.json: examples/
// syscalls.hcl and user.hcl applied by the probectl before it, with facts,
// events, histograms and user binaries) reads as encoding/json reads it.
func TestParseStateAsEncodingJSON(t *testing.T) {
	b, err := os.ReadFile("testdata/state-v1.json")
	if err != nil {
		t.Fatal(err)
	}
	got, err := parseState(b, "state-v1.json", "apply2-old")
	if err != nil {
		t.Fatal(err)
	}
	var want State
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if len(got.Probes) != 5 || got.Facts == nil || got.Events == nil {
		t.Fatalf("state-v1.json: %d probes, facts %v, events %v; want 5 and both", len(got.Probes), got.Facts != nil, got.Events != nil)
	}
	if !reflect.DeepEqual(&want, got) {
		w, _ := json.Marshal(&want)
		g, _ := json.Marshal(got)
		t.Errorf("parseState and encoding/json differ:\n%s\n%s", w, g)
	}
	b, _ = json.Marshal(validState())
	if got, err := parseState(b, "state.json", "ws"); err != nil || !reflect.DeepEqual(got, validState()) {
		t.Errorf("validState read back: %v, %+v", err, got)
	}
}

func TestDecodeKey(t *testing.T) {
	fields := []compiler.KeyField{
		{Name: "comm", Kind: "comm", Offset: 0, Size: 16},
		{Name: "func", Kind: "func", Offset: 16, Size: 8},
		{Name: "ret", Kind: "int", Offset: 24, Size: 8},
		{Name: "small", Kind: "int", Offset: 32, Size: 4},
		{Name: "beyond", Kind: "int", Offset: 36, Size: 8},
	}
	b := make([]byte, 40)
	copy(b, "bash\x00junk")
	b[16] = 1
	for i := 24; i < 32; i++ {
		b[i] = 0xff // -1
	}
	copy(b[32:], []byte{0xfe, 0xff, 0xff, 0xff}) // -2 in 4 bytes
	key := decodeKey(fields, b, &ProbeState{Description: compiler.Description{Functions: []string{"vfs_read", "vfs_write"}}})
	got, _ := json.Marshal(key)
	want := `{"comm":"bash","func":"vfs_write","ret":-1,"small":-2,"beyond":"(out of the record)"}`
	if string(got) != want {
		t.Errorf("key = %s, want %s", got, want)
	}
	// strings, bytes, joined argv and events
	more := []compiler.KeyField{
		{Name: "path", Kind: "string", Offset: 0, Size: 8},
		{Name: "addr", Kind: "bytes", Offset: 8, Size: 4},
		{Name: "argv", Kind: "argv", Offset: 12, Size: 12},
		{Name: "event", Kind: "event", Offset: 24, Size: 8},
	}
	rec := make([]byte, 32)
	copy(rec, "/tmp/x\x00\x00")
	copy(rec[8:], []byte{127, 0, 0, 1})
	copy(rec[12:], "ls\x00-l\x00")
	rec[24] = 1
	p := &ProbeState{Description: compiler.Description{Tracepoints: []string{"sched:a", "sched:b"}}}
	if got, _ := json.Marshal(decodeKey(more, rec, p)); string(got) != `{"path":"/tmp/x","addr":"7f000001","argv":"ls -l","event":"sched:b"}` {
		t.Errorf("record = %s", got)
	}
	b[16] = 7 // an index past the functions
	if k := decodeKey(fields[1:2], b, nil); k[0].Value != "#7" {
		t.Errorf("unknown function index: %v", k[0].Value)
	}
}

// Keys are JSON whatever a process named itself (issue 7, defect 5).
func TestKeyJSONHostileStrings(t *testing.T) {
	for _, s := range []string{"x\x1b[2J", "\x80\xff", "a\"b\\c", "\x00", "tab\there", "\u2028"} {
		b, err := json.Marshal(OrderedKey{{Name: "comm", Value: s}, {Name: "n", Value: int64(math.MinInt64)}})
		if err != nil || !json.Valid(b) {
			t.Errorf("%q: %s (%v)", s, b, err)
		}
	}
}

func TestBucketRanges(t *testing.T) {
	lin := &compiler.Aggregation{Kind: "lhist", LinearMin: 0, LinearMax: 20, LinearStep: 5}
	for b, want := range map[int64][2]int64{0: {math.MinInt64, 0}, 1: {0, 5}, 4: {15, 20}, 5: {20, math.MaxInt64}} {
		if lo, hi := bucketRange(lin, b); lo != want[0] || hi != want[1] {
			t.Errorf("lhist bucket %d = [%d, %d), want %v", b, lo, hi, want)
		}
	}
	log := &compiler.Aggregation{Kind: "hist"}
	for b, want := range map[int64][2]int64{0: {math.MinInt64, 0}, 1: {0, 1}, 2: {1, 2}, 3: {2, 4}, 64: {1 << 62, math.MaxInt64}} {
		if lo, hi := bucketRange(log, b); lo != want[0] || hi != want[1] {
			t.Errorf("hist bucket %d = [%d, %d), want %v", b, lo, hi, want)
		}
	}
}

// A bucket's JSON has no int64 limit for an open end (issue 21: hist's
// top bucket had "high": 9223372036854775807): the open bound is left
// out and "open" is true.
func TestBucketJSONOpenEnds(t *testing.T) {
	log := &compiler.Aggregation{Kind: "hist"}
	lin := &compiler.Aggregation{Kind: "lhist", LinearMin: 0, LinearMax: 20, LinearStep: 5}
	for _, c := range []struct {
		agg  *compiler.Aggregation
		b    int64
		want string
	}{
		{log, 64, `{"low":4611686018427387904,"count":3,"open":true}`},
		{log, 0, `{"high":0,"count":3,"open":true}`},
		{log, 3, `{"low":2,"high":4,"count":3}`},
		{lin, 5, `{"low":20,"count":3,"open":true}`},
		{lin, 0, `{"high":0,"count":3,"open":true}`},
		{lin, 1, `{"low":0,"high":5,"count":3}`},
	} {
		lo, hi := bucketRange(c.agg, c.b)
		got, err := json.Marshal(Bucket{Low: lo, High: hi, Count: 3})
		if err != nil || string(got) != c.want {
			t.Errorf("%s bucket %d: %s (%v), want %s", c.agg.Kind, c.b, got, err, c.want)
		}
	}
}

// Diff: create, no-op, replace with why, drift, delete.
func TestDiff(t *testing.T) {
	facts, err := bpf.Profile("linux-7.2-amd64")
	if err != nil {
		t.Fatal(err)
	}
	desc := func(name, digest string, fns ...string) compiler.Description {
		return compiler.Description{Address: bpf.Address{Kind: bpf.KindKernel, Name: name}, Route: compiler.RouteFtrace,
			Attach: []compiler.Family{compiler.FamilyKprobeMulti}, Functions: fns, Digest: digest}
	}
	mk := func(name string, fns ...string) *compiler.Probe {
		return &compiler.Probe{Description: desc(name, "new-"+name, fns...)}
	}
	same, changed, fresh := mk("same", "a"), mk("changed", "a", "b"), mk("fresh", "a")
	drifted := mk("drifted", "a")
	gone := desc("gone", "x")
	gone.Exclude, gone.PID = []string{"b"}, 7
	old := &State{Probes: []*ProbeState{
		{Description: desc("same", same.Digest, "a")},
		{Description: desc("changed", "old", "a")},
		{Description: desc("drifted", drifted.Digest, "a")},
		{Description: gone},
	}}
	out := &compiler.Output{Facts: facts, Probes: []*compiler.Probe{same, changed, fresh, drifted}}
	plan := Diff(old, out, map[bpf.Address][]string{drifted.Address: {"link kprobe.multi: pin gone"}})
	got := map[string]string{}
	for _, c := range plan.Changes {
		got[c.Address.String()] = string(c.Action) + " " + c.Why
		if c.Action == compiler.ActionDelete && (c.Digest != "x" || c.PID != 7 || len(c.Exclude) != 1) {
			t.Errorf("the delete entry lost the applied description: %+v", c.Description)
		}
	}
	want := map[string]string{
		"kernel.same":    "no-op ",
		"kernel.changed": "replace functions added: b",
		"kernel.fresh":   "create ",
		"kernel.drifted": "replace drift: link kprobe.multi: pin gone",
		"kernel.gone":    "delete no longer in the specs",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
	if s := plan.Summary; s.Create != 1 || s.Replace != 2 || s.Delete != 1 || s.NoOp != 1 {
		t.Errorf("summary %+v", s)
	}
}

// The checked directories: symlinks are never followed, loose and foreign
// directories are refused, files are replaced atomically.
func TestDirRefusesWhatOthersControl(t *testing.T) {
	base := t.TempDir()
	target := filepath.Join(base, "target")
	if err := os.Mkdir(target, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(target, "file"), []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	d, err := openPath(base, false)
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	if _, err := d.sub("link", false, trustPrivate); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Errorf("sub through a symlink: %v", err)
	}
	if err := d.removeAll("link"); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(target, "file")); err != nil || string(b) != "keep" {
		t.Errorf("removeAll of a symlink touched its target: %q %v", b, err)
	}
	if err := os.Symlink(filepath.Join(target, "file"), filepath.Join(base, "state.json")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.readFile("state.json", 100); err == nil {
		t.Error("readFile followed a symlink")
	}
	if err := d.writeFile("state.json", []byte("new")); err != nil {
		t.Fatal(err) // replaces the symlink itself, atomically
	}
	if b, _ := os.ReadFile(filepath.Join(target, "file")); string(b) != "keep" {
		t.Errorf("writeFile wrote through a symlink: %q", b)
	}
	if b, err := d.readFile("state.json", 100); err != nil || string(b) != "new" {
		t.Errorf("readFile = %q, %v", b, err)
	}
	if _, err := d.readFile("state.json", 2); err == nil {
		t.Error("readFile ignored its limit")
	}
	loose := filepath.Join(base, "loose")
	if err := os.Mkdir(loose, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(loose, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := openPath(loose, false); err == nil || !strings.Contains(err.Error(), "writable by other users") {
		t.Errorf("a loose directory: %v", err)
	}
	if _, err := openPath(filepath.Join(loose, "below"), true); err == nil {
		t.Error("a directory created under a loose one")
	}
	if _, err := openPath(filepath.Join(base, "missing", "deeper"), false); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
	for _, bad := range []string{"", ".", "..", "a/b", "a\x00b"} {
		if err := d.mkdirExcl(bad); err == nil {
			t.Errorf("mkdirExcl(%q) accepted", bad)
		}
	}
	if err := d.mkdirExcl("x"); err != nil {
		t.Fatal(err)
	}
	if err := d.mkdirExcl("x"); err == nil {
		t.Error("mkdirExcl of an existing directory succeeded")
	}
}

func TestWorkspaceNames(t *testing.T) {
	for _, good := range []string{"default", "a", "ws-1_x", strings.Repeat("a", 64)} {
		if _, err := Open(t.TempDir(), good); err != nil {
			t.Errorf("%q: %v", good, err)
		}
	}
	for _, bad := range []string{"", "-x", "../etc", "a/b", "a.b", "a b", strings.Repeat("a", 65), "_x", "\x00"} {
		if _, err := Open(t.TempDir(), bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// The build-id index is a cache of the user's, found by $XDG_CACHE_HOME or
// $HOME: under sudo -E those are the invoking user's. Root neither reads
// an index another user controls (it may send a build id to a forged
// file) nor creates one through a directory of theirs (a symlink to
// anywhere).
func TestBuildIDIndexNotInAnotherUsersDirectory(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the directories of another user are made with chown")
	}
	home := t.TempDir()
	elsewhere := filepath.Join(home, "elsewhere")
	cache := filepath.Join(home, "cache")
	for _, d := range []string{elsewhere, cache} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(elsewhere, filepath.Join(cache, "probectl")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{elsewhere, cache, filepath.Join(cache, "probectl")} {
		if err := os.Lchown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("XDG_CACHE_HOME", cache)
	if got := buildIDIndexFile(); got != "" {
		t.Errorf("the index is %q, in a directory uid 65534 controls", got)
	}

	// The directory is root's (an earlier run made it), in a directory
	// of the user's, who may rename it away and put a link in its place
	// between the check and the use.
	theirs := filepath.Join(home, "theirs")
	if err := os.MkdirAll(filepath.Join(theirs, "probectl"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(theirs, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_CACHE_HOME", theirs)
	if got := buildIDIndexFile(); got != "" {
		t.Errorf("the index is %q, in a directory within one uid 65534 controls", got)
	}

	// A directory of its own, made there: used.
	mine := filepath.Join(home, "mine")
	t.Setenv("XDG_CACHE_HOME", mine)
	if got, want := buildIDIndexFile(), filepath.Join(mine, "probectl", "buildids.json"); got != want {
		t.Errorf("the index is %q, want %q", got, want)
	}
}

// TestAttachersCoverFamilies holds every link family of the compiler's
// table to an attacher, and every attacher to a family of the table: a
// family added to the table without one would plan and then fail at apply.
func TestAttachersCoverFamilies(t *testing.T) {
	for _, fi := range compiler.Families() {
		if attachers[fi.Family] == nil {
			t.Errorf("link family %s has no attacher", fi.Family)
		}
	}
	for fam := range attachers {
		if _, ok := fam.Info(); !ok {
			t.Errorf("attacher for %q, a family the compiler's table lacks", fam)
		}
	}
}

// SortEntries orders by value, largest first (a histogram by its total
// count), ties by the key's JSON text: random entries, many of them tied,
// against that rule written out.
func TestSortEntries(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewSource(seed))
	for trial := 0; trial < 200; trial++ {
		es := make([]Entry, r.Intn(40))
		for i := range es {
			es[i].Key = OrderedKey{{Name: "comm", Value: fmt.Sprintf("c%d", r.Intn(30))}, {Name: "n", Value: int64(r.Intn(3))}}
			if r.Intn(4) == 0 {
				es[i].Buckets = []Bucket{{Low: 0, High: 1, Count: uint64(r.Intn(4))}, {Low: 1, High: 2, Count: uint64(r.Intn(4))}}
				continue
			}
			v := int64(r.Intn(8))
			es[i].Value = &v
		}
		weight := func(e Entry) int64 {
			if e.Value != nil {
				return *e.Value
			}
			var w int64
			for _, b := range e.Buckets {
				w += int64(b.Count)
			}
			return w
		}
		text := func(e Entry) string { b, _ := e.Key.MarshalJSON(); return string(b) }
		want := make([]Entry, len(es))
		copy(want, es)
		sort.SliceStable(want, func(i, j int) bool {
			if wi, wj := weight(want[i]), weight(want[j]); wi != wj {
				return wi > wj
			}
			return text(want[i]) < text(want[j])
		})
		SortEntries(es)
		if !reflect.DeepEqual(es, want) {
			t.Fatalf("trial %d: sorted\n%v\nwant\n%v", trial, es, want)
		}
	}
}
