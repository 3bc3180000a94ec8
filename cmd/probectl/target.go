package main

import (
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/internal/views"
	"github.com/spf13/cobra"
)

// targetArgs are probectl target's options.
type targetArgs struct {
	json   bool   // print the facts as JSON
	output string // write them, with functions, tracepoint formats and BTF, to this file
}

func newTargetCmd() *cobra.Command {
	var a targetArgs
	cmd := &cobra.Command{
		Use:   "target [-json] [-o FILE]",
		Short: "Show the live kernel's facts, or write them to a file",
		Long: `Target detects the running kernel's facts: architecture, version, link types,
the fprobe backend, helpers and BTF. It loads small probe programs without
attaching them, so it needs root.

  -o FILE  write the facts, with the list of probe-able functions, the
           format of every tracepoint, and the kernel's BTF (its types, for
           args.NAME, struct fields and ret), for "probectl plan -target FILE"
           on another machine`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return runTarget(cmd, a) },
	}
	cmd.Flags().BoolVar(&a.json, "json", false, "print the facts as JSON")
	cmd.Flags().StringVarP(&a.output, "output", "o", "", "write the facts (with the function list, tracepoint formats and BTF) to FILE")
	return cmd
}

// runTarget detects the live kernel's facts (with what a facts file
// carries when writing one) and writes, prints as JSON, or shows them.
func runTarget(cmd *cobra.Command, a targetArgs) error {
	if err := requireBPF("target"); err != nil {
		return err
	}
	full := a.output != ""
	var facts *bpf.Facts
	var err error
	what := "Detecting the kernel's facts"
	if full {
		what = "Detecting the kernel's facts, functions, tracepoint formats and BTF"
	}
	progress(cmd.ErrOrStderr(), what, func() {
		facts, err = bpf.Detect(bpf.DetectOptions{Functions: full, BTF: full, Tracepoints: full, Fresh: true})
	})
	if err != nil {
		return err
	}
	if full {
		if err := facts.WriteFile(a.output); err != nil {
			return err
		}
		views.FactsWritten(cmd.OutOrStdout(), facts, a.output)
		return nil
	}
	return views.NewFacts(a.json, cmd.OutOrStdout()).Facts(facts)
}
