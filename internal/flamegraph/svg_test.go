package flamegraph

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/probectl/probectl/internal/flamegraph/flamegraphtest"
)

func renderFlame(t testing.TB, title string, stacks []Stack) ([]byte, *flamegraphtest.Doc) {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, title, stacks); err != nil {
		t.Fatal(err)
	}
	doc, err := flamegraphtest.Parse(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatalf("the SVG does not parse: %v", err)
	}
	if doc.Script != "\n"+flameScript {
		t.Fatalf("the script is not the renderer's")
	}
	return buf.Bytes(), doc
}

// testStacks: a known profile of 100 samples.
var testStacks = []Stack{
	{[]string{"main", "run", "parse"}, 30},
	{[]string{"main", "run", "eval", "add"}, 20},
	{[]string{"worker", "loop", "vfs_read_[k]"}, 35},
	{[]string{"main", "run", "eval", "mul"}, 10},
	{[]string{"main", "init"}, 5},
	{[]string{"main", "ignored"}, 0},
}

// checkWidths checks that every frame is as wide as its samples (within
// the rounding of its two edges to hundredths of a pixel) and that each
// frame lies inside its caller.
func checkWidths(t testing.TB, doc *flamegraphtest.Doc) {
	t.Helper()
	if len(doc.Frames) == 0 {
		return
	}
	scale := float64(flameWidth) / float64(doc.Total)
	byDepth := map[int][]flamegraphtest.Rect{}
	for _, f := range doc.Frames {
		want := float64(f.Samples) * scale
		if math.Abs(f.Width-want) > 0.0100001 {
			t.Errorf("%q: width %v, want %v (%d of %d samples)", f.Name, f.Width, want, f.Samples, doc.Total)
		}
		if wantX := flameXPad + float64(f.Start)*scale; math.Abs(f.X-wantX) > 0.0050001 {
			t.Errorf("%q: x %v, want %v", f.Name, f.X, wantX)
		}
		byDepth[f.Depth] = append(byDepth[f.Depth], f)
	}
	if root := byDepth[0]; len(root) != 1 || root[0].Samples != doc.Total || root[0].Start != 0 || root[0].Name != "all" {
		t.Errorf("root frames: %+v", root)
	}
	for depth := 1; len(byDepth[depth]) > 0; depth++ {
		for _, f := range byDepth[depth] {
			var parent *flamegraphtest.Rect
			for i, p := range byDepth[depth-1] {
				if p.Start <= f.Start && f.Start < p.Start+p.Samples {
					parent = &byDepth[depth-1][i]
				}
			}
			if parent == nil {
				t.Errorf("%q (depth %d, start %d) has no caller drawn", f.Name, f.Depth, f.Start)
				continue
			}
			if f.Start+f.Samples > parent.Start+parent.Samples {
				t.Errorf("%q (%d+%d samples) reaches past its caller %q (%d+%d)", f.Name, f.Start, f.Samples, parent.Name, parent.Start, parent.Samples)
			}
			if f.X < parent.X || f.X+f.Width > parent.X+parent.Width+1e-9 || f.Width > parent.Width {
				t.Errorf("%q [%v, +%v] reaches past its caller %q [%v, +%v]", f.Name, f.X, f.Width, parent.Name, parent.X, parent.Width)
			}
		}
		// Callees of one caller do not overlap.
		fs := byDepth[depth]
		for i := 1; i < len(fs); i++ {
			if fs[i].Start < fs[i-1].Start+fs[i-1].Samples {
				t.Errorf("%q overlaps %q", fs[i].Name, fs[i-1].Name)
			}
		}
	}
}

