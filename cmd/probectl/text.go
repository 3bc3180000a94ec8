package main

import (
	"fmt"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// printable returns s as it may go to a terminal: unchanged when every
// character prints, otherwise Go-quoted ("\x1b[2J"), so that a process
// name, a symbol or a string read from a probe never writes raw control
// sequences and never passes for another string.
func printable(s string) string {
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

// value writes a decoded key or field value for a terminal. Not only
// strings carry other users' text: a stack's frames are named by the ELF
// files a process maps.
func value(v any) string {
	if s, ok := v.(string); ok {
		return printable(s)
	}
	return printable(fmt.Sprint(v))
}
