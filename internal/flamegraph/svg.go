package flamegraph

import (
	"bufio"
	"cmp"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Stack is one stack and its weight; Frames run from the root (outermost
// caller) to the leaf.
type Stack struct {
	Frames []string
	Value  int64
}

const (
	flameNS          = "urn:probectl:flamegraph"
	flameImageWidth  = 1200
	flameXPad        = 10
	flameWidth       = flameImageWidth - 2*flameXPad // pixels for 100% of the samples
	flameFrameHeight = 16
	flameFontSize    = 12
	flameCharWidth   = 7.4 // an upper bound of a 12px monospace glyph's advance
	flameTop         = 40  // title and controls above the frames
	flameBottom      = 44  // details, matched and the note below them
	flameMinWidth    = 0.1 // pixels: narrower frames are not drawn
	flameMaxFrames   = 20000
	flameMaxName     = 1000 // runes of a frame name shown; the rest is cut
	flameMaxTitle    = 200
	flameRootColor   = "#c8c8c0"
	flameHighlight   = "#e600e6"
)

// flameNode is one drawn frame: start and n are in samples.
type flameNode struct {
	name  string
	depth int
	start int64
	n     int64
}

// flameLayout is the merged tree, as the frames to draw.
type flameLayout struct {
	total      int64
	nodes      []flameNode // by depth, then start; the root first
	maxDepth   int
	elided     int   // frames not drawn
	elidedMaxN int64 // the widest of them, in samples
	capped     bool  // frames were left out to keep flameMaxFrames
}

// Write writes an interactive SVG flame graph of stacks.
//
// Equal prefixes merge into one frame; stacks with a zero value are
// ignored, a negative value is an error, and so is a total that does not
// fit in an int64. Frame names may hold anything: invalid UTF-8, control
// characters and characters that would reorder the text (bidi controls)
// are shown as \xNN or \uNNNN escapes, names are cut after 1,000
// characters, and everything is escaped for XML. With no samples the file
// is a valid SVG that says so.
func Write(w io.Writer, title string, stacks []Stack) error {
	l, err := layoutFlame(stacks)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	l.render(bw, title)
	return bw.Flush()
}

// layoutFlame merges the stacks into a tree, as flamegraph.pl does: sort
// the stacks (frame by frame, names in byte order, a stack before its own
// prefix), then walk them once, closing the frames where a stack leaves
// the previous one and opening the frames it adds.
func layoutFlame(stacks []Stack) (*flameLayout, error) {
	items, total, err := cleanStacks(stacks)
	if err != nil {
		return nil, err
	}
	l := &flameLayout{total: total}
	if total == 0 {
		return l, nil
	}
	slices.SortFunc(items, func(a, b Stack) int { return compareStacks(a.Frames, b.Frames) })
	nodes := l.merge(items)
	if len(nodes) > flameMaxFrames {
		nodes = l.capFrames(nodes)
	}
	slices.SortFunc(nodes, func(a, b flameNode) int {
		return cmp.Or(cmp.Compare(a.depth, b.depth), cmp.Compare(a.start, b.start))
	})
	for _, n := range nodes {
		l.maxDepth = max(l.maxDepth, n.depth)
	}
	l.nodes = nodes
	return l, nil
}

// cleanStacks checks the sample counts and sums them, leaves out the
// stacks without samples, and makes every frame name safe to show
// (cleanFrameName; the caller's stacks are not changed).
func cleanStacks(stacks []Stack) ([]Stack, int64, error) {
	items := make([]Stack, 0, len(stacks))
	var total int64
	for i, s := range stacks {
		switch {
		case s.Value < 0:
			return nil, 0, fmt.Errorf("flame graph: stack %d has a negative sample count (%d)", i, s.Value)
		case s.Value == 0:
			continue
		case s.Value > math.MaxInt64-total:
			return nil, 0, errors.New("flame graph: the sample counts add up to more than an int64 holds")
		}
		total += s.Value
		frames, cloned := s.Frames, false
		for j, f := range frames {
			if c := cleanFrameName(f); c != f {
				if !cloned {
					frames, cloned = slices.Clone(frames), true
				}
				frames[j] = c
			}
		}
		items = append(items, Stack{frames, s.Value})
	}
	return items, total, nil
}

// merge walks the sorted stacks once and returns the frames wide enough
// to draw, the root first; the others are counted as elided.
func (l *flameLayout) merge(items []Stack) []flameNode {
	scale := float64(flameWidth) / float64(l.total)
	nodes := []flameNode{{name: "all", depth: 0, start: 0, n: l.total}}
	type open struct {
		name  string
		start int64
	}
	var path []open
	var offset int64
	closeTo := func(keep int) {
		for len(path) > keep {
			o := path[len(path)-1]
			path = path[:len(path)-1]
			n := offset - o.start
			if float64(n)*scale < flameMinWidth {
				l.elided++
				l.elidedMaxN = max(l.elidedMaxN, n)
				continue
			}
			nodes = append(nodes, flameNode{name: o.name, depth: len(path) + 1, start: o.start, n: n})
		}
	}
	for _, it := range items {
		common := 0
		for common < len(path) && common < len(it.Frames) && path[common].name == it.Frames[common] {
			common++
		}
		closeTo(common)
		for _, f := range it.Frames[common:] {
			path = append(path, open{f, offset})
		}
		offset += it.Value
	}
	closeTo(0)
	return nodes
}

// capFrames keeps flameMaxFrames of the frames: the widest, and of
// equally wide frames the shallowest. A caller is never narrower than its
// callees, so a callee never comes before its caller in this order, and
// what stays is a tree.
func (l *flameLayout) capFrames(nodes []flameNode) []flameNode {
	slices.SortFunc(nodes, func(a, b flameNode) int {
		return cmp.Or(cmp.Compare(b.n, a.n), cmp.Compare(a.depth, b.depth), cmp.Compare(a.start, b.start))
	})
	l.elided += len(nodes) - flameMaxFrames
	l.elidedMaxN = max(l.elidedMaxN, nodes[flameMaxFrames].n)
	l.capped = true
	return nodes[:flameMaxFrames]
}

// compareStacks orders stacks frame by frame, and a stack before its own
// prefixes: a frame's callees come first, its self samples after them.
func compareStacks(a, b []string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if c := strings.Compare(a[i], b[i]); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(b), len(a))
}

// cleanFrameName makes a name safe to show: invalid UTF-8 bytes and C0
// controls become \xNN, DEL, C1 controls, bidi controls and the XML
// non-characters U+FFFE and U+FFFF become \uNNNN. Printable ASCII (the
// common case) is returned as it is.
func cleanFrameName(s string) string {
	i := 0
	for i < len(s) && s[i] >= 0x20 && s[i] < 0x7f {
		i++
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r < 0x20:
			fmt.Fprintf(&b, `\x%02x`, r)
		case hidden(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// hidden reports whether cleanFrameName shows r as \uNNNN: DEL, the C1
// controls, the bidi controls and the XML non-characters U+FFFE, U+FFFF.
func hidden(r rune) bool {
	switch {
	case r == 0x7f, r >= 0x80 && r <= 0x9f:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return r == 0xfffe || r == 0xffff
}

// cutName keeps the first max runes of s, marking the cut.
func cutName(s string, max int) string {
	if len(s) <= max {
		return s
	}
	n := 0
	for i := range s {
		if n == max {
			return s[:i] + "…"
		}
		n++
	}
	return s
}

// fitLabel is the label that fits in w pixels: the name, the start of it
// and "..", or nothing (as the script's fit does).
func fitLabel(name string, w float64) string {
	room := int(math.Floor((w - 6) / flameCharWidth))
	if room < 3 {
		return ""
	}
	if utf8.RuneCountInString(name) <= room {
		return name
	}
	n := 0
	for i := range name {
		if n == room-2 {
			return name[:i] + ".."
		}
		n++
	}
	return name
}

// flameColor is a frame's fill, derived from its name alone.
func flameColor(name string) string {
	kernel := false
	for _, k := range []string{"_[k]", " [k]"} {
		if base, ok := strings.CutSuffix(name, k); ok {
			name, kernel = base, true
		}
	}
	if i := strings.LastIndex(name, " ["); i > 0 && strings.HasSuffix(name, "]") {
		name = name[:i]
	}
	if i := strings.LastIndex(name, "+0x"); i > 0 && isHex(name[i+3:]) {
		name = name[:i]
	}
	h := uint32(2166136261) // FNV-1a
	for i := 0; i < len(name); i++ {
		h ^= uint32(name[i])
		h *= 16777619
	}
	v1 := float64(h&0xff) / 255
	v2 := float64(h>>8&0xff) / 255
	v3 := float64(h>>16&0xff) / 255
	var r, g, b float64
	if kernel {
		r, g, b = 40+70*v1, 160+60*v1, 170+60*v2
	} else {
		r, g, b = 205+50*v3, 230*v1, 55*v2
	}
	return fmt.Sprintf("#%02x%02x%02x", int(r), int(g), int(b))
}

func isHex(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !strings.ContainsRune("0123456789abcdefABCDEF", rune(s[i])) {
			return false
		}
	}
	return true
}

var xmlText = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&apos;")

// flameRender appends the SVG, keeping positions in hundredths of a pixel
// so that a frame's right edge is computed once and its callees never
// reach past it.
type flameRender struct {
	b     []byte
	w     *bufio.Writer
	scale float64
}

func (r *flameRender) s(s string)    { r.b = append(r.b, s...) }
func (r *flameRender) text(s string) { r.s(xmlText.Replace(s)) }
func (r *flameRender) int(v int64)   { r.b = strconv.AppendInt(r.b, v, 10) }
func (r *flameRender) flush() {
	r.w.Write(r.b)
	r.b = r.b[:0]
}

// px appends hundredths of a pixel as a decimal number.
func (r *flameRender) px(v int64) {
	r.int(v / 100)
	if f := v % 100; f != 0 {
		r.b = append(r.b, '.', byte('0'+f/10))
		if f%10 != 0 {
			r.b = append(r.b, byte('0'+f%10))
		}
	}
}

// x is the left edge, in hundredths of a pixel, of the frame that starts
// after start samples.
func (r *flameRender) x(start int64) int64 {
	return int64(math.Round((flameXPad + float64(start)*r.scale) * 100))
}

func (l *flameLayout) height() int {
	rows := l.maxDepth + 1
	return flameTop + rows*flameFrameHeight + flameBottom
}

func (l *flameLayout) render(w *bufio.Writer, title string) {
	title = cutName(cleanFrameName(title), flameMaxTitle)
	r := &flameRender{w: w}
	if l.total > 0 {
		r.scale = float64(flameWidth) / float64(l.total)
	}
	h := l.height()
	r.s(`<?xml version="1.0" encoding="UTF-8" standalone="no"?>` + "\n")
	r.s(`<svg xmlns="http://www.w3.org/2000/svg" xmlns:fg="` + flameNS + `" version="1.1" width="`)
	r.int(flameImageWidth)
	r.s(`" height="`)
	r.int(int64(h))
	r.s(`" viewBox="0 0 `)
	r.int(flameImageWidth)
	r.s(" ")
	r.int(int64(h))
	r.s(`" fg:total="`)
	r.int(l.total)
	r.s(`" fg:xpad="`)
	r.int(flameXPad)
	r.s(`" fg:width="`)
	r.int(flameWidth)
	r.s(`" fg:cw="` + strconv.FormatFloat(flameCharWidth, 'f', -1, 64) + `" fg:hl="` + flameHighlight + `" fg:top="`)
	r.int(flameTop)
	r.s(`" fg:fh="`)
	r.int(flameFrameHeight)
	r.s(`" fg:rows="`)
	r.int(int64(l.maxDepth + 1))
	r.s(`">` + "\n")
	r.s("<title>")
	r.text(title)
	r.s("</title>\n<desc>Flame graph written by probectl: ")
	r.s(flameCount(l.total, "sample"))
	r.s(", ")
	r.s(flameCount(int64(len(l.nodes)), "frame"))
	r.s(" drawn")
	if l.elided > 0 {
		r.s(", ")
		r.s(flameCount(int64(l.elided), "narrow frame"))
		r.s(" left out")
	}
	r.s(". Roots on top (Flame draws them at the bottom); click a frame to zoom into it, Search (or Ctrl-F) to highlight frames by regular expression.</desc>\n")
	r.s("<style><![CDATA[\n")
	r.s(flameStyle)
	r.s("]]></style>\n")
	r.s(`<rect width="100%" height="100%" fill="#f6f5ee"/>` + "\n")
	r.s(`<text id="title" x="600" y="24" text-anchor="middle">`)
	r.text(title)
	r.s("</text>\n")
	r.s(`<text id="reset" class="ctl hide" x="10" y="24">Reset Zoom</text>` + "\n")
	r.s(`<text id="layout" class="ctl" x="120" y="24">Flame</text>` + "\n")
	r.s(`<text id="clear" class="ctl hide" x="1130" y="24" text-anchor="end">Clear</text>` + "\n")
	r.s(`<text id="search" class="ctl" x="1190" y="24" text-anchor="end">Search</text>` + "\n")
	fmt.Fprintf(r, `<text id="details" x="10" y="%d"> </text>`+"\n", h-flameBottom+18)
	fmt.Fprintf(r, `<text id="matched" x="1190" y="%d" text-anchor="end"></text>`+"\n", h-flameBottom+18)
	if l.total == 0 {
		fmt.Fprintf(r, `<text id="empty" x="600" y="%d" text-anchor="middle">No samples</text>`+"\n", flameTop+12)
	}
	if l.elided > 0 {
		fmt.Fprintf(r, `<text id="note" x="10" y="%d">`, h-flameBottom+36)
		r.s(flameCount(int64(l.elided), "frame"))
		if l.capped {
			fmt.Fprintf(r, " at most %.2f px wide", float64(l.elidedMaxN)*r.scale)
		} else {
			fmt.Fprintf(r, " narrower than %g px", flameMinWidth)
		}
		r.s(" are not drawn (their samples count in their callers' widths); zoom and search see only the frames drawn.</text>\n")
	}
	r.s(`<g id="frames">` + "\n")
	for _, n := range l.nodes {
		l.frame(r, n)
		if len(r.b) > 32<<10 {
			r.flush()
		}
	}
	r.s("</g>\n<script><![CDATA[\n")
	r.s(flameScript)
	r.s("]]></script>\n</svg>\n")
	r.flush()
}

// frame appends one frame: its group, with its position in samples, its
// title, its box and its label.
func (l *flameLayout) frame(r *flameRender, n flameNode) {
	name := cutName(n.name, flameMaxName)
	x1, x2 := r.x(n.start), r.x(n.start+n.n)
	y := int64(flameTop + n.depth*flameFrameHeight)
	r.s(`<g class="f" fg:s="`)
	r.int(n.start)
	r.s(`" fg:n="`)
	r.int(n.n)
	r.s(`" fg:d="`)
	r.int(int64(n.depth))
	r.s(`"><title>`)
	r.text(name)
	r.s(" (")
	r.s(flameCount(n.n, "sample"))
	r.s(", ")
	r.s(strconv.FormatFloat(float64(n.n)*100/float64(l.total), 'f', 2, 64))
	r.s(`%)</title><rect x="`)
	r.px(x1)
	r.s(`" y="`)
	r.int(y)
	r.s(`" width="`)
	r.px(x2 - x1)
	r.s(`" height="`)
	r.int(flameFrameHeight - 1)
	r.s(`" rx="2" fill="`)
	if n.depth == 0 {
		r.s(flameRootColor)
	} else {
		r.s(flameColor(n.name))
	}
	r.s(`"/><text x="`)
	r.px(x1 + 300)
	r.s(`" y="`)
	r.int(y + flameFrameHeight - 4)
	r.s(`">`)
	r.text(fitLabel(name, float64(x2-x1)/100))
	r.s("</text></g>\n")
}

// Write lets fmt write into the buffer.
func (r *flameRender) Write(p []byte) (int, error) {
	r.b = append(r.b, p...)
	return len(p), nil
}

// flameCount formats n with thousands separators and the noun.
func flameCount(n int64, noun string) string {
	s := strconv.FormatInt(n, 10)
	var b []byte
	for i, c := range []byte(s) {
		if i > 0 && (len(s)-i)%3 == 0 && s[i-1] != '-' {
			b = append(b, ',')
		}
		b = append(b, c)
	}
	if n != 1 {
		noun += "s"
	}
	return string(b) + " " + noun
}

// flameStyle is the graph's CSS, inside a CDATA section of its <style>.
//
//go:embed flamegraph.css
var flameStyle string

// flameScript zooms and searches, inside a CDATA section of its <script>.
// It reads names only as text (textContent) and writes them only as text,
// so nothing in a name can run. It names the attributes' namespace
// (flameNS) itself.
//
//go:embed flamegraph.js
var flameScript string
