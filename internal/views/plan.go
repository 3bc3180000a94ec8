package views

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/bpf/symbols"
	"github.com/probectl/probectl/compiler/compiled"
	"github.com/probectl/probectl/internal/termtext"
)

// Plan shows a plan: the human view in the manner of terraform plan, the
// JSON view as the README's "Plan JSON".
type Plan interface {
	Plan(plan *compiled.Plan) error
}

// NewPlan is the plan view -json selects, writing to w.
func NewPlan(asJSON bool, w io.Writer) Plan {
	if asJSON {
		return PlanJSON{w}
	}
	return PlanHuman{w}
}

// PlanHuman is the plan as text.
type PlanHuman struct{ W io.Writer }

// PlanJSON is the plan as indented JSON.
type PlanJSON struct{ W io.Writer }

// Plan writes plan as JSON.
func (v PlanJSON) Plan(plan *compiled.Plan) error { return writeJSON(v.W, plan) }

// Plan writes plan as text.
func (v PlanHuman) Plan(plan *compiled.Plan) error {
	renderPlan(v.W, plan)
	return nil
}

// renderPlan writes a plan in the manner of terraform plan.
func renderPlan(out io.Writer, plan *compiled.Plan) {
	// Buffered: a plan of thousands of probes is tens of thousands of
	// small writes otherwise. Coloured when out is (termtext.ColorWriter).
	bw := bufio.NewWriter(out)
	defer bw.Flush()
	var w io.Writer = bw
	if termtext.Colored(out) {
		w = termtext.ColorWriter{Writer: bw}
	}
	f := plan.Target.Facts
	fmt.Fprintf(w, "Target: linux %s %s (%s %s)\n", f.Kernel, f.Arch, f.Source, f.Name)
	fmt.Fprintf(w, "  fprobe %s%s; links: %s\n", f.Fprobe, fastPath(f.FprobeEntryFastPath), linkList(plan))
	fmt.Fprintf(w, "  scope: %s\n\n", scopeOf(plan))
	if len(plan.Changes) == 0 {
		fmt.Fprintln(w, "No probes.")
		renderSkipped(w, plan.Skipped)
		return
	}
	fmt.Fprintln(w, "probectl will perform the following actions:")
	if plan.Events != nil {
		fmt.Fprintln(w)
		renderEvents(w, plan.Events)
	}
	for _, t := range plan.Tables {
		fmt.Fprintln(w)
		renderTable(w, t, f.CPUs)
	}
	for _, c := range plan.Changes {
		fmt.Fprintln(w)
		renderChange(w, c, f.CPUs)
	}
	renderSkipped(w, plan.Skipped)
	s := plan.Summary
	fmt.Fprintf(w, "\nPlan: %d to create, %d to replace, %d to delete, %d unchanged.\n", s.Create, s.Replace, s.Delete, s.NoOp)
}

// scopeOf is the plan's scope; a plan saved before scopes were planned
// is node-wide.
func scopeOf(plan *compiled.Plan) compiled.Scope {
	if plan.Scope.Kind == "" {
		return compiled.ScopeOf("")
	}
	return plan.Scope
}

func fastPath(on bool) string {
	if on {
		return " with the entry-only ftrace fast path"
	}
	return ""
}

func linkList(plan *compiled.Plan) string {
	have, _ := plan.Target.Links.Split()
	return strings.Join(have, ", ")
}

var actionSymbols = map[compiled.Action]string{
	compiled.ActionCreate: "+", compiled.ActionReplace: "-/+", compiled.ActionDelete: "-", compiled.ActionNoOp: " ",
}

// actionColors are terraform's: + green, - red, -/+ magenta.
var actionColors = map[compiled.Action]string{
	compiled.ActionCreate: termtext.Green, compiled.ActionReplace: termtext.Magenta, compiled.ActionDelete: termtext.Red,
}

// symbol is the action's symbol, coloured for w.
func symbol(w io.Writer, a compiled.Action) string {
	if c, ok := actionColors[a]; ok {
		return termtext.Paint(w, c, actionSymbols[a])
	}
	return actionSymbols[a]
}