func TestFlameGraphLayout(t *testing.T) {
	_, doc := renderFlame(t, "CPU profile", testStacks)
	type frame struct {
		name     string
		depth    int
		start, n int64
	}
	// Sorted by depth, then left to right: callees sorted by name.
	want := []frame{
		{"all", 0, 0, 100},
		{"main", 1, 0, 65},
		{"worker", 1, 65, 35},
		{"init", 2, 0, 5},
		{"run", 2, 5, 60},
		{"loop", 2, 65, 35},
		{"eval", 3, 5, 30},
		{"parse", 3, 35, 30},
		{"vfs_read_[k]", 3, 65, 35},
		{"add", 4, 5, 20},
		{"mul", 4, 25, 10},
	}
	var got []frame
	for _, f := range doc.Frames {
		got = append(got, frame{f.Name, f.Depth, f.Start, f.Samples})
	}
	if !slices.Equal(got, want) {
		t.Errorf("frames:\n got %v\nwant %v", got, want)
	}
	if doc.Total != 100 {
		t.Errorf("total %d, want 100", doc.Total)
	}
	checkWidths(t, doc)
	for _, f := range doc.Frames {
		// 1180 px for 100 samples: 11.8 px a sample, exactly.
		if f.Width != float64(f.Samples)*11.8 && math.Abs(f.Width-float64(f.Samples)*11.8) > 1e-9 {
			t.Errorf("%q: width %v for %d samples, want %v", f.Name, f.Width, f.Samples, float64(f.Samples)*11.8)
		}
		if f.Name == "eval" && f.Title != "eval (30 samples, 30.00%)" {
			t.Errorf("eval's title: %q", f.Title)
		}
		if f.Name == "eval" && f.Label != "eval" {
			t.Errorf("eval's label: %q", f.Label)
		}
	}
	// Kernel frames get the other palette; a name's color is the same everywhere.
	fill := map[string]string{}
	for _, f := range doc.Frames {
		fill[f.Name] = f.Fill
	}
	if fill["all"] != flameRootColor || fill["vfs_read_[k]"] != flameColor("vfs_read_[k]") {
		t.Errorf("fills: %v", fill)
	}
	if flameColor("vfs_read_[k]") != flameColor("vfs_read+0x1f_[k]") || flameColor("f+0x10 [mod]") != flameColor("f") {
		t.Errorf("offsets and modules change a frame's color")
	}
	for _, f := range []string{"vfs_read_[k]", "tcp_drop [k]"} {
		if c := flameColor(f); c[1:3] >= "80" { // kernel: red below 0x80
			t.Errorf("kernel frame %q has the color %s", f, c)
		}
	}
	for _, f := range []string{"main", "parse", "a", "zzz"} {
		if c := flameColor(f); c[1:3] < "cd" || c[5:7] > "37" { // warm: red 205-255, blue 0-55
			t.Errorf("frame %q has the color %s", f, c)
		}
	}
}

func TestFlameGraphMerge(t *testing.T) {
	stacks := []Stack{
		{[]string{"a", "b", "c"}, 1},
		{[]string{"a", "b", "d"}, 2},
		{[]string{"a", "b", "c"}, 3}, // the same stack again
		{[]string{"a", "b"}, 4},      // b's own samples
		{[]string{"a", "x", "c"}, 5}, // c again, under another caller
		{[]string{}, 6},              // no frames: the root's own samples
	}
	_, doc := renderFlame(t, "merge", stacks)
	var got []string
	for _, f := range doc.Frames {
		got = append(got, fmt.Sprintf("%d %s %d+%d", f.Depth, f.Name, f.Start, f.Samples))
	}
	want := []string{
		"0 all 0+21",
		"1 a 0+15",
		"2 b 0+10", // callees first, its own 4 samples after them
		"2 x 10+5",
		"3 c 0+4",
		"3 d 4+2",
		"3 c 10+5",
	}
	if !slices.Equal(got, want) {
		t.Errorf("frames:\n got %q\nwant %q", got, want)
	}
	checkWidths(t, doc)
}

func TestFlameGraphOrderDoesNotMatter(t *testing.T) {
	a, _ := renderFlame(t, "t", testStacks)
	shuffled := slices.Clone(testStacks)
	slices.Reverse(shuffled)
	b, _ := renderFlame(t, "t", shuffled)
	if !bytes.Equal(a, b) {
		t.Error("the order of the stacks changes the output")
	}
}

func TestFlameGraphEscaping(t *testing.T) {
	long := strings.Repeat("x", 10000)
	hostile := []string{
		`<script>alert(1)</script>`,
		`</title><script>alert(2)</script>`,
		`"><g onload="alert(3)">`,
		`a & b &amp; c`,
		`]]></script><script>alert(4)</script>`,
		`'single' "double"`,
		"bad\xff\xfeutf8\xc3",
		"ctl\x00\x01\x1b[31m\x7f\u0085\r\n\ttab",
		"\u202egnp.exe",
		long,
		"ünïcödé 函数",
	}
	var stacks []Stack
	for i, h := range hostile {
		stacks = append(stacks, Stack{[]string{"proc", h}, int64(100 + i)})
	}
	stacks = append(stacks, Stack{[]string{"<comm>", "&"}, 50})
	out, doc := renderFlame(t, `<script>alert("title")</script>`+"\x00", stacks)
	for _, bad := range []string{"<script>alert", "onload=\"", "\x00", "\x1b", "\xff", "\u202e"} {
		if bytes.Contains(out, []byte(bad)) {
			t.Errorf("the output holds %q", bad)
		}
	}
	if !utf8.Valid(out) {
		t.Error("the output is not valid UTF-8")
	}
	names := map[string]bool{}
	for _, f := range doc.Frames {
		names[f.Name] = true
	}
	wantNames := []string{
		`<script>alert(1)</script>`,
		`</title><script>alert(2)</script>`,
		`"><g onload="alert(3)">`,
		`a & b &amp; c`,
		`]]></script><script>alert(4)</script>`,
		`'single' "double"`,
		`bad\xff\xfeutf8\xc3`,
		`ctl\x00\x01\x1b[31m\u007f\u0085\x0d\x0a\x09tab`,
		`\u202egnp.exe`,
		strings.Repeat("x", flameMaxName) + "…",
		"ünïcödé 函数",
		"<comm>",
		"&",
	}
	for _, n := range wantNames {
		if !names[n] {
			t.Errorf("no frame named %q", n)
		}
	}
	if doc.Texts["title"] != `<script>alert("title")</script>\x00` {
		t.Errorf("title %q", doc.Texts["title"])
	}
	checkWidths(t, doc)
	// Labels fit their frames.
	for _, f := range doc.Frames {
		if n := utf8.RuneCountInString(f.Label); float64(n)*flameCharWidth > f.Width {
			t.Errorf("label %q (%d characters) does not fit in %v px", f.Label, n, f.Width)
		}
	}
}

