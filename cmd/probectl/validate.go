package main

import (
	"strings"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/internal/termtext"
	"github.com/probectl/probectl/internal/views"
	"github.com/probectl/probectl/spec"
	"github.com/spf13/cobra"
)

func newValidateCmd() *cobra.Command {
	var deny denyFlag
	cmd := &cobra.Command{
		Use:   "validate [PATH...]",
		Short: "Check specs for errors, without a target kernel",
		Long: `Validate reads spec files (a directory means every *.hcl in it; no PATH, the
current directory) and reports
every error as FILE:LINE:COL: error: SUMMARY, with the detail and the fix.
Tracepoints and the fields read from them are checked against the built-in
profiles' kernels: one that none has is an error, one that some lack a
warning.

  -deny CLASS[,CLASS]  refuse constructs of these classes: ` + denyClasses() + `

Exit status: 0 valid, 1 errors.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			paths, err := specPaths(cmd, args)
			if err != nil {
				return err
			}
			cfg, diags := spec.LoadPaths(paths)
			if cfg != nil {
				diags = append(diags, cfg.Enforce(deny.p)...)
				kernels, err := knownKernels()
				if err != nil {
					return err
				}
				diags = append(diags, cfg.CheckKernels(kernels)...)
			}
			var sources map[string][]byte
			if cfg != nil {
				sources = cfg.Sources
			}
			termtext.Diagnostics(cmd.ErrOrStderr(), diags, sources)
			if diags.HasErrors() {
				return exitError{1}
			}
			cmd.Printf("Valid: %d probe(s) in %s.\n", len(cfg.Probes), views.Plural(len(cfg.Sources), "file"))
			return nil
		},
	}
	deny.add(cmd)
	return cmd
}

// denyFlag is -deny CLASS[,CLASS]: the policy validate, plan and apply
// check the specs under (spec.Policy).
type denyFlag struct{ p spec.Policy }

func (f *denyFlag) add(cmd *cobra.Command) {
	cmd.Flags().Var(f, "deny", "refuse constructs of these classes (comma-separated): "+denyClasses())
}

func (f *denyFlag) String() string { return f.p.String() }
func (f *denyFlag) Type() string   { return "CLASS[,CLASS]" }

func (f *denyFlag) Set(s string) error {
	p, err := spec.ParsePolicy(s)
	if err != nil {
		return err
	}
	f.p = p
	return nil
}

// denyClasses lists the classes -deny takes, with what each refuses.
func denyClasses() string {
	var s []string
	for _, c := range spec.DenyClasses {
		s = append(s, string(c.Class)+" ("+c.Refuses+")")
	}
	return strings.Join(s, ", ")
}

// knownKernels are the built-in profiles, whose kernels validate checks
// the tracepoint probes against.
func knownKernels() ([]*bpf.Facts, error) {
	var out []*bpf.Facts
	for _, name := range bpf.ProfileNames() {
		f, err := bpf.Profile(name)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}
