package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/probectl/probectl/internal/bttext"
	"github.com/probectl/probectl/runtime"
	"github.com/probectl/probectl/spec/bpftrace"
)

// record prints an event record: a record of an imported bpftrace
// program's printf as bpftrace prints its line (every one, as bpftrace
// does), any other through the events printer. With -json every record
// goes to the printer.
func (r *probeRun) record(rec *runtime.EventRecord) error {
	if r.exited.Load() {
		return nil // after a probe's exit(), as bpftrace stops printing
	}
	lines, ok := r.o.prints[[2]string{rec.Probe, rec.Name}]
	if !ok || r.o.asJSON || rec.Type != runtime.RecordEvent {
		return r.pr.Record(rec)
	}
	r.pr.Flush()
	text := printfLines(lines, rec, r.cmd.ErrOrStderr())
	if r.o.bto != nil && r.o.bto.json {
		var b strings.Builder
		for i, t := range text {
			switch {
			case lines[i].Exit:
			case lines[i].Cat == "":
				b.WriteString(bttext.PrintfJSON(t))
			case t != "":
				b.WriteString(bttext.CatJSON(t))
			}
		}
		text = []string{b.String()}
	}
	_, err := fmt.Fprint(r.cmd.OutOrStdout(), strings.Join(text, ""))
	if slices.ContainsFunc(lines, func(l bpftrace.Print) bool { return l.Exit }) {
		r.exited.Store(true)
		r.exit()
	}
	return err
}

// printfLines is what the printfs of a record print: each conversion takes
// the record's field at its index; the time (-1) is the record's
// CLOCK_MONOTONIC nanoseconds, bpftrace's nsecs; a time() line is the
// record's wall time as strftime(l.Time) prints it; a cat() line is the
// file now (a file that cannot be read prints nothing and says why on
// errs, as bpftrace does). One text per printf.
func printfLines(lines []bpftrace.Print, rec *runtime.EventRecord, errs io.Writer) []string {
	var out []string
	for _, l := range lines {
		if l.Exit {
			out = append(out, "")
			continue
		}
		if l.Cat != "" {
			text, err := bttext.Cat(l.Cat)
			if err != nil {
				fmt.Fprintf(errs, "probectl: %v\n", err)
			}
			out = append(out, text)
			continue
		}
		if l.Format == "" && l.Time != "" {
			out = append(out, bttext.Strftime(l.Time, rec.Wall))
			continue
		}
		if l.When > 0 && (l.When > len(rec.Fields) || fmt.Sprint(rec.Fields[l.When-1].Value) == "0") {
			continue
		}
		args := make([]any, len(l.Fields))
		for i, f := range l.Fields {
			switch {
			case f < 0:
				args[i] = bttext.Strftime(l.Time, rec.Wall)
			case f < len(rec.Fields):
				args[i] = rec.Fields[f].Value
			default:
				args[i] = ""
			}
		}
		for i, p := range l.Prefixes {
			args[i] = p + fmt.Sprint(args[i])
		}
		for _, i := range l.Dirs {
			if args[i] == "/" {
				args[i] = ""
			}
		}
		for _, i := range l.Symbols {
			if s, ok := args[i].(string); ok {
				args[i] = symbolName(s)
			}
		}
		out = append(out, bttext.Printf(l.Format, args...))
	}
	return out
}
