package spec

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/big"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/probectl/probectl/bpf"
)

// Input limits. Specs are small hand-written files; these bound what a
// command reads, and how deep any pass over a spec recurses (the HCL
// parser, the checker and the compiler all recurse through expressions).
const (
	// MaxFileSize is the size of the largest spec file.
	MaxFileSize = 1 << 20
	// MaxNesting bounds brackets, braces, quotes and template
	// interpolations inside one another, together with runs of ! and -
	// and chains of ? :.
	MaxNesting = 1000
	// MaxOperators bounds the operators, indexes and attribute accesses
	// of one expression: each can be a level of its tree.
	MaxOperators = 100000
)

// ReadFile reads a spec file. It must be a regular file (a symlink to one
// is fine) of at most [MaxFileSize] bytes; anything else is refused without
// blocking, and without reading more than MaxFileSize+1 bytes.
func ReadFile(name string) ([]byte, *hcl.Diagnostic) {
	f, err := bpf.OpenRegular(name)
	if err != nil {
		return nil, fileDiag(name, "Cannot read spec file", "%s. Give a .hcl file or a directory of them.", pathError(err))
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fileDiag(name, "Cannot read spec file", "%s.", pathError(err))
	}
	if len(b) > MaxFileSize {
		return nil, tooLarge(name)
	}
	return b, nil
}

// ParseFile parses one spec file's HCL syntax, after checking it against
// the input limits: a file beyond them is refused before the HCL parser
// sees it. The file is nil when it cannot be decoded; one with bpftrace's
// habits that can be read away (->, a line of @map or $variable) is
// returned with their errors, read without them, so that its other
// mistakes are found too.
func ParseFile(name string, src []byte) (*hcl.File, hcl.Diagnostics) {
	if len(src) > MaxFileSize {
		return nil, hcl.Diagnostics{tooLarge(name)}
	}
	if ok, cuts := plainWithinLimits(src); ok {
		if f := parseApart(name, src, cuts); f != nil {
			return f, nil
		}
		return parse(name, src, src)
	}
	tokens, _ := hclsyntax.LexConfig(src, name, hcl.InitialPos)
	if d := checkDepth(tokens); d != nil {
		return nil, hcl.Diagnostics{d}
	}
	if d := checkNumbers(tokens); d != nil {
		return nil, hcl.Diagnostics{d}
	}
	habits := checkSyntax(tokens)
	if !habits.HasErrors() {
		return parse(name, src, src)
	}
	text, ok := withHabitsRead(src, tokens)
	if !ok {
		return nil, habits
	}
	f, diags := parse(name, src, text)
	if f == nil {
		// What was read away may have held what the rest needs (a heredoc's
		// start): HCL's errors could be about the reading, not the file.
		return nil, habits
	}
	return f, append(habits, diags...)
}

// parse parses text, which is src or src with bytes replaced in place,
// explaining its errors in src's terms; the file is nil when it has
// errors.
func parse(name string, src, text []byte) (*hcl.File, hcl.Diagnostics) {
	f, diags := hclsyntax.ParseConfig(text, name, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, explainParse(diags, src)
	}
	f.Bytes = src
	return f, diags
}

// without is diags less those whose range meets one of reported's: the
// same mistake, already reported.
func without(diags, reported hcl.Diagnostics) hcl.Diagnostics {
	var out hcl.Diagnostics
	for _, d := range diags {
		met := false
		for _, r := range reported {
			met = met || d.Subject != nil && r.Subject != nil && d.Subject.Overlaps(*r.Subject)
		}
		if !met {
			out = append(out, d)
		}
	}
	return out
}

// checkNumbers refuses numbers HCL does not have, which it would otherwise
// lex as a 0 followed by a name (0xff: "Missing argument separator").
func checkNumbers(tokens hclsyntax.Tokens) *hcl.Diagnostic {
	for i := 0; i+1 < len(tokens); i++ {
		num, next := &tokens[i], &tokens[i+1]
		if num.Type != hclsyntax.TokenNumberLit || next.Type != hclsyntax.TokenIdent ||
			string(num.Bytes) != "0" || num.Range.End.Byte != next.Range.Start.Byte {
			continue
		}
		base := map[byte]int{'x': 16, 'X': 16, 'o': 8, 'O': 8, 'b': 2, 'B': 2}[next.Bytes[0]]
		if base == 0 {
			continue
		}
		detail := "Numbers are decimal: HCL has no 0x, 0o or 0b literals."
		if n, ok := new(big.Int).SetString(string(next.Bytes[1:]), base); ok {
			detail += fmt.Sprintf(" Write %s for %s%s.", n, num.Bytes, next.Bytes)
		}
		if base == 16 {
			detail += fmt.Sprintf(" To keep it in hex, write it as a string given to hex: hex(\"%s%s\").", num.Bytes, next.Bytes)
		}
		rng := hcl.RangeBetween(num.Range, next.Range)
		return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Not a decimal number", Detail: detail, Subject: &rng}
	}
	return nil
}

