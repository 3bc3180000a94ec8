package bpftrace

import (
	"fmt"
	"strconv"

	"github.com/probectl/probectl/spec"
)

// kaddr checks kaddr("SYMBOL"): a name that could be a kernel symbol, at
// its line and column if not, and then stops the import: a kernel
// variable read by name (its address resolved at apply, against KASLR)
// has no equivalent yet.
func (c *ctx) kaddr(e *Call) {
	if len(e.Args) != 1 {
		c.t.fail(e.Pos, "Invalid kaddr()", "kaddr takes one kernel symbol's name, a string literal: kaddr(\"avenrun\").")
	}
	s, ok := c.raw(e.Args[0]).(*Str)
	if !ok {
		c.t.fail(e.Args[0].At(), "Invalid kaddr()", "kaddr's symbol is a string literal: kaddr(\"avenrun\").")
	}
	if !spec.KernelSymbol(s.Val) {
		c.t.fail(e.Args[0].At(), "Invalid kernel symbol "+strconv.Quote(s.Val),
			fmt.Sprintf("A kernel symbol is letters, digits, _ and . (not first a digit), at most %d bytes, as /proc/kallsyms names them: kaddr(\"avenrun\").", spec.MaxSymbolLen))
	}
	c.t.fail(e.Pos, "Unsupported kaddr()", fmt.Sprintf("kaddr(%q) has no equivalent: a kernel variable is not read by name yet.", s.Val))
}
