package flamegraph

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/probectl/probectl/internal/testenv"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/probectl/probectl/internal/flamegraph/flamegraphtest"
)

// chromiumPath finds Debian's chromium (apt-get install chromium), or
// the browser $PROBECTL_CHROMIUM names. The test skips only when there is
// none, and never in CI (CI=true), where .ci/run installs it and its
// absence is a failure.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PROBECTL_CHROMIUM"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("PROBECTL_CHROMIUM: %v", err)
		}
		return p
	}
	for _, name := range []string{"/usr/bin/chromium", "chromium"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testenv.Absent(t, "chromium is not installed (/usr/bin/chromium, or set PROBECTL_CHROMIUM): apt-get install chromium")
	return ""
}

// keepArtifact writes a file a person may want to look at into the test's
// artifact directory (kept under -outputdir with go test -artifacts) and,
// when $PROBECTL_ARTIFACTS is set, a copy there. It logs both paths.
func keepArtifact(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.ArtifactDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("artifact: %s", p)
	if dir := os.Getenv("PROBECTL_ARTIFACTS"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		c := filepath.Join(dir, name)
		if err := os.WriteFile(c, data, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("artifact copied to %s", c)
	}
	return p
}

// browserFrame is a frame's geometry and state as the browser shows it.
type browserFrame struct {
	Found   bool    `json:"found"`
	X       float64 `json:"x"`
	Y       float64 `json:"y"`
	Width   float64 `json:"width"`
	Height  float64 `json:"height"`
	Display string  `json:"display"`
	Class   string  `json:"class"`
	Fill    string  `json:"fill"`
	Label   string  `json:"label"`
}

func (f browserFrame) center() (float64, float64) { return f.X + f.Width/2, f.Y + f.Height/2 }

// frameJS reads a frame by its name (its <title> up to " (").
const frameJS = `(function (name) {
	var gs = document.querySelectorAll("g.f");
	for (var i = 0; i < gs.length; i++) {
		var t = gs[i].querySelector("title").textContent;
		if (t.slice(0, t.lastIndexOf(" (")) !== name) continue;
		var rect = gs[i].querySelector("rect"), b = rect.getBoundingClientRect();
		return { found: true, x: b.x, y: b.y, width: b.width, height: b.height,
			display: getComputedStyle(gs[i]).display, class: gs[i].getAttribute("class") || "",
			fill: rect.getAttribute("fill"), label: gs[i].querySelector("text").textContent };
	}
	return { found: false };
})(%s)`

// framesJS reads every frame, in document order (as flamegraphtest.Parse), as
// rows of [x, y, width, height, hidden, faded] and the labels: plain
// numbers keep the answer small for a graph of 20,000 frames.
const framesJS = `(function () {
	var gs = document.querySelectorAll("g.f"), rows = [], labels = [];
	for (var i = 0; i < gs.length; i++) {
		var g = gs[i], b = g.querySelector("rect").getBoundingClientRect(), c = g.getAttribute("class") || "";
		rows.push([b.x, b.y, b.width, b.height, getComputedStyle(g).display === "none" ? 1 : 0, / p( |$)/.test(c) ? 1 : 0]);
		labels.push(g.querySelector("text").textContent);
	}
	return { rows: rows, labels: labels };
})()`

// browser is one headless chromium, with what its pages did: exceptions
// their scripts threw and the dialogs they opened.
type browser struct {
	t          *testing.T
	ctx        context.Context
	mu         sync.Mutex
	exceptions []string
	alerts     []string // alert and confirm dialogs: a flame graph opens none
	requests   []string // URLs the pages asked for besides the graphs opened
	opened     map[string]bool
	prompt     string // the answer to the search prompt
}

// startBrowser starts chromium for the test, with a viewport as large as
// a flame graph of height pixels; the test's cleanup stops it and checks
// that none of its processes outlive the test.
func startBrowser(t *testing.T, height int) *browser {
	return startBrowserSize(t, flameImageWidth, height)
}

// startBrowserSize is startBrowser with a viewport of width × height.
func startBrowserSize(t *testing.T, width, height int) *browser {
	chromium := chromiumPath(t)
	userData := t.TempDir()
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(userData),
		chromedp.WindowSize(width, height),
	)
	ctx, cancelCtx := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancelCtx()
		cancelAlloc()
		// No chromium process of this test may outlive it: each one has
		// our user data directory on its command line.
		if pids := waitBrowserGone(userData, 10*time.Second); len(pids) > 0 {
			t.Errorf("chromium processes left running after the test: %v (killed now)", pids)
			for _, pid := range pids {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	// Start the browser with no deadline (a deadline on the first action
	// would bind the browser's life to it), then limit the test's actions.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium (%s): %v", chromium, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(cancel)
	b := &browser{t: t, ctx: ctx, opened: map[string]bool{}}
	if err := chromedp.Listen(ctx, func(ev any) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			msg := ev.ExceptionDetails.Text
			if ev.ExceptionDetails.Exception != nil {
				msg += " " + ev.ExceptionDetails.Exception.Description
			}
			b.exceptions = append(b.exceptions, msg)
		case *network.EventRequestWillBeSent:
			if !b.opened[ev.Request.URL] {
				b.requests = append(b.requests, ev.Request.URL)
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			b.mu.Lock()
			answer := b.prompt
			if ev.Type != page.DialogTypePrompt {
				b.alerts = append(b.alerts, string(ev.Type)+": "+ev.Message)
			}
			b.mu.Unlock()
			chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{
				Accept: ev.Type == page.DialogTypePrompt, PromptText: answer})
		}
	}()
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(int64(width), int64(height))); err != nil {
		t.Fatal(err)
	}
	return b
}

