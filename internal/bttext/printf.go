package bttext

import (
	"fmt"
	"strconv"
	"strings"
)

// Printf formats args as bpftrace's printf does. The args are int64,
// uint64 or string; a conversion given the other kind prints as its
// value's text. bpftrace's rules, measured on 0.17:
//   - %d %u %x %X %c without l or ll take the value as a C int: the low
//     32 bits (%d signed, %u %x %X unsigned); with l or ll all 64 bits.
//   - %p prints 0x and the hex of the 64-bit value.
//   - %r prints a buffer (buf()), which its value already shows with
//     bpftrace's escapes (\xNN for a byte that does not print).
//   - %% before a conversion prints %; the text after the last conversion
//     (or a format with none) is printed as written, %% and all.
//   - flags: - (left), 0 (zero pad), a width and a .precision.
func Printf(format string, args ...any) string {
	var b strings.Builder
	n := 0
	last := lastConversion(format)
	for i := 0; i < len(format); i++ {
		c := format[i]
		if i >= last || c != '%' {
			b.WriteByte(c)
			continue
		}
		if i+1 < len(format) && format[i+1] == '%' {
			b.WriteByte('%')
			i++
			continue
		}
		j := i + 1
		for j < len(format) && strings.IndexByte("-0123456789.", format[j]) >= 0 {
			j++
		}
		flags := format[i+1 : j]
		long := false
		for j < len(format) && (format[j] == 'l' || format[j] == 'h' || format[j] == 'z') {
			long = long || format[j] == 'l' || format[j] == 'z'
			j++
		}
		if j >= len(format) {
			b.WriteString(format[i:])
			break
		}
		var arg any = ""
		if n < len(args) {
			arg = args[n]
		}
		n++
		b.WriteString(conv(flags, format[j], long, arg))
		i = j
	}
	return b.String()
}

// lastConversion is the index just past the format's last conversion: the
// text from there on prints as written.
func lastConversion(format string) int {
	end := 0
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		if i+1 < len(format) && format[i+1] == '%' {
			i++
			continue
		}
		j := i + 1
		for j < len(format) && strings.IndexByte("-0123456789.lhz", format[j]) >= 0 {
			j++
		}
		if j < len(format) {
			end = j + 1
			i = j
		}
	}
	return end
}

func conv(flags string, verb byte, long bool, arg any) string {
	if s, ok := arg.(string); ok && verb != 's' && verb != 'r' {
		// A value shown as text (hex(), a decoder's) printed as a number.
		if n, err := strconv.ParseInt(s, 0, 64); err == nil {
			arg = n
		} else if u, err := strconv.ParseUint(s, 0, 64); err == nil {
			arg = u
		}
	}
	if s, ok := arg.(string); ok {
		if verb == 's' || verb == 'r' {
			// %r: a buffer, already shown with bpftrace's escapes.
			return fmt.Sprintf("%"+flags+"s", s)
		}
		return fmt.Sprintf("%"+strings.TrimLeft(flags, "0")+"s", s)
	}
	var u uint64
	switch v := arg.(type) {
	case int64:
		u = uint64(v)
	case uint64:
		u = v
	case int:
		u = uint64(v)
	}
	switch verb {
	case 'd', 'i':
		if long {
			return fmt.Sprintf("%"+flags+"d", int64(u))
		}
		return fmt.Sprintf("%"+flags+"d", int32(u))
	case 'u':
		if !long {
			u = uint64(uint32(u))
		}
		return fmt.Sprintf("%"+flags+"d", u)
	case 'x', 'X':
		if !long {
			u = uint64(uint32(u))
		}
		return fmt.Sprintf("%"+flags+string(verb), u)
	case 'c':
		return fmt.Sprintf("%"+strings.TrimLeft(flags, "0")+"c", rune(byte(u)))
	case 'p':
		return fmt.Sprintf("%"+strings.TrimLeft(flags, "0")+"s", "0x"+strconv.FormatUint(u, 16))
	}
	return fmt.Sprintf("%"+flags+"s", strconv.FormatUint(u, 10))
}
