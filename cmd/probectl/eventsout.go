package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/probectl/probectl/internal/eventfile"
	"github.com/probectl/probectl/internal/views"
	"github.com/probectl/probectl/runtime"
	"github.com/spf13/cobra"
)

// Defaults of -events-max-size and -events-keep.
const (
	defaultEventsMaxSize = "100MiB"
	defaultEventsKeep    = 5
	minEventsMaxSize     = 4 << 10
)

// eventsOutFlags are the flags of an event sink: serve and agent write the
// workspace's events as NDJSON (the format of events -json) to a file they
// rotate, or to stdout.
type eventsOutFlags struct {
	out     string
	maxSize string
	keep    int
}

// addEventsOutFlags registers -events-out, -events-max-size and
// -events-keep on cmd.
func addEventsOutFlags(cmd *cobra.Command) *eventsOutFlags {
	f := &eventsOutFlags{}
	cmd.Flags().StringVar(&f.out, "events-out", "", "write the events as NDJSON to this file (rotated by size), or to stdout (-)")
	cmd.Flags().StringVar(&f.maxSize, "events-max-size", defaultEventsMaxSize, "rotate the -events-out file before it grows past this size (KiB, MiB, GiB, or bytes)")
	cmd.Flags().IntVar(&f.keep, "events-keep", defaultEventsKeep, "how many rotated -events-out files to keep (FILE.1 the newest)")
	return f
}

// eventsOutHelp documents the flags in a command's long help.
const eventsOutHelp = `  -events-out PATH|-     write the workspace's events as NDJSON, as events
                         -json prints them (README, "Events out"), to PATH,
                         rotated by size, or to stdout (-), which then carries
                         nothing else; the sink holds the buffer's reader lock
  -events-max-size SIZE  rotate PATH before it grows past SIZE (default
                         ` + defaultEventsMaxSize + `; KiB, MiB, GiB or bytes, at least 4KiB)
  -events-keep N         rotated files kept: PATH.1 (the newest) to PATH.N
                         (default 5; 0 keeps none)`

var byteSize = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([0-9]{1,15})(KiB|MiB|GiB)?$`) }) // compiled when used

// parseByteSize reads a size: bytes, or a whole number of KiB, MiB or GiB.
func parseByteSize(s string) (int64, error) {
	m := byteSize().FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("%q is not a size: write a whole number of bytes, or of KiB, MiB or GiB (powers of 1024), such as 100MiB", s)
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	unit := map[string]int64{"": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[m[2]]
	if n > (1<<62)/unit {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return n * unit, nil
}

// check parses the flags; what is wrong is said with the flag's name.
func (f *eventsOutFlags) check() (maxSize int64, err error) {
	if f == nil {
		return 0, nil
	}
	maxSize, err = parseByteSize(f.maxSize)
	if err != nil {
		return 0, fmt.Errorf("-events-max-size: %w", err)
	}
	if maxSize < minEventsMaxSize {
		return 0, fmt.Errorf("-events-max-size %s: it must be at least 4KiB", f.maxSize)
	}
	if f.keep < 0 {
		return 0, fmt.Errorf("-events-keep %d: it cannot be negative", f.keep)
	}
	return maxSize, nil
}

// startEventSink starts writing the events of g's workspace as f says
// (eventfile.Start): nil, nil without -events-out. With -events-out -,
// the events go to stdout; notices go to stderr.
func startEventSink(ctx context.Context, g *globals, f *eventsOutFlags, stdout, stderr io.Writer) (*eventfile.Sink, error) {
	if f == nil || f.out == "" {
		return nil, nil
	}
	maxSize, err := f.check()
	if err != nil {
		return nil, err
	}
	o := eventfile.Options{Path: f.out, MaxSize: maxSize, Keep: f.keep, Printer: func(out io.Writer) runtime.EventPrinter {
		return views.NewEvents(out, stderr, true, nil)
	}}
	return eventfile.Start(ctx, g.stateDir, g.workspace, o, stdout, stderr)
}

// slogLines is an io.Writer that logs each line written to it as one
// record: the sink's notices in the agent's structured log
// (startEventSink(ctx, g, f, stdout, slogLines{log})).
type slogLines struct{ log *slog.Logger }

func (s slogLines) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		if line != "" {
			s.log.Info(line, "component", "events-out")
		}
	}
	return len(p), nil
}