// open keeps svg as an artifact and opens it from its file:// URL.
func (b *browser) open(name string, svg []byte) {
	b.t.Helper()
	p := keepArtifact(b.t, name, svg)
	b.mu.Lock()
	b.opened["file://"+p] = true
	b.mu.Unlock()
	if err := chromedp.Do(b.ctx, chromedp.Navigate("file://"+p)); err != nil {
		b.t.Fatalf("open %s: %v", p, err)
	}
}

// checkQuiet fails the test if a page threw an exception, opened an alert
// or asked for anything but the graph itself (a flame graph needs nothing
// else, and never the network).
func (b *browser) checkQuiet() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.exceptions {
		b.t.Errorf("the page threw: %s", e)
	}
	for _, a := range b.alerts {
		b.t.Errorf("the page opened a dialog: %s", a)
	}
	for _, u := range b.requests {
		b.t.Errorf("the page asked for %s", u)
	}
	b.exceptions, b.alerts, b.requests = nil, nil, nil
}

func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// frame reads the frame named name.
func (b *browser) frame(name string) browserFrame {
	b.t.Helper()
	f := eval[browserFrame](b, fmt.Sprintf(frameJS, jsString(name)))
	if !f.Found {
		b.t.Fatalf("no frame %q in the page", name)
	}
	return f
}

// frames reads every frame, in the order of doc.Frames: geometry,
// display ("none" or ""), class ("f p" for a faded caller, else "f") and
// label.
func (b *browser) frames() []browserFrame {
	b.t.Helper()
	r := eval[struct {
		Rows   [][6]float64 `json:"rows"`
		Labels []string     `json:"labels"`
	}](b, framesJS)
	if len(r.Rows) != len(r.Labels) {
		b.t.Fatalf("%d frames, %d labels", len(r.Rows), len(r.Labels))
	}
	fs := make([]browserFrame, len(r.Rows))
	for i, row := range r.Rows {
		fs[i] = browserFrame{Found: true, X: row[0], Y: row[1], Width: row[2], Height: row[3], Class: "f", Label: r.Labels[i]}
		if row[4] != 0 {
			fs[i].Display = "none"
		}
		if row[5] != 0 {
			fs[i].Class = "f p"
		}
	}
	return fs
}

func (b *browser) text(id string) string {
	b.t.Helper()
	return eval[string](b, fmt.Sprintf(`document.getElementById(%q).textContent`, id))
}

func (b *browser) visible(id string) bool {
	b.t.Helper()
	return eval[bool](b, fmt.Sprintf(`getComputedStyle(document.getElementById(%q)).display !== "none"`, id))
}

func (b *browser) click(x, y float64) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, chromedp.MouseClickXY(x, y)); err != nil {
		b.t.Fatalf("click at (%v, %v): %v", x, y, err)
	}
}

// clickText clicks the <text> element with the id (a control).
func (b *browser) clickText(id string) {
	b.t.Helper()
	r := eval[browserFrame](b, fmt.Sprintf(
		`(function (b) { return { found: true, x: b.x, y: b.y, width: b.width, height: b.height }; })(document.getElementById(%q).getBoundingClientRect())`, id))
	b.click(r.center())
}

