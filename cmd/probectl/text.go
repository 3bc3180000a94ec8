package main

import (
	"fmt"
	"io"

	"github.com/hashicorp/hcl/v2"
	"github.com/probectl/probectl/internal/termtext"
)

// printable is termtext.Printable: s as it may go to a terminal.
func printable(s string) string { return termtext.Printable(s) }

// printDiags is termtext.Diagnostics: diagnostics at their spec ranges.
func printDiags(w io.Writer, diags hcl.Diagnostics, sources map[string][]byte) {
	termtext.Diagnostics(w, diags, sources)
}

// value writes a decoded key or field value for a terminal. Not only
// strings carry other users' text: a stack's frames are named by the ELF
// files a process maps.
func value(v any) string {
	if s, ok := v.(string); ok {
		return printable(s)
	}
	return printable(fmt.Sprint(v))
}