func TestFlameGraphEmpty(t *testing.T) {
	for _, stacks := range [][]Stack{nil, {{[]string{"a"}, 0}}} {
		_, doc := renderFlame(t, "nothing", stacks)
		if len(doc.Frames) != 0 || doc.Total != 0 {
			t.Errorf("frames of an empty graph: %+v", doc.Frames)
		}
		if doc.Texts["empty"] != "No samples" {
			t.Errorf("texts of an empty graph: %q", doc.Texts)
		}
	}
}

func TestFlameGraphErrors(t *testing.T) {
	var buf bytes.Buffer
	err := Write(&buf, "t", []Stack{{[]string{"a"}, 1}, {[]string{"b"}, -1}})
	if err == nil || !strings.Contains(err.Error(), "negative") {
		t.Errorf("a negative count: %v", err)
	}
	err = Write(&buf, "t", []Stack{{[]string{"a"}, math.MaxInt64}, {[]string{"b"}, 1}})
	if err == nil || !strings.Contains(err.Error(), "int64") {
		t.Errorf("an overflowing total: %v", err)
	}
	if buf.Len() != 0 {
		t.Errorf("an error wrote %d bytes", buf.Len())
	}
	// A total of exactly MaxInt64 is fine.
	_, doc := renderFlame(t, "t", []Stack{{[]string{"a"}, math.MaxInt64 - 1}, {[]string{"b"}, 1}})
	checkWidths(t, doc)
}

// hugeStacks is a profile of n distinct stacks, shaped like a real one: a
// few processes, call trees that share their callers, Zipf-like weights.
func hugeStacks(n int) []Stack {
	rng := rand.New(rand.NewPCG(1, 2))
	funcs := make([]string, 2000)
	for i := range funcs {
		funcs[i] = fmt.Sprintf("pkg%d.function_%d", i%37, i)
	}
	seen := map[string]bool{}
	var stacks []Stack
	for len(stacks) < n {
		depth := 3 + rng.IntN(30)
		frames := []string{fmt.Sprintf("proc-%d", rng.IntN(8))}
		f := rng.IntN(20)
		for range depth {
			frames = append(frames, funcs[f])
			f = (f*7 + rng.IntN(1+len(frames)*3)) % len(funcs) // few callees near the root, more deeper
		}
		key := strings.Join(frames, ";")
		if seen[key] {
			continue
		}
		seen[key] = true
		stacks = append(stacks, Stack{frames, 1 + int64(1000/(1+rng.IntN(1000)))})
	}
	return stacks
}

