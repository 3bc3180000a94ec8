// Package bpftrace imports bpftrace programs as specs: a lexer and parser
// for .bt files (the preamble, probes with their attach points, filters
// and blocks, bpftrace's expressions with their precedence, macros), every
// node at its line and column, and a translator that writes the spec the
// program means, as HCL text in the canonical format, keeping the file's
// header and comments. What has no equivalent in a spec stops the import
// with a diagnostic at the .bt file's line and column that names the
// construct and what is missing: never a spec that measures something
// else. A spec's handler has no loops: a short for loop (or unroll) is
// written out step by step, and the walk of the working directory that
// opensnoop writes as loops becomes the value cwd (loop.go). For probectl
// run, ImportRun also says what prints as bpftrace would print it: each
// event's printfs (Prints), each aggregated map by its bpftrace name and
// the spec aggregations holding it (Maps), and the printing steps of
// BEGIN, END and interval probes (Steps).
//
// Package bpftrace imports spec (to check what it writes), bpf (the
// perf events software: and hardware: probes name) and internal/bttext
// (BEGIN's printf text, as run prints printf, and the files cat may
// read), and never loads
// anything into a kernel.
package bpftrace