func (b *browser) hover(x, y float64) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, x, y)); err != nil {
		b.t.Fatal(err)
	}
}

func (b *browser) screenshot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatalf("screenshot: %v", err)
	}
	keepArtifact(b.t, name, png)
}

// waitText waits until the element with the id holds some text.
func (b *browser) waitText(id string) string {
	b.t.Helper()
	var s string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if s = b.text(id); s != "" {
			break
		}
	}
	return s
}

func near(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 0.6 {
		t.Errorf("%s: %v px, want %v", what, got, want)
	}
}

// checkView checks every frame as the browser shows it when the frame
// doc.Frames[z] is zoomed into (z is 0, the root, for the whole graph):
// z and its callees are drawn across the full width in proportion to their
// samples, its callers span the full width, faded (except the root when
// nothing is zoomed), and every other frame is hidden.
func checkView(t *testing.T, doc *flamegraphtest.Doc, got []browserFrame, z int) {
	t.Helper()
	if len(got) != len(doc.Frames) {
		t.Fatalf("the page has %d frames, the SVG %d", len(got), len(doc.Frames))
	}
	zf := doc.Frames[z]
	scale := float64(flameWidth) / float64(zf.Samples)
	bad := 0
	for i, f := range doc.Frames {
		g := got[i]
		var err string
		switch {
		case f.Depth < zf.Depth && f.Start <= zf.Start && f.Start+f.Samples >= zf.Start+zf.Samples:
			if g.Display == "none" || !strings.Contains(g.Class, "p") ||
				math.Abs(g.X-flameXPad) > 0.6 || math.Abs(g.Width-flameWidth) > 0.6 {
				err = "a caller: want full width, faded"
			}
		case f.Depth >= zf.Depth && f.Start >= zf.Start && f.Start+f.Samples <= zf.Start+zf.Samples:
			wantX := flameXPad + float64(f.Start-zf.Start)*scale
			wantW := float64(f.Samples) * scale
			if g.Display == "none" || strings.Contains(g.Class, "p") ||
				math.Abs(g.X-wantX) > 0.6 || math.Abs(g.Width-wantW) > 0.6 {
				err = fmt.Sprintf("want x %.2f, width %.2f", wantX, wantW)
			}
			if n := utf8.RuneCountInString(g.Label); float64(n)*flameCharWidth > g.Width+0.6 {
				err = fmt.Sprintf("the label %q does not fit", g.Label)
			}
		default:
			if g.Display != "none" || g.Width != 0 {
				err = "want hidden"
			}
		}
		if err != "" {
			if bad++; bad <= 20 {
				t.Errorf("zoomed into %q: frame %d %q (depth %d, %d+%d samples): display %q, class %q, x %.2f, width %.2f: %s",
					zf.Name, i, f.Name, f.Depth, f.Start, f.Samples, g.Display, g.Class, g.X, g.Width, err)
			}
		}
	}
	if bad > 20 {
		t.Errorf("... and %d more frames", bad-20)
	}
}

// openFlameGraph starts chromium and opens svg, a graph Write
// wrote, kept as the artifact name; it checks that every frame shows as
// wide as its samples.
func openFlameGraph(t *testing.T, svg []byte, name string) (*browser, *flamegraphtest.Doc) {
	t.Helper()
	doc, err := flamegraphtest.Parse(bytes.NewReader(svg))
	if err != nil {
		t.Fatalf("the SVG does not parse: %v", err)
	}
	if len(doc.Frames) == 0 {
		t.Fatal("the flame graph has no frames")
	}
	b := startBrowser(t, doc.Height)
	b.open(name, svg)
	checkView(t, doc, b.frames(), 0)
	return b, doc
}

// zoomInto clicks the widest frame named name and checks the view; it
// returns the frame's index in doc.Frames.
func (b *browser) zoomInto(doc *flamegraphtest.Doc, name string) int {
	b.t.Helper()
	z := -1
	for i, f := range doc.Frames {
		if f.Name == name && (z < 0 || f.Samples > doc.Frames[z].Samples) {
			z = i
		}
	}
	if z < 0 {
		b.t.Fatalf("no frame %q in the flame graph", name)
	}
	g := b.frames()[z]
	if g.Width < 2 {
		b.t.Fatalf("the frame %q is %.2f px wide: too narrow to click", name, g.Width)
	}
	b.click(g.center())
	checkView(b.t, doc, b.frames(), z)
	if !b.visible("reset") {
		b.t.Error("no Reset Zoom after a click on a frame")
	}
	return z
}

