package main

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/runtime"
)

// Stacks in show: symbolized frames one per line (innermost first, as
// bpftrace prints them), the folded format of flamegraph.pl (show -folded),
// and an SVG flame graph (show -flamegraph FILE).

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

// flameFrame names a frame in folded stacks and flame graphs: the function
// without its offset (so that samples in one function merge), kernel
// frames marked "_[k]" as stackcollapse-perf.pl --kernel marks them, the
// file for an unknown user function (and why, when a bound said so); a
// frame's note as show prints it ("func [untrusted: /tmp/x owned by uid
// 1000]", "[process 1234 exited]").
func flameFrame(f bpf.Frame, user bool) string {
	name := f.Symbol
	switch {
	case f.Note != "" && name != "":
		name += " [" + f.Note + "]"
	case f.Note != "":
		name = "[" + f.Note + "]"
	case name == "" && user && f.Module != "":
		name = "[" + filepath.Base(f.Module) + "]"
		if f.Reason != "" {
			name += " (" + f.Reason + ")"
		}
	case name == "":
		name = "[unknown]"
	}
	if !user {
		name += "_[k]"
	}
	return foldedSafe(name)
}

// foldedSafe keeps a frame name on its line and in its frame: the folded
// format separates frames with ";" and ends a line with " COUNT".
func foldedSafe(s string) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case r == ';':
			return ':'
		case r < 0x20 || r == 0x7f:
			return '?'
		}
		return r
	}, s)
	if s == "" {
		return "[empty]"
	}
	return s
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

// foldStacks turns an aggregation's entries into stacks, root first: each
// key field in by order, a stack as its frames from the outermost caller,
// any other field as one frame (comm, pid, ...). Equal stacks merge.
func foldStacks(ar *runtime.AggregationResult) []flameStack {
	sums := map[string]int64{}
	var order []string
	for _, e := range ar.Entries {
		var frames []string
		for _, f := range e.Key {
			s, ok := f.Value.(*runtime.Stack)
			if !ok {
				frames = append(frames, foldedSafe(fmt.Sprint(f.Value)))
				continue
			}
			if s.Err != "" && !strings.HasPrefix(s.Err, "no ") {
				frames = append(frames, "["+s.Err+"]")
			}
			for i := len(s.Frames) - 1; i >= 0; i-- {
				frames = append(frames, flameFrame(s.Frames[i], s.User))
			}
		}
		if len(frames) == 0 {
			frames = []string{"[empty]"}
		}
		k := strings.Join(frames, ";")
		if _, ok := sums[k]; !ok {
			order = append(order, k)
		}
		sums[k] += *e.Value
	}
	sort.Strings(order)
	out := make([]flameStack, 0, len(order))
	for _, k := range order {
		out = append(out, flameStack{Frames: strings.Split(k, ";"), Value: sums[k]})
	}
	return out
}

// writeFolded writes stacks in the folded format: "a;b;c 12" a line.
func writeFolded(w io.Writer, stacks []flameStack) error {
	for _, s := range stacks {
		if _, err := fmt.Fprintf(w, "%s %d\n", strings.Join(s.Frames, ";"), s.Value); err != nil {
			return err
		}
	}
	return nil
}

// writeFlameFile writes the flame graph of stacks to path: a new file
// renamed over it (show runs as root; a symlink another user left at path
// is replaced, never written through).
func writeFlameFile(path, title string, stacks []flameStack) error {
	var b bytes.Buffer
	if err := writeFlameGraph(&b, title, stacks); err != nil {
		return err
	}
	return bpf.WriteNew(path, b.Bytes(), 0o644)
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
	stacks := foldStacks(ar)
	if folded {
		if err := writeFolded(cmd.OutOrStdout(), stacks); err != nil {
			return err
		}
	}
	if flameFile != "" {
		title := fmt.Sprintf("%s %s %q", addr, ar.Kind, ar.Name)
		if err := writeFlameFile(flameFile, title, stacks); err != nil {
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
