package views

import (
	"fmt"
	"io"
	"strings"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler/compiled"
	"github.com/probectl/probectl/runtime"
)

// Status shows the applied probes and their health (status): the human
// view as a list, the JSON view as the README's "Status JSON".
type Status interface {
	Status(s *runtime.State, st []runtime.ProbeStatus, ev *runtime.EventsStatus, leftovers []string) error
}

// NewStatus is the status view -json selects, writing to w.
func NewStatus(asJSON bool, w io.Writer) Status {
	if asJSON {
		return StatusJSON{w}
	}
	return StatusHuman{w}
}

// StatusHuman is the status as text.
type StatusHuman struct{ W io.Writer }

// StatusJSON is the status as indented JSON.
type StatusJSON struct{ W io.Writer }

// Status writes the status as JSON.
func (v StatusJSON) Status(s *runtime.State, st []runtime.ProbeStatus, ev *runtime.EventsStatus, left []string) error {
	if st == nil {
		st = []runtime.ProbeStatus{}
	}
	return writeJSON(v.W, struct {
		Workspace string                `json:"workspace"`
		Lineage   string                `json:"lineage"`
		Serial    uint64                `json:"serial"`
		Probes    []runtime.ProbeStatus `json:"probes"`
		Events    *runtime.EventsStatus `json:"events,omitempty"`
		Leftovers []string              `json:"leftovers,omitempty"`
	}{s.Workspace, s.Lineage, s.Serial, st, ev, left})
}

// Status writes the status as text.
func (v StatusHuman) Status(s *runtime.State, st []runtime.ProbeStatus, ev *runtime.EventsStatus, left []string) error {
	renderStatus(v.W, s, st)
	renderEventsStatus(v.W, ev)
	if len(left) > 0 {
		n := fmt.Sprintf("%d probe directories", len(left))
		if len(left) == 1 {
			n = "1 probe directory"
		}
		fmt.Fprintf(v.W, "\n  LEFTOVERS  %s that the state does not record, left by an interrupted\n"+
			"             command, links attached (the next apply or destroy removes them): %s\n", n, abbreviate(left, 6))
	}
	return nil
}

func renderStatus(w io.Writer, s *runtime.State, st []runtime.ProbeStatus) {
	fmt.Fprintf(w, "Workspace %q: %s applied (serial %d)\n", s.Workspace, plural(len(st), "probe"), s.Serial)
	for _, p := range st {
		fmt.Fprintf(w, "\n  %s\n", p.Address)
		fmt.Fprintf(w, "    route      %s via %s\n", p.Route, compiled.JoinFamilies(p.Attach))
		switch {
		case p.Event != "":
			fmt.Fprintf(w, "    event      %s\n", printable(p.Event))
		case len(p.Tracepoints) > 0:
			fmt.Fprintf(w, "    events     %d: %s\n", len(p.Tracepoints), abbreviate(p.Tracepoints, 6))
		case p.Sampler != nil:
			fmt.Fprintf(w, "    sample     %s\n", samplerText(p.Sampler))
		case p.USDT != "":
			fmt.Fprintf(w, "    usdt       %s, %s\n", printable(p.USDT), plural(len(p.Sites), "site"))
		default:
			fmt.Fprintf(w, "    functions  %d: %s\n", len(p.Functions), abbreviate(p.Functions, 6))
		}
		if p.Binary != "" {
			fmt.Fprintf(w, "    binary     %s\n", printable(p.Binary))
		}
		var ids []string
		for _, l := range p.Links {
			ids = append(ids, fmt.Sprint(l.ID))
		}
		fmt.Fprintf(w, "    links      %d (ids %s)\n", len(p.Links), abbreviate(ids, 8))
		fmt.Fprintf(w, "    %s; missed %d\n", hitsText(p), p.Missed)
		fmt.Fprintf(w, "    dropped    %d keys, %d events\n", p.DroppedKeys, p.DroppedEvents)
		if len(p.Drift) > 0 {
			fmt.Fprintf(w, "    DRIFT      %s (apply replaces it)\n", printable(strings.Join(p.Drift, "; ")))
		}
	}
}

// hitsText is a probe's hits as its programs' roles give them: entry and
// exit where it has both (a session's one program runs at both), the one
// it has, or a tracepoint's hits and a profile's samples, which have no
// exit.
func hitsText(p runtime.ProbeStatus) string {
	roles := map[compiled.Role]bool{}
	for _, f := range p.Attach {
		if fi, ok := f.Info(); ok {
			roles[fi.Role] = true
		}
	}
	entry := roles[compiled.RoleEntry] || roles[compiled.RoleSession]
	exit := roles[compiled.RoleExit] || roles[compiled.RoleSession]
	switch {
	case entry && exit:
		return fmt.Sprintf("hits       %d entry, %d exit", p.EntryHits, p.ExitHits)
	case exit:
		return fmt.Sprintf("hits       %d exit", p.ExitHits)
	case roles[compiled.RoleSample]:
		return fmt.Sprintf("samples    %d", p.EntryHits)
	case entry:
		return fmt.Sprintf("hits       %d entry", p.EntryHits)
	}
	return fmt.Sprintf("hits       %d", p.EntryHits)
}

// renderEventsStatus writes the event buffer's health: how full it is,
// who reads it.
func renderEventsStatus(w io.Writer, ev *runtime.EventsStatus) {
	if ev == nil {
		return
	}
	fmt.Fprintf(w, "\n  %s\n", ev.Address)
	switch {
	case len(ev.Drift) > 0:
		fmt.Fprintf(w, "    size       %s\n", bpf.SizeText(ev.Size))
	case ev.Unread < 0:
		fmt.Fprintf(w, "    size       %s (how full cannot be read)\n", bpf.SizeText(ev.Size))
	default:
		fmt.Fprintf(w, "    size       %s; %s not read yet (%.1f%%)\n", bpf.SizeText(ev.Size), bytesString(ev.Unread), 100*float64(ev.Unread)/float64(ev.Size))
	}
	if ev.Reader != "" {
		fmt.Fprintf(w, "    reader     %s\n", printable(ev.Reader))
	} else {
		fmt.Fprintf(w, "    reader     none: records are kept up to the size, then dropped and counted (probectl events reads them)\n")
	}
	if ev.Retired > 0 {
		fmt.Fprintf(w, "    retired    %s of probes replaced or destroyed, for their records still unread\n", plural(ev.Retired, "layout"))
	}
	if len(ev.Drift) > 0 {
		fmt.Fprintf(w, "    DRIFT      %s (apply replaces it)\n", printable(strings.Join(ev.Drift, "; ")))
	}
}
