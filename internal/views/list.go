package views

import (
	"bufio"
	"io"

	"github.com/probectl/probectl/compiler/compiled"
	"github.com/probectl/probectl/internal/termtext"
)

// List shows what probectl list found on a target: the human view one
// point a line as bpftrace -l prints them (with -v, each field on a line
// of its own, indented by four spaces), the JSON view as one document.
type List interface {
	List(target string, points []compiled.ProbePoint) error
}

// NewList is the list view -json selects, writing to w.
func NewList(asJSON bool, w io.Writer) List {
	if asJSON {
		return ListJSON{w}
	}
	return ListHuman{w}
}

// ListHuman is the points as bpftrace -l prints them.
type ListHuman struct{ W io.Writer }

// ListJSON is the points as indented JSON.
type ListJSON struct{ W io.Writer }

// List writes the points, a name that would not print as itself quoted
// (a facts file's names are anyone's).
func (v ListHuman) List(_ string, points []compiled.ProbePoint) error {
	w := bufio.NewWriter(v.W)
	for _, p := range points {
		w.WriteString(termtext.Printable(p.String()))
		w.WriteByte('\n')
		for _, f := range p.Fields {
			w.WriteString("    ")
			w.WriteString(termtext.Printable(f))
			w.WriteByte('\n')
		}
	}
	return w.Flush()
}

// listJSON is the JSON view's document.
type listJSON struct {
	Target string          `json:"target"`
	Probes []listPointJSON `json:"probes"`
}

type listPointJSON struct {
	// Probe is the point as the human view prints it.
	Probe string `json:"probe"`
	compiled.ProbePoint
}

// List writes the target's label and the points, each with its line.
func (v ListJSON) List(target string, points []compiled.ProbePoint) error {
	doc := listJSON{Target: target, Probes: make([]listPointJSON, len(points))}
	for i, p := range points {
		doc.Probes[i] = listPointJSON{Probe: p.String(), ProbePoint: p}
	}
	return writeJSON(v.W, doc)
}
