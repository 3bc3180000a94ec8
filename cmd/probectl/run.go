package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/examples"
	"github.com/probectl/probectl/internal/bttext"
	"github.com/probectl/probectl/internal/engine"
	"github.com/probectl/probectl/internal/termtext"
	"github.com/probectl/probectl/internal/views"
	"github.com/probectl/probectl/runtime"
	"github.com/probectl/probectl/spec"
	"github.com/probectl/probectl/spec/bpftrace"
	"github.com/spf13/cobra"
)

// runOptions are run's flags.
type runOptions struct {
	duration, interval   time.Duration
	asJSON, totals       bool
	verbose              bool
	flameFile, pprofFile string
	aggName, symbolDirs  string
	pid                  int            // -p: the process a bpftrace program is limited to
	proc                 *tracedProcess // -p's process, open
	command              string         // -c: the command to start and trace
	child                *heldChild     // -c's child, held until the probes are attached
	bt                   bpftrace.Options
	prints               bpftrace.Prints // an imported program's printfs (btprint.go)
	format               string          // -f: text or json, bpftrace's output formats
	bto                  *btOutput       // an imported program's output (btmaps.go)
	beginText            string          // what its BEGIN prints, for a program of BEGIN alone
	beginExit            bool            // its BEGIN calls exit(): stop at once
}

// Without -v, run draws the runTopStacks largest stacks of an aggregation
// keyed by stacks, and the last runLastEvents events of each interval.
const (
	runTopStacks  = 10
	runLastEvents = 5
)

// check refuses what no run can do.
func (o *runOptions) check() error {
	if o.duration < 0 || o.interval < 0 {
		return fmt.Errorf("-duration and -interval cannot be negative")
	}
	switch {
	case o.format != "text" && o.format != "json":
		return fmt.Errorf("-f is text or json, not %q", o.format)
	case o.format == "json" && o.asJSON:
		return fmt.Errorf("give -f json (a bpftrace program's output as bpftrace -f json prints it) or -json (probectl's NDJSON), not both")
	}
	return nil
}

