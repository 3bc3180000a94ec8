package views

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/probectl/probectl/bpf/symbols"
	"github.com/probectl/probectl/runtime"
)

// run without -v: an aggregation of 15 stacks prints its summary (all
// samples, the lost ones, distinct stacks) and its 10 largest, and how
// many it left out; top 0 prints all 15 without the summary.
func TestWriteResultsTopStacks(t *testing.T) {
	var entries []runtime.Entry
	var total int64
	for i := 15; i >= 1; i-- {
		v := int64(i)
		total += v
		s := &runtime.Stack{Frames: []symbols.Frame{{Symbol: fmt.Sprintf("fn%02d", i)}}}
		if i == 1 {
			s = &runtime.Stack{Err: "stack lost: stack map full"}
		}
		entries = append(entries, runtime.Entry{Key: runtime.OrderedKey{{Name: "kstack", Value: s}}, Value: &v})
	}
	results := []runtime.ProbeResult{{Address: "profile.cpu", Aggregations: []runtime.AggregationResult{
		{Name: "samples", Kind: "count", Entries: entries}}}}
	var b bytes.Buffer
	WriteResultsTop(&b, results, 10, EventsOfRun)
	out := b.String()
	if want := fmt.Sprintf("    %d samples, 1 lost, 15 distinct stacks; the top 10:\n", total); !strings.Contains(out, want) {
		t.Errorf("no summary %q in:\n%s", want, out)
	}
	if n := strings.Count(out, "    count: "); n != 10 {
		t.Errorf("%d stacks printed, want 10:\n%s", n, out)
	}
	if !strings.Contains(out, "fn06") || strings.Contains(out, "fn05") {
		t.Errorf("want the 10 largest (fn15 to fn06):\n%s", out)
	}
	if !strings.Contains(out, "(5 more stacks, with smaller values)") {
		t.Errorf("no count of the stacks left out:\n%s", out)
	}
	b.Reset()
	WriteResultsTop(&b, results, 0, EventsOfRun)
	if n := strings.Count(b.String(), "    count: "); n != 15 || strings.Contains(b.String(), "distinct") {
		t.Errorf("top 0: %d stacks, want all 15 and no summary:\n%s", n, b.String())
	}
}

// A probe with events only says where they are: show's, that the
// workspace's are followed by probectl events and written by serve and
// agent -events-out; run's, that it prints them.
func TestWriteResultsEventsOnly(t *testing.T) {
	results := []runtime.ProbeResult{{Address: "tracepoint.exits", Events: true}}
	var b bytes.Buffer
	if err := (ResultsHuman{&b}).Results(results, nil); err != nil {
		t.Fatal(err)
	}
	if want := "tracepoint.exits\n  (events only: probectl events prints them (-follow: as they arrive); serve and agent -events-out write them as NDJSON)\n"; b.String() != want {
		t.Errorf("show:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	WriteResultsTop(&b, results, 10, EventsOfRun)
	if want := "tracepoint.exits\n  (events only: run prints them as they arrive)\n"; b.String() != want {
		t.Errorf("run:\n%s\nwant:\n%s", b.String(), want)
	}
}

// Quiet holds text records back: Digest prints the count by probe and the
// last n lines, once; Summary says they were read, not printed.
func TestEventsQuiet(t *testing.T) {
	var out, errOut bytes.Buffer
	p := NewEvents(&out, &errOut, false, nil)
	p.Quiet(3)
	at := time.Unix(1700000000, 0)
	for i := 0; i < 20; i++ {
		probe := "tracepoint.a"
		if i%4 == 0 {
			probe = "tracepoint.b"
		}
		r := &runtime.EventRecord{Type: runtime.RecordEvent, Probe: probe, Name: "ev", Wall: at,
			Fields: runtime.OrderedKey{{Name: "i", Value: int64(i)}}}
		if err := p.Record(r); err != nil {
			t.Fatal(err)
		}
	}
	p.Digest()
	p.Digest() // nothing new: nothing printed
	p.Flush()
	got := out.String()
	lines := strings.Split(strings.TrimSpace(got), "\n")
	if len(lines) != 4 || lines[0] != "--- 20 events (tracepoint.a 15, tracepoint.b 5); the last 3:" {
		t.Fatalf("digest:\n%s", got)
	}
	for k, i := range []int{17, 18, 19} {
		if !strings.HasSuffix(lines[k+1], fmt.Sprintf(" ev: i=%d", i)) {
			t.Errorf("line %d %q: want event %d", k+1, lines[k+1], i)
		}
	}
	out.Reset()
	p.Summary(nil)
	if !strings.HasPrefix(out.String(), "Events: 20 read (") {
		t.Errorf("summary %q", out.String())
	}
}

// A power-of-two bucket of one value is [1], as bpftrace draws hist; an
// lhist's bucket of step 1 is [0, 1), as bpftrace draws lhist.
func TestHistogramLabels(t *testing.T) {
	var b strings.Builder
	drawHistogram(&b, []runtime.Bucket{{Low: 0, High: 1, Count: 2}, {Low: 1, High: 2, Count: 1}, {Low: 2, High: 4, Count: 1}}, false)
	if got := b.String(); !strings.Contains(got, "    [0]  ") || !strings.Contains(got, "    [1]  ") || !strings.Contains(got, "    [2, 4)  ") {
		t.Errorf("hist:\n%s", got)
	}
	b.Reset()
	drawHistogram(&b, []runtime.Bucket{{Low: 0, High: 1, Count: 2}, {Low: 1, High: 2, Count: 1}, {Low: 2, High: math.MaxInt64, Count: 1}}, true)
	if got := b.String(); !strings.Contains(got, "    [0, 1)  ") || !strings.Contains(got, "    [1, 2)  ") || !strings.Contains(got, "    [2, inf)  ") || strings.Contains(got, "[0]") {
		t.Errorf("lhist:\n%s", got)
	}
}