// checkFlameGraphInBrowser opens svg, a graph Write wrote, in
// headless chromium, clicks the widest frame named name and checks that
// the view zoomed into it (it spans the full width, its callees scale
// with it, its siblings and every frame outside it hide), then that Reset
// Zoom restores the whole graph. The SVG and a screenshot of the zoomed
// view are kept as artifacts (prefix.svg, prefix-zoomed.png). A test of
// show -flamegraph can call it with the file the command wrote.
func checkFlameGraphInBrowser(t *testing.T, svg []byte, prefix, name string) {
	t.Helper()
	b, doc := openFlameGraph(t, svg, prefix+".svg")
	b.zoomInto(doc, name)
	b.screenshot(prefix + "-zoomed.png")
	b.clickText("reset")
	checkView(t, doc, b.frames(), 0)
	b.checkQuiet()
}

// TestFlameGraphBrowser opens a flame graph in headless chromium from a
// file:// URL and uses it as a person would: click a frame (it zooms),
// reset the zoom, search, hover. Then it opens a graph of hostile frame
// names and checks that none of them runs or adds anything to the page.
// Neither page may throw, open an alert or request any URL but its own.
// The SVGs and screenshots are kept as artifacts (the log names them).
func TestFlameGraphBrowser(t *testing.T) {
	var svg bytes.Buffer
	if err := Write(&svg, "probectl flame graph: browser test", testStacks); err != nil {
		t.Fatal(err)
	}
	b, doc := openFlameGraph(t, svg.Bytes(), "flamegraph.svg")
	samples := map[string]int64{}
	for _, f := range doc.Frames {
		samples[f.Name] = f.Samples
	}
	W, X := float64(flameWidth), float64(flameXPad)

	// Before: every frame as wide as its samples.
	for _, name := range []string{"all", "main", "run", "eval", "parse", "add", "worker"} {
		f := b.frame(name)
		near(t, name+" width", f.Width, float64(samples[name])*W/100)
		if f.Display == "none" {
			t.Errorf("%s is hidden before any click", name)
		}
	}
	if b.visible("reset") {
		t.Error("Reset Zoom shows before any click")
	}
	b.screenshot("flamegraph-1-before-click.png")

	// Click "eval" (30 of 100 samples, depth 3): it spans the full width,
	// its callers stay (full width, faded), its callees scale with it, and
	// every other frame hides, its sibling "parse" first.
	z := b.zoomInto(doc, "eval")
	if doc.Frames[z].Name != "eval" || doc.Frames[z].Samples != 30 {
		t.Fatalf("zoomed into %+v", doc.Frames[z])
	}
	ev := b.frame("eval")
	near(t, "eval x after the click", ev.X, X)
	near(t, "eval width after the click", ev.Width, W)
	for _, name := range []string{"add", "mul"} {
		f := b.frame(name)
		near(t, name+" width after the click", f.Width, float64(samples[name])*W/float64(samples["eval"]))
		if f.Display == "none" {
			t.Errorf("%s (called by eval) is hidden after the click", name)
		}
	}
	near(t, "add x after the click", b.frame("add").X, X)
	near(t, "mul x after the click", b.frame("mul").X, X+W*20/30)
	for _, name := range []string{"all", "main", "run"} {
		f := b.frame(name)
		near(t, name+" (a caller) width after the click", f.Width, W)
		if f.Display == "none" || !strings.Contains(f.Class, "p") {
			t.Errorf("%s (a caller) after the click: display %q, class %q", name, f.Display, f.Class)
		}
	}
	for _, name := range []string{"parse", "init", "worker", "loop", "vfs_read_[k]"} {
		if f := b.frame(name); f.Display != "none" || f.Width != 0 {
			t.Errorf("%s (not under eval) after the click: display %q, width %v", name, f.Display, f.Width)
		}
	}
	if !b.visible("reset") {
		t.Error("no Reset Zoom after the click")
	}
	b.screenshot("flamegraph-2-after-click.png")

	// Reset Zoom: back to the first view.
	b.clickText("reset")
	checkView(t, doc, b.frames(), 0)
	for _, name := range []string{"eval", "parse", "worker", "main", "add"} {
		f := b.frame(name)
		near(t, name+" width after the reset", f.Width, float64(samples[name])*W/100)
		if f.Display == "none" {
			t.Errorf("%s is hidden after the reset", name)
		}
	}
	if b.visible("reset") {
		t.Error("Reset Zoom still shows after the reset")
	}

	// Search: the prompt is answered with the term.
	const term = `^(add|mul)$`
	b.mu.Lock()
	b.prompt = term
	b.mu.Unlock()
	b.clickText("search")
	if got, want := b.waitText("matched"), "Matched: 30.00% (30 of 100 samples)"; got != want {
		t.Errorf("after a search for %s: %q, want %q", term, got, want)
	}
	for _, name := range []string{"add", "mul"} {
		if f := b.frame(name); f.Fill != flameHighlight {
			t.Errorf("%s (matched) has the fill %s", name, f.Fill)
		}
	}
	for _, name := range []string{"eval", "main", "parse"} {
		if f := b.frame(name); f.Fill == flameHighlight {
			t.Errorf("%s (not matched) is highlighted", name)
		}
	}
	if !b.visible("clear") {
		t.Error("no Clear after a search")
	}
	// Hovering shows the frame's samples and share (as its tooltip does).
	b.hover(b.frame("parse").center())
	if got, want := b.text("details"), "parse (30 samples, 30.00%)"; got != want {
		t.Errorf("details while hovering parse: %q, want %q", got, want)
	}
	b.screenshot("flamegraph-3-search.png")
	b.clickText("clear")
	if f := b.frame("add"); f.Fill == flameHighlight || b.text("matched") != "" {
		t.Errorf("after Clear: add's fill %s, matched %q", f.Fill, b.text("matched"))
	}
	b.checkQuiet()

	t.Run("hostile", func(t *testing.T) { testFlameGraphHostileBrowser(t, b) })
}

