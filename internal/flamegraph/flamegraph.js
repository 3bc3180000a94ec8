(function () {
"use strict";
var NS = "urn:probectl:flamegraph";
var svg = document.documentElement;
function num(el, name) { return Number(el.getAttributeNS(NS, name)); }
function byId(id) { return document.getElementById(id); }
var xpad = num(svg, "xpad"), width = num(svg, "width"), cw = num(svg, "cw");
var total = num(svg, "total"), hl = svg.getAttributeNS(NS, "hl");
var top = num(svg, "top"), fh = num(svg, "fh"), rows = num(svg, "rows");
var imageWidth = Number(svg.getAttribute("width")), imageHeight = Number(svg.getAttribute("height"));
var resetCtl = byId("reset"), clearCtl = byId("clear"), searchCtl = byId("search"), layoutCtl = byId("layout");
var flame = false;
var details = byId("details"), matched = byId("matched");
var frames = [], root = null, zoomed = null, re = null, term = "";
var gs = document.querySelectorAll("g.f");
for (var i = 0; i < gs.length; i++) {
	var g = gs[i], t = g.querySelector("title").textContent, rect = g.querySelector("rect");
	var f = { g: g, s: num(g, "s"), n: num(g, "n"), d: num(g, "d"), rect: rect,
		label: g.querySelector("text"), title: t, name: t.slice(0, t.lastIndexOf(" (")),
		fill: rect.getAttribute("fill"), match: false, chars: null };
	g.flameFrame = f;
	frames.push(f);
	if (f.d === 0) root = f;
}
function show(el, on) { el.setAttribute("class", on ? "ctl" : "ctl hide"); }
// fitWindow scales the graph to the window's width (the viewBox keeps
// every position in the graph's own pixels).
function fitWindow() {
	var w = window.innerWidth;
	if (!(w > 0)) return;
	svg.setAttribute("width", w);
	svg.setAttribute("height", Math.round(imageHeight * w / imageWidth));
}
// setLayout draws the roots on top (icicle, the default: where the eye
// starts) or at the bottom (flame, as flamegraph.pl does).
function setLayout(f) {
	flame = f;
	for (var i = 0; i < frames.length; i++) {
		var y = top + (flame ? rows - 1 - frames[i].d : frames[i].d) * fh;
		frames[i].rect.setAttribute("y", y);
		frames[i].label.setAttribute("y", y + fh - 4);
	}
	layoutCtl.textContent = flame ? "Icicle" : "Flame";
}
function fit(f, w) {
	var room = Math.floor((w - 6) / cw);
	if (room < 3) return "";
	var chars = f.chars || (f.chars = Array.from(f.name));
	if (chars.length <= room) return f.name;
	return chars.slice(0, room - 2).join("") + "..";
}
function place(f, x, w) {
	f.rect.setAttribute("x", x.toFixed(2));
	f.rect.setAttribute("width", w.toFixed(2));
	f.label.setAttribute("x", (x + 3).toFixed(2));
	f.label.textContent = fit(f, w);
}
// zoom makes z span the full width: its callers stay (full width, faded),
// its callees scale with it, and every other frame hides.
function zoom(z) {
	if (!z) return;
	zoomed = z === root ? null : z;
	var scale = width / z.n;
	for (var i = 0; i < frames.length; i++) {
		var f = frames[i], cls = "f";
		if (f.d < z.d) {
			if (f.s <= z.s && f.s + f.n >= z.s + z.n) { place(f, xpad, width); cls = "f p"; }
			else cls = "f hide";
		} else if (f.s >= z.s && f.s + f.n <= z.s + z.n) {
			place(f, xpad + (f.s - z.s) * scale, f.n * scale);
		} else cls = "f hide";
		f.g.setAttribute("class", cls);
	}
	show(resetCtl, zoomed !== null);
}
// search highlights the frames whose name matches the regular expression
// and says which share of all samples they cover (nested matches count once).
function search(s) {
	if (s === null) return;
	if (s === "") { clearSearch(); return; }
	var r;
	try { r = new RegExp(s); } catch (e) { matched.textContent = "Invalid regular expression: " + e.message; return; }
	re = r; term = s;
	var hits = [];
	for (var i = 0; i < frames.length; i++) {
		var f = frames[i];
		f.match = re.test(f.name);
		f.rect.setAttribute("fill", f.match ? hl : f.fill);
		if (f.match) hits.push(f);
	}
	hits.sort(function (a, b) { return a.s - b.s || b.n - a.n; });
	var covered = 0, end = 0;
	for (var j = 0; j < hits.length; j++) {
		var h = hits[j], from = Math.max(h.s, end), to = h.s + h.n;
		if (to > from) { covered += to - from; end = to; }
	}
	var pct = total > 0 ? covered * 100 / total : 0;
	matched.textContent = "Matched: " + pct.toFixed(2) + "% (" + covered.toLocaleString("en-US") + " of " +
		total.toLocaleString("en-US") + " samples)";
	show(clearCtl, true);
}
function clearSearch() {
	re = null; term = "";
	for (var i = 0; i < frames.length; i++) {
		frames[i].match = false;
		frames[i].rect.setAttribute("fill", frames[i].fill);
	}
	matched.textContent = "";
	show(clearCtl, false);
}
function askSearch() { search(window.prompt("Search frames (regular expression):", term)); }
function frameOf(el) { var g = el.closest ? el.closest("g.f") : null; return g ? g.flameFrame : null; }
svg.addEventListener("click", function (e) {
	var t = e.target;
	if (t === resetCtl) zoom(root);
	else if (t === layoutCtl) setLayout(!flame);
	else if (t === searchCtl) askSearch();
	else if (t === clearCtl) clearSearch();
	else zoom(frameOf(t));
});
svg.addEventListener("mouseover", function (e) {
	var f = frameOf(e.target);
	details.textContent = f ? f.title : " ";
});
svg.addEventListener("mouseout", function () { details.textContent = " "; });
document.addEventListener("keydown", function (e) {
	if ((e.ctrlKey || e.metaKey) && e.key === "f") { e.preventDefault(); askSearch(); }
	else if (e.key === "Escape") zoom(root);
});
window.addEventListener("resize", fitWindow);
fitWindow();
})();
