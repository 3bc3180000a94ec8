package flamegraph

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/bpf/symbols"
	"github.com/probectl/probectl/runtime"
)

// flameFrame names a frame in folded stacks and flame graphs: frameName,
// kernel frames marked "_[k]" as stackcollapse-perf.pl --kernel marks
// them.
func flameFrame(f symbols.Frame, user bool) string {
	name := frameName(f, user)
	if !user {
		name += "_[k]"
	}
	return foldedSafe(name)
}

// frameName names a frame in folded stacks, flame graphs and profiles:
// the function without its offset (so that samples in one function
// merge), the file for an unknown user function (and why, when a bound
// said so); a frame's note as show prints it ("func [untrusted: /tmp/x
// owned by uid 1000]", "[process 1234 exited]").
func frameName(f symbols.Frame, user bool) string {
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
	return name
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

// Fold turns an aggregation's entries into stacks, root first: each
// key field in by order, a stack as its frames from the outermost caller,
// any other field as one frame (comm, pid, ...). Equal stacks merge.
func Fold(ar *runtime.AggregationResult) []Stack {
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
	out := make([]Stack, 0, len(order))
	for _, k := range order {
		out = append(out, Stack{Frames: strings.Split(k, ";"), Value: sums[k]})
	}
	return out
}

// WriteFolded writes stacks in the folded format: "a;b;c 12" a line.
func WriteFolded(w io.Writer, stacks []Stack) error {
	for _, s := range stacks {
		if _, err := fmt.Fprintf(w, "%s %d\n", strings.Join(s.Frames, ";"), s.Value); err != nil {
			return err
		}
	}
	return nil
}

// WriteFile writes the flame graph of stacks to path: a new file
// renamed over it (show runs as root; a symlink another user left at path
// is replaced, never written through).
func WriteFile(path, title string, stacks []Stack) error {
	var b bytes.Buffer
	if err := Write(&b, title, stacks); err != nil {
		return err
	}
	return bpf.WriteNew(path, b.Bytes(), 0o644)
}