func newRunCmd() *cobra.Command {
	var o runOptions
	var program string
	cmd := &cobra.Command{
		Use:   "run [PATH... | FILE.bt | -e PROGRAM] [-p PID | -c CMD] [-f json] [-duration D] [-interval D] [-totals] [-v] [-json] [-flamegraph FILE.svg] [-pprof FILE.pb.gz]",
		Short: "Apply specs into a temporary workspace, print what they measure, destroy on exit",
		Long: `Run is the one-command way to try a spec: it attaches it, prints the results
every interval and events as they arrive, and detaches everything on exit
(Ctrl-C, -duration, or an error). It names the optional probes it leaves
out and why, and the optional patterns that matched nothing. Its probes are never pinned: they live
exactly as long as the probectl process, so even kill -9 leaves nothing
attached. Events come out as probectl events prints them: every probe's,
in the order they were reserved, with their time; without -v, each
interval prints how many each probe emitted and the last 5. Events that
find the buffer full are dropped, counted and reported as they happen; at
exit the buffer is drained and the totals printed. An aggregation keyed
by stacks prints its samples, lost and distinct stacks and the 10 largest
(-v: all). With no PATH it runs the built-in example: tracepoints on
system calls. A bpftrace program (FILE.bt, or -e PROGRAM) runs as the
spec probectl import writes of it, and prints as bpftrace 0.17 prints:
its printf lines, what its BEGIN (once the probes are attached), END
and interval probes print (printf, time, print(@map), clear, zero), and
at the end every map (results every -interval only when -interval is
given). BEGIN's exit() stops at once, and a program of BEGIN alone
prints and waits, as bpftrace does.

  -duration D  stop after D (default: until Ctrl-C)
  -interval D  print the results every D (default 5s; 0: only at the end):
               counts, sums and histograms as what the interval added,
               min and max since the start; the totals at the end
  -totals      print the totals since the start at every interval
  -v           print every event and every stack
  -flamegraph FILE.svg
               at the end, write the flame graph show -flamegraph writes
               (-aggregation NAME picks the aggregation keyed by stacks;
               -symbols DIR[:DIR] where to find exited processes' files)
  -pprof FILE.pb.gz
               at the end, write the pprof profile show -pprof writes
  -e PROGRAM   run this bpftrace program (as probectl import takes it)
  -p PID       as bpftrace -p: limit the program to process PID (its user
               probes attach to that process; tracepoint, kernel and
               profile probes count its events only, by its pid, not its
               children's) and stop when it exits
  -c CMD       as bpftrace -c: start CMD (its words; found on PATH),
               held until the probes are attached, limit the program to
               it as -p does (cpid is its pid) and stop when it exits;
               a run that ends first sends it SIGTERM. probectl's exit
               status is its own, not CMD's
  -f json      a bpftrace program's output as bpftrace -f json prints
               it: one JSON object a line (attached_probes, printf,
               map, hist, stats, lost_events); what run says goes to
               stderr
  -json        NDJSON on stdout: events as probectl events -json prints
               them, results as {"type": "results", ...} objects (show
               -json's probes and tables), the summary last`,
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			if err = requireBPF("run"); err != nil {
				return err
			}
			if err = o.check(); err != nil {
				return err
			}
			o.bt = bpftrace.Options{PID: o.pid}
			if o.pid != 0 || o.command != "" {
				if program == "" && !(len(args) == 1 && strings.HasSuffix(args[0], ".bt")) {
					fmt.Fprintln(cmd.ErrOrStderr(), "Error: -p PID and -c CMD limit a bpftrace program (-e PROGRAM or FILE.bt); a spec names its process with pid = PID in its user probes, or when = pid == PID")
					return exitError{2}
				}
				if o.pid != 0 && o.command != "" {
					fmt.Fprintln(cmd.ErrOrStderr(), "Error: give -p PID or -c CMD, not both")
					return exitError{2}
				}
				if o.command != "" {
					if o.child, err = startChild(o.command, cmd.OutOrStdout(), cmd.ErrOrStderr()); err != nil {
						fmt.Fprintf(cmd.ErrOrStderr(), "Error: %v\n", err)
						return exitError{1}
					}
					defer o.child.end()
					o.pid = o.child.cmd.Process.Pid
					o.bt = bpftrace.Options{PID: o.pid, CPID: o.pid}
				}
				if o.proc, err = openProcess(o.pid); err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "Error: %v\n", err)
					return exitError{1}
				}
				defer o.proc.close()
			}
			cfg, out, err := compileRun(cmd, args, program, &o)
			if err != nil {
				return err
			}
			if o.format == "json" && o.bto == nil {
				fmt.Fprintln(cmd.ErrOrStderr(), "Error: -f json prints a bpftrace program's output (-e PROGRAM or FILE.bt) as bpftrace -f json does; a spec's results print as NDJSON with -json")
				return exitError{2}
			}
			if out == nil {
				return runBegin(cmd, o)
			}
			return runProbes(cmd, cfg, out, o)
		},
	}
	cmd.Flags().StringVarP(&program, "program", "e", "", "run this bpftrace program")
	cmd.Flags().IntVarP(&o.pid, "pid", "p", 0, "limit the bpftrace program to this process, and stop when it exits")
	cmd.Flags().StringVarP(&o.command, "command", "c", "", "start this command once the probes are attached, limit the bpftrace program to it, and stop when it exits")
	cmd.Flags().DurationVar(&o.duration, "duration", 0, "stop after this long (0: until Ctrl-C)")
	cmd.Flags().DurationVar(&o.interval, "interval", 5*time.Second, "print results this often (0: only at the end)")
	cmd.Flags().StringVarP(&o.format, "format", "f", "text", "a bpftrace program's output format: text or json, as bpftrace -f")
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print NDJSON: events, results and the summary, as probectl events -json")
	cmd.Flags().BoolVar(&o.totals, "totals", false, "print totals since the start at each interval, not what the interval added")
	cmd.Flags().StringVar(&o.flameFile, "flamegraph", "", "at the end, write an SVG flame graph of the aggregation keyed by stacks to this file")
	cmd.Flags().StringVar(&o.pprofFile, "pprof", "", "at the end, write a pprof profile of the aggregation keyed by stacks to this file")
	cmd.Flags().BoolVarP(&o.verbose, "verbose", "v", false, "print every event and every stack")
	cmd.Flags().StringVar(&o.aggName, "aggregation", "", "the aggregation -flamegraph and -pprof write, when several are keyed by stacks")
	cmd.Flags().StringVar(&o.symbolDirs, "symbols", "", "directories (colon-separated) to find the files of user stacks in, by build id")
	return cmd
}

