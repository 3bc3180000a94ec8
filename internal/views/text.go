package views

import (
	"fmt"
	"io"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/internal/termtext"
)

// printable is termtext.Printable: s as it may go to a terminal.
func printable(s string) string { return termtext.Printable(s) }

// value writes a decoded key or field value for a terminal. Not only
// strings carry other users' text: a stack's frames are named by the ELF
// files a process maps.
func value(v any) string {
	if s, ok := v.(string); ok {
		return printable(s)
	}
	return printable(fmt.Sprint(v))
}

// writeJSON writes v as indented JSON and a newline.
func writeJSON(w io.Writer, v any) error {
	b, err := bpf.JSONIndent(v, "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}

// Plural is "1 word" or "n words".
func Plural(n int, word string) string { return plural(n, word) }

// samplerText says what a profile probe samples.
func samplerText(s *bpf.Sampler) string {
	if s.OneCPU {
		return fmt.Sprintf("%s %s on one CPU", s.Event, s.Rate())
	}
	return fmt.Sprintf("%s %s on every CPU", s.Event, s.Rate())
}
