package main

import (
	"github.com/probectl/probectl/internal/buildinfo"
	"github.com/probectl/probectl/internal/views"
	"github.com/spf13/cobra"
)

func newVersionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version [-json]",
		Short: "Show probectl's version, the commit it was built from and its Go",
		Long: `Version prints the build of this binary: its version (git describe, as make
build sets it, or the main module's), the commit (and whether the tree was
modified), and the Go that built it. serve and the agents export the same
as probectl_build_info{version,commit,goversion} 1.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return views.NewVersion(asJSON, cmd.OutOrStdout()).Version(buildinfo.Read())
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