// compileRun compiles the specs at args for the live kernel, a bpftrace
// program (one FILE.bt, or -e PROGRAM) as probectl import writes it, or
// with neither the built-in example.
func compileRun(cmd *cobra.Command, args []string, program string, o *runOptions) (*spec.Config, *compiler.Output, error) {
	switch {
	case program != "" && len(args) > 0:
		fmt.Fprintln(cmd.ErrOrStderr(), "Error: -e PROGRAM runs that program alone: give no PATH with it")
		return nil, nil, exitError{2}
	case program != "":
		return compileBpftrace(cmd, "-e", []byte(program), o)
	case len(args) == 1 && strings.HasSuffix(args[0], ".bt"):
		src, d := spec.ReadFile(args[0])
		if d != nil {
			termtext.Diagnostics(cmd.ErrOrStderr(), hcl.Diagnostics{d}, nil)
			return nil, nil, exitError{1}
		}
		return compileBpftrace(cmd, args[0], src, o)
	case len(args) == 0:
		return compileDemo(cmd)
	}
	return compileLive(cmd, args, spec.Policy{})
}

// compileBpftrace imports a bpftrace program and compiles the spec.
// An interval probe calling exit() stops the run after its interval,
// unless -duration says otherwise.
func compileBpftrace(cmd *cobra.Command, name string, src []byte, o *runOptions) (*spec.Config, *compiler.Output, error) {
	imp, diags := bpftrace.ImportRun(name, src, o.bt)
	o.prints = imp.Prints
	if diags.HasErrors() {
		termtext.Diagnostics(cmd.ErrOrStderr(), diags, map[string][]byte{name: src})
		return nil, nil, exitError{1}
	}
	// bpftrace prints its maps at the end, and what its interval probes
	// print: probectl's results each interval only when asked.
	// -json is probectl's own results, as for a spec.
	if !o.asJSON {
		o.bto = newBtOutput(imp, o.format == "json")
	}
	if !cmd.Flags().Changed("interval") {
		o.interval = 0
	}
	if imp.StopAfter > 0 && o.duration == 0 {
		o.duration = imp.StopAfter
	}
	o.beginText, o.beginExit = imp.BeginText, imp.BeginExit
	if imp.Spec == nil {
		return nil, nil, nil // BEGIN alone: runBegin
	}
	return compileSources(cmd, map[string][]byte{strings.TrimSuffix(name, ".bt") + ".hcl": imp.Spec})
}

func compileDemo(cmd *cobra.Command) (*spec.Config, *compiler.Output, error) {
	return compileSources(cmd, map[string][]byte{examples.DemoName: examples.Demo})
}

// compileSources parses specs held in memory and compiles them for the
// live kernel.
func compileSources(cmd *cobra.Command, sources map[string][]byte) (*spec.Config, *compiler.Output, error) {
	cfg, err := parseSources(cmd, sources)
	if err != nil {
		return nil, nil, err
	}
	facts, err := engine.TargetFacts("auto", cfg)
	if err != nil {
		return nil, nil, err
	}
	return compileFor(cmd, cfg, facts, spec.Policy{})
}

// probeRun is one run: its session, the printer its events and results
// go through, and the reader of its event buffer.
type probeRun struct {
	cmd      *cobra.Command
	o        runOptions
	say      io.Writer // what run says: stderr with -json, where stdout is NDJSON alone
	sess     *runtime.Session
	pr       *views.Events
	st       *runtime.EventStream // nil when no probe emits events
	wg       sync.WaitGroup
	stopping atomic.Bool
	exited   atomic.Bool        // a probe's exit() printed: nothing after it prints (btprint.go)
	exit     context.CancelFunc // ends the run at a probe's exit()
	drained  bool
	last     []runtime.ProbeResult // the results the last interval showed
	btFired  []time.Time           // when each interval probe last ran (btmaps.go)
	started  time.Time
}

