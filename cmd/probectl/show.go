package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strings"

	"github.com/probectl/probectl/runtime"
	"github.com/spf13/cobra"
)

func newShowCmd(g *globals) *cobra.Command {
	var asJSON, folded bool
	var top int
	var flameFile, aggName, symbolDirs string
	cmd := &cobra.Command{
		Use:   "show [-json] [-top N] [-folded | -flamegraph FILE.svg] [ADDRESS...]",
		Short: "Show what the applied probes measured",
		Long: `Show prints each aggregation of the applied probes (or of the addresses
given): counters and sums as tables sorted by value, histograms as text
bars, keys decoded (function names, comm strings, signed values). A probe
that cannot be read is reported, and the others are still shown (exit 1).

  -json   the stable JSON form (README, "Show JSON")
  -top N  only the N keys of each aggregation with the largest values
          (histograms: the largest counts), and how many were left out

Stacks (by = [kstack], by = [ustack]) print symbolized, innermost frame
first. An aggregation keyed by stacks also prints as:

  -folded                the folded stacks of flamegraph.pl ("a;b;c 12" a line),
                         root first, kernel frames marked _[k]
  -flamegraph FILE.svg   an interactive SVG flame graph
  -aggregation NAME      which aggregation, when several are keyed by stacks
  -symbols DIR[:DIR]     where to look for the files of user stacks by build id,
                         besides the files running processes map, $PATH, the
                         library directories and /usr/lib/debug/.build-id`,
		RunE: func(cmd *cobra.Command, args []string) error {
			// One write at the end, not one per line: a workspace may
			// hold thousands of probes.
			out := bufio.NewWriter(cmd.OutOrStdout())
			defer out.Flush()
			cmd.SetOut(out)
			if err := requireBPF("show"); err != nil {
				return err
			}
			w, s, err := g.inspect()
			if err != nil {
				return err
			}
			defer w.Close()
			probes, err := selectProbes(s, args)
			if err != nil {
				return err
			}
			if top < 0 {
				return fmt.Errorf("-top takes a number of keys, 1 or more (0: all)")
			}
			w.Symbols.Dirs = filepath.SplitList(symbolDirs)
			if folded || flameFile != "" {
				return showStacks(cmd, w.Read(probes), aggName, folded, flameFile)
			}
			results := topResults(w.Read(probes), top)
			var tables []runtime.TableResult
			if len(args) == 0 {
				tables = w.ReadTables(s.Tables)
			}
			if asJSON {
				if err := writeResultsJSON(cmd.OutOrStdout(), results, tables); err != nil {
					return err
				}
			} else if len(results) == 0 {
				cmd.Println("No probes applied in this workspace.")
			} else {
				renderResults(cmd.OutOrStdout(), results)
				renderTables(cmd.OutOrStdout(), tables)
			}
			for _, r := range results {
				if r.Error != "" {
					fmt.Fprintf(cmd.ErrOrStderr(), "Error: %s cannot be read: %s\n", r.Address, r.Error)
				}
			}
			for _, r := range results {
				if r.Error != "" {
					return exitError{1}
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().IntVar(&top, "top", 0, "only the N keys with the largest values per aggregation (0: all)")
	cmd.Flags().BoolVar(&folded, "folded", false, "print the stacks of an aggregation keyed by stacks in the folded format")
	cmd.Flags().StringVar(&flameFile, "flamegraph", "", "write an SVG flame graph of an aggregation keyed by stacks to this file")
	cmd.Flags().StringVar(&aggName, "aggregation", "", "the aggregation -folded and -flamegraph draw")
	cmd.Flags().StringVar(&symbolDirs, "symbols", "", "directories (colon-separated) to find the files of user stacks in, by build id")
	return cmd
}

func writeResultsJSON(w io.Writer, results []runtime.ProbeResult, tables []runtime.TableResult) error {
	if results == nil {
		results = []runtime.ProbeResult{}
	}
	b, err := json.MarshalIndent(struct {
		Probes []runtime.ProbeResult `json:"probes"`
		Tables []runtime.TableResult `json:"tables,omitempty"`
	}{results, tables}, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}

func selectProbes(s *runtime.State, args []string) ([]*runtime.ProbeState, error) {
	if len(args) == 0 {
		return s.Probes, nil
	}
	addrs, err := parseAddresses(args)
	if err != nil {
		return nil, err
	}
	var out []*runtime.ProbeState
	for _, a := range addrs {
		p := s.Probe(a)
		if p == nil {
			return nil, errors.New(a.String() + " is not applied in this workspace")
		}
		out = append(out, p)
	}
	return out, nil
}

// renderResults draws results as text, in the manner of bpftrace.
func renderResults(w io.Writer, results []runtime.ProbeResult) {
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
			fmt.Fprintln(w, "  (events only: probectl run prints them as they arrive)")
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
			if hasStacks(ar) {
				stackEntries(w, ar)
				continue
			}
			if ar.Kind.IsHistogram() {
				for _, e := range ar.Entries {
					if len(e.Key) > 0 {
						fmt.Fprintf(w, "    [%s]\n", keyText(e.Key))
					}
					drawHistogram(w, e.Buckets)
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

// topResults keeps the first n entries of each aggregation (they are
// sorted, largest first) and counts the others; n 0 keeps all.
func topResults(results []runtime.ProbeResult, n int) []runtime.ProbeResult {
	if n <= 0 {
		return results
	}
	for i := range results {
		for j := range results[i].Aggregations {
			ar := &results[i].Aggregations[j]
			if len(ar.Entries) > n {
				ar.Omitted = len(ar.Entries) - n
				ar.Entries = ar.Entries[:n]
			}
		}
	}
	return results
}

func keyText(k runtime.OrderedKey) string {
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

func drawHistogram(w io.Writer, buckets []runtime.Bucket) {
	var most uint64
	for _, b := range buckets {
		most = max(most, b.Count)
	}
	const width = 52
	for _, b := range buckets {
		label := fmt.Sprintf("[%s, %s)", bound(b.Low), bound(b.High))
		if b.High == b.Low+1 {
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
