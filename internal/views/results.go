package views

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler/compiled"
	"github.com/probectl/probectl/runtime"
)

// Results shows what the applied probes measured (show): the human view as
// tables and text bars, the JSON view as the README's "Show JSON".
type Results interface {
	Results(results []runtime.ProbeResult, tables []runtime.TableResult) error
}

// NewResults is the results view -json selects, writing to w.
func NewResults(asJSON bool, w io.Writer) Results {
	if asJSON {
		return ResultsJSON{w}
	}
	return ResultsHuman{w}
}

// ResultsHuman is the results as text.
type ResultsHuman struct{ W io.Writer }

// ResultsJSON is the results as indented JSON.
type ResultsJSON struct{ W io.Writer }

// Results writes results and tables as text.
func (v ResultsHuman) Results(results []runtime.ProbeResult, tables []runtime.TableResult) error {
	if len(results) == 0 {
		_, err := fmt.Fprintln(v.W, "No probes applied in this workspace.")
		return err
	}
	WriteResults(v.W, results)
	renderTables(v.W, tables)
	return nil
}

// Results writes results and tables as JSON.
func (v ResultsJSON) Results(results []runtime.ProbeResult, tables []runtime.TableResult) error {
	if results == nil {
		results = []runtime.ProbeResult{}
	}
	return writeJSON(v.W, struct {
		Probes []runtime.ProbeResult `json:"probes"`
		Tables []runtime.TableResult `json:"tables,omitempty"`
	}{results, tables})
}

// Where the events of a probe with events only are, as the results say
// in its place: show's (the workspace's events) or run's (its own).
const (
	EventsOfWorkspace = "events only: probectl events prints them (-follow: as they arrive); serve and agent -events-out write them as NDJSON"
	EventsOfRun       = "events only: run prints them as they arrive"
)

// WriteResults draws results as text, in the manner of bpftrace, as show
// does.
func WriteResults(w io.Writer, results []runtime.ProbeResult) {
	WriteResultsTop(w, results, 0, EventsOfWorkspace)
}

// WriteResultsTop is WriteResults with an aggregation keyed by stacks
// summed up (samples, lost, distinct stacks) and only its topStacks
// largest entries drawn (topStacks 0 draws all, without the summary), and
// events (EventsOfRun, EventsOfWorkspace) in the place of a probe with
// events only.
func WriteResultsTop(w io.Writer, results []runtime.ProbeResult, topStacks int, events string) {
	for i, pr := range results {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s\n", pr.Address)
		if pr.Error != "" {
			fmt.Fprintf(w, "  (cannot be read: %s)\n", printable(pr.Error))
			continue
		}
		switch {
		case len(pr.Aggregations) > 0:
		case pr.Events:
			fmt.Fprintf(w, "  (%s)\n", events)
		default:
			fmt.Fprintln(w, "  (no aggregations or events: it only updates tables)")
		}
		for _, ar := range pr.Aggregations {
			fmt.Fprintf(w, "\n  %s %q", ar.Kind, ar.Name)
			if ar.Dropped > 0 {
				fmt.Fprintf(w, " (%d observations dropped: more keys than max_keys)", ar.Dropped)
			}
			fmt.Fprintln(w)
			if len(ar.Entries) == 0 {
				fmt.Fprintln(w, "    (no data)")
				continue
			}
			if HasStacks(ar) {
				stackEntries(w, ar, topStacks)
				continue
			}
			if ar.Kind.IsHistogram() {
				for _, e := range ar.Entries {
					if len(e.Key) > 0 {
						fmt.Fprintf(w, "    [%s]\n", KeyText(e.Key))
					}
					drawHistogram(w, e.Buckets, ar.Kind == compiled.AggLHist)
				}
			} else {
				table(w, ar)
			}
			if ar.Omitted > 0 {
				more := strings.Replace(plural(ar.Omitted, "key"), " ", " more ", 1)
				fmt.Fprintf(w, "    (%s, with smaller values)\n", more)
			}
		}
	}
}

// KeyText writes a key as name=value pairs.
func KeyText(k runtime.OrderedKey) string {
	parts := make([]string, len(k))
	for i, f := range k {
		parts[i] = fmt.Sprintf("%s=%s", f.Name, value(f.Value))
	}
	return strings.Join(parts, ", ")
}

func table(w io.Writer, ar runtime.AggregationResult) {
	cols := append([]string{}, ar.ByFields...)
	rows := [][]string{}
	for _, e := range ar.Entries {
		var row []string
		for _, f := range e.Key {
			row = append(row, value(f.Value))
		}
		row = append(row, fmt.Sprint(*e.Value))
		rows = append(rows, row)
	}
	cols = append(cols, string(ar.Kind))
	widths := make([]int, len(cols))
	for i, c := range cols {
		widths[i] = len(c)
		for _, r := range rows {
			widths[i] = max(widths[i], len(r[i]))
		}
	}
	line := func(cells []string) {
		fmt.Fprint(w, "    ")
		for i, c := range cells {
			if i == len(cells)-1 {
				fmt.Fprintf(w, "%*s", widths[i], c)
			} else {
				fmt.Fprintf(w, "%-*s  ", widths[i], c)
			}
		}
		fmt.Fprintln(w)
	}
	line(cols)
	for _, r := range rows {
		line(r)
	}
}

func bound(v int64) string {
	switch v {
	case math.MinInt64:
		return "-inf"
	case math.MaxInt64:
		return "inf"
	}
	return humanInt(v)
}