var actionWords = map[compiled.Action]string{
	compiled.ActionCreate: "will be created", compiled.ActionReplace: "must be replaced",
	compiled.ActionDelete: "will be destroyed", compiled.ActionNoOp: "is unchanged",
}

func renderChange(w io.Writer, c *compiled.Change, cpus int) {
	fmt.Fprintf(w, "  # %s %s", c.Address, actionWords[c.Action])
	if c.Why != "" {
		fmt.Fprintf(w, " (%s)", c.Why)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  %s probe %q %q {\n", symbol(w, c.Action), c.Address.Kind, c.Address.Name)
	renderAttributeChanges(w, c.Changes)
	row := rowWriter(w)
	renderWhat(row, c)
	renderWhere(row, c)
	row("route", "%s", c.Route)
	row("reason", "%s", c.Reason)
	if c.Unpinnable != "" {
		row("pinned", "no: %s", c.Unpinnable)
	}
	row("attach", "%s (%s)", compiled.JoinFamilies(c.Attach), linksText(c))
	if c.Cost != nil {
		row("cost", "%s", c.Cost)
	}
	row("entry_data", "%s", entryDataText(c.EntryData))
	for _, w := range c.PodWhen {
		row("when", "%s (matched against the node's pods)", printable(w))
	}
	if len(c.Deferred) > 0 {
		row("deferred", "%s (resolved at apply: the target carries no BTF)", printable(strings.Join(c.Deferred, ", ")))
	}
	renderPrograms(w, c.Programs)
	renderMaps(w, c.Maps)
	cpuNote := "for " + plural(cpus, "CPU")
	if cpus == 0 {
		cpuNote = "for 1 CPU: the profile does not say how many"
	}
	row("memory", "%s (%s)", bytesString(c.MemoryBytes), cpuNote)
	fmt.Fprintln(w, "    }")
}

// renderAttributeChanges writes what a replace changes, as terraform
// writes an attribute diff: ~ changed, + added, - removed, the source
// text as written.
func renderAttributeChanges(w io.Writer, changes []compiled.AttributeChange) {
	for _, a := range changes {
		switch {
		case a.Before == "":
			fmt.Fprintf(w, "      %s %s: %s\n", termtext.Paint(w, termtext.Green, "+"), printable(a.Attribute), sourceText(a.After))
		case a.After == "":
			fmt.Fprintf(w, "      %s %s: %s\n", termtext.Paint(w, termtext.Red, "-"), printable(a.Attribute), sourceText(a.Before))
		default:
			fmt.Fprintf(w, "      %s %s: %s -> %s\n", termtext.Paint(w, termtext.Yellow, "~"), printable(a.Attribute), sourceText(a.Before), sourceText(a.After))
		}
	}
}

// sourceText shows source text quoted ("pid > 1"), or as it is when it
// has quotes of its own (["ksys_read", "ksys_write"]).
func sourceText(s string) string {
	if strings.Contains(s, `"`) {
		return printable(s)
	}
	return strconv.Quote(s)
}

// rowWriter writes "key = value" rows of an entry to w.
func rowWriter(w io.Writer) func(key, format string, args ...any) {
	return func(key, format string, args ...any) {
		fmt.Fprintf(w, "      %-10s = %s\n", key, fmt.Sprintf(format, args...))
	}
}

// renderWhat writes what a probe attaches to: its events, functions or
// sampler, and what it excludes.
func renderWhat(row func(key, format string, args ...any), c *compiled.Change) {
	switch {
	case c.Event != "":
		row("event", "%s", printable(c.Event))
	case len(c.Tracepoints) > 0:
		row("events", "%d: %s", len(c.Tracepoints), abbreviate(c.Tracepoints, 8))
	case c.Address.Kind == bpf.KindTracepoint:
		row("events", "%s", quoteAll(c.Patterns))
	case c.Sampler != nil:
		row("sample", "%s", samplerText(c.Sampler))
	case c.USDT != "" && c.Sites == nil:
		row("usdt", "%s (resolved at apply: the binary is not on this host)", printable(c.USDT))
	case c.USDT != "":
		renderUSDT(row, c)
	case c.Functions != nil:
		row("functions", "%d: %s", len(c.Functions), abbreviate(c.Functions, 8))
	default:
		row("functions", "%s (resolved at apply: the target's function list is unknown)", quoteAll(c.Patterns))
	}
	if len(c.Exclude) > 0 {
		row("exclude", "%s", quoteAll(c.Exclude))
	}
}

// renderUSDT writes a USDT probe's sites: their addresses, the
// semaphore the uprobes raise, and the argument specifiers.
func renderUSDT(row func(key, format string, args ...any), c *compiled.Change) {
	var at, args []string
	var sem uint64
	for _, s := range c.Sites {
		at = append(at, fmt.Sprintf("%#x", s.Address))
		if !slices.Contains(args, s.Args) {
			args = append(args, s.Args)
		}
		sem = max(sem, s.RefCtrOffset)
	}
	text := fmt.Sprintf("%s, %s at %s", printable(c.USDT), plural(len(c.Sites), "site"), abbreviate(at, 4))
	if sem != 0 {
		text += fmt.Sprintf(", semaphore at file offset %#x (ref_ctr_offset)", sem)
	}
	row("usdt", "%s", text)
	if len(args) == 1 {
		row("arguments", "%s", printable(args[0]))
	} else {
		row("arguments", "%s (the sites differ: the cookie says which fired)", printable(strings.Join(args, "; ")))
	}
}

// renderWhere writes where a user probe attaches: its binary, the
// functions missing from it, its process.
func renderWhere(row func(key, format string, args ...any), c *compiled.Change) {
	if c.Binary != "" && c.Library != "" {
		row("binary", "%s (%s, from %s)", printable(c.Binary), printable(c.Library), symbols.LDCache)
	} else if c.Binary != "" {
		row("binary", "%s", printable(c.Binary))
	}
	if c.Root != "" {
		row("root", "%s (the binary is read and attached under it)", printable(c.Root))
	}
	if len(c.Missing) > 0 {
		row("missing", "%s (not attached)", printable(strings.Join(c.Missing, "; ")))
	}
	if c.PID != 0 {
		row("pid", "%d", c.PID)
	}
}

// linksText says how many links a change attaches.
func linksText(c *compiled.Change) string {
	if c.Links != nil {
		return plural(*c.Links, "link")
	}
	if c.Sampler != nil && c.Sampler.OneCPU {
		return "one, on the first online CPU"
	}
	if c.Sampler != nil {
		return "one per online CPU"
	}
	return "one per function"
}

// entryDataText says where a probe keeps what its entry hands its exit.
func entryDataText(d compiled.EntryData) string {
	switch d.Storage {
	case compiled.StorageCookie:
		return fmt.Sprintf("%d bytes in the session cookie", d.Size)
	case compiled.StorageMap:
		return fmt.Sprintf("%d bytes in a per-call map slot (thread, function)", d.Size)
	default:
		return "none"
	}
}

// renderPrograms writes the "programs" rows, one per program.
func renderPrograms(w io.Writer, programs []compiled.PlanProgram) {
	for i, p := range programs {
		key := ""
		if i == 0 {
			key = "programs"
		}
		per := ""
		if p.PerFunction {
			per = ", loaded once per function"
		}
		fmt.Fprintf(w, "      %-10s %s %s %q: %d instructions, %d bytes of stack%s\n", key, eqIf(i == 0), p.Role, p.Name, p.Instructions, p.StackBytes, per)
	}
}

// renderMaps writes the "maps" rows, one per map.
func renderMaps(w io.Writer, maps []compiled.PlanMap) {
	for i, m := range maps {
		key := ""
		if i == 0 {
			key = "maps"
		}
		limit := fmt.Sprintf("%d keys", m.MaxEntries)
		if m.Type == "RingBuf" {
			limit = fmt.Sprintf("%d KiB", m.MaxEntries/1024)
		}
		purpose := m.Purpose
		if m.Metric != "" {
			purpose += ", served as a " + m.Metric
		}
		if m.Served != "" {
			purpose += fmt.Sprintf(", in %s as %s", m.ServedUnit, m.Served)
		}
		fmt.Fprintf(w, "      %-10s %s %s %s, %s: %s\n", key, eqIf(i == 0), m.Name, m.Type, limit, purpose)
	}
}

// renderTable writes a table's entry: its layout, its users, its memory.
func renderTable(w io.Writer, t *compiled.TableChange, cpus int) {
	fmt.Fprintf(w, "  # %s %s", t.Address, actionWords[t.Action])
	if t.Why != "" {
		fmt.Fprintf(w, " (%s)", t.Why)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  %s table %q {\n", symbol(w, t.Action), t.Address.Name)
	row := func(key, format string, args ...any) {
		fmt.Fprintf(w, "      %-10s = %s\n", key, fmt.Sprintf(format, args...))
	}
	slots := func(fields []compiled.KeyField) string {
		var parts []string
		for _, f := range fields {
			parts = append(parts, fmt.Sprintf("%s %s (%d bytes)", f.Name, f.Kind, f.Size))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	row("key", "%s", slots(t.Key))
	row("value", "%s", slots(t.Value))
	row("max_keys", "%d (a full table counts the stores it refuses)", t.MaxKeys)
	if len(t.Users) > 0 {
		var users []string
		for _, u := range t.Users {
			users = append(users, u.String())
		}
		row("users", "%s", strings.Join(users, ", "))
	}
	cpuNote := "for " + plural(cpus, "CPU")
	if cpus == 0 {
		cpuNote = "for 1 CPU: the profile does not say how many"
	}
	row("memory", "%s (%s)", bytesString(t.MemoryBytes(cpus)), cpuNote)
	fmt.Fprintln(w, "    }")
}

// renderEvents writes the event buffer's entry: its size, what it holds,
// its users.
func renderEvents(w io.Writer, e *compiled.EventsChange) {
	fmt.Fprintf(w, "  # %s %s", e.Address, actionWords[e.Action])
	if e.Why != "" {
		fmt.Fprintf(w, " (%s)", e.Why)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  %s events %q {\n", symbol(w, e.Action), e.Address.Name)
	row := func(key, format string, args ...any) {
		fmt.Fprintf(w, "      %-10s = %s\n", key, fmt.Sprintf(format, args...))
	}
	size := bpf.SizeText(e.Size)
	if e.MaxRecord > 0 {
		row("size", "%s: %d records of the largest event (%d bytes with its headers) or more", size, e.Records(), e.MaxRecord)
	} else {
		row("size", "%s", size)
	}
	row("unread", "kept up to the size, then dropped and counted per probe (probectl events reads them)")
	if len(e.Users) > 0 {
		var users []string
		for _, u := range e.Users {
			users = append(users, u.String())
		}
		row("users", "%s", strings.Join(users, ", "))
	}
	row("memory", "%s", bytesString(e.MemoryBytes))
	fmt.Fprintln(w, "    }")
}

func eqIf(first bool) string {
	if first {
		return "="
	}
	return " "
}

// abbreviate writes the first n names of list, each printable.
func abbreviate(list []string, n int) string {
	shown := make([]string, 0, min(n, len(list)))
	for _, s := range list[:min(n, len(list))] {
		shown = append(shown, printable(s))
	}
	if len(list) <= n {
		return strings.Join(shown, ", ")
	}
	return strings.Join(shown, ", ") + fmt.Sprintf(", ... (%d more)", len(list)-n)
}

func quoteAll(list []string) string {
	q := make([]string, len(list))
	for i, s := range list {
		q[i] = fmt.Sprintf("%q", s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func bytesString(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// renderSkipped lists the optional probes that will not be attached.
func renderSkipped(w io.Writer, skipped []compiled.Skipped) {
	for _, sk := range skipped {
		fmt.Fprintf(w, "\n  # %s will not be attached (optional): %s\n", sk.Address, printable(sk.Why))
	}
}
