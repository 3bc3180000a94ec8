package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/probectl/probectl/internal/flamegraph"
	"github.com/probectl/probectl/internal/views"
	"github.com/probectl/probectl/runtime"
)

// Stacks in show: symbolized frames one per line (innermost first, as
// bpftrace prints them), the folded format of flamegraph.pl (show -folded),
// and an SVG flame graph (show -flamegraph FILE), both drawn by
// internal/flamegraph.

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
			if views.HasStacks(*ar) || name != "" {
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
