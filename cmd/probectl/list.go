package main

import (
	"fmt"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/internal/termtext"
	"github.com/probectl/probectl/internal/views"
	"github.com/spf13/cobra"
)

// listArgs are probectl list's options.
type listArgs struct {
	target  string // auto (or live), a profile, or a facts file
	verbose bool   // each point's fields: a tracepoint's, a kernel function's prototype
	json    bool
}

func newListCmd() *cobra.Command {
	var a listArgs
	cmd := &cobra.Command{
		Use:   "list [-v] [-json] [-target auto|PROFILE|FILE] [PATTERN]",
		Short: "List the kernel functions, tracepoints and user functions a target can probe, as bpftrace -l",
		Long: `List prints what a target can probe that PATTERN matches, one point a line,
as bpftrace -l does: kernel functions, tracepoints, and the functions of a
user binary. PATTERN is KIND:NAME, patterns separated by commas; * and ?
and [...] are globs. A bare NAME searches every tracepoint and kernel
function; no PATTERN lists them all.

  kprobe:vfs_*  k:  kretprobe:  kr:      kernel functions (probectl's kernel: too)
  fentry:vfs_read  f:  kfunc:  fexit:    those the target's BTF declares
  tracepoint:syscalls:sys_enter_*  t:sched:*
  uprobe:/bin/bash:readline  u:  uretprobe:  user:  (a library by name: libc)

  -v               a tracepoint's fields, a kernel function's prototype (BTF)
  -target auto     the running kernel (needs root; "live" says the same)
  -target PROFILE  a built-in profile: ` + fmt.Sprint(bpf.ProfileNames()) + ` (tracepoints only)
  -target FILE     facts written by "probectl target -o FILE"`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runList(cmd, a, args) },
	}
	cmd.Flags().StringVar(&a.target, "target", "auto", "auto (or live), a profile name, or a facts file")
	cmd.Flags().BoolVarP(&a.verbose, "verbose", "v", false, "show tracepoints' fields and kernel functions' prototypes")
	cmd.Flags().BoolVar(&a.json, "json", false, "print the points as JSON")
	return cmd
}

// runList parses the pattern, reads what it needs of the target, and
// shows what matches; diagnostics point into the pattern.
func runList(cmd *cobra.Command, a listArgs, args []string) error {
	arg := ""
	if len(args) == 1 {
		arg = args[0]
	}
	sources := map[string][]byte{compiler.ListSource: []byte(arg)}
	q, diags := compiler.ParseListPatterns(arg)
	if diags.HasErrors() {
		termtext.Diagnostics(cmd.ErrOrStderr(), diags, sources)
		return exitError{1}
	}
	target := a.target
	if target == "live" {
		target = "auto"
	}
	if target == "auto" && bpf.CheckPrivileges() != nil {
		return fmt.Errorf("list -target auto reads the live kernel and needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN), which this process lacks: run it as root, or list a profile's tracepoints: -target %s", bpf.ProfileNames()[0])
	}
	var events []string
	if a.verbose {
		events = q.Events() // the formats to read from tracefs
	}
	facts, err := bpf.LoadTarget(target, events, q.KernelFunctions())
	if err != nil {
		return err
	}
	points, diags := compiler.List(q, facts, a.verbose)
	termtext.Diagnostics(cmd.ErrOrStderr(), diags, sources)
	if err := views.NewList(a.json, cmd.OutOrStdout()).List(facts.Label(), points); err != nil {
		return err
	}
	if diags.HasErrors() {
		return exitError{1}
	}
	return nil
}