// checkClean checks that the page holds only what the renderer writes:
// no script ran from a name, one script element, no element of a name, no
// event handler or link attribute.
func checkClean(t *testing.T, b *browser, when string) {
	t.Helper()
	if got := eval[string](b, `typeof window.flmInjected === "undefined" ? "" : String(window.flmInjected)`); got != "" {
		t.Errorf("%s: a frame name ran script: window.flmInjected = %q", when, got)
	}
	// The page holds only what the renderer writes: one script, no
	// element of a name, no event handler attribute.
	if n := eval[int](b, `document.querySelectorAll("script").length`); n != 1 {
		t.Errorf("%s: %d scripts in the page, want 1", when, n)
	}
	// Every label is plain text.
	if n := eval[int](b, `document.querySelectorAll("g.f text *, g.f title *, #details *, #matched *").length`); n != 0 {
		t.Errorf("%s: %d elements inside labels and titles", when, n)
	}
	if s := eval[string](b, `Array.from(document.querySelectorAll("img, iframe, a, foreignObject, image, use")).map(function (e) { return e.localName; }).join(" ")`); s != "" {
		t.Errorf("%s: elements from frame names in the page: %s", when, s)
	}
	if s := eval[string](b, `Array.from(document.querySelectorAll("*")).flatMap(function (e) { return Array.from(e.attributes).filter(function (a) { return /^on|href/i.test(a.name); }).map(function (a) { return e.localName + "@" + a.name; }); }).join(" ")`); s != "" {
		t.Errorf("%s: event handler or link attributes in the page: %s", when, s)
	}
}

