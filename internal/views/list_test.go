package views

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/probectl/probectl/compiler/compiled"
)

func TestListViews(t *testing.T) {
	points := []compiled.ProbePoint{
		{Kind: "tracepoint", Name: "syscalls:sys_enter_openat", Fields: []string{"int __syscall_nr", "const char * filename"}},
		// A facts file's names are anyone's: quoted, never raw.
		{Kind: "kprobe", Name: "evil\x1b[2J"},
	}
	var b bytes.Buffer
	if err := NewList(false, &b).List("linux 6.12 x86_64 (file f.json)", points); err != nil {
		t.Fatal(err)
	}
	want := "tracepoint:syscalls:sys_enter_openat\n    int __syscall_nr\n    const char * filename\n\"kprobe:evil\\x1b[2J\"\n"
	if b.String() != want {
		t.Errorf("human:\n%q\nwant\n%q", b.String(), want)
	}

	b.Reset()
	if err := NewList(true, &b).List("linux 6.12 x86_64 (file f.json)", points); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Target string `json:"target"`
		Probes []struct {
			Probe, Kind, Name string
			Fields            []string
		} `json:"probes"`
	}
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Target != "linux 6.12 x86_64 (file f.json)" || len(doc.Probes) != 2 || doc.Probes[0].Probe != "tracepoint:syscalls:sys_enter_openat" ||
		doc.Probes[0].Name != "syscalls:sys_enter_openat" || len(doc.Probes[0].Fields) != 2 || doc.Probes[1].Probe != "kprobe:evil\x1b[2J" || doc.Probes[1].Fields != nil {
		t.Errorf("JSON: %+v\n%s", doc, b.String())
	}
}
