package bpftrace

import (
	"fmt"
	"strconv"

	"github.com/probectl/probectl/internal/bttext"
)

// cat translates cat(PATH) after a printf: the event that printf makes
// carries it (Print.Cat), and probectl run reads the file in user space
// as it prints the event, as bpftrace does. Only bttext.CatFiles may be
// named: probectl reads as root, and what it reads reaches whoever reads
// the events. The spec itself has no file read: import notes it.
func (c *ctx) cat(call *Call) {
	if len(call.Args) != 1 {
		c.t.fail(call.Pos, "Unsupported cat()", "cat(FORMAT, ARGS...) has no equivalent: cat takes one path, a string literal.")
	}
	s, ok := c.raw(call.Args[0]).(*Str)
	if !ok {
		c.t.fail(call.Args[0].At(), "Unsupported cat()", "cat's path is a string literal here.")
	}
	if !bttext.CatAllowed(s.Val) {
		c.t.fail(call.Args[0].At(), "Refused cat() of "+strconv.Quote(s.Val),
			fmt.Sprintf("probectl reads files as root and hands what it reads to whoever reads the events (a tenant's too), so cat reads only world-readable kernel files of the whole machine: %s.", bttext.CatList()))
	}
	if c.special() {
		c.t.fail(call.Pos, "Unsupported cat() in "+c.family, "cat() has an equivalent after a printf in a probe: the event prints the file.")
	}
	w, _ := c.when()
	if c.event == nil || c.event.attrs[0].v != w {
		c.t.fail(call.Pos, "Unsupported cat() without a printf", "cat() is printed with an event: write a printf before it, under the same condition.")
	}
	c.printed(c.event, Print{Cat: s.Val})
	c.t.note("cat(%q) is read by probectl run as each event prints; the spec's events do not carry the file.", s.Val)
}

// probeExit translates exit() in a probe after a printf: the event that
// printf makes carries it (Print.Exit), and probectl run stops once it
// printed that event, printing nothing after it, as bpftrace stops at the
// first event that calls exit(). An applied spec has no exit: import
// notes it.
func (c *ctx) probeExit(call *Call) {
	w, _ := c.when()
	if c.event == nil || c.event.attrs[0].v != w {
		c.t.fail(call.Pos, "Unsupported exit", "exit() in a probe has an equivalent after a printf under the same condition: probectl run stops once that event printed. Without one, a spec runs until it is destroyed (probectl run -duration stops after a time).")
	}
	c.printed(c.event, Print{Exit: true})
	c.t.note("exit() stops probectl run after the first event that calls it; an applied spec runs until it is destroyed.")
}
