package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/runtime"
	"github.com/probectl/probectl/spec"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
)

// globals are the flags every command that touches state shares.
type globals struct {
	stateDir    string
	workspace   string
	lockTimeout time.Duration
}

func (g *globals) register(root *cobra.Command) {
	def := os.Getenv("PROBECTL_STATE_DIR")
	if def == "" {
		def = runtime.DefaultStateDir
	}
	root.PersistentFlags().StringVar(&g.stateDir, "state-dir", def, "where state lives (env PROBECTL_STATE_DIR)")
	ws := os.Getenv("PROBECTL_WORKSPACE")
	if ws == "" {
		ws = runtime.DefaultWorkspace
	}
	root.PersistentFlags().StringVar(&g.workspace, "workspace", ws, "the workspace: an independent set of probes (env PROBECTL_WORKSPACE)")
}

func (g *globals) addLockTimeout(cmd *cobra.Command) {
	cmd.Flags().DurationVar(&g.lockTimeout, "lock-timeout", 0, "how long to wait for another probectl holding the workspace (0: fail at once)")
}

// requireRoot refuses, in one sentence, when the process cannot use BPF.
func requireRoot(what string) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%s needs root (CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN): run it with sudo", what)
	}
	return nil
}

func (g *globals) open() (*runtime.Workspace, error) {
	w, err := runtime.Open(g.stateDir, g.workspace)
	if err != nil {
		return nil, err
	}
	w.LockTimeout = g.lockTimeout
	return w, nil
}

// lockAndRepair locks the workspace, reads its state and repairs what an
// interrupted command left. The caller must Unlock.
func (g *globals) lockAndRepair(cmd *cobra.Command) (*runtime.Workspace, *runtime.State, error) {
	w, err := g.open()
	if err != nil {
		return nil, nil, err
	}
	if err := w.Lock(); err != nil {
		return nil, nil, err
	}
	s, err := w.State()
	if err != nil {
		w.Unlock()
		return nil, nil, err
	}
	removed, err := w.Repair(s)
	if err != nil {
		w.Unlock()
		return nil, nil, err
	}
	for _, r := range removed {
		fmt.Fprintf(cmd.ErrOrStderr(), "Repaired: removed %s, left by an interrupted command.\n", r)
	}
	return w, s, nil
}

// compileLive loads the specs and compiles them for the running kernel.
func compileLive(cmd *cobra.Command, paths []string) (*spec.Config, *compiler.Output, error) {
	cfg, diags := spec.LoadPaths(paths)
	if diags.HasErrors() {
		printDiags(cmd.ErrOrStderr(), diags, sourcesOf(cfg))
		return nil, nil, exitError{1}
	}
	printDiags(cmd.ErrOrStderr(), diags, cfg.Sources) // warnings
	facts, err := loadTarget("auto", cfg)
	if err != nil {
		return nil, nil, err
	}
	return compileFor(cmd, cfg, facts)
}

// parseSources decodes specs given as text (the built-in example, a saved plan).
func parseSources(cmd *cobra.Command, files map[string][]byte) (*spec.Config, error) {
	cfg, diags := spec.Parse(files)
	if diags.HasErrors() {
		printDiags(cmd.ErrOrStderr(), diags, files)
		return nil, exitError{1}
	}
	return cfg, nil
}

// compileFor compiles cfg for facts, printing the diagnostics.
func compileFor(cmd *cobra.Command, cfg *spec.Config, facts *bpf.Facts) (*spec.Config, *compiler.Output, error) {
	out, diags := compiler.Compile(cfg, facts)
	printDiags(cmd.ErrOrStderr(), diags, cfg.Sources)
	if diags.HasErrors() {
		return nil, nil, exitError{1}
	}
	return cfg, out, nil
}

// reportApplyError prints a load or attach failure the way users need it:
// a verifier rejection as a diagnostic at the spec range.
func reportApplyError(cmd *cobra.Command, err error, cfg *spec.Config) error {
	var le *runtime.LoadError
	if errors.As(err, &le) && le.Program != nil {
		if d := compiler.VerifierDiagnostic(le.Probe, le.Program, le.Err); d != nil {
			printDiags(cmd.ErrOrStderr(), hcl.Diagnostics{d}, sourcesOf(cfg))
			fmt.Fprintln(cmd.ErrOrStderr(), "Nothing was changed: the kernel holds what it held before.")
			return exitError{1}
		}
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "Error: %v\nNothing was changed: the kernel holds what it held before.\n", err)
	return exitError{1}
}

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

func parseAddresses(args []string) ([]bpf.Address, error) {
	var out []bpf.Address
	for _, a := range args {
		addr, err := bpf.ParseAddress(a)
		if err != nil {
			return nil, err
		}
		out = append(out, addr)
	}
	return out, nil
}
