// Package bttext renders values as bpftrace 0.17 prints them in its text
// output: a printf line with bpftrace's format semantics (Printf), a time
// as its strftime() and time() print it (Strftime), and a hist's rows
// (Hist). It is the layout a bpftrace user reads; probectl run of an
// imported program prints through it.
//
// Imports nothing of probectl.
package bttext
