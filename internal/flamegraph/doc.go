// Package flamegraph draws the stacks an aggregation counted: folded, as
// flamegraph.pl reads them ("a;b;c 12" a line: Fold, WriteFolded), as a
// pprof profile (Profile, WriteProfile: gzipped profile.proto through
// github.com/google/pprof/profile) and as an interactive SVG flame graph
// (Write, WriteFile) that opens in a browser from disk and needs nothing
// else: its JavaScript (flamegraph.js) and CSS (flamegraph.css) are
// embedded, constant, and never see a frame name except through the DOM's
// text nodes.
//
// Layout: an icicle graph, the root ("all") on top and each frame below
// its caller (the script's Flame toggle draws them as flamegraph.pl does,
// the root at the bottom), scaled to the window's width; widths
// proportional to samples, children sorted
// by name from left to right with the caller's own samples (self time) to
// the right of its children. Frames narrower than flameMinWidth pixels are
// not drawn, and at most flameMaxFrames frames are (the narrowest go
// first); the graph says how many were left out.
//
// Colors are derived from the frame's name, so a function has the same
// color everywhere and in every file: a warm red-to-yellow palette, and
// blue-green for kernel frames, which are those whose name ends in "_[k]"
// (the mark stackcollapse-perf.pl --kernel puts in the folded format) or
// " [k]". A "+0x1f" offset and a " [module]" suffix are ignored for the
// color. The root is grey; frames matched by a search are magenta.
//
// Every frame is a <g class="f"> holding a <title> ("NAME (N samples,
// P%)"), a <rect> and a <text> label, with its position in samples as
// attributes in the flameNS namespace: fg:s (samples to its left), fg:n
// (its samples) and fg:d (its depth, the root being 0). The script zooms
// and searches with those integers alone.
//
// Package flamegraph imports runtime (the aggregation results it folds),
// bpf/symbols (frames) and bpf (writing a file without following a
// link). Which aggregation to draw, and the text view of stacks, are
// probectl show's.
package flamegraph
