package main

import (
	"fmt"
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
	lines, ok := r.o.prints[[2]string{rec.Probe, rec.Name}]
	if !ok || r.o.asJSON || rec.Type != runtime.RecordEvent {
		return r.pr.Record(rec)
	}
	r.pr.Flush()
	_, err := fmt.Fprint(r.cmd.OutOrStdout(), printfLines(lines, rec))
	return err
}

// header prints what an imported program's BEGIN prints of literals (its
// header), as bpftrace does once every probe is attached; not with -json.
func (r *probeRun) header() error {
	if r.o.asJSON {
		return nil
	}
	for _, p := range r.o.begin {
		args := make([]any, len(p.Args))
		for i, a := range p.Args {
			args[i] = a
		}
		if _, err := fmt.Fprint(r.cmd.OutOrStdout(), bttext.Printf(p.Format, args...)); err != nil {
			return err
		}
	}
	return nil
}

// printfLines is what the printfs of a record print: each conversion takes
// the record's field at its index; the time (-1) is the record's wall
// time as strftime(l.Time) prints it (a time() line: that alone).
func printfLines(lines []bpftrace.Print, rec *runtime.EventRecord) string {
	var b strings.Builder
	for _, l := range lines {
		if l.Format == "" && l.Time != "" {
			b.WriteString(bttext.Strftime(l.Time, rec.Wall))
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
		for _, i := range l.Symbols {
			if s, ok := args[i].(string); ok {
				args[i] = bareSymbol(s)
			}
		}
		b.WriteString(bttext.Printf(l.Format, args...))
	}
	return b.String()
}

// bareSymbol is a frame as bpftrace's usym and ksym print it: the
// function's name without its offset and module (func+0x12 [libc.so.6]
// is func), or the address when no name was found (0x7f12 [process 1234
// exited] is 0x7f12).
func bareSymbol(frame string) string {
	frame, _, _ = strings.Cut(frame, " ")
	if i := strings.Index(frame, "+0x"); i > 0 {
		frame = frame[:i]
	}
	return frame
}
