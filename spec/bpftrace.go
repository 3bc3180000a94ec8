package spec

import (
	"bytes"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// People who know bpftrace write its names and its syntax: these say what
// probectl calls the same thing.

// bpftraceNames are bpftrace's built-in values that probectl has no value
// for, with what to write instead; bpftrace's spellings of the values
// probectl has are in the table of built-in values (Builtin.Bpftrace).
var bpftraceNames = map[string]string{
	"username": "uid: the kernel knows the numeric user ID only",
	"cpid":     "pid with a when filter: probectl starts no child process",
	"sarg0":    "arg0 to arg5: arguments on the stack cannot be read",
	"rand":     "no such value: there is no random number",
}

// bpftraceRoots are bpftrace's values with fields that probectl names
// otherwise: curtask->real_parent->pid is task.real_parent.pid.
var bpftraceRoots = map[string]string{"curtask": "task"}

// bpftracePath says what to write for bpftrace's root with fields (the
// names after it), or "".
func bpftracePath(root string, fields []string) string {
	if r := bpftraceRoots[root]; r != "" && len(fields) > 0 {
		return fmt.Sprintf(" Write %s.%s.", r, strings.Join(fields, "."))
	}
	return ""
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
			rng, chain, last := arrowChain(tokens, i)
			detail := "bpftrace's -> is . in probectl, through pointers as well: write %s."
			if root := bpftraceRoots[chain[0]]; root != "" {
				detail += fmt.Sprintf(" bpftrace's %s is %s here.", chain[0], root)
				chain[0] = root
			}
			add(rng, "Use . for fields", detail, strings.Join(chain, "."))
			i = last
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

// withHabitsRead is src read as if the bpftrace habits checkSyntax
// reports were not there, every byte in its place, so that the file's
// other mistakes are found at their ranges: each -> as the . it means
// (". "), and a statement of @maps or $variables that is a line of its own
// as blanks. ok is false when a habit cannot be read away (a statement
// sharing its line with other code or a brace).
func withHabitsRead(src []byte, tokens hclsyntax.Tokens) (out []byte, ok bool) {
	out = bytes.Clone(src)
	for i := 0; i < len(tokens); i++ {
		tok := tokens[i]
		switch {
		case isArrow(tokens, i):
			at := tok.Range.End.Byte - 1
			out[at], out[at+1] = '.', ' '
		case tok.Type == hclsyntax.TokenInvalid && (string(tok.Bytes) == "@" || string(tok.Bytes) == "$"):
			start := tok.Range.Start.Byte
			ls, le := lineBounds(src, start)
			if len(bytes.TrimSpace(src[ls:start])) > 0 || bytes.ContainsAny(src[start:le], "{}") {
				return nil, false
			}
			for j := start; j < le; j++ {
				if out[j] != '\r' {
					out[j] = ' '
				}
			}
			i = skipLine(tokens, i)
		}
	}
	return out, true
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

// arrowChain reads the -> at token i and those chained after it
// (curtask->real_parent->pid): their range, the names in the chain (FIELD
// when none follows the last ->), and the index of the chain's last token.
func arrowChain(tokens hclsyntax.Tokens, i int) (hcl.Range, []string, int) {
	first := tokens[i].Range
	chain := []string{strings.TrimSuffix(string(tokens[i].Bytes), "-")}
	for {
		next := i + 2
		if next >= len(tokens) || tokens[next].Type != hclsyntax.TokenIdent ||
			tokens[next].Range.Start.Byte != tokens[i+1].Range.End.Byte {
			return hcl.RangeBetween(first, tokens[i+1].Range), append(chain, "FIELD"), i + 1
		}
		if !isArrow(tokens, next) {
			return hcl.RangeBetween(first, tokens[next].Range), append(chain, string(tokens[next].Bytes)), next
		}
		chain = append(chain, strings.TrimSuffix(string(tokens[next].Bytes), "-"))
		i = next
	}
}

// skipLine returns the index of the last token of tok i's line, so that
// one mistake is reported once. A # comment's token holds its newline.
func skipLine(tokens hclsyntax.Tokens, i int) int {
	line := tokens[i].Range.Start.Line
	for i+1 < len(tokens) && tokens[i+1].Type != hclsyntax.TokenNewline && tokens[i+1].Type != hclsyntax.TokenEOF &&
		tokens[i+1].Range.Start.Line == line {
		i++
	}
	return i
}

// bpftraceOperators are bpftrace's bitwise operators, which HCL lacks,
// with the function that does the same here (Functions).
var bpftraceOperators = map[string]string{"&": "band", "|": "bor", "^": "bxor", "<<": "shl", ">>": "shr", "~": "bnot"}

// BpftraceOperator is the function that does what bpftrace's bitwise
// operator op does, or "".
func BpftraceOperator(op string) string { return bpftraceOperators[op] }

// bpftraceValues are the built-in values bpftrace spells as one word
// (Builtin.Bpftrace), by that word; a word two values share (probe: func
// or event) and the values of USDT probes alone are left out.
var bpftraceValues = func() map[string]string {
	m := map[string]string{}
	shared := map[string]bool{}
	for _, b := range builtinList {
		w := b.Bpftrace
		if w == "" || b.USDTOnly || strings.IndexFunc(w, func(r rune) bool { return !(r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r)) }) >= 0 {
			continue
		}
		if _, ok := m[w]; ok {
			shared[w] = true
		}
		m[w] = b.Name
	}
	for w := range shared {
		delete(m, w)
	}
	return m
}()

// BpftraceValue is the built-in value probectl writes for bpftrace's
// one-word value name (nsecs: ktime), or "".
func BpftraceValue(name string) string { return bpftraceValues[name] }

// explainParse rewrites HCL's parse errors where the source at their range
// is a bpftrace habit (bitwise operators, and/or/not, a function called as
// a statement, a block inside a one-line block): HCL's own message names
// its grammar, or suggests && for &. The parser's follow-on errors on the
// line of an explained one are dropped: they are the same mistake.
func explainParse(diags hcl.Diagnostics, src []byte) hcl.Diagnostics {
	var out hcl.Diagnostics
	explained := map[int]bool{}
	for _, d := range diags {
		if d.Subject == nil || d.Severity != hcl.DiagError || d.Subject.Start.Byte >= len(src) {
			out = append(out, d)
			continue
		}
		if explained[d.Subject.Start.Line] {
			continue
		}
		if e := explainHabit(d, src); e != nil {
			explained[d.Subject.Start.Line] = true
			d = e
		}
		out = append(out, d)
	}
	return out
}

// explainHabit is the diagnostic for the bpftrace habit at d's range, or
// nil when there is none.
func explainHabit(d *hcl.Diagnostic, src []byte) *hcl.Diagnostic {
	at := d.Subject.Start.Byte
	word := wordAt(src, at)
	habit := func(start, end int, summary, detail string, args ...any) *hcl.Diagnostic {
		return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: fmt.Sprintf(detail, args...),
			Subject: byteRange(d.Subject.Filename, src, start, end).Ptr()}
	}
	if op, start := operatorAt(src, at); op != "" {
		fn := bpftraceOperators[op]
		if op == "~" {
			return habit(start, start+len(op), "Bitwise operator",
				"HCL has no ~ operator: bpftrace's ~x is bnot(x) here. The bitwise functions are band, bor, bxor, shl, shr and bnot.")
		}
		example := ""
		if op == "&" {
			example = ", as in when = band(args.flags, 64) != 0"
		}
		return habit(start, start+len(op), "Bitwise operator",
			"HCL has no %s operator: bpftrace's a %s b is %s(a, b) here%s. The bitwise functions are band, bor, bxor, shl, shr and bnot.",
			op, op, fn, example)
	}
	switch {
	case word == "and" || word == "or":
		op := map[string]string{"and": "&&", "or": "||"}[word]
		return habit(at, at+len(word), "Use !, && and ||",
			"HCL writes and as &&, or as ||, and not as !, as bpftrace does: write %s for %s (when = pid > 1 %s pid < 100).", op, word, op)
	case word != "" && wordBefore(src, at) == "not":
		start := at - 1
		for src[start] == ' ' || src[start] == '\t' {
			start--
		}
		return habit(start-2, start+1, "Use !, && and ||",
			"HCL writes not as !, and as && and or as ||, as bpftrace does: write !%s.", word)
	case d.Summary == "Argument or block definition required" && word != "" && nextByte(src, at+len(word)) == '(':
		return habit(at, at+len(word), "Function call as a statement",
			"%s(...) is a statement; a handler holds when = ..., save = { ... } and action blocks (count, sum, hist, event, store, ...), each on its own line.%s",
			word, bpftraceFunction(word))
	case d.Summary == "Argument definition required" && word != "":
		ls, le := lineBounds(src, at)
		brace := bytes.LastIndexByte(src[ls:at], '{')
		if brace < 0 {
			return nil
		}
		outer := strings.TrimSpace(string(src[ls : ls+brace]))
		inner := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(string(src[at:le])), "}"))
		return habit(at, at+len(word), "Block on one line",
			"HCL allows a block on one line only when it holds a single argument (count \"n\" { by = [comm] }); a block inside a block goes on a line of its own:\n\n  %s {\n    %s\n  }", outer, inner)
	case d.Summary == "Invalid single-argument block definition":
		// probe "k" "p" { functions = [...]   with the block going on
		// below: HCL's message names neither the block nor the fix.
		ls, le := lineBounds(src, min(at, len(src)-1))
		brace := bytes.LastIndexByte(src[ls:le], '{')
		if brace < 0 {
			return nil
		}
		start := ls + brace + 1
		for start < le && (src[start] == ' ' || src[start] == '\t') {
			start++
		}
		end := le
		for end > start && (src[end-1] == ' ' || src[end-1] == '\t' || src[end-1] == '\r') {
			end--
		}
		if end <= start {
			return nil
		}
		outer := strings.TrimSpace(string(src[ls : ls+brace]))
		return habit(start, end, "Block on one line",
			"HCL allows an argument on the line of its block's { only when the block closes on that line (count \"n\" { by = [comm] }); a block that goes on has its arguments on lines of their own:\n\n  %s {\n    %s\n    ...\n  }", outer, string(src[start:end]))
	}
	return nil
}

