package termtext

import (
	"strconv"
	"unicode"
	"unicode/utf8"
)

// Printable returns s as it may go to a terminal: unchanged when every
// character prints, otherwise Go-quoted ("\x1b[2J"), so that a process
// name, a symbol or a string read from a probe never writes raw control
// sequences and never passes for another string.
func Printable(s string) string {
	if !utf8.ValidString(s) {
		return strconv.Quote(s)
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}
