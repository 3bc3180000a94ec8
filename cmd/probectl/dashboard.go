package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/internal/views"
	"github.com/probectl/probectl/spec"
	"github.com/spf13/cobra"
)

func newDashboardCmd() *cobra.Command {
	var target, title string
	cmd := &cobra.Command{
		Use:   "dashboard [-target auto|PROFILE|FILE] [-title TITLE] [PATH...]",
		Short: "Print a Grafana dashboard for the metrics of the specs",
		Long: `Dashboard compiles the specs as plan does, for the target kernel, and
prints a Grafana dashboard (JSON, to import) for the metrics that
"probectl serve" and "probectl agent" serve for them once applied
(README, "Dashboards"): a row per probe, with a panel per aggregation (a
heatmap of the buckets of hist and lhist, the rate of count and sum, min
and max as they are), and a row of the probes' hits, missed hits, dropped
keys and dropped events. The data source is a variable ($datasource, any
Prometheus), and $instance picks the hosts. Metric names are the ones the
collector gives the aggregations, in the order of a workspace that holds
only these specs (names that meet get _2 in that order).

  -target auto     the running kernel (the probes it cannot attach are left out)
  -target PROFILE  a built-in profile: ` + fmt.Sprint(bpf.ProfileNames()) + `
  -target FILE     facts written by "probectl target -o FILE"
  -title TITLE     the dashboard's title (default: probectl and the files' names)

Exit status: 0, 1 errors.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			args, err := specPaths(cmd, args)
			if err != nil {
				return err
			}
			_, _, out, err := compileTarget(cmd, target, args, spec.Policy{})
			if err != nil {
				return err
			}
			if title == "" {
				title = dashboardTitle(args)
			}
			b, err := bpf.JSONIndent(views.Dashboard(title, out), "  ")
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n", b)
			return err
		},
	}
	cmd.Flags().StringVar(&target, "target", "auto", "auto, a profile name, or a facts file")
	cmd.Flags().StringVar(&title, "title", "", "the dashboard's title")
	return cmd
}

// dashboardTitle is "probectl: " and the specs' names, without .hcl.
func dashboardTitle(paths []string) string {
	names := make([]string, len(paths))
	for i, p := range paths {
		if wd, err := os.Getwd(); p == "." && err == nil {
			p = wd // the default path: the directory's name
		}
		names[i] = strings.TrimSuffix(filepath.Base(p), ".hcl")
	}
	return "probectl: " + strings.Join(names, ", ")
}
