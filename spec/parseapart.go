package spec

import (
	"bytes"
	goruntime "runtime"
	"sync"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// parseApartMin is the smallest file worth parsing in pieces.
const parseApartMin = 32 << 10

// parseApart parses a large plain file (one plainWithinLimits passed) as
// a few runs of whole top-level items at once, one per CPU, each from its
// own position in the file, and joins their blocks: lexing and parsing
// are most of planning a large spec, and a file is a sequence of
// independent items. It returns nil — parse the file whole — for a small
// file, or when any run has diagnostics or top-level attributes (so that
// errors, and attributes redefined across runs, are reported exactly as
// HCL reports them for the whole file).
func parseApart(name string, src []byte, cuts []int) *hcl.File {
	runs := min(goruntime.GOMAXPROCS(0), 8)
	if len(src) < parseApartMin || runs < 2 || len(cuts) < runs {
		return nil
	}
	// Cut at the item boundaries nearest to equal shares of the bytes.
	starts := []int{0}
	for k := 1; k < runs; k++ {
		want := len(src) * k / runs
		for _, c := range cuts {
			if c >= want && c > starts[len(starts)-1] {
				starts = append(starts, c)
				break
			}
		}
	}
	files := make([]*hcl.File, len(starts))
	bad := make([]bool, len(starts))
	var wg sync.WaitGroup
	for k, start := range starts {
		end := len(src)
		if k+1 < len(starts) {
			end = starts[k+1]
		}
		pos := hcl.Pos{Line: 1 + bytes.Count(src[:start], []byte{'\n'}), Column: 1, Byte: start}
		wg.Go(func() {
			f, diags := hclsyntax.ParseConfig(src[start:end:end], name, pos)
			body, ok := f.Body.(*hclsyntax.Body)
			files[k], bad[k] = f, diags.HasErrors() || len(diags) > 0 || !ok || len(body.Attributes) > 0
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
