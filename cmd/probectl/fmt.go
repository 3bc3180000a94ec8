package main

import (
	"bytes"
	"fmt"
	"os"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/probectl/probectl/internal/termtext"
	"github.com/probectl/probectl/spec"
	"github.com/rogpeppe/go-internal/diff"
	"github.com/spf13/cobra"
)

func newFmtCmd() *cobra.Command {
	var check, showDiff bool
	cmd := &cobra.Command{
		Use:   "fmt [-check] [-diff] [PATH...]",
		Short: "Rewrite specs in the canonical format",
		Long: `Fmt rewrites spec files in the canonical HCL format and lists the files it changed
(no PATH: every *.hcl in the current directory).
A file that does not parse is reported and never rewritten.

  -check  change nothing; exit 3 when a file would change
  -diff   print the changes as a unified diff

Exit status: 0 done (or nothing to change), 1 a file does not parse or cannot be written, 3 -check found changes.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			paths, err := specPaths(cmd, args)
			if err != nil {
				return err
			}
			files, err := spec.ExpandPaths(paths)
			if err != nil {
				return err
			}
			failed, changed := false, false
			for _, name := range files {
				src, d := spec.ReadFile(name)
				if d != nil {
					termtext.Diagnostics(cmd.ErrOrStderr(), hcl.Diagnostics{d}, nil)
					failed = true
					continue
				}
				// Parse first, within the limits validate has: hclwrite.Format
				// only re-spaces tokens, even broken ones.
				if _, diags := spec.ParseFile(name, src); diags.HasErrors() {
					termtext.Diagnostics(cmd.ErrOrStderr(), diags, map[string][]byte{name: src})
					failed = true
					continue
				}
				out := hclwrite.Format(src)
				if bytes.Equal(src, out) {
					continue
				}
				changed = true
				cmd.Println(name)
				if showDiff {
					cmd.Print(string(diff.Diff(name, src, name+" (formatted)", out)))
				}
				if check {
					continue
				}
				if err := os.WriteFile(name, out, 0o644); err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "Error: %s\n", err)
					failed = true
				}
			}
			switch {
			case failed:
				return exitError{1}
			case check && changed:
				return exitError{3}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&check, "check", false, "exit 3 when a file would change; change nothing")
	cmd.Flags().BoolVar(&showDiff, "diff", false, "print the changes as a unified diff")
	return cmd
}
