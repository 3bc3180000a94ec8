package bpftrace

import (
	"fmt"
	"strconv"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// Options are what bpftrace takes on its command line and the import
// writes into the spec.
type Options struct {
	// PID is bpftrace's -p: the program's probes are limited to that
	// process. User probes attach to its binary and libraries only
	// (pid = PID); kernel-side probes (tracepoints, kernel functions,
	// profiles) count its events only (when = pid == PID). 0: every
	// process.
	PID int
	// CPID is the pid of the child bpftrace -c started, the value of
	// cpid; 0: there is none, and cpid is an error.
	CPID int
	run  bool // for probectl run (ImportRun)
}

// ImportWith is Import with bpftrace's command-line options.
func ImportWith(filename string, src []byte, o Options) ([]byte, hcl.Diagnostics) {
	r, diags := importProgram(filename, src, o)
	return r.Spec, diags
}

// Run is an imported program as probectl run runs it: the spec, and
// what the run does beyond it.
type Run struct {
	Spec []byte
	// StopAfter is the shortest interval probe that calls exit()
	// (interval:s:5 { exit(); }): the run stops after it, as bpftrace
	// does; 0: none does.
	StopAfter time.Duration
	// Prints are the printfs each event prints (ImportPrints).
	Prints Prints
	// Maps are the program's aggregations as bpftrace's maps, by name.
	Maps []Map
	// Begin and End are what BEGIN and END print, in order; Intervals
	// what each interval probe prints each period (maps.go).
	Begin, End []Step
	Intervals  []Interval
	// Probes is how many attach points the program names, as bpftrace's
	// "Attaching N probes" counts them (before wildcards expand).
	Probes int
	// BeginText is what BEGIN prints (its printfs of string literals),
	// run prints it once the probes are attached; BeginExit: BEGIN calls
	// exit(), and the run stops at once. A program of BEGIN (and END)
	// alone has no Spec: run prints BeginText and waits, as bpftrace
	// does.
	BeginText string
	BeginExit bool
}

// ImportRun is ImportWith for probectl run.
func ImportRun(filename string, src []byte, o Options) (Run, hcl.Diagnostics) {
	o.run = true
	return importProgram(filename, src, o)
}

// limitTo limits every probe to process pid, as bpftrace's -p does.
func (t *translator) limitTo(pid int) {
	if pid == 0 {
		return
	}
	n := strconv.Itoa(pid)
	t.note("Limited to process %d (bpftrace -p %d).", pid, pid)
	for _, p := range t.probes {
		if p.kind == "user" {
			p.attrs = append(p.attrs, kv{"pid", n})
			continue
		}
		if p.entry == nil && p.exit == nil {
			p.entry = &handler{}
		}
		for _, h := range []*handler{p.entry, p.exit} {
			if h == nil {
				continue
			}
			w := fmt.Sprintf("pid == %s", n)
			if h.when != "" {
				w += " && (" + h.when + ")"
			}
			h.when = w
		}
	}
}
