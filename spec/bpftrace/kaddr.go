package bpftrace

import (
	"fmt"
	"strconv"

	"github.com/probectl/probectl/spec"
)

// kaddr translates kaddr("SYMBOL"), checked at its line and column: a
// kernel variable's address, which the runtime reads from /proc/kallsyms
// at apply. Only a probe that runs in the kernel reads it: an interval
// probe calling it is a one-CPU timer (probe.go).
func (c *ctx) kaddr(e *Call) hx {
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
	if c.special() {
		c.t.fail(e.Pos, "Unsupported kaddr() in "+c.family, fmt.Sprintf("kaddr(%q) in %s has no equivalent: %s only prints here; an interval probe reads kernel variables.", s.Val, c.family, c.family))
	}
	return hx{text: "kaddr(" + strconv.Quote(s.Val) + ")", prec: precAtom, kind: kInt, kaddr: true, name: identName(s.Val)}
}
