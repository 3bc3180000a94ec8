package spec

import "bytes"

// plainMaxOperators: files with more operators take the exact checks.
// Far below MaxOperators, because the count is the whole file's.
const plainMaxOperators = 8192

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
//
// cuts are where top-level items may be parsed apart: the starts of the
// lines after top-level closing braces.
func plainWithinLimits(src []byte) (ok bool, cuts []int) {
	s := quickScan{src: src, stack: make([]byte, 1, 64)}
	s.stack[0] = scanCode
	for ; s.i < len(src); s.i++ {
		if s.top() == scanQuote {
			ok = s.quoted(src[s.i])
		} else {
			ok = s.code(src[s.i])
		}
		if !ok {
			return false, nil
		}
	}
	return s.within(), s.cuts
}

// The modes of the scan, kept on its stack.
const (
	scanCode   = 0 // the file's top level
	scanBrack  = 1 // inside { [ ( in code
	scanQuote  = 2 // inside "…"
	scanInterp = 3 // inside ${ … } in a string
)

// quickScan is the state of plainWithinLimits: where it is, the modes it
// is nested in, and what it counts.
type quickScan struct {
	src   []byte
	i     int
	stack []byte
	// maxDepth is the deepest nesting seen; run the current run of ! and -,
	// maxRun the longest.
	maxDepth, questions, run, maxRun, ops int
	cuts                                  []int
}

func (s *quickScan) top() byte { return s.stack[len(s.stack)-1] }

func (s *quickScan) push(m byte) {
	s.stack = append(s.stack, m)
	if d := len(s.stack) - 1; d > s.maxDepth {
		s.maxDepth = d
	}
}

func (s *quickScan) pop() { s.stack = s.stack[:len(s.stack)-1] }

// next says whether the byte after the current one is c.
func (s *quickScan) next(c byte) bool { return s.i+1 < len(s.src) && s.src[s.i+1] == c }

// within says whether the whole scan stayed inside the limits.
func (s *quickScan) within() bool {
	return len(s.stack) == 1 && s.maxDepth+s.questions+s.maxRun <= MaxNesting/2 && s.ops <= plainMaxOperators
}

// quoted scans one byte inside a string.
func (s *quickScan) quoted(c byte) bool {
	switch c {
	case '"':
		s.pop()
	case '\\':
		if s.i+1 >= len(s.src) || s.src[s.i+1] == '\n' || s.src[s.i+1] == '\r' {
			return false
		}
		s.i++
	case '\n', '\r':
		return false
	case '$', '%':
		return s.templateStart(c)
	}
	return true
}

// templateStart follows $ or % in a string: ${ opens an interpolation;
// $${ and %%{ (escapes HCL reads its own way) and %{ (a template
// directive) are refused.
func (s *quickScan) templateStart(c byte) bool {
	if s.next(c) {
		return false
	}
	if s.next('{') {
		if c == '%' {
			return false
		}
		s.push(scanInterp)
		s.i++
	}
	return true
}

// Classes of the bytes of code: what code does with each.
const (
	clsRefused  = iota // outside ASCII, control characters, @ $ ` \ ' ; ^
	clsPlain           // identifier bytes and separators
	clsQuote           // "
	clsOpen            // { [ (
	clsClose           // } ] )
	clsHash            // #
	clsSlash           // /
	clsQuestion        // ?
	clsPair            // - and <, refused before > and <
	clsOperator        // + * % = ! > & | .
	clsZero            // 0, refused as the start of 0x, 0o, 0b
)

var codeClass = func() (t [256]byte) {
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = clsPlain, clsPlain
	}
	for _, c := range []byte("123456789_ \t\n\r:,~") {
		t[c] = clsPlain
	}
	for _, c := range []byte("+*%=!>&|.") {
		t[c] = clsOperator
	}
	t['"'], t['#'], t['/'], t['?'], t['0'] = clsQuote, clsHash, clsSlash, clsQuestion, clsZero
	t['{'], t['['], t['('] = clsOpen, clsOpen, clsOpen
	t['}'], t[']'], t[')'] = clsClose, clsClose, clsClose
	t['-'], t['<'] = clsPair, clsPair
	return t
}()

// pairRefused is, for - and <, the byte after it that is refused: -> (a
// bpftrace arrow) and << (a heredoc).
var pairRefused = [256]byte{'-': '>', '<': '<'}

// code scans one byte of code: the top level, inside brackets, or inside
// ${ }.
func (s *quickScan) code(c byte) bool {
	s.countRun(c)
	switch codeClass[c] {
	case clsPlain:
	case clsQuote:
		s.push(scanQuote)
	case clsOpen:
		s.push(scanBrack)
		if c == '[' {
			s.ops++
		}
	case clsClose:
		return s.close(c)
	case clsHash:
		s.skipLine()
	case clsSlash:
		return s.slash()
	case clsQuestion:
		s.questions++
		s.ops++
	case clsPair:
		if s.next(pairRefused[c]) {
			return false
		}
		s.ops++
	case clsOperator:
		s.ops++
	case clsZero:
		return !s.prefixedNumber()
	default:
		return false
	}
	return true
}

// countRun counts runs of ! and -, which nest unary operators; white
// space does not end a run.
func (s *quickScan) countRun(c byte) {
	switch c {
	case '!', '-':
		s.run++
		s.maxRun = max(s.maxRun, s.run)
	case ' ', '\t', '\n', '\r':
	default:
		s.run = 0
	}
}

// close closes a bracket or an interpolation; a top-level closing brace
// marks a cut at the start of the next line.
func (s *quickScan) close(c byte) bool {
	top := s.top()
	if top != scanBrack && (c != '}' || top != scanInterp) {
		return false
	}
	s.pop()
	if len(s.stack) == 1 && c == '}' {
		if nl := bytes.IndexByte(s.src[s.i:], '\n'); nl >= 0 && s.i+nl+1 < len(s.src) {
			s.cuts = append(s.cuts, s.i+nl+1)
		}
	}
	return true
}

// skipLine skips to the end of the line (a comment).
func (s *quickScan) skipLine() {
	for s.i < len(s.src) && s.src[s.i] != '\n' {
		s.i++
	}
}

// slash is a line comment, a block comment (refused unterminated), or
// division.
func (s *quickScan) slash() bool {
	switch {
	case s.next('/'):
		s.skipLine()
	case s.next('*'):
		end := bytes.Index(s.src[s.i+2:], []byte("*/"))
		if end < 0 {
			return false
		}
		s.i += 2 + end + 1
	default:
		s.ops++
	}
	return true
}

// prefixedNumber says whether the 0 here starts a number as 0x, 0o or
// 0b, which HCL does not read as the number it looks like.
func (s *quickScan) prefixedNumber() bool {
	i, src := s.i, s.src
	if i > 0 && identByte(src[i-1]) && src[i-1] != '-' || i+1 >= len(src) {
		return false
	}
	switch src[i+1] {
	case 'x', 'X', 'o', 'O', 'b', 'B':
		return true
	}
	return false
}

// identByte says whether c may be part of an identifier.
func identByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}