func runProbes(cmd *cobra.Command, cfg *spec.Config, out *compiler.Output, o runOptions) (err error) {
	for _, r := range runtime.CleanRuns() {
		fmt.Fprintf(cmd.ErrOrStderr(), "Removed %s, left by a probectl run that was killed.\n", r)
	}
	r := &probeRun{cmd: cmd, o: o, say: cmd.OutOrStdout(), started: time.Now()}
	if o.asJSON || o.format == "json" {
		r.say = cmd.ErrOrStderr()
	}
	r.sess, err = runtime.Attach(out)
	if err != nil {
		return reportApplyError(cmd, err, cfg)
	}
	r.sess.Symbols.Dirs = filepath.SplitList(o.symbolDirs)
	defer func() {
		if cerr := r.sess.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("detach: %w", cerr)
		}
		if err == nil {
			fmt.Fprintln(r.say, "\nDetached and removed every probe.")
		}
	}()
	r.announce(out.Skipped)
	ctx, stop := o.context()
	defer stop()
	ctx, r.exit = context.WithCancel(ctx)
	defer r.exit()
	if o.beginExit {
		stop() // BEGIN's exit(): the results, as they are, and out
	}
	if o.proc != nil {
		var unwatch context.CancelFunc
		ctx, unwatch = o.proc.watch(ctx, r.say)
		defer unwatch()
	}
	r.pr = views.NewEvents(cmd.OutOrStdout(), cmd.ErrOrStderr(), o.asJSON, nil)
	if !o.verbose && !o.asJSON {
		r.pr.Quiet(runLastEvents)
	}
	defer r.pr.Flush()
	if err := r.follow(); err != nil {
		return err
	}
	if r.st != nil {
		defer r.st.Close()
	}
	defer r.drain()
	if o.bto != nil {
		r.pr.WithPrinter(func(w io.Writer) {
			if o.bto.json {
				io.WriteString(w, bttext.AttachedJSON(o.bto.probes))
			}
			o.bto.steps(w, o.bto.begin, r.sess.Read)
		})
	}
	if o.child != nil {
		o.child.release()
	}
	return r.loop(ctx)
}

// runBegin runs a bpftrace program of BEGIN (and END) alone, as bpftrace
// does: it prints what BEGIN prints, then waits for Ctrl-C (or -duration,
// or -p's process), unless BEGIN calls exit(). Nothing is attached.
func runBegin(cmd *cobra.Command, o runOptions) error {
	say := cmd.OutOrStdout()
	if o.asJSON {
		say = cmd.ErrOrStderr()
	}
	if o.child != nil {
		o.child.release()
	}
	fmt.Fprint(say, o.beginText)
	if o.beginExit {
		return nil
	}
	ctx, stop := o.context()
	defer stop()
	if o.proc != nil {
		var unwatch context.CancelFunc
		ctx, unwatch = o.proc.watch(ctx, say)
		defer unwatch()
	}
	<-ctx.Done()
	return nil
}

// announce says what is attached (and of its optional patterns, which
// matched nothing), which optional probes are not and why, and for how
// long.
func (r *probeRun) announce(skipped []compiler.Skipped) {
	for _, p := range r.sess.States {
		fmt.Fprintf(r.say, "Attached %s: %s via %s.\n", p.Address, p.Route, compiler.JoinFamilies(p.Attach))
		for _, m := range p.Missing {
			fmt.Fprintf(r.say, "  Not attached: %s.\n", termtext.Printable(m))
		}
	}
	for _, sk := range skipped {
		fmt.Fprintf(r.say, "Skipped %s (optional): %s\n", sk.Address, sentence(termtext.Printable(sk.Why)))
	}
	until := "until Ctrl-C"
	if r.o.proc != nil {
		until = fmt.Sprintf("until process %d exits or Ctrl-C", r.o.pid)
		if r.o.child != nil {
			until = fmt.Sprintf("until %s (process %d) exits or Ctrl-C", strings.Fields(r.o.command)[0], r.o.pid)
		}
	}
	if r.o.duration > 0 {
		until = "for " + r.o.duration.String()
	}
	fmt.Fprintf(r.say, "Running %s.\n", until)
}

