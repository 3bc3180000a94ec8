package termtext

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// The colours of terraform's plans and diagnostics (SGR codes).
const (
	Green   = "32" // create +
	Red     = "31" // delete -, errors
	Yellow  = "33" // update ~, warnings
	Magenta = "35" // replace -/+
)

// ColorWriter is a writer whose text may be coloured: a terminal, with
// colour not turned off. Views and Diagnostics colour what they write to
// one, and nothing else.
type ColorWriter struct{ io.Writer }

// Colored reports whether w is a ColorWriter.
func Colored(w io.Writer) bool {
	_, ok := w.(ColorWriter)
	return ok
}

// Paint is s in colour for w: wrapped in the SGR sequence when w is a
// ColorWriter, s as it is otherwise.
func Paint(w io.Writer, color, s string) string {
	if !Colored(w) || s == "" {
		return s
	}
	return "\x1b[" + color + "m" + s + "\x1b[0m"
}

// MaybeColor returns w as a ColorWriter when colour is on: w is a
// terminal, NO_COLOR is not set (to any value: no-color.org), and
// noColor (the -no-color flag) is false.
func MaybeColor(w io.Writer, noColor bool) io.Writer {
	if _, set := os.LookupEnv("NO_COLOR"); noColor || set || !Terminal(w) {
		return w
	}
	return ColorWriter{w}
}

// Terminal reports whether w is a terminal: a file the TCGETS ioctl
// answers for.
func Terminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