// operatorAt is the bitwise operator at (or, for << and >>, ending at) byte
// at, and where it starts; "" when there is none.
func operatorAt(src []byte, at int) (string, int) {
	if at > 0 && (src[at-1] == '<' || src[at-1] == '>') && src[at] == src[at-1] {
		return string(src[at-1 : at+1]), at - 1
	}
	if at+1 < len(src) && (src[at] == '<' || src[at] == '>') && src[at+1] == src[at] {
		return string(src[at : at+2]), at
	}
	op := string(src[at : at+1])
	if bpftraceOperators[op] == "" || at+1 < len(src) && src[at+1] == src[at] {
		return "", 0
	}
	return op, at
}

// wordAt is the name starting at byte at, or "".
func wordAt(src []byte, at int) string {
	end := at
	for end < len(src) && identByte(src[end]) && src[end] != '-' {
		end++
	}
	return string(src[at:end])
}

// wordBefore is the name that ends right before byte at, blanks between.
func wordBefore(src []byte, at int) string {
	end := at
	for end > 0 && (src[end-1] == ' ' || src[end-1] == '\t') {
		end--
	}
	start := end
	for start > 0 && identByte(src[start-1]) {
		start--
	}
	return string(src[start:end])
}

// nextByte is the first byte at or after at that is not a blank, or 0.
func nextByte(src []byte, at int) byte {
	for ; at < len(src); at++ {
		if src[at] != ' ' && src[at] != '\t' {
			return src[at]
		}
	}
	return 0
}

// lineBounds are the start and end of the line holding byte at.
func lineBounds(src []byte, at int) (int, int) {
	start := bytes.LastIndexByte(src[:at], '\n') + 1
	end := bytes.IndexByte(src[at:], '\n')
	if end < 0 {
		return start, len(src)
	}
	return start, at + end
}

// byteRange is the range of src's bytes start to end, which lie on one line.
func byteRange(name string, src []byte, start, end int) hcl.Range {
	ls, _ := lineBounds(src, start)
	line := 1 + bytes.Count(src[:start], []byte{'\n'})
	col := 1 + utf8.RuneCount(src[ls:start])
	return hcl.Range{Filename: name,
		Start: hcl.Pos{Line: line, Column: col, Byte: start},
		End:   hcl.Pos{Line: line, Column: col + utf8.RuneCount(src[start:end]), Byte: end}}
}
