package main

import (
	"github.com/probectl/probectl/spec"
	"github.com/spf13/cobra"
)

func newValidateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "validate PATH...",
		Short: "Check specs for errors, without a target kernel",
		Long: `Validate reads spec files (a directory means every *.hcl in it) and reports
every error as FILE:LINE:COL: error: SUMMARY, with the detail and the fix.
Exit status: 0 valid, 1 errors.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, diags := spec.LoadPaths(args)
			var sources map[string][]byte
			if cfg != nil {
				sources = cfg.Sources
			}
			printDiags(cmd.ErrOrStderr(), diags, sources)
			if diags.HasErrors() {
				return exitError{1}
			}
			cmd.Printf("Valid: %d probe(s) in %s.\n", len(cfg.Probes), plural(len(cfg.Sources), "file"))
			return nil
		},
	}
}
