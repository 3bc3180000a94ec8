package bpftrace

import (
	"fmt"
	"strconv"
	"strings"
)

// Pos is a place in the .bt file: line and column from 1 (columns count
// bytes, as HCL's do), and the byte offset.
type Pos struct{ Line, Col, Off int }

type tokKind int

const (
	tEOF tokKind = iota
	tIdent
	tVar    // $name or $1
	tMap    // @name or @
	tNum    // 12, 0x1f, 1e6
	tString // "..."
	tPunct  // operators and brackets
)

type token struct {
	kind tokKind
	text string // the source text; for tString the unquoted value
	pos  Pos
	end  int // byte offset after the token
}

// comment is a // or /* */ comment, its text without the markers.
type comment struct {
	pos  Pos
	text []string
}

type lexer struct {
	src      []byte
	off      int
	line     int
	lineOff  int // offset of the current line's start
	comments []comment
}

func (lx *lexer) pos() Pos { return Pos{Line: lx.line, Col: lx.off - lx.lineOff + 1, Off: lx.off} }

func (lx *lexer) advance(n int) {
	for i := 0; i < n && lx.off < len(lx.src); i++ {
		if lx.src[lx.off] == '\n' {
			lx.line++
			lx.lineOff = lx.off + 1
		}
		lx.off++
	}
}

// seek puts the lexer back at p (the parser reads attach points raw).
func (lx *lexer) seek(p Pos) {
	lx.off, lx.line, lx.lineOff = p.Off, p.Line, p.Off-p.Col+1
}

// space skips white space and comments, keeping the comments.
func (lx *lexer) space() error {
	for lx.off < len(lx.src) {
		c := lx.src[lx.off]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			lx.advance(1)
		case c == '/' && lx.peekByte(1) == '/':
			p := lx.pos()
			end := lx.off
			for end < len(lx.src) && lx.src[end] != '\n' {
				end++
			}
			text := string(lx.src[lx.off+2 : end])
			lx.advance(end - lx.off)
			lx.comments = append(lx.comments, comment{pos: p, text: []string{text}})
		case c == '/' && lx.peekByte(1) == '*':
			p := lx.pos()
			i := strings.Index(string(lx.src[lx.off+2:]), "*/")
			if i < 0 {
				return errAt(p, "Unterminated comment", "A /* comment has no */.")
			}
			body := string(lx.src[lx.off+2 : lx.off+2+i])
			lx.advance(i + 4)
			var lines []string
			for _, l := range strings.Split(body, "\n") {
				lines = append(lines, strings.TrimPrefix(strings.TrimSpace(l), "* "))
			}
			lx.comments = append(lx.comments, comment{pos: p, text: lines})
		default:
			return nil
		}
	}
	return nil
}

func (lx *lexer) peekByte(n int) byte {
	if lx.off+n < len(lx.src) {
		return lx.src[lx.off+n]
	}
	return 0
}

func isIdentStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isIdent(c byte) bool { return isIdentStart(c) || (c >= '0' && c <= '9') }

// puncts are the operators, longest first.
var puncts = []string{
	"<<=", ">>=", "...",
	"->", "==", "!=", "<=", ">=", "&&", "||", "<<", ">>", "++", "--", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "..",
	"{", "}", "(", ")", "[", "]", ",", ";", ":", ".", "?", "=", "<", ">", "+", "-", "*", "/", "%", "&", "|", "^", "~", "!", "#",
}

// next reads one token.
func (lx *lexer) next() (token, error) {
	if err := lx.space(); err != nil {
		return token{}, err
	}
	p := lx.pos()
	if lx.off >= len(lx.src) {
		return token{kind: tEOF, pos: p, end: lx.off}, nil
	}
	c := lx.src[lx.off]
	start := lx.off
	word := func(from int) string {
		end := from
		for end < len(lx.src) && isIdent(lx.src[end]) {
			end++
		}
		return string(lx.src[from:end])
	}
	switch {
	case isIdentStart(c):
		w := word(lx.off)
		lx.advance(len(w))
		return token{kind: tIdent, text: w, pos: p, end: lx.off}, nil
	case c == '$' || c == '@':
		w := word(lx.off + 1)
		if c == '$' && w == "" {
			return token{}, errAt(p, "Invalid variable", "A $ must be followed by a variable's name.")
		}
		lx.advance(1 + len(w))
		k := tVar
		if c == '@' {
			k = tMap
		}
		return token{kind: k, text: w, pos: p, end: lx.off}, nil
	case c >= '0' && c <= '9':
		end := lx.off
		for end < len(lx.src) && (isIdent(lx.src[end]) || (lx.src[end] == '.' && end+1 < len(lx.src) && lx.src[end+1] >= '0' && lx.src[end+1] <= '9')) {
			end++
		}
		text := string(lx.src[lx.off:end])
		lx.advance(end - start)
		return token{kind: tNum, text: text, pos: p, end: lx.off}, nil
	case c == '"':
		var b strings.Builder
		i := lx.off + 1
		for {
			if i >= len(lx.src) || lx.src[i] == '\n' {
				return token{}, errAt(p, "Unterminated string", "A string literal ends on its line, with a \".")
			}
			ch := lx.src[i]
			if ch == '"' {
				break
			}
			if ch == '\\' && i+1 < len(lx.src) {
				i++
				switch e := lx.src[i]; e {
				case 'n':
					b.WriteByte('\n')
				case 't':
					b.WriteByte('\t')
				case 'r':
					b.WriteByte('\r')
				case '\\', '"', '\'':
					b.WriteByte(e)
				case '0':
					b.WriteByte(0)
				default:
					b.WriteByte('\\')
					b.WriteByte(e)
				}
				i++
				continue
			}
			b.WriteByte(ch)
			i++
		}
		lx.advance(i + 1 - start)
		return token{kind: tString, text: b.String(), pos: p, end: lx.off}, nil
	}
	for _, op := range puncts {
		if strings.HasPrefix(string(lx.src[lx.off:min(len(lx.src), lx.off+3)]), op) {
			lx.advance(len(op))
			return token{kind: tPunct, text: op, pos: p, end: lx.off}, nil
		}
	}
	return token{}, errAt(p, "Invalid character", fmt.Sprintf("%s is not part of bpftrace's syntax.", strconv.QuoteRune(rune(c))))
}

// raw reads the text up to white space, a comma or a brace: an attach
// point (uprobe:/bin/bash:readline, kprobe:vfs_*).
func (lx *lexer) raw() (token, error) {
	if err := lx.space(); err != nil {
		return token{}, err
	}
	p := lx.pos()
	end := lx.off
	for end < len(lx.src) {
		c := lx.src[end]
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',' || c == '{' {
			break
		}
		if c == '/' && end+1 < len(lx.src) && (lx.src[end+1] == '/' || lx.src[end+1] == '*') {
			break
		}
		end++
	}
	text := string(lx.src[lx.off:end])
	lx.advance(end - lx.off)
	return token{kind: tIdent, text: text, pos: p, end: lx.off}, nil
}

// restOfLine reads the rest of the line (a preprocessor directive).
func (lx *lexer) restOfLine() string {
	end := lx.off
	for end < len(lx.src) && lx.src[end] != '\n' {
		end++
	}
	s := string(lx.src[lx.off:end])
	lx.advance(end - lx.off)
	return s
}