// sentence is s ending in a period.
func sentence(s string) string {
	if strings.HasSuffix(s, ".") {
		return s
	}
	return s + "."
}

// context ends at Ctrl-C, SIGTERM or after -duration.
func (o runOptions) context() (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	if o.duration <= 0 {
		return ctx, stop
	}
	ctx, cancel := context.WithTimeout(ctx, o.duration)
	return ctx, func() { cancel(); stop() }
}

// follow starts the one reader of the session's event buffer, which
// prints the records in the order they were reserved, through the
// printer events uses.
func (r *probeRun) follow() error {
	st, err := r.sess.OpenEvents()
	if err != nil {
		return err
	}
	r.st = st
	if st != nil {
		r.wg.Add(1)
		go r.readEvents()
	}
	return nil
}

func (r *probeRun) readEvents() {
	defer r.wg.Done()
	for !r.stopping.Load() {
		rec, err := r.st.Next(time.Now().Add(200 * time.Millisecond))
		switch {
		case err == nil:
			err = r.record(rec)
		case errors.Is(err, runtime.ErrIdle):
			r.pr.Flush()
			r.st.Housekeep()
			err = nil
		}
		if err != nil {
			fmt.Fprintf(r.cmd.ErrOrStderr(), "events: %v\n", err)
			return
		}
	}
}

// drain stops the producers, then reads what the buffer holds; once.
func (r *probeRun) drain() error {
	if r.drained {
		return nil
	}
	r.drained = true
	_ = r.sess.Detach()
	r.stopping.Store(true)
	r.wg.Wait()
	if r.st != nil && !r.exited.Load() {
		return r.st.ReadBuffered(r.pr.Record)
	}
	return nil
}

// loop shows the results every interval and the drops every second,
// and fills the pod maps of when conditions every runtime.PodRefresh,
// until ctx ends.
func (r *probeRun) loop(ctx context.Context) error {
	var tick <-chan time.Time
	if r.o.interval > 0 {
		t := time.NewTicker(r.o.interval)
		defer t.Stop()
		tick = t.C
	}
	dropTick := time.NewTicker(time.Second)
	defer dropTick.Stop()
	podTick := time.NewTicker(runtime.PodRefresh)
	defer podTick.Stop()
	btTick, btStop := r.btIntervals()
	defer btStop()
	for {
		select {
		case <-ctx.Done():
			r.btDue(ctx)
			return r.finish()
		case i := <-btTick:
			if r.btInterval(i) {
				return r.finish()
			}
		case <-tick:
			r.show(false)
		case <-dropTick.C:
			r.reportDrops()
		case <-podTick.C:
			if err := r.sess.RefreshPods(); err != nil {
				fmt.Fprintf(r.cmd.ErrOrStderr(), "Warning: pod maps: %v\n", err)
			}
		}
	}
}

// finish drains the events, shows the totals, writes the flame graph
// and prints the events' summary.
func (r *probeRun) finish() error {
	if err := r.drain(); err != nil {
		return err
	}
	if r.o.bto != nil {
		var lost uint64
		if r.st != nil {
			for _, d := range r.st.Drops() {
				lost += d.During
			}
		}
		r.pr.WithPrinter(func(w io.Writer) { r.o.bto.finish(w, r.sess.Read, lost) })
	} else {
		r.show(true)
	}
	so := stackOutputs{aggName: r.o.aggName, flameFile: r.o.flameFile, pprofFile: r.o.pprofFile,
		samplers: samplersOf(r.sess.States), since: r.started}
	if so.any() {
		var results []runtime.ProbeResult
		progress(r.cmd.ErrOrStderr(), "Reading and symbolizing the stacks", func() { results = r.sess.Read() })
		if err := showStacks(r.cmd, results, so); err != nil {
			return err
		}
	}
	switch {
	case r.st != nil && r.o.format == "json":
		r.pr.Drops(r.st.Drops())
	case r.st != nil:
		if !r.o.asJSON {
			r.pr.WithPrinter(func(w io.Writer) { fmt.Fprintln(w) })
		}
		r.pr.Summary(r.st.Drops())
	}
	return nil
}

