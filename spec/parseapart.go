package spec

import (
	"bytes"
	goruntime "runtime"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// parseApartMin is the smallest file worth parsing in pieces, and
// parseApartRun the size of a piece.
const (
	parseApartMin = 32 << 10
	parseApartRun = 8 << 10
)

// parseApart parses a large plain file (one plainWithinLimits passed) as
// runs of whole top-level items, on every CPU, each from its own position
// in the file, and joins their blocks: lexing and parsing are most of
// planning a large spec, and a file is a sequence of independent items. It returns nil — parse the file whole — for a small
// file, or when any run has diagnostics or top-level attributes (so that
// errors, and attributes redefined across runs, are reported exactly as
// HCL reports them for the whole file).
func parseApart(name string, src []byte, cuts []int) *hcl.File {
	workers := min(goruntime.GOMAXPROCS(0), 8)
	if len(src) < parseApartMin || len(cuts) < 2 {
		return nil
	}
	// Runs of whole items of about parseApartRun bytes: HCL's lexer grows
	// one token slice per parse, so small runs allocate far less than
	// the whole file (and stay in cache), and the CPUs share them.
	starts := runStarts(cuts)
	files := make([]*hcl.File, len(starts))
	bad := make([]bool, len(starts))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(workers, len(starts)) {
		wg.Go(func() {
			for k := int(next.Add(1) - 1); k < len(starts); k = int(next.Add(1) - 1) {
				files[k], bad[k] = parseRun(name, src, starts, k)
			}
		})
	}
	wg.Wait()
	var blocks hclsyntax.Blocks
	for k, f := range files {
		if bad[k] {
			return nil
		}
		blocks = append(blocks, f.Body.(*hclsyntax.Body).Blocks...)
	}
	last := files[len(files)-1].Body.(*hclsyntax.Body)
	return &hcl.File{
		Bytes: src,
		Body: &hclsyntax.Body{
			Attributes: hclsyntax.Attributes{},
			Blocks:     blocks,
			SrcRange:   hcl.Range{Filename: name, Start: hcl.InitialPos, End: last.SrcRange.End},
			EndRange:   last.EndRange,
		},
	}
}

// runStarts are where the runs start: at 0, then at each cut at least
// parseApartRun bytes after the last start.
func runStarts(cuts []int) []int {
	starts := []int{0}
	for _, c := range cuts {
		if c-starts[len(starts)-1] >= parseApartRun {
			starts = append(starts, c)
		}
	}
	return starts
}

// parseRun parses run k of src, from its start to the next one's, at its
// position in the file; bad when it has diagnostics or top-level
// attributes.
func parseRun(name string, src []byte, starts []int, k int) (f *hcl.File, bad bool) {
	start, end := starts[k], len(src)
	if k+1 < len(starts) {
		end = starts[k+1]
	}
	pos := hcl.Pos{Line: 1 + bytes.Count(src[:start], []byte{'\n'}), Column: 1, Byte: start}
	f, diags := hclsyntax.ParseConfig(src[start:end:end], name, pos)
	body, ok := f.Body.(*hclsyntax.Body)
	return f, len(diags) > 0 || !ok || len(body.Attributes) > 0
}