func tooLarge(name string) *hcl.Diagnostic {
	return fileDiag(name, "File too large",
		"%s has more than %d bytes; a spec file may have at most %d. Split the probes into several files.", name, MaxFileSize, MaxFileSize)
}

// fileDiag is an error about a whole file, at its start.
func fileDiag(name, summary, detail string, args ...any) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagError, Summary: summary, Detail: fmt.Sprintf(detail, args...),
		Subject: &hcl.Range{Filename: name, Start: hcl.InitialPos, End: hcl.InitialPos},
	}
}

func pathError(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Path + ": " + pe.Err.Error()
	}
	return err.Error()
}

var (
	openers = map[hclsyntax.TokenType]bool{
		hclsyntax.TokenOBrace: true, hclsyntax.TokenOBrack: true, hclsyntax.TokenOParen: true,
		hclsyntax.TokenOQuote: true, hclsyntax.TokenOHeredoc: true,
		hclsyntax.TokenTemplateInterp: true, hclsyntax.TokenTemplateControl: true,
	}
	closers = map[hclsyntax.TokenType]bool{
		hclsyntax.TokenCBrace: true, hclsyntax.TokenCBrack: true, hclsyntax.TokenCParen: true,
		hclsyntax.TokenCQuote: true, hclsyntax.TokenCHeredoc: true, hclsyntax.TokenTemplateSeqEnd: true,
	}
	operators = map[hclsyntax.TokenType]bool{
		hclsyntax.TokenPlus: true, hclsyntax.TokenMinus: true, hclsyntax.TokenStar: true,
		hclsyntax.TokenSlash: true, hclsyntax.TokenPercent: true,
		hclsyntax.TokenEqualOp: true, hclsyntax.TokenNotEqual: true,
		hclsyntax.TokenLessThan: true, hclsyntax.TokenLessThanEq: true,
		hclsyntax.TokenGreaterThan: true, hclsyntax.TokenGreaterThanEq: true,
		hclsyntax.TokenAnd: true, hclsyntax.TokenOr: true, hclsyntax.TokenBang: true,
		hclsyntax.TokenOBrack: true, hclsyntax.TokenDot: true, hclsyntax.TokenQuestion: true,
	}
)

// checkDepth bounds, on the tokens, how deep the parser and every later
// pass will recurse: nesting (brackets of every kind, runs of unary ! and -,
// and ? : chains, each a recursion of the HCL parser) and the operators of
// one expression (each a level of its tree, though the parser loops over
// them). Lexical errors are left for the parser to report.
func checkDepth(tokens hclsyntax.Tokens) *hcl.Diagnostic {
	type level struct {
		opener    hclsyntax.TokenType
		base, ops int // operators on the path into this level, and with this expression's
		questions int // ? without their expression ended
	}
	stack := []level{{opener: hclsyntax.TokenOBrace}}
	questions, unary := 0, 0 // over all levels; ! and - in a row
	for i := range tokens {
		tok := &tokens[i]
		top := &stack[len(stack)-1]
		if tok.Type == hclsyntax.TokenBang || tok.Type == hclsyntax.TokenMinus {
			unary++
		} else {
			unary = 0
		}
		if operators[tok.Type] {
			top.ops++
		}
		switch {
		case openers[tok.Type]:
			stack = append(stack, level{opener: tok.Type, base: top.ops, ops: top.ops})
		case closers[tok.Type] && len(stack) > 1:
			questions -= top.questions
			stack = stack[:len(stack)-1]
		case tok.Type == hclsyntax.TokenQuestion:
			top.questions++
			questions++
		case tok.Type == hclsyntax.TokenComma,
			tok.Type == hclsyntax.TokenNewline && top.opener == hclsyntax.TokenOBrace:
			// The end of an element, an argument or an attribute.
			questions -= top.questions
			top.ops, top.questions = top.base, 0
		}
		if depth := len(stack) - 1 + questions + unary; depth > MaxNesting {
			return &hcl.Diagnostic{
				Severity: hcl.DiagError, Summary: "Too deeply nested",
				Detail: fmt.Sprintf("This goes %d levels deep; at most %d are allowed (brackets, braces, quotes and ${ } inside one another, ! and - in a row, and ? : chains). Flatten the expression.",
					depth, MaxNesting),
				Subject: tok.Range.Ptr(),
			}
		}
		if top := stack[len(stack)-1]; top.ops > MaxOperators {
			return &hcl.Diagnostic{
				Severity: hcl.DiagError, Summary: "Expression too long",
				Detail: fmt.Sprintf("An expression may have at most %d operators, indexes and attribute accesses; this one has more. Split it across several actions or probes.",
					MaxOperators),
				Subject: tok.Range.Ptr(),
			}
		}
	}
	return nil
}
