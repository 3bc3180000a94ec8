package main

import (
	"fmt"
	"os"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/internal/engine"
	"github.com/probectl/probectl/internal/termtext"
	"github.com/probectl/probectl/runtime"
	"github.com/probectl/probectl/spec"
	"github.com/spf13/cobra"
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

// requireBPF refuses, in one sentence, when the process cannot use BPF:
// root, or CAP_BPF with CAP_PERFMON, or CAP_SYS_ADMIN.
func requireBPF(what string) error {
	if err := bpf.CheckPrivileges(); err != nil {
		return fmt.Errorf("%s needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN), which this process lacks: run it as root (sudo), or grant those capabilities", what)
	}
	return nil
}

// engineWorkspace is the workspace the flags name, for the apply path:
// a wait for its lock is said on stderr.
func (g *globals) engineWorkspace() engine.Workspace {
	return engine.Workspace{StateDir: g.stateDir, Name: g.workspace, LockTimeout: g.lockTimeout,
		Waiting: func(holder string) {
			fmt.Fprintf(os.Stderr, "Waiting up to %s for workspace %q, held by %s...\n", g.lockTimeout, g.workspace, holder)
		}}
}

func (g *globals) open() (*runtime.Workspace, error) { return g.engineWorkspace().Open() }

// lockAndRepair locks the workspace, reads its state, checks that the state
// owns the workspace's pins, and repairs what an interrupted command left,
// saying so on cmd's stderr. The caller must Unlock.
func (g *globals) lockAndRepair(cmd *cobra.Command) (*runtime.Workspace, *runtime.State, error) {
	return g.applyWorkspace(cmd).Begin()
}

// applyWorkspace is engineWorkspace, its repairs said on cmd's stderr.
func (g *globals) applyWorkspace(cmd *cobra.Command) engine.Workspace {
	ws := g.engineWorkspace()
	ws.Repaired = func(path string) {
		fmt.Fprintf(cmd.ErrOrStderr(), "Repaired: removed %s, left by an interrupted command.\n", path)
	}
	return ws
}

// inspect opens the workspace for a command that changes nothing: no lock,
// no repair. The caller must Close.
func (g *globals) inspect() (*runtime.Workspace, *runtime.State, error) {
	w, err := g.open()
	if err != nil {
		return nil, nil, err
	}
	s, err := w.Inspect()
	if err != nil {
		w.Close()
		return nil, nil, err
	}
	return w, s, nil
}

// compileLive loads the specs and compiles them for the running kernel,
// under policy.
func compileLive(cmd *cobra.Command, paths []string, policy spec.Policy) (*spec.Config, *compiler.Output, error) {
	cfg, diags := spec.LoadPaths(paths)
	if diags.HasErrors() {
		termtext.Diagnostics(cmd.ErrOrStderr(), diags, sourcesOf(cfg))
		return nil, nil, exitError{1}
	}
	termtext.Diagnostics(cmd.ErrOrStderr(), diags, cfg.Sources) // warnings
	facts, err := engine.TargetFacts("auto", cfg)
	if err != nil {
		return nil, nil, err
	}
	return compileFor(cmd, cfg, facts, policy)
}

// parseSources decodes specs given as text (the built-in example, a saved plan).
func parseSources(cmd *cobra.Command, files map[string][]byte) (*spec.Config, error) {
	cfg, diags := spec.Parse(files)
	if diags.HasErrors() {
		termtext.Diagnostics(cmd.ErrOrStderr(), diags, files)
		return nil, exitError{1}
	}
	return cfg, nil
}

// compileFor compiles cfg for facts under policy (a spec it refuses is
// not compiled), printing the diagnostics.
func compileFor(cmd *cobra.Command, cfg *spec.Config, facts *bpf.Facts, policy spec.Policy) (*spec.Config, *compiler.Output, error) {
	out, diags := engine.Compile(cfg, facts, policy)
	termtext.Diagnostics(cmd.ErrOrStderr(), diags, cfg.Sources)
	if diags.HasErrors() {
		return nil, nil, exitError{1}
	}
	return cfg, out, nil
}

// reportApplyError prints a load or attach failure the way users need it:
// a verifier rejection as a diagnostic at the spec range.
func reportApplyError(cmd *cobra.Command, err error, cfg *spec.Config) error {
	if d := engine.Refusal(cfg, err); d != nil {
		termtext.Diagnostics(cmd.ErrOrStderr(), hcl.Diagnostics{d}, sourcesOf(cfg))
		fmt.Fprintln(cmd.ErrOrStderr(), "Nothing was changed: the kernel holds what it held before.")
		return exitError{1}
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "Error: %v\nNothing was changed: the kernel holds what it held before.\n", err)
	return exitError{1}
}

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool { return termtext.Terminal(f) }

// specPaths is the spec paths a command was given or, with none, the
// current directory (every *.hcl in it), as terraform reads its working
// directory. A current directory without specs is refused by name, with
// what to do.
func specPaths(cmd *cobra.Command, args []string) ([]string, error) {
	if len(args) > 0 {
		return args, nil
	}
	if names, err := spec.ExpandPaths([]string{"."}); err == nil && len(names) > 0 {
		return []string{"."}, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		dir = "."
	}
	return nil, fmt.Errorf("no specs in the current directory %s: it has no *.hcl files; give the specs' paths (%s PATH..., a .hcl file or a directory of them), or run it in the specs' directory",
		termtext.Printable(dir), cmd.CommandPath())
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
