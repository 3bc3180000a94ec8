package spec

import "bytes"

// plainWithinLimits reports, from one pass over the bytes, that src is
// certainly within the input limits and free of what checkNumbers and
// checkSyntax look for, so that ParseFile may skip lexing the file a
// second time for them (HCL lexes it anyway; that lex is a third of
// planning a large spec). It is conservative: it over-counts nesting,
// ?: chains, runs of ! and - and operators (over the whole file, not per
// expression), stays below half of the nesting limit and below
// plainMaxOperators, and says false on anything it does not follow exactly —
// heredocs, template directives, escapes of ${ and %{, characters outside
// ASCII in code, unbalanced brackets, unterminated strings or comments,
// 0x-style numbers, -> and the bpftrace sigils @ and $ — leaving those
// files to the exact checks on HCL's tokens.
// plainMaxOperators: files with more operators take the exact checks.
// Far below MaxOperators, because the count is the whole file's.
const plainMaxOperators = 8192

// cuts are where top-level items may be parsed apart: the starts of the
// lines after top-level closing braces.
func plainWithinLimits(src []byte) (ok bool, cuts []int) {
	const (
		code   = 0 // the file's top level
		brack  = 1 // inside { [ ( in code
		quote  = 2 // inside "…"
		interp = 3 // inside ${ … } in a string
	)
	stack := make([]byte, 1, 64)
	stack[0] = code
	maxDepth, questions, run, maxRun, ops := 0, 0, 0, 0, 0
	identByte := func(c byte) bool {
		return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
	}
	push := func(m byte) {
		stack = append(stack, m)
		if d := len(stack) - 1; d > maxDepth {
			maxDepth = d
		}
	}
	for i := 0; i < len(src); i++ {
		c := src[i]
		top := stack[len(stack)-1]
		if top == quote {
			switch c {
			case '"':
				stack = stack[:len(stack)-1]
			case '\\':
				if i+1 >= len(src) || src[i+1] == '\n' || src[i+1] == '\r' {
					return false, nil
				}
				i++
			case '\n', '\r':
				return false, nil
			case '$', '%':
				if i+1 < len(src) && src[i+1] == c {
					return false, nil // $${ and %%{: escapes HCL reads its own way
				}
				if i+1 < len(src) && src[i+1] == '{' {
					if c == '%' {
						return false, nil // a template directive
					}
					push(interp)
					i++
				}
			}
			continue
		}
		// Code: the top level, inside brackets, or inside ${ }.
		if c == '!' || c == '-' {
			run++
			if run > maxRun {
				maxRun = run
			}
		} else if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			run = 0
		}
		switch c {
		case ' ', '\t', '\n', '\r':
		case '"':
			push(quote)
		case '{', '[', '(':
			push(brack)
			if c == '[' {
				ops++
			}
		case '}', ']', ')':
			if top != brack && !(c == '}' && top == interp) {
				return false, nil
			}
			stack = stack[:len(stack)-1]
			if len(stack) == 1 && c == '}' {
				if nl := bytes.IndexByte(src[i:], '\n'); nl >= 0 && i+nl+1 < len(src) {
					cuts = append(cuts, i+nl+1)
				}
			}
		case '#':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case '/':
			switch {
			case i+1 < len(src) && src[i+1] == '/':
				for i < len(src) && src[i] != '\n' {
					i++
				}
			case i+1 < len(src) && src[i+1] == '*':
				end := -1
				for j := i + 2; j+1 < len(src); j++ {
					if src[j] == '*' && src[j+1] == '/' {
						end = j + 1
						break
					}
				}
				if end < 0 {
					return false, nil
				}
				i = end
			default:
				ops++
			}
		case '?':
			questions++
			ops++
		case '-':
			if i+1 < len(src) && src[i+1] == '>' {
				return false, nil
			}
			ops++
		case '<':
			if i+1 < len(src) && src[i+1] == '<' {
				return false, nil // a heredoc
			}
			ops++
		case '+', '*', '%', '=', '!', '>', '&', '|', '.':
			ops++
		case ':', ',', '~':
		case '@', '$', '`', '\\', '\'', ';', '^':
			return false, nil
		case '0':
			if (i == 0 || !identByte(src[i-1]) || src[i-1] == '-') && i+1 < len(src) {
				switch src[i+1] {
				case 'x', 'X', 'o', 'O', 'b', 'B':
					return false, nil
				}
			}
		default:
			if !identByte(c) {
				return false, nil // outside ASCII, or a control character
			}
		}
	}
	return len(stack) == 1 && maxDepth+questions+maxRun <= MaxNesting/2 && ops <= plainMaxOperators, cuts
}
