package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/examples"
	"github.com/probectl/probectl/runtime"
	"github.com/probectl/probectl/spec"
	"github.com/spf13/cobra"
)

func newRunCmd() *cobra.Command {
	var duration, interval time.Duration
	var totals bool
	cmd := &cobra.Command{
		Use:   "run [PATH...] [-duration D] [-interval D] [-totals]",
		Short: "Apply specs into a temporary workspace, print what they measure, destroy on exit",
		Long: `Run is the one-command way to try a spec: it attaches it, prints the results
every interval and events as they arrive, and detaches everything on exit
(Ctrl-C, -duration, or an error). Its probes are never pinned: they live
exactly as long as the probectl process, so even kill -9 leaves nothing
attached. Events that find the ring buffer full are dropped, counted and
reported as they happen; at exit the buffers are drained and the totals
printed. With no PATH it runs the built-in example: tracepoints on system
calls.

  -duration D  stop after D (default: until Ctrl-C)
  -interval D  print the results every D (default 5s; 0: only at the end):
               counts, sums and histograms as what the interval added,
               min and max since the start; the totals at the end
  -totals      print the totals since the start at every interval`,
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
				cfg, out, err = compileLive(cmd, args)
			}
			if err != nil {
				return err
			}
			return runProbes(cmd, cfg, out, duration, interval, totals)
		},
	}
	cmd.Flags().DurationVar(&duration, "duration", 0, "stop after this long (0: until Ctrl-C)")
	cmd.Flags().DurationVar(&interval, "interval", 5*time.Second, "print results this often (0: only at the end)")
	cmd.Flags().BoolVar(&totals, "totals", false, "print totals since the start at each interval, not what the interval added")
	return cmd
}

func compileDemo(cmd *cobra.Command) (*spec.Config, *compiler.Output, error) {
	cfg, err := parseSources(cmd, map[string][]byte{examples.DemoName: examples.Demo})
	if err != nil {
		return nil, nil, err
	}
	facts, err := loadTarget("auto", cfg)
	if err != nil {
		return nil, nil, err
	}
	return compileFor(cmd, cfg, facts)
}

func runProbes(cmd *cobra.Command, cfg *spec.Config, out *compiler.Output, duration, interval time.Duration, totals bool) (err error) {
	for _, r := range runtime.CleanRuns() {
		fmt.Fprintf(cmd.ErrOrStderr(), "Removed %s, left by a probectl run that was killed.\n", r)
	}
	sess, err := runtime.Attach(out)
	if err != nil {
		return reportApplyError(cmd, err, cfg)
	}
	defer func() {
		if cerr := sess.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("detach: %w", cerr)
		}
		if err == nil {
			cmd.Println("\nDetached and removed every probe.")
		}
	}()
	for _, p := range sess.States {
		cmd.Printf("Attached %s: %s via %s.\n", p.Address, p.Route, compiler.JoinFamilies(p.Attach))
	}
	until := "until Ctrl-C"
	if duration > 0 {
		until = "for " + duration.String()
	}
	cmd.Printf("Running %s.\n", until)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, duration)
		defer cancel()
	}

	// One writer to the terminal at a time; events are buffered, because a
	// flood of them must not slow the readers into dropping more.
	var mu sync.Mutex
	outw := bufio.NewWriterSize(cmd.OutOrStdout(), 64<<10)
	defer outw.Flush()
	readers, err := sess.Events()
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	printed := make([]uint64, len(readers))
	for i, rd := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				ev, err := rd.Read()
				if err != nil {
					if !errors.Is(err, runtime.ErrClosed) && !errors.Is(err, runtime.ErrDrained) {
						mu.Lock()
						fmt.Fprintf(cmd.ErrOrStderr(), "events: %v\n", err)
						mu.Unlock()
					}
					return
				}
				mu.Lock()
				fmt.Fprintf(outw, "%s event %s: %s\n", time.Now().Format("15:04:05"), ev.Name, keyText(ev.Fields))
				printed[i]++
				mu.Unlock()
			}
		}()
	}
	drained := false
	drain := func() {
		if drained {
			return
		}
		drained = true
		// Stop the producers, then read what the buffers still hold.
		_ = sess.Detach()
		for _, rd := range readers {
			_ = rd.Drain()
		}
		wg.Wait()
		for _, rd := range readers {
			rd.Close()
		}
	}
	defer drain()

	// Dropped events are reported as they happen.
	var lastDropped []uint64
	reportDrops := func(final bool) {
		counters, err := sess.Counters()
		if err != nil {
			return
		}
		if lastDropped == nil {
			lastDropped = make([]uint64, len(counters))
		}
		mu.Lock()
		defer mu.Unlock()
		outw.Flush()
		for i, c := range counters {
			if n := c.DroppedEvents - lastDropped[i]; n > 0 && !final {
				fmt.Fprintf(cmd.ErrOrStderr(), "%s: %d events dropped (the ring buffer was full; %d in all)\n", c.Address, n, c.DroppedEvents)
			}
			lastDropped[i] = c.DroppedEvents
		}
	}
	// Each interval prints what it added (-totals: the totals); the end
	// prints the totals.
	var last []runtime.ProbeResult
	show := func(final bool) {
		reportDrops(false)
		results := sess.Read()
		mu.Lock()
		defer mu.Unlock()
		outw.Flush()
		shown, title := results, "totals"
		if !final && !totals {
			shown, title = intervalResults(last, results), "the last "+interval.String()
			if last == nil {
				title = "the first " + interval.String()
			}
			last = results
		}
		cmd.Printf("\n--- %s (%s)\n", time.Now().Format("15:04:05"), title)
		renderResults(cmd.OutOrStdout(), shown)
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
			drain()
			show(true)
			if len(readers) > 0 {
				reportDrops(true)
				var n, dropped uint64
				for i := range readers {
					n += printed[i]
				}
				for _, d := range lastDropped {
					dropped += d
				}
				outw.Flush()
				if dropped == 0 {
					cmd.Printf("\nEvents: %d printed, none dropped.\n", n)
				} else {
					cmd.Printf("\nEvents: %d printed, %d dropped (the ring buffer was full).\n", n, dropped)
				}
			}
			return nil
		case <-tick:
			show(false)
		case <-dropTick.C:
			reportDrops(false)
			mu.Lock()
			outw.Flush()
			mu.Unlock()
		}
	}
}
