package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/internal/flamegraph"
	"github.com/probectl/probectl/runtime"
)

// Stacks in show: symbolized frames one per line (innermost first, as
// bpftrace prints them), the folded format of flamegraph.pl (show -folded),
// and an SVG flame graph (show -flamegraph FILE), both drawn by
// internal/flamegraph.

// hasStacks reports whether an aggregation is keyed by a stack.
func hasStacks(ar runtime.AggregationResult) bool {
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
// block per key, its stacks one frame a line, then the value.
func stackEntries(w io.Writer, ar runtime.AggregationResult) {
	for i, e := range ar.Entries {
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
			drawHistogram(w, e.Buckets)
			continue
		}
		fmt.Fprintf(w, "    %s: %d\n", ar.Kind, *e.Value)
	}
}

// stackAggregation picks the one aggregation keyed by stacks that -folded
// and -flamegraph draw: the one named, or the only one there is.
func stackAggregation(results []runtime.ProbeResult, name string) (*runtime.AggregationResult, string, error) {
	type found struct {
		addr string
		ar   *runtime.AggregationResult
	}
	var all []found
	for i := range results {
		for j := range results[i].Aggregations {
			ar := &results[i].Aggregations[j]
			if name != "" && ar.Name != name {
				continue
			}
			if hasStacks(*ar) || name != "" {
				all = append(all, found{results[i].Address, ar})
			}
		}
	}
	switch {
	case len(all) == 1:
		if all[0].ar.Kind.IsHistogram() {
			return nil, "", fmt.Errorf("%s %q is a histogram: a flame graph weighs stacks by a count or a sum", all[0].addr, name)
		}
		return all[0].ar, all[0].addr, nil
	case len(all) == 0 && name != "":
		return nil, "", fmt.Errorf("no aggregation %q in the probes shown", name)
	case len(all) == 0:
		return nil, "", fmt.Errorf("no aggregation of the probes shown is keyed by a stack (by = [kstack], by = [ustack])")
	}
	var names []string
	for _, f := range all {
		names = append(names, fmt.Sprintf("%s %q", f.addr, f.ar.Name))
	}
	return nil, "", fmt.Errorf("several aggregations are keyed by stacks (%s): name one with -aggregation NAME, or an address", strings.Join(names, ", "))
}

// showStacks is show -folded and show -flamegraph.
func showStacks(cmd interface {
	OutOrStdout() io.Writer
	ErrOrStderr() io.Writer
}, results []runtime.ProbeResult, aggName string, folded bool, flameFile string) error {
	for _, r := range results {
		if r.Error != "" {
			return fmt.Errorf("%s cannot be read: %s", r.Address, r.Error)
		}
	}
	ar, addr, err := stackAggregation(results, aggName)
	if err != nil {
		return err
	}
	stacks := flamegraph.Fold(ar)
	if folded {
		if err := flamegraph.WriteFolded(cmd.OutOrStdout(), stacks); err != nil {
			return err
		}
	}
	if flameFile != "" {
		title := fmt.Sprintf("%s %s %q", addr, ar.Kind, ar.Name)
		if err := flamegraph.WriteFile(flameFile, title, stacks); err != nil {
			return err
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "Wrote %s: %d stacks.\n", flameFile, len(stacks))
	}
	return nil
}

// samplerText says what a profile probe samples.
func samplerText(s *bpf.Sampler) string {
	if s.PeriodNS > 0 {
		return fmt.Sprintf("%s every %d ns on every CPU", s.Event, s.PeriodNS)
	}
	return fmt.Sprintf("%s at %d Hz on every CPU", s.Event, s.Frequency)
}
