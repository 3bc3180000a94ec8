package runtime_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/probectl/probectl/runtime"
)

// linePrinter prints each record as its NDJSON line to a disk that takes
// the first room bytes and then fails: what the follower needs of
// probectl's printer, with a full disk.
type linePrinter struct {
	held            bytes.Buffer
	printed         int64
	written         int64 // bytes on the disk, whole lines
	room            int64
	records, summed int
}

func (p *linePrinter) Record(r *runtime.EventRecord) error {
	b, err := r.MarshalJSON()
	if err != nil {
		return err
	}
	p.held.Write(append(b, '\n'))
	p.printed += int64(len(b) + 1)
	p.records++
	return nil
}

func (p *linePrinter) Drops([]runtime.ProbeDrops)     {}
func (p *linePrinter) EndStream([]runtime.ProbeDrops) {}
func (p *linePrinter) Summary([]runtime.ProbeDrops) error {
	p.summed++
	return nil
}
func (p *linePrinter) Held() int      { return p.held.Len() }
func (p *linePrinter) Printed() int64 { return p.printed }

// Flush writes the whole lines that fit, as a sink's file does when the
// disk fills: the line that does not fit is not written at all.
func (p *linePrinter) Flush() error {
	for p.held.Len() > 0 {
		line, _ := p.held.ReadBytes('\n')
		if p.written+int64(len(line)) > p.room {
			p.held.Reset()
			return errors.New("no space left on device")
		}
		p.written += int64(len(line))
	}
	return nil
}

// TestFollowerCommitsWrittenLines replays issue 18's sink on a full disk:
// the follower consumes a record only once its line was written. Of 20
// records, the disk takes 7 lines; the follower ends with the disk's
// error, and the next reader reads the 13 records it did not write, from
// the 8th on.
func TestFollowerCommitsWrittenLines(t *testing.T) {
	requireRoot(t)
	w := workspace(t)
	s, _ := apply(t, w, `probe "user" "calls" {
  binary    = "WORK"
  functions = ["target"]
  on_entry {
    event "t" {
      fields = { x = arg0 }
    }
  }
}`)
	st, err := w.OpenEvents(s)
	if err != nil {
		t.Fatal(err)
	}
	runWork(t, 20)
	// The room of 7 lines: each line's length, from a first read of the
	// buffer that consumes nothing.
	var lines []int64
	st.HoldRecords()
	if err := st.ReadBuffered(func(r *runtime.EventRecord) error {
		b, err := r.MarshalJSON()
		lines = append(lines, int64(len(b)+1))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	st.Rewind()
	if len(lines) != 20 {
		t.Fatalf("%d records, want 20", len(lines))
	}
	pr := &linePrinter{}
	for _, n := range lines[:7] {
		pr.room += n
	}
	f := runtime.NewFollower(w, st, pr, runtime.FollowOptions{Written: func() int64 { return pr.written }})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = f.Run(ctx)
	if err == nil || err.Error() != "no space left on device" {
		t.Fatalf("Run: %v, want the disk's error", err)
	}
	if err := f.Finish(); err != nil || pr.summed != 1 {
		t.Fatalf("Finish: %v; %d summaries", err, pr.summed)
	}
	if pr.records != 20 {
		t.Errorf("the follower printed %d records, want 20", pr.records)
	}
	s, err = w.Inspect()
	if err != nil {
		t.Fatal(err)
	}
	next, err := w.OpenEvents(s)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	var left []string
	if err := next.ReadBuffered(func(r *runtime.EventRecord) error {
		left = append(left, fmt.Sprint(r.Fields))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var want []string
	for x := 7; x < 20; x++ {
		want = append(want, fmt.Sprintf("[{x %d}]", x))
	}
	if fmt.Sprint(left) != fmt.Sprint(want) {
		t.Errorf("the next reader read %v, want the 13 records not written: %v", left, want)
	}
}
