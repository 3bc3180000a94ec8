package spec

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// People who know bpftrace write its names and its syntax: these say what
// probectl calls the same thing.

// bpftraceNames are bpftrace's built-in values that probectl has no value
// for, with what to write instead; bpftrace's spellings of the values
// probectl has are in the table of built-in values (Builtin.Bpftrace).
var bpftraceNames = map[string]string{
	"elapsed":  "ktime, the time since boot: there is no start of the run in a spec that outlives it; for a duration subtract a time you saved (ktime - entry.start)",
	"username": "uid: the kernel knows the numeric user ID only",
	"cpid":     "pid with a when filter: probectl starts no child process",
	"sarg0":    "arg0 to arg5: arguments on the stack cannot be read",
	"rand":     "no such value: there is no random number",
}

// bpftraceFunctions are bpftrace's functions that are blocks or other
// functions in probectl.
var bpftraceFunctions = map[string]string{
	"count":    `an action block here: count "calls" { by = [comm] }`,
	"sum":      `an action block here: sum "bytes" { value = ret }`,
	"min":      `an action block here: min "least" { value = ret }`,
	"max":      `an action block here: max "most" { value = ret }`,
	"avg":      `not an aggregation here: keep a sum "total" { value = x } and a count "n" {}, and divide`,
	"stats":    `not an aggregation here: keep count, sum, min and max blocks of the value`,
	"hist":     `an action block here: hist "latency" { value = ktime - entry.start }`,
	"lhist":    `an action block here: lhist "sizes" { value = arg2, min = 0, max = 4096, step = 256 }`,
	"printf":   `an event block here: event "opens" { fields = { pid = pid, file = str(args.filename) } }, which probectl run prints`,
	"print":    `show's: probectl show prints every aggregation`,
	"clear":    "not needed: probectl run -interval prints what each interval added",
	"delete":   `a delete "TABLE" { key = [...] } block here`,
	"ntop":     "inet(addr[, port]) or inet6(addr[, port]) here, in a by key or an event field",
	"strerror": "errno_name(x) here, in a by key or an event field",
}

// bpftraceHint says what probectl calls bpftrace's name, or "".
func bpftraceHint(name string) string {
	what, ok := bpftraceNames[name]
	if !ok {
		what, ok = bpftraceSpellings[name]
	}
	if ok {
		return fmt.Sprintf(" %q is bpftrace's name; here it is %s.", name, what)
	}
	return ""
}

// bpftraceFunction says what probectl calls bpftrace's function, or "".
func bpftraceFunction(name string) string {
	if what, ok := bpftraceFunctions[name]; ok {
		return fmt.Sprintf(" bpftrace's %s() is %s.", name, what)
	}
	return ""
}

// checkSyntax finds, on the tokens, what bpftrace allows and HCL reads
// as something else or not at all (after checkNumbers, which refuses 0x40):
// -> (HCL names may hold a hyphen: args- > flags), @maps
// and $variables (characters HCL does not use). Each gets an error that
// says what to write; the parser's own messages would not.
func checkSyntax(tokens hclsyntax.Tokens) hcl.Diagnostics {
	var diags hcl.Diagnostics
	add := func(rng hcl.Range, summary, detail string, args ...any) {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError, Summary: summary, Detail: fmt.Sprintf(detail, args...), Subject: rng.Ptr(),
		})
	}
	for i := 0; i < len(tokens); i++ {
		tok := tokens[i]
		switch {
		case isArrow(tokens, i):
			rng, base, field := arrowField(tokens, i)
			add(rng, "Use . for fields",
				"bpftrace's -> is . in probectl, through pointers as well: write %s.%s.", base, field)
			i++
		case tok.Type == hclsyntax.TokenInvalid && string(tok.Bytes) == "@":
			add(tok.Range, "bpftrace map",
				"probectl has no @maps: an aggregation is a block in on_entry or on_exit, such as count \"opens\" { by = [comm] } for @opens[comm] = count(), and state shared between probes is a table (table \"start\" {}, store and read as start[tid]).")
			i = skipLine(tokens, i)
		case tok.Type == hclsyntax.TokenInvalid && string(tok.Bytes) == "$":
			add(tok.Range, "bpftrace variable",
				"probectl has no $variables: on_entry keeps values for on_exit with save = { start = ktime } (read as entry.start), and a value is written where it is used.")
			i = skipLine(tokens, i)
		}
	}
	return diags
}

// isArrow says tokens i and i+1 are bpftrace's -> as HCL reads it: a name
// ending in '-' right before a '>'.
func isArrow(tokens hclsyntax.Tokens, i int) bool {
	if i+1 >= len(tokens) {
		return false
	}
	tok, next := tokens[i], tokens[i+1]
	return tok.Type == hclsyntax.TokenIdent && len(tok.Bytes) > 1 && tok.Bytes[len(tok.Bytes)-1] == '-' &&
		next.Type == hclsyntax.TokenGreaterThan && tok.Range.End.Byte == next.Range.Start.Byte
}

// arrowField is the range of the -> at token i and the field after it, the
// name before it, and the field's name (FIELD when none follows).
func arrowField(tokens hclsyntax.Tokens, i int) (hcl.Range, string, string) {
	tok := tokens[i]
	base := strings.TrimSuffix(string(tok.Bytes), "-")
	if i+2 < len(tokens) && tokens[i+2].Type == hclsyntax.TokenIdent {
		return hcl.RangeBetween(tok.Range, tokens[i+2].Range), base, string(tokens[i+2].Bytes)
	}
	return hcl.RangeBetween(tok.Range, tokens[i+1].Range), base, "FIELD"
}

// skipLine returns the index of the last token of tok i's line, so that
// one mistake is reported once.
func skipLine(tokens hclsyntax.Tokens, i int) int {
	for i+1 < len(tokens) && tokens[i+1].Type != hclsyntax.TokenNewline && tokens[i+1].Type != hclsyntax.TokenEOF {
		i++
	}
	return i
}