// humanInt writes powers of two as bpftrace does: 1K, 4M.
func humanInt(v int64) string {
	for _, u := range []struct {
		n int64
		s string
	}{{1 << 60, "E"}, {1 << 50, "P"}, {1 << 40, "T"}, {1 << 30, "G"}, {1 << 20, "M"}, {1 << 10, "K"}} {
		if v != 0 && v%u.n == 0 {
			return fmt.Sprintf("%d%s", v/u.n, u.s)
		}
	}
	return fmt.Sprint(v)
}

// drawHistogram draws the buckets as bpftrace does: a power-of-two
// bucket of one value as [1], an lhist's (linear) buckets as [lo, hi)
// even when a step of 1 holds one value.
func drawHistogram(w io.Writer, buckets []runtime.Bucket, linear bool) {
	var most uint64
	for _, b := range buckets {
		most = max(most, b.Count)
	}
	const width = 52
	for _, b := range buckets {
		label := fmt.Sprintf("[%s, %s)", bound(b.Low), bound(b.High))
		if b.High == b.Low+1 && !linear {
			label = fmt.Sprintf("[%s]", bound(b.Low))
		}
		bar := 0
		if most > 0 {
			bar = int(b.Count * width / most)
		}
		fmt.Fprintf(w, "    %-20s %8d |%-*s|\n", label, b.Count, width, strings.Repeat("@", bar))
	}
}

// renderTables says how full each table is: tables are the probes' working
// state, so show counts them (show -json lists what they hold).
func renderTables(w io.Writer, tables []runtime.TableResult) {
	for _, t := range tables {
		fmt.Fprintf(w, "\n%s: ", t.Address)
		switch {
		case t.Error != "":
			fmt.Fprintf(w, "cannot be read: %s\n", printable(t.Error))
		default:
			fmt.Fprintf(w, "%s", plural(len(t.Entries), "key"))
			if t.Dropped > 0 {
				fmt.Fprintf(w, "; %d stores refused (the table was full: raise max_keys)", t.Dropped)
			}
			fmt.Fprintln(w)
		}
	}
}

// ResultsLine writes a {"type": "results", ...} line.
func ResultsLine(w io.Writer, title string, shown []runtime.ProbeResult, tables []runtime.TableResult) {
	b, _ := bpf.JSON(struct {
		Type   string                `json:"type"`
		Wall   string                `json:"wall"`
		Shows  string                `json:"shows"`
		Probes []runtime.ProbeResult `json:"probes"`
		Tables []runtime.TableResult `json:"tables,omitempty"`
	}{"results", runtime.WallText(time.Now()), title, shown, tables})
	fmt.Fprintf(w, "%s\n", b)
}

// Stacks in show: symbolized frames one per line (innermost first, as
// bpftrace prints them).

// HasStacks reports whether an aggregation is keyed by a stack.
func HasStacks(ar runtime.AggregationResult) bool {
	for _, e := range ar.Entries {
		for _, f := range e.Key {
			if _, ok := f.Value.(*runtime.Stack); ok {
				return true
			}
		}
	}
	return false
}

// stackEntries prints the entries of an aggregation keyed by stacks: one
// block per key, its stacks one frame a line, then the value; top > 0,
// the summary and the top largest (they are sorted, largest first).
func stackEntries(w io.Writer, ar runtime.AggregationResult, top int) {
	entries := ar.Entries
	if top > 0 {
		stackSummary(w, ar, top)
		entries = entries[:min(top, len(entries))]
	}
	for i, e := range entries {
		if i > 0 {
			fmt.Fprintln(w)
		}
		for _, f := range e.Key {
			s, ok := f.Value.(*runtime.Stack)
			if !ok {
				fmt.Fprintf(w, "    %s: %s\n", printable(f.Name), value(f.Value))
				continue
			}
			fmt.Fprintf(w, "    %s:\n", printable(f.Name))
			switch {
			case s.Err != "":
				fmt.Fprintf(w, "        [%s]\n", s.Err)
			case len(s.Frames) == 0:
				fmt.Fprintln(w, "        (empty)")
			}
			for _, fr := range s.Frames {
				fmt.Fprintf(w, "        %s\n", printable(fr.String()))
			}
		}
		if ar.Kind.IsHistogram() {
			drawHistogram(w, e.Buckets, ar.Kind == compiled.AggLHist)
			continue
		}
		fmt.Fprintf(w, "    %s: %d\n", ar.Kind, *e.Value)
	}
	if more := len(ar.Entries) - len(entries); more > 0 {
		fmt.Fprintf(w, "\n    (%s, with smaller values)\n", strings.Replace(plural(more, "stack"), " ", " more ", 1))
	}
}

// stackSummary says what an aggregation keyed by stacks holds: its total
// (samples for a count), how much of it lost its stack, how many distinct
// keys, and how many of them follow.
func stackSummary(w io.Writer, ar runtime.AggregationResult, top int) {
	var total, lost int64
	for _, e := range ar.Entries {
		v := int64(0)
		if e.Value != nil {
			v = *e.Value
		}
		for _, b := range e.Buckets {
			v += int64(b.Count)
		}
		total += v
		for _, f := range e.Key {
			if s, ok := f.Value.(*runtime.Stack); ok && strings.HasPrefix(s.Err, "stack lost") {
				lost += v
				break
			}
		}
	}
	what := "samples"
	switch {
	case ar.Kind.IsHistogram():
		what = "observations"
	case ar.Kind != "count":
		what = string(ar.Kind)
	}
	fmt.Fprintf(w, "    %d %s, %d lost, %d distinct stacks", total, what, lost, len(ar.Entries))
	if len(ar.Entries) > top {
		fmt.Fprintf(w, "; the top %d:", top)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w)
}
