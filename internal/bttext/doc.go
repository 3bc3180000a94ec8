// Package bttext renders values as bpftrace 0.17 prints them: a printf
// line with bpftrace's format semantics (Printf), a time as its strftime()
// and time() print it (Strftime), a hist's and an lhist's rows (Hist,
// Lhist), a map as its text output prints it at exit or at print()
// (Map.Text: sorted, keyed, stack keys a frame a line, hist blocks,
// stats), and the lines of its -f json output (Map.JSON, PrintfJSON,
// AttachedJSON, LostJSON), and what cat(PATH) prints of the few files it
// may read (Cat, CatFiles). It is the
// layout a bpftrace user reads; probectl run of an imported program
// prints through it.
//
// Imports nothing of probectl.
package bttext
