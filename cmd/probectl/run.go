package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/examples"
	"github.com/probectl/probectl/internal/engine"
	"github.com/probectl/probectl/runtime"
	"github.com/probectl/probectl/spec"
	"github.com/spf13/cobra"
)

func newRunCmd() *cobra.Command {
	var duration, interval time.Duration
	var asJSON, totals bool
	var flameFile, aggName, symbolDirs string
	cmd := &cobra.Command{
		Use:   "run [PATH...] [-duration D] [-interval D] [-totals] [-json] [-flamegraph FILE.svg]",
		Short: "Apply specs into a temporary workspace, print what they measure, destroy on exit",
		Long: `Run is the one-command way to try a spec: it attaches it, prints the results
every interval and events as they arrive, and detaches everything on exit
(Ctrl-C, -duration, or an error). Its probes are never pinned: they live
exactly as long as the probectl process, so even kill -9 leaves nothing
attached. Events come out as probectl events prints them: every probe's,
in the order they were reserved, with their time. Events that find the
buffer full are dropped, counted and reported as they happen; at exit the
buffer is drained and the totals printed. With no PATH it runs the
built-in example: tracepoints on system calls.

  -duration D  stop after D (default: until Ctrl-C)
  -interval D  print the results every D (default 5s; 0: only at the end):
               counts, sums and histograms as what the interval added,
               min and max since the start; the totals at the end
  -totals      print the totals since the start at every interval
  -flamegraph FILE.svg
               at the end, write the flame graph show -flamegraph writes
               (-aggregation NAME picks the aggregation keyed by stacks;
               -symbols DIR[:DIR] where to find exited processes' files)
  -json        NDJSON on stdout: events as probectl events -json prints
               them, results as {"type": "results", ...} objects (show
               -json's probes and tables), the summary last`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireBPF("run"); err != nil {
				return err
			}
			if duration < 0 || interval < 0 {
				return fmt.Errorf("-duration and -interval cannot be negative")
			}
			var cfg *spec.Config
			var out *compiler.Output
			var err error
			if len(args) == 0 {
				cfg, out, err = compileDemo(cmd)
			} else {
				cfg, out, err = compileLive(cmd, args, spec.Policy{})
			}
			if err != nil {
				return err
			}
			return runProbes(cmd, cfg, out, duration, interval, asJSON, totals, flameFile, aggName, filepath.SplitList(symbolDirs))
		},
	}
	cmd.Flags().DurationVar(&duration, "duration", 0, "stop after this long (0: until Ctrl-C)")
	cmd.Flags().DurationVar(&interval, "interval", 5*time.Second, "print results this often (0: only at the end)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print NDJSON: events, results and the summary, as probectl events -json")
	cmd.Flags().BoolVar(&totals, "totals", false, "print totals since the start at each interval, not what the interval added")
	cmd.Flags().StringVar(&flameFile, "flamegraph", "", "at the end, write an SVG flame graph of the aggregation keyed by stacks to this file")
	cmd.Flags().StringVar(&aggName, "aggregation", "", "the aggregation -flamegraph draws, when several are keyed by stacks")
	cmd.Flags().StringVar(&symbolDirs, "symbols", "", "directories (colon-separated) to find the files of user stacks in, by build id")
	return cmd
}

func compileDemo(cmd *cobra.Command) (*spec.Config, *compiler.Output, error) {
	cfg, err := parseSources(cmd, map[string][]byte{examples.DemoName: examples.Demo})
	if err != nil {
		return nil, nil, err
	}
	facts, err := engine.TargetFacts("auto", cfg)
	if err != nil {
		return nil, nil, err
	}
	return compileFor(cmd, cfg, facts, spec.Policy{})
}

