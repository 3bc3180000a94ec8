package main

import (
	"fmt"
	"os"

	"github.com/hashicorp/hcl/v2"
	"github.com/probectl/probectl/internal/termtext"
	"github.com/probectl/probectl/spec"
	"github.com/probectl/probectl/spec/bpftrace"
	"github.com/spf13/cobra"
)

func newImportCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "import [-o OUT.hcl] FILE.bt",
		Short: "Write the spec a bpftrace program means",
		Long: `Import reads a bpftrace program and writes the spec it means, in the canonical
format, with the program's header and comments (to stdout, or to OUT.hcl with -o).
What has no equivalent in a spec stops the import with an error at the .bt
file's line and column naming the construct: never a spec that measures
something else.

Exit status: 0 imported, 1 errors.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			src, d := spec.ReadFile(name)
			if d != nil {
				termtext.Diagnostics(cmd.ErrOrStderr(), hcl.Diagnostics{d}, nil)
				return exitError{1}
			}
			hclText, diags := bpftrace.Import(name, src)
			if diags.HasErrors() {
				termtext.Diagnostics(cmd.ErrOrStderr(), diags, map[string][]byte{name: src})
				return exitError{1}
			}
			if out == "" {
				_, err := cmd.OutOrStdout().Write(hclText)
				return err
			}
			if err := os.WriteFile(out, hclText, 0o644); err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "Error: %s\n", err)
				return exitError{1}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "write the spec to this file")
	return cmd
}
