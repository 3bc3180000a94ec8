package termtext

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
)

// Diagnostics writes each diagnostic as "FILE:LINE:COL: error: SUMMARY",
// the source line with the range underlined (when sources holds its
// file), and the detail.
func Diagnostics(w io.Writer, diags hcl.Diagnostics, sources map[string][]byte) {
	for _, d := range diags {
		sev := Paint(w, Red, "error")
		if d.Severity == hcl.DiagWarning {
			sev = Paint(w, Yellow, "warning")
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

// DiagnosticsText is Diagnostics as one string without the final
// newline, for a log line.
func DiagnosticsText(diags hcl.Diagnostics, sources map[string][]byte) string {
	var b bytes.Buffer
	Diagnostics(&b, diags, sources)
	return strings.TrimRight(b.String(), "\n")
}

func printSnippet(w io.Writer, src []byte, rng hcl.Range) {
	n := rng.Start.Line
	lineStart := 0
	for l := 1; l < n; l++ {
		i := bytes.IndexByte(src[lineStart:], '\n')
		if i < 0 {
			return
		}
		lineStart += i + 1
	}
	lineEnd := len(src)
	if i := bytes.IndexByte(src[lineStart:], '\n'); i >= 0 {
		lineEnd = lineStart + i
	}
	line := strings.ReplaceAll(string(src[lineStart:lineEnd]), "\t", " ")
	from := min(max(rng.Start.Byte-lineStart, 0), len(line))
	to := from + 1
	if rng.End.Line == rng.Start.Line {
		to = rng.End.Byte - lineStart
	}
	to = min(max(to, from+1), len(line))
	// A very long line is cut around the range: the snippet stays readable
	// whatever the spec holds.
	const most = 120
	head, tail := "", ""
	if len(line) > most {
		cut := max(0, min(from-most/2, len(line)-most))
		if cut > 0 {
			head = "..."
		}
		if cut+most < len(line) {
			tail = "..."
		}
		line = line[cut:min(cut+most, len(line))]
		from, to = min(from-cut, len(line)), min(to-cut, len(line))
	}
	// The line as a terminal may show it; the caret under the same text.
	shown, col, width := head+line+tail, len(head)+utf8.RuneCountInString(line[:from]), max(utf8.RuneCountInString(line[from:to]), 1)
	if Printable(line) != line {
		body := func(s string) string { q := strconv.Quote(s); return q[1 : len(q)-1] }
		shown = head + strconv.Quote(line) + tail
		col, width = len(head)+1+len(body(line[:from])), max(len(body(line[from:to])), 1)
	}
	num := fmt.Sprint(n)
	fmt.Fprintf(w, "  %s | %s\n", num, shown)
	fmt.Fprintf(w, "  %s | %s%s\n", strings.Repeat(" ", len(num)), strings.Repeat(" ", col), strings.Repeat("^", width))
}
