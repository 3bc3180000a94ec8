package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/internal/flamegraph"
	"github.com/probectl/probectl/internal/views"
	"github.com/probectl/probectl/runtime"
	"github.com/spf13/cobra"
)

// showOptions are show's flags.
type showOptions struct {
	asJSON, folded                            bool
	top                                       int
	flameFile, pprofFile, aggName, symbolDirs string
}

// stacks are where show -folded, -flamegraph and -pprof write.
func (o *showOptions) stacks(probes []*runtime.ProbeState) stackOutputs {
	return stackOutputs{aggName: o.aggName, folded: o.folded, flameFile: o.flameFile, pprofFile: o.pprofFile,
		samplers: samplersOf(probes)}
}

// check refuses a -top below 0, before anything is read.
func (o *showOptions) check() error {
	if o.top < 0 {
		return fmt.Errorf("-top takes a number of keys, 1 or more (0: all)")
	}
	return nil
}

func newShowCmd(g *globals) *cobra.Command {
	var o showOptions
	cmd := &cobra.Command{
		Use:   "show [-json] [-top N] [-folded | -flamegraph FILE.svg | -pprof FILE.pb.gz] [ADDRESS...]",
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
  -pprof FILE.pb.gz      a pprof profile (gzipped profile.proto) for go tool
                         pprof, Pyroscope, Parca, Grafana (README, "pprof")
  -aggregation NAME      which aggregation, when several are keyed by stacks
  -symbols DIR[:DIR]     where to look for the files of user stacks by build id,
                         besides the files running processes map, $PATH, the
                         library directories and /usr/lib/debug/.build-id`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.check(); err != nil {
				return err
			}
			return runShow(cmd, g, o, args)
		},
	}
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print JSON")
	cmd.Flags().IntVar(&o.top, "top", 0, "only the N keys with the largest values per aggregation (0: all)")
	cmd.Flags().BoolVar(&o.folded, "folded", false, "print the stacks of an aggregation keyed by stacks in the folded format")
	cmd.Flags().StringVar(&o.flameFile, "flamegraph", "", "write an SVG flame graph of an aggregation keyed by stacks to this file")
	cmd.Flags().StringVar(&o.pprofFile, "pprof", "", "write a pprof profile (gzipped profile.proto) of an aggregation keyed by stacks to this file")
	cmd.Flags().StringVar(&o.aggName, "aggregation", "", "the aggregation -folded, -flamegraph and -pprof write")
	cmd.Flags().StringVar(&o.symbolDirs, "symbols", "", "directories (colon-separated) to find the files of user stacks in, by build id")
	return cmd
}

// runShow reads the applied probes (or those args name) and shows them:
// their results, or the stacks of one aggregation.
func runShow(cmd *cobra.Command, g *globals, o showOptions, args []string) error {
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
	w.Symbols.Dirs = filepath.SplitList(o.symbolDirs)
	if so := o.stacks(probes); so.any() {
		var results []runtime.ProbeResult
		progress(cmd.ErrOrStderr(), "Reading and symbolizing the stacks", func() { results = w.Read(probes) })
		return showStacks(cmd, results, so)
	}
	results := topResults(w.Read(probes), o.top)
	var tables []runtime.TableResult
	if len(args) == 0 {
		tables = w.ReadTables(s.Tables)
	}
	if err := views.NewResults(o.asJSON, cmd.OutOrStdout()).Results(results, tables); err != nil {
		return err
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

// Stacks in show: symbolized frames one per line (innermost first, as
// bpftrace prints them; internal/views), the folded format of flamegraph.pl
// (show -folded), and an SVG flame graph (show -flamegraph FILE), both drawn
// by internal/flamegraph.

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

// stackOutputs are where show and run write an aggregation keyed by
// stacks: folded on stdout, a flame graph, a pprof profile.
type stackOutputs struct {
	aggName              string
	folded               bool
	flameFile, pprofFile string
	// samplers are the profile probes' samplers by address (a profile's
	// period); since is when what is read began (its duration).
	samplers map[string]*bpf.Sampler
	since    time.Time
}

func (o stackOutputs) any() bool { return o.folded || o.flameFile != "" || o.pprofFile != "" }

// samplersOf are the samplers of the profile probes among probes.
func samplersOf(probes []*runtime.ProbeState) map[string]*bpf.Sampler {
	m := map[string]*bpf.Sampler{}
	for _, p := range probes {
		if p.Sampler != nil {
			m[p.Address.String()] = p.Sampler
		}
	}
	return m
}

// showStacks is show -folded, -flamegraph and -pprof.
func showStacks(cmd interface {
	OutOrStdout() io.Writer
	ErrOrStderr() io.Writer
}, results []runtime.ProbeResult, o stackOutputs) error {
	for _, r := range results {
		if r.Error != "" {
			return fmt.Errorf("%s cannot be read: %s", r.Address, r.Error)
		}
	}
	ar, addr, err := stackAggregation(results, o.aggName)
	if err != nil {
		return err
	}
	if o.pprofFile != "" {
		po := flamegraph.ProfileOptions{Sampler: o.samplers[addr], Time: time.Now()}
		if !o.since.IsZero() {
			po.Duration = time.Since(o.since)
		}
		if err := flamegraph.WriteProfileFile(o.pprofFile, ar, po); err != nil {
			return err
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "Wrote %s: %d stacks (go tool pprof -top %s).\n", o.pprofFile, len(ar.Entries), o.pprofFile)
	}
	if !o.folded && o.flameFile == "" {
		return nil
	}
	stacks := flamegraph.Fold(ar)
	if o.folded {
		if err := flamegraph.WriteFolded(cmd.OutOrStdout(), stacks); err != nil {
			return err
		}
	}
	if o.flameFile != "" {
		title := fmt.Sprintf("%s %s %q", addr, ar.Kind, ar.Name)
		if err := flamegraph.WriteFile(o.flameFile, title, stacks); err != nil {
			return err
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "Wrote %s: %d stacks.\n", o.flameFile, len(stacks))
	}
	return nil
}
