package eventfile

import (
	"context"
	"fmt"
	"io"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/runtime"
)

// Options say where and how a sink writes.
type Options struct {
	// Path is the file (rotated by size), or "-" for stdout.
	Path string
	// MaxSize is the size a file is rotated before it grows past; Keep
	// how many rotated files are kept (PATH.1 the newest).
	MaxSize int64
	Keep    int
	// Printer makes the view the sink writes with (required): NDJSON,
	// as events -json prints, to out.
	Printer func(out io.Writer) runtime.EventPrinter
}

// Sink writes a workspace's events as NDJSON until stopped.
type Sink struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// Start starts writing the events of the workspace in stateDir as o
// says, in a goroutine. It opens the buffer, if the workspace has one
// (refusing when another reader holds it), then the file (refusing a path
// that is not a regular file in a directory: see Open; the error names
// -events-out, the flag of serve and agent that gives it); without a
// buffer it waits for one. It follows the buffer through applies, and
// through destroys: a removed buffer's stream is closed and the
// workspace's next buffer read (runtime.Follower). Notices go to notices;
// with "-", the events go to stdout. Stop it with Stop, which writes the
// summary line last; Done is closed when it ends by itself (a write
// error, which Stop returns).
func Start(ctx context.Context, stateDir, workspace string, o Options, stdout, notices io.Writer) (*Sink, error) {
	w, err := runtime.Open(stateDir, workspace)
	if err != nil {
		return nil, err
	}
	// The buffer first: another reader at the start is an error (one is
	// configured where only one can read), and leaves no file behind.
	s, err := w.Inspect()
	if err != nil {
		w.Close()
		return nil, err
	}
	var st *runtime.EventStream
	if s.Events != nil {
		if st, err = w.OpenEvents(s); err != nil {
			w.Close()
			return nil, err
		}
	}
	out, where := stdout, "stdout"
	var file *File
	if o.Path != "-" {
		file, err = Open(o.Path, o.MaxSize, o.Keep)
		if err != nil {
			if st != nil {
				st.Close()
			}
			w.Close()
			return nil, fmt.Errorf("-events-out: %w", err)
		}
		out = file
		where = fmt.Sprintf("%s (rotated at %s, %d kept)", o.Path, bpf.SizeText(int(o.MaxSize)), o.Keep)
	}
	fo := runtime.FollowOptions{Wait: true, Notices: notices}
	fmt.Fprintf(notices, "Writing the events of workspace %q to %s.\n", w.Name, where)
	if file != nil {
		if file.cut > 0 {
			fmt.Fprintf(notices, "%s ended inside a line (a write that failed, or a crash): its last %d bytes were removed; that event is still in the buffer, and written again.\n", o.Path, file.cut)
		}
		fo.Written, fo.LastLine = file.Written, file.last
	}
	fl := runtime.NewFollower(w, st, o.Printer(out), fo)
	ctx, cancel := context.WithCancel(ctx)
	sink := &Sink{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(sink.done)
		err := fl.Run(ctx)
		if serr := fl.Finish(); err == nil {
			err = serr
		}
		if file != nil {
			if cerr := file.Close(); err == nil {
				err = cerr
			}
		}
		w.Close()
		if err != nil {
			sink.err = fmt.Errorf("events to %s: %w", where, err)
		}
	}()
	return sink, nil
}

// Done is closed when the sink ended: stopped, or by an error. A nil sink
// (no -events-out) is never done.
func (s *Sink) Done() <-chan struct{} {
	if s == nil {
		return nil
	}
	return s.done
}

// Stop reads what the buffer holds, writes the summary, closes the file,
// and returns the error that ended the sink, if any. A nil sink stops at
// once.
func (s *Sink) Stop() error {
	if s == nil {
		return nil
	}
	s.cancel()
	<-s.done
	return s.err
}