func (r *probeRun) reportDrops() {
	if r.st != nil {
		r.pr.Drops(r.st.Drops())
	}
}

// show prints what the interval added (-totals: the totals); final, the
// totals.
func (r *probeRun) show(final bool) {
	r.reportDrops()
	results := r.sess.Read()
	tables := r.sess.Tables()
	shown, title := results, "totals"
	if !final && !r.o.totals {
		shown, title = intervalResults(r.last, results), "the last "+r.o.interval.String()
		if r.last == nil {
			title = "the first " + r.o.interval.String()
		}
		r.last = results
	}
	r.pr.Digest()
	top := runTopStacks
	if r.o.verbose {
		top = 0
	}
	r.pr.WithPrinter(func(w io.Writer) {
		if r.o.asJSON {
			views.ResultsLine(w, title, shown, tables)
			return
		}
		fmt.Fprintf(w, "\n--- %s (%s)\n", time.Now().Format("15:04:05"), title)
		views.WriteResultsTop(w, shown, top, views.EventsOfRun)
	})
}

// intervalResults is what cur added since prev, for run -interval:
// counts, sums and histogram buckets less what prev had for the same key
// (a key that added nothing is left out; a histogram shows from its lowest
// to its highest bucket that grew). Min and max cannot be taken back: they
// are as cur has them, since the start. prev nil: cur as it is.
func intervalResults(prev, cur []runtime.ProbeResult) []runtime.ProbeResult {
	if prev == nil {
		return cur
	}
	before := map[string]map[string]runtime.Entry{} // address and aggregation, then key
	for _, pr := range prev {
		for _, ar := range pr.Aggregations {
			m := map[string]runtime.Entry{}
			for _, e := range ar.Entries {
				m[views.KeyText(e.Key)] = e
			}
			before[pr.Address+"\x00"+ar.Name] = m
		}
	}
	out := make([]runtime.ProbeResult, len(cur))
	for i, pr := range cur {
		out[i] = pr
		out[i].Aggregations = make([]runtime.AggregationResult, len(pr.Aggregations))
		for j, ar := range pr.Aggregations {
			old := before[pr.Address+"\x00"+ar.Name]
			if ar.Kind == compiler.AggMin || ar.Kind == compiler.AggMax || old == nil {
				out[i].Aggregations[j] = ar
				continue
			}
			d := ar
			d.Entries = []runtime.Entry{}
			for _, e := range ar.Entries {
				if e, ok := entryDelta(old[views.KeyText(e.Key)], e); ok {
					d.Entries = append(d.Entries, e)
				}
			}
			sort.SliceStable(d.Entries, func(a, b int) bool { return weight(d.Entries[a]) > weight(d.Entries[b]) })
			out[i].Aggregations[j] = d
		}
	}
	return out
}

// entryDelta is cur less old (old zero when the key is new); false when
// nothing was added.
func entryDelta(old, cur runtime.Entry) (runtime.Entry, bool) {
	if cur.Value != nil {
		v := *cur.Value
		if old.Value != nil {
			v -= *old.Value
		}
		cur.Value = &v
		return cur, v != 0
	}
	was := map[int64]uint64{}
	for _, b := range old.Buckets {
		was[b.Low] = b.Count
	}
	var buckets []runtime.Bucket
	first, last := -1, -1
	for _, b := range cur.Buckets {
		b.Count -= min(b.Count, was[b.Low])
		if b.Count > 0 {
			if first < 0 {
				first = len(buckets)
			}
			last = len(buckets)
		}
		buckets = append(buckets, b)
	}
	if first < 0 {
		return cur, false
	}
	cur.Buckets = buckets[first : last+1]
	return cur, true
}

// weight orders entries: the value, or a histogram's count.
func weight(e runtime.Entry) int64 {
	if e.Value != nil {
		return *e.Value
	}
	var n int64
	for _, b := range e.Buckets {
		n += int64(b.Count)
	}
	return n
}