// TestFlameGraphBrowserLarge zooms into a graph of 100,000 stacks, shaped
// like a real profile (20,000 frames drawn).
func TestFlameGraphBrowserLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a 4 MiB flame graph in chromium")
	}
	var svg bytes.Buffer
	if err := Write(&svg, "probectl flame graph: 100,000 stacks", hugeStacks(100000)); err != nil {
		t.Fatal(err)
	}
	doc, err := flamegraphtest.Parse(bytes.NewReader(svg.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	// The widest frame at depth 3: it has callers, siblings and callees.
	name, widest := "", int64(0)
	for _, f := range doc.Frames {
		if f.Depth == 3 && f.Samples > widest {
			name, widest = f.Name, f.Samples
		}
	}
	start := time.Now()
	checkFlameGraphInBrowser(t, svg.Bytes(), "flamegraph-large", name)
	t.Logf("%d frames; opened, zoomed into %q (%d of %d samples) and reset in %v",
		len(doc.Frames), name, widest, doc.Total, time.Since(start).Round(time.Millisecond))
}

// hostileNames are frame names that would run script or add elements if
// they reached the page as markup.
var hostileNames = []string{
	`<script>window.flmInjected = "script"</script>`,
	`<img src=x onerror="window.flmInjected = 'img'">`,
	`"><g onload="window.flmInjected = 'attr'" x="`,
	`]]></script><script>window.flmInjected = "cdata"</script><![CDATA[`,
	`</title><foreignObject><iframe src="javascript:parent.flmInjected = 'iframe'"/></foreignObject>`,
	`<a href="javascript:window.flmInjected = 'href'">click</a>`,
	`&lt;script&gt;window.flmInjected = "entity"&lt;/script&gt;`,
	"\u202e\u0000 bidi override and NUL",
	"ctl\x1b[31m red \xff\xfe",
}

func testFlameGraphHostileBrowser(t *testing.T, b *browser) {
	prev := b.t
	b.t = t
	defer func() { b.t = prev }()
	stacks := []Stack{{[]string{"proc"}, 1}}
	for i, name := range hostileNames {
		stacks = append(stacks, Stack{[]string{"proc", name}, int64(10 + i)})
	}
	var svg bytes.Buffer
	if err := Write(&svg, `<script>window.flmInjected = "title"</script>`, stacks); err != nil {
		t.Fatal(err)
	}
	b.open("flamegraph-hostile.svg", svg.Bytes())

	checkClean(t, b, "opened")
	if got, want := eval[string](b, `document.getElementById("title").textContent`), `<script>window.flmInjected = "title"</script>`; got != want {
		t.Errorf("title %q, want %q", got, want)
	}
	// Each name is shown as its text.
	for _, name := range hostileNames {
		if f := b.frame(cleanFrameName(name)); f.Display == "none" {
			t.Errorf("%q is hidden", name)
		}
	}
	b.screenshot("flamegraph-4-hostile.png")
	// Zoom into one and search for markup: the script treats names as text.
	name := hostileNames[0]
	b.click(b.frame(name).center())
	if f := b.frame(name); math.Abs(f.Width-float64(flameWidth)) > 0.6 || math.Abs(f.X-flameXPad) > 0.6 {
		t.Errorf("%q after a click on it: x %v, width %v, want %v, %v", name, f.X, f.Width, flameXPad, flameWidth)
	}
	if f := b.frame(hostileNames[1]); f.Display != "none" {
		t.Errorf("%q (a sibling) shows after the click on %q", hostileNames[1], name)
	}
	b.hover(b.frame(name).center())
	if got := b.text("details"); !strings.HasPrefix(got, name+" (") {
		t.Errorf("details while hovering %q: %q", name, got)
	}
	checkClean(t, b, "zoomed")
	b.mu.Lock()
	b.prompt = `<script>`
	b.mu.Unlock()
	b.clickText("search")
	if got := b.waitText("matched"); !strings.HasPrefix(got, "Matched: ") {
		t.Errorf("after a search for <script>: %q", got)
	}
	for i, n := range hostileNames {
		want := strings.Contains(n, "<script>")
		if got := b.frame(cleanFrameName(n)).Fill == flameHighlight; got != want {
			t.Errorf("frame %d highlighted: %v, want %v", i, got, want)
		}
	}
	b.screenshot("flamegraph-5-hostile-zoom-search.png")
	checkClean(t, b, "zoomed and searched")
	b.clickText("reset")
	checkClean(t, b, "zoom reset")
	b.checkQuiet()
}

// waitBrowserGone waits until no process has --user-data-dir=dir on its
// command line, and returns those still there at the deadline.
func waitBrowserGone(dir string, limit time.Duration) []int {
	want := []byte("--user-data-dir=" + dir + "\x00")
	deadline := time.Now().Add(limit)
	for {
		var pids []int
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if err != nil {
				continue
			}
			if bytes.Contains(cmdline, want) {
				pids = append(pids, pid)
			}
		}
		if len(pids) == 0 || time.Now().After(deadline) {
			return pids
		}
		time.Sleep(50 * time.Millisecond)
	}
}