func TestFlameGraphHuge(t *testing.T) {
	stacks := hugeStacks(100000)
	var buf bytes.Buffer
	start, cpuStart := time.Now(), cpuTime()
	if err := Write(&buf, "huge", stacks); err != nil {
		t.Fatal(err)
	}
	took, cpu := time.Since(start), cpuTime()-cpuStart
	doc, err := flamegraphtest.Parse(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	l, _ := layoutFlame(stacks)
	t.Logf("100,000 distinct stacks: rendered in %v (%v of CPU), %d bytes (%.1f MiB), %d frames drawn, %d narrower frames left out",
		took.Round(time.Millisecond), cpu.Round(time.Millisecond), buf.Len(), float64(buf.Len())/(1<<20), len(doc.Frames), l.elided)
	// CPU time, not the wall clock: other tests and programs share the
	// machine. About 0.4 s on the development machine.
	if cpu > 3*time.Second {
		t.Errorf("rendering took %v of CPU", cpu)
	}
	if len(doc.Frames) > flameMaxFrames || buf.Len() > 8<<20 {
		t.Errorf("%d frames, %d bytes: the file is too big", len(doc.Frames), buf.Len())
	}
	if l.elided == 0 || !strings.Contains(doc.Texts["note"], "are not drawn") {
		t.Errorf("the graph does not say that frames were left out: %q", doc.Texts["note"])
	}
	checkWidths(t, doc)
	for _, f := range doc.Frames {
		if f.Width < flameMinWidth-0.01 {
			t.Errorf("%q is %v px wide", f.Name, f.Width)
		}
	}
}

// cpuTime is the CPU time this process has used (user and system): the
// figure to read on a busy machine, where the wall clock waits for others.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkFlameGraph(b *testing.B) {
	stacks := hugeStacks(100000)
	b.ResetTimer()
	for b.Loop() {
		if err := Write(io.Discard, "huge", stacks); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzFlameGraph renders stacks read from folded lines ("a;b;c 12"; a
// count that does not parse counts 1): the SVG always parses, and no frame
// is wider than its caller or reaches past it.
func FuzzFlameGraph(f *testing.F) {
	f.Add("main;run;parse 30\nmain;run;eval;add 20\nworker;loop;vfs_read_[k] 35\nmain 5\n")
	f.Add("a;b 1\na;b 1\na 1\n;; 3\n")
	f.Add("<script>alert(1)</script>;&amp; 2\n\xff\xfe;\x00\x01 9223372036854775806\n")
	f.Add("x 0\ny -1\n")
	f.Add(strings.Repeat("a;", 200) + "b 7\n")
	f.Fuzz(func(t *testing.T, folded string) {
		var stacks []Stack
		for line := range strings.Lines(folded) {
			line = strings.TrimSuffix(line, "\n")
			frames, count, _ := strings.Cut(line, " ")
			n, err := strconv.ParseInt(count, 10, 64)
			if err != nil {
				n = 1
			}
			var fs []string
			if frames != "" {
				fs = strings.Split(frames, ";")
			}
			stacks = append(stacks, Stack{fs, n})
		}
		var buf bytes.Buffer
		err := Write(&buf, folded, stacks)
		if err != nil {
			if buf.Len() != 0 {
				t.Fatalf("an error (%v) after writing", err)
			}
			return
		}
		doc, err := flamegraphtest.Parse(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatalf("the SVG does not parse: %v", err)
		}
		var total int64
		for _, s := range stacks {
			total += s.Value
		}
		if doc.Total != total {
			t.Fatalf("total %d, want %d", doc.Total, total)
		}
		checkWidths(t, doc)
	})
}

// TestFlameGraphWriteError: a failing writer's error comes back.
func TestFlameGraphWriteError(t *testing.T) {
	err := Write(failWriter{}, "t", testStacks)
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("Write to a failing writer: %v", err)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// TestFlameGraphCapTies: more frames than flameMaxFrames, all as wide as
// one another; the cap keeps flameMaxFrames of them, callers before
// callees, rather than dropping every frame of the tied width.
func TestFlameGraphCapTies(t *testing.T) {
	var stacks []Stack
	for i := range 5000 {
		var frames []string
		for d := range 10 {
			frames = append(frames, fmt.Sprintf("s%d_f%d", i, d))
		}
		stacks = append(stacks, Stack{frames, 1})
	}
	_, doc := renderFlame(t, "ties", stacks)
	if len(doc.Frames) != flameMaxFrames {
		t.Errorf("%d frames drawn, want %d", len(doc.Frames), flameMaxFrames)
	}
	if !strings.Contains(doc.Texts["note"], "30,001 frames") {
		t.Errorf("note: %q", doc.Texts["note"])
	}
	checkWidths(t, doc)
}

// TestFlameGraphFileIsNotFollowed: show -flamegraph FILE runs as root; a
// user who owns FILE's directory (their home) left a symlink there to a
// file of root's. The flame graph replaces the link; the file it pointed
// to is untouched.
func TestFlameGraphFileIsNotFollowed(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "passwd")
	if err := os.WriteFile(victim, []byte("root:x:0:0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "flame.svg")
	if err := os.Symlink(victim, out); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(out, "t", testStacks); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "root:x:0:0\n" {
		t.Errorf("the link's target was written: %.40q", b)
	}
	if st, err := os.Lstat(out); err != nil || !st.Mode().IsRegular() {
		t.Errorf("%s is not a regular file: %v %v", out, st, err)
	}
	if b, _ := os.ReadFile(out); !bytes.Contains(b, []byte("<svg")) {
		t.Errorf("%s holds no SVG", out)
	}
}
