package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/probectl/probectl/bpf"
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
	facts, err := bpf.Detect(bpf.DetectOptions{Functions: full, BTF: full, Tracepoints: full, Fresh: true})
	if err != nil {
		return err
	}
	switch {
	case full:
		if err := facts.WriteFile(a.output); err != nil {
			return err
		}
		renderFactsWritten(cmd, facts, a.output)
	case a.json:
		b, _ := json.MarshalIndent(facts, "", "  ")
		cmd.Println(string(b))
	default:
		renderFacts(cmd, facts)
	}
	return nil
}

// renderFactsWritten says what a facts file holds.
func renderFactsWritten(cmd *cobra.Command, facts *bpf.Facts, path string) {
	btf := "no BTF"
	if len(facts.KernelBTF) > 0 {
		btf = fmt.Sprintf("its BTF (%d KiB gzipped)", len(facts.KernelBTF)/1024)
	}
	cmd.Printf("Wrote the facts of %s, with %d functions, the formats of its tracepoints (%d KiB gzipped) and %s, to %s.\n",
		facts.Label(), len(facts.Functions), len(facts.TracepointFormats)/1024, btf, path)
}

// renderFacts shows the facts: the link types as every display names them
// (bpf.LinkFacts), the ones the kernel has, then the ones it lacks.
func renderFacts(cmd *cobra.Command, f *bpf.Facts) {
	yes := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	cmd.Printf("Kernel:   linux %s (%s), %s\n", f.Kernel, f.Name, f.Arch)
	cmd.Printf("BTF:      %s\n", yes(f.BTF))
	cmd.Printf("ISA:      %s\n", map[bool]string{true: "v4 (gotol: jumps beyond 32767 instructions)", false: "before v4 (no gotol)"}[f.ISAv4])
	cmd.Printf("fprobe:   %s", f.Fprobe)
	if f.FprobeEntryFastPath {
		cmd.Print(", entry-only ftrace_ops fast path")
	}
	cmd.Printf(" (ftrace WITH_REGS %s, WITH_ARGS %s)\n", yes(f.FtraceWithRegs), yes(f.FtraceWithArgs))
	have, lack := f.Links.Split()
	cmd.Printf("Links:    %s\n", strings.Join(have, ", "))
	if len(lack) > 0 {
		cmd.Printf("Missing:  %s\n", strings.Join(lack, ", "))
	}
	h := f.Helpers
	cmd.Printf("Helpers:  attach cookies %s (fentry %s), func arg/ret %s, ring buffer %s, session kfuncs %s (ctx prototype %s)\n",
		yes(h.AttachCookie), yes(h.TracingAttachCookie), yes(h.FuncArg), yes(h.Ringbuf), yes(h.SessionKfuncs), yes(h.SessionKfuncsCtxArg))
	if f.CPUs > 0 {
		cmd.Printf("CPUs:     %d\n", f.CPUs)
	}
}
