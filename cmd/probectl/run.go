package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
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
	cmd := &cobra.Command{
		Use:   "run [PATH...] [-duration D] [-interval D]",
		Short: "Apply specs into a temporary workspace, print what they measure, destroy on exit",
		Long: `Run is the one-command way to try a spec: it applies it into a temporary
workspace, prints the results every interval and events as they arrive, and
destroys everything on exit (Ctrl-C, -duration, or an error). With no PATH
it runs the built-in example: tracepoints on system calls.

  -duration D  stop after D (default: until Ctrl-C)
  -interval D  print the results every D (default 5s; 0: only at the end)`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := requireRoot("run"); err != nil {
				return err
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
			return runProbes(cmd, cfg, out, duration, interval)
		},
	}
	cmd.Flags().DurationVar(&duration, "duration", 0, "stop after this long (0: until Ctrl-C)")
	cmd.Flags().DurationVar(&interval, "interval", 5*time.Second, "print results this often (0: only at the end)")
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

func runProbes(cmd *cobra.Command, cfg *spec.Config, out *compiler.Output, duration, interval time.Duration) (err error) {
	dir, err := os.MkdirTemp("", "probectl-run-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	temp := &globals{stateDir: dir, workspace: fmt.Sprintf("run-%d", os.Getpid())}
	w, s, err := temp.lockAndRepair(cmd)
	if err != nil {
		return err
	}
	defer w.Unlock()
	defer os.Remove(w.PinDir())
	plan := runtime.Diff(s, out, nil)
	s, _, err = w.Apply(s, out, plan)
	if err != nil {
		return reportApplyError(cmd, err, cfg)
	}
	defer func() {
		if _, _, derr := w.Destroy(s, nil); derr != nil && err == nil {
			err = fmt.Errorf("destroy: %w", derr)
		}
		if err == nil {
			cmd.Println("\nDetached and removed every probe.")
		}
	}()
	for _, c := range plan.Changes {
		cmd.Printf("Attached %s: %s via %s.\n", c.Address, c.Route, strings.Join(c.Attach, " + "))
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

	var mu sync.Mutex // one writer to the terminal at a time
	var wg sync.WaitGroup
	var readers []*runtime.EventReader
	for _, p := range s.Probes {
		rd, err := w.Events(p)
		if err != nil {
			return err
		}
		if rd == nil {
			continue
		}
		readers = append(readers, rd)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				ev, err := rd.Read()
				if err != nil {
					if !errors.Is(err, runtime.ErrClosed) {
						mu.Lock()
						fmt.Fprintf(cmd.ErrOrStderr(), "events: %v\n", err)
						mu.Unlock()
					}
					return
				}
				mu.Lock()
				cmd.Printf("%s event %s: %s\n", time.Now().Format("15:04:05"), ev.Name, keyText(ev.Fields))
				mu.Unlock()
			}
		}()
	}
	defer func() {
		for _, rd := range readers {
			rd.Close()
		}
		wg.Wait()
	}()

	show := func() error {
		results, err := w.Read(s, s.Probes)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		cmd.Printf("\n--- %s\n", time.Now().Format("15:04:05"))
		renderResults(cmd.OutOrStdout(), results)
		return nil
	}
	var tick <-chan time.Time
	if interval > 0 {
		t := time.NewTicker(interval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return show()
		case <-tick:
			if err := show(); err != nil {
				return err
			}
		}
	}
}
