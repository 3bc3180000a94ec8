package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// exitError carries an exit code through cobra; its message, if any, has
// already been printed.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run executes one command line and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(normalizeFlags(args))
	err := root.Execute()
	var ee exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	default:
		fmt.Fprintf(stderr, "Error: %s\n", err)
		return 1
	}
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "probectl",
		Short:         "Declarative probe compiler for Linux",
		Long:          "probectl compiles HCL probe specs into BPF programs and an attach plan for a target kernel.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	g := &globals{}
	g.register(root)
	root.AddCommand(
		newValidateCmd(),
		newFmtCmd(),
		newPlanCmd(g),
		newApplyCmd(g),
		newDestroyCmd(g),
		newStatusCmd(g),
		newShowCmd(g),
		newRunCmd(),
		newTargetCmd(),
	)
	return root
}

// normalizeFlags lets users write long flags with one dash, as in
// terraform ("-json", "-target=linux-6.1-amd64"): pflag wants two.
func normalizeFlags(args []string) []string {
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if len(a) > 2 && a[0] == '-' && a[1] != '-' {
			name, _, _ := strings.Cut(a[1:], "=")
			if len(name) > 1 {
				a = "-" + a
			}
		}
		out = append(out, a)
	}
	return out
}