func runProbes(cmd *cobra.Command, cfg *spec.Config, out *compiler.Output, duration, interval time.Duration, asJSON, totals bool, flameFile, aggName string, symbolDirs []string) (err error) {
	for _, r := range runtime.CleanRuns() {
		fmt.Fprintf(cmd.ErrOrStderr(), "Removed %s, left by a probectl run that was killed.\n", r)
	}
	// With -json, stdout is NDJSON alone; what run says goes to stderr.
	say := cmd.OutOrStdout()
	if asJSON {
		say = cmd.ErrOrStderr()
	}
	sess, err := runtime.Attach(out)
	if err != nil {
		return reportApplyError(cmd, err, cfg)
	}
	sess.Symbols.Dirs = symbolDirs
	defer func() {
		if cerr := sess.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("detach: %w", cerr)
		}
		if err == nil {
			fmt.Fprintln(say, "\nDetached and removed every probe.")
		}
	}()
	for _, p := range sess.States {
		fmt.Fprintf(say, "Attached %s: %s via %s.\n", p.Address, p.Route, compiler.JoinFamilies(p.Attach))
	}
	until := "until Ctrl-C"
	if duration > 0 {
		until = "for " + duration.String()
	}
	fmt.Fprintf(say, "Running %s.\n", until)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, duration)
		defer cancel()
	}

	// One reader of the session's event buffer prints the records in the
	// order they were reserved, through the printer events uses.
	pr := newEventPrinter(cmd.OutOrStdout(), cmd.ErrOrStderr(), asJSON, nil)
	defer pr.Flush()
	st, err := sess.OpenEvents()
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	var stopping atomic.Bool
	if st != nil {
		defer st.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stopping.Load() {
				rec, err := st.Next(time.Now().Add(200 * time.Millisecond))
				switch {
				case err == nil:
					err = pr.Record(rec)
				case errors.Is(err, runtime.ErrIdle):
					pr.Flush()
					st.Housekeep()
					err = nil
				}
				if err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "events: %v\n", err)
					return
				}
			}
		}()
	}
	drained := false
	drain := func() error {
		if drained {
			return nil
		}
		drained = true
		// Stop the producers, then read what the buffer holds.
		_ = sess.Detach()
		stopping.Store(true)
		wg.Wait()
		if st != nil {
			return st.ReadBuffered(pr.Record)
		}
		return nil
	}
	defer drain()

	// Each interval prints what it added (-totals: the totals); the end
	// prints the totals.
	var last []runtime.ProbeResult
	show := func(final bool) {
		if st != nil {
			pr.Drops(st.Drops())
		}
		results := sess.Read()
		tables := sess.Tables()
		shown, title := results, "totals"
		if !final && !totals {
			shown, title = intervalResults(last, results), "the last "+interval.String()
			if last == nil {
				title = "the first " + interval.String()
			}
			last = results
		}
		pr.withPrinter(func(w io.Writer) {
			if asJSON {
				b, _ := json.Marshal(struct {
					Type   string                `json:"type"`
					Wall   string                `json:"wall"`
					Shows  string                `json:"shows"`
					Probes []runtime.ProbeResult `json:"probes"`
					Tables []runtime.TableResult `json:"tables,omitempty"`
				}{"results", runtime.WallText(time.Now()), title, shown, tables})
				fmt.Fprintf(w, "%s\n", b)
				return
			}
			fmt.Fprintf(w, "\n--- %s (%s)\n", time.Now().Format("15:04:05"), title)
			renderResults(w, shown)
		})
	}
	var tick <-chan time.Time
	if interval > 0 {
		t := time.NewTicker(interval)
		defer t.Stop()
		tick = t.C
	}
	dropTick := time.NewTicker(time.Second)
	defer dropTick.Stop()
	for {
		select {
		case <-ctx.Done():
			if err := drain(); err != nil {
				return err
			}
			show(true)
			if flameFile != "" {
				if err := showStacks(cmd, sess.Read(), aggName, false, flameFile); err != nil {
					return err
				}
			}
			if st != nil {
				if !asJSON {
					pr.withPrinter(func(w io.Writer) { fmt.Fprintln(w) })
				}
				pr.Summary(st.Drops())
			}
			return nil
		case <-tick:
			show(false)
		case <-dropTick.C:
			if st != nil {
				pr.Drops(st.Drops())
			}
		}
	}
}
