package views

import (
	"bytes"
	"strings"
	"testing"

	"github.com/probectl/probectl/compiler/compiled"
	"github.com/probectl/probectl/runtime"
)

// status shows the hits that apply to a probe's programs: a tracepoint
// and a profile have no exit (issue 21: "0 exit"), a probe attached at
// entry only has none either, a session program counts both.
func TestStatusHitsAsTheyApply(t *testing.T) {
	for _, c := range []struct {
		attach []compiled.Family
		want   string
	}{
		{[]compiled.Family{compiled.FamilyTracepoint}, "    hits       7; missed 1\n"},
		{[]compiled.Family{compiled.FamilyPerfEvent}, "    samples    7; missed 1\n"},
		{[]compiled.Family{compiled.FamilyUprobeMulti}, "    hits       7 entry; missed 1\n"},
		{[]compiled.Family{compiled.FamilyKretprobeMulti}, "    hits       3 exit; missed 1\n"},
		{[]compiled.Family{compiled.FamilyFentry, compiled.FamilyFexit}, "    hits       7 entry, 3 exit; missed 1\n"},
		{[]compiled.Family{compiled.FamilyKprobeSession}, "    hits       7 entry, 3 exit; missed 1\n"},
	} {
		st := runtime.ProbeStatus{EntryHits: 7, ExitHits: 3, Missed: 1}
		st.Address.Kind, st.Address.Name = "tracepoint", "p"
		st.Attach = c.attach
		var b bytes.Buffer
		if err := (StatusHuman{&b}).Status(&runtime.State{Workspace: "bt-paper"}, []runtime.ProbeStatus{st}, nil, nil); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), c.want) {
			t.Errorf("%v: want %q in:\n%s", c.attach, c.want, b.String())
		}
	}
}
