package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// printDiags writes each diagnostic as "FILE:LINE:COL: error: SUMMARY",
// the source line with the range underlined, and the detail.
func printDiags(w io.Writer, diags hcl.Diagnostics, sources map[string][]byte) {
	for _, d := range diags {
		sev := "error"
		if d.Severity == hcl.DiagWarning {
			sev = "warning"
		}
		if d.Subject == nil {
			fmt.Fprintf(w, "%s: %s\n", sev, d.Summary)
		} else {
			fmt.Fprintf(w, "%s:%d:%d: %s: %s\n", d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column, sev, d.Summary)
			if src, ok := sources[d.Subject.Filename]; ok {
				printSnippet(w, src, *d.Subject)
			}
		}
		if d.Detail != "" {
			for _, line := range strings.Split(d.Detail, "\n") {
				fmt.Fprintf(w, "  %s\n", line)
			}
		}
	}
}

func printSnippet(w io.Writer, src []byte, rng hcl.Range) {
	lines := strings.Split(string(src), "\n")
	n := rng.Start.Line
	if n < 1 || n > len(lines) {
		return
	}
	line := strings.ReplaceAll(lines[n-1], "\t", " ")
	width := 1
	if rng.End.Line == rng.Start.Line && rng.End.Column > rng.Start.Column {
		width = rng.End.Column - rng.Start.Column
	}
	// A very long line is cut around the range: the snippet stays readable
	// whatever the spec holds.
	col := rng.Start.Column
	const most = 120
	if len(line) > most {
		from := max(0, min(col-1-most/2, len(line)-most))
		line = "..." + line[from:min(from+most, len(line))] + "..."
		col = col - from + 3
		width = min(width, most)
	}
	line = printable(line)
	num := fmt.Sprint(n)
	fmt.Fprintf(w, "  %s | %s\n", num, line)
	fmt.Fprintf(w, "  %s | %s%s\n", strings.Repeat(" ", len(num)), strings.Repeat(" ", max(col-1, 0)), strings.Repeat("^", width))
}
