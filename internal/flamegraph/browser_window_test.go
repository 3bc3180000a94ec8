package flamegraph

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"sort"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/probectl/probectl/internal/flamegraph/flamegraphtest"
)

// deepStacks is a profile whose stacks are 120 frames deep (a graph
// taller than two screens, as real CPU profiles are): three process roots
// of 60, 30 and 10 samples, each a chain of frames.
func deepStacks() []Stack {
	var out []Stack
	for _, p := range []struct {
		name string
		n    int64
	}{{"server_main", 60}, {"batch_worker", 30}, {"cron_tick", 10}} {
		frames := []string{p.name}
		for d := 1; d < 120; d++ {
			frames = append(frames, fmt.Sprintf("%s_level_%03d", p.name, d))
		}
		out = append(out, Stack{frames, p.n})
	}
	return out
}

// labelBox is a frame's label as the browser lays it out.
type labelBox struct {
	Name  string  `json:"name"`
	Label string  `json:"label"`
	X     float64 `json:"x"`
	Y     float64 `json:"y"`
	W     float64 `json:"w"`
	H     float64 `json:"h"`
}

// labelsJS reads the label boxes of the named frames.
const labelsJS = `(function (names) {
	var out = [];
	document.querySelectorAll("g.f").forEach(function (g) {
		var t = g.querySelector("title").textContent, name = t.slice(0, t.lastIndexOf(" ("));
		if (names.indexOf(name) < 0) return;
		var l = g.querySelector("text"), b = l.getBoundingClientRect();
		out.push({ name: name, label: l.textContent, x: b.x, y: b.y, w: b.width, h: b.height });
	});
	return out;
})(%s)`

// TestFlameGraphWindow opens a graph of deep stacks in chromium at
// 1400×900, as a person's window, and checks what the first screen shows:
// the graph fits the window's width, and the widest frames (the root and
// the process roots, where the eye starts) are on it with their names
// whole (read from the DevTools' layout), and the screenshot's top region
// is drawn frames, not background. The Flame toggle puts the roots at the
// bottom, off the first screen, and back; a click zooms and Reset Zoom
// restores. The screenshots are kept as artifacts.
func TestFlameGraphWindow(t *testing.T) {
	const winW, winH = 1400, 900
	var svg bytes.Buffer
	if err := Write(&svg, "probectl flame graph: deep stacks", deepStacks()); err != nil {
		t.Fatal(err)
	}
	doc, err := flamegraphtest.Parse(bytes.NewReader(svg.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if doc.Height < 2*winH {
		t.Fatalf("the graph is %d px tall: want one taller than two screens", doc.Height)
	}
	widest := widestFrames(doc, 4)
	b := startBrowserSize(t, winW, winH)
	b.open("flamegraph-window.svg", svg.Bytes())
	if w := eval[float64](b, `document.documentElement.getBoundingClientRect().width`); w < winW-1 || w > winW+1 {
		t.Errorf("the graph is %v px wide in a %d px window: want it fit to the window", w, winW)
	}
	scale := float64(winW) / flameImageWidth
	root := b.frame("all")
	near(t, "the root's width in the window", root.Width, flameWidth*scale)
	checkOnScreen(t, b, widest, winW, winH)
	checkTopDrawn(t, b.screenshotPNG("flamegraph-window-1400x900.png"), scale)

	// Flame: the roots at the bottom, off the first screen.
	b.clickText("layout")
	if f := b.frame("all"); f.Y < winH {
		t.Errorf("after Flame, the root is at y %v: want it at the bottom, below the first screen", f.Y)
	}
	if got := b.text("layout"); got != "Icicle" {
		t.Errorf("the toggle says %q after Flame, want Icicle", got)
	}
	b.screenshot("flamegraph-window-flame.png")
	b.clickText("layout")
	checkOnScreen(t, b, widest, winW, winH)

	// Zoom into the second process root and back.
	f := b.frame("batch_worker")
	b.click(f.center())
	if z := b.frame("batch_worker"); z.Width < flameWidth*scale-1 {
		t.Errorf("after a click batch_worker is %v px wide: want the full width", z.Width)
	}
	if z := b.frame("server_main"); z.Display != "none" {
		t.Errorf("after a click on batch_worker its sibling server_main shows")
	}
	b.clickText("reset")
	near(t, "server_main's width after the reset", b.frame("server_main").Width, flameWidth*scale*0.6)
	b.checkQuiet()
}

// widestFrames are the names of the n widest frames.
func widestFrames(doc *flamegraphtest.Doc, n int) []string {
	fs := append([]flamegraphtest.Rect(nil), doc.Frames...)
	sort.SliceStable(fs, func(i, j int) bool { return fs[i].Samples > fs[j].Samples })
	var names []string
	for _, f := range fs[:n] {
		names = append(names, f.Name)
	}
	return names
}

// checkOnScreen: each named frame's label is inside the window and shows
// the whole name.
func checkOnScreen(t *testing.T, b *browser, names []string, w, h float64) {
	t.Helper()
	boxes := eval[[]labelBox](b, fmt.Sprintf(labelsJS, jsArray(names)))
	if len(boxes) != len(names) {
		t.Fatalf("found labels %+v, want %v", boxes, names)
	}
	for _, l := range boxes {
		if l.Label != l.Name || l.X < 0 || l.Y < 0 || l.X+l.W > w || l.Y+l.H > h || l.W == 0 {
			t.Errorf("the label of %q is %q at (%.0f, %.0f) %.0f×%.0f: want the whole name inside the %v×%v window",
				l.Name, l.Label, l.X, l.Y, l.W, l.H, w, h)
		}
	}
}

func jsArray(ss []string) string {
	var parts []string
	for _, s := range ss {
		parts = append(parts, jsString(s))
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// checkTopDrawn: below the title row, the top quarter of the screenshot
// is mostly frames (not the background), and the root's grey is among
// them: the old layout (roots at the bottom) showed only leaves there.
func checkTopDrawn(t *testing.T, img image.Image, scale float64) {
	t.Helper()
	bg := color.RGBA{0xf6, 0xf5, 0xee, 0xff}
	rootGrey := color.RGBA{0xc8, 0xc8, 0xc0, 0xff}
	r := img.Bounds()
	y0, y1 := int(float64(flameTop)*scale)+2, r.Dy()/4
	drawn, grey, all := 0, 0, 0
	for y := y0; y < y1; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			all++
			switch color.RGBAModel.Convert(img.At(x, y)).(color.RGBA) {
			case bg:
			case rootGrey:
				grey++
				drawn++
			default:
				drawn++
			}
		}
	}
	if drawn*2 < all {
		t.Errorf("rows %d to %d of the screenshot: %d of %d pixels drawn: want most (the roots on the first screen)", y0, y1, drawn, all)
	}
	if grey < r.Dx()*int(flameFrameHeight*scale)/2 {
		t.Errorf("rows %d to %d of the screenshot: %d pixels of the root's grey: want its row (the root on the first screen)", y0, y1, grey)
	}
	t.Logf("rows %d to %d: %d of %d pixels drawn, %d the root's", y0, y1, drawn, all, grey)
}

// screenshotPNG keeps a screenshot as an artifact and decodes it.
func (b *browser) screenshotPNG(name string) image.Image {
	b.t.Helper()
	data, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatalf("screenshot: %v", err)
	}
	keepArtifact(b.t, name, data)
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v (%s...)", name, err, base64.StdEncoding.EncodeToString(data[:min(len(data), 16)]))
	}
	return img
}
