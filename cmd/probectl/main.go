package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/probectl/probectl/internal/termtext"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// exitError carries an exit code through cobra; its message, if any, has
// already been printed.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run executes one command line and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(normalizeFlags(root, args))
	err := root.Execute()
	var ee exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	default:
		w := root.ErrOrStderr() // coloured on a terminal (PersistentPreRun)
		fmt.Fprintf(w, "%s %s\n", termtext.Paint(w, termtext.Red, "Error:"), err)
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
	var noColor bool
	root.PersistentFlags().BoolVar(&noColor, "no-color", false, "no colours on a terminal (also: NO_COLOR set to anything)")
	root.PersistentPreRun = func(cmd *cobra.Command, _ []string) {
		tuneGC(cmd)
		// Colours as terraform's, on a terminal only, never with -json.
		if f := cmd.Flags().Lookup("json"); f != nil && f.Value.String() == "true" {
			return
		}
		root.SetOut(termtext.MaybeColor(stdout, noColor))
		root.SetErr(termtext.MaybeColor(stderr, noColor))
	}
	root.AddCommand(
		newValidateCmd(),
		newFmtCmd(),
		newImportCmd(),
		newPlanCmd(g),
		newApplyCmd(g),
		newDestroyCmd(g),
		newStatusCmd(g),
		newShowCmd(g),
		newEventsCmd(g),
		newRunCmd(),
		newTargetCmd(),
		newListCmd(),
		newStateCmd(g),
		newServeCmd(g),
		newDashboardCmd(),
		newAgentCmd(g),
		newVersionCmd(),
	)
	for _, c := range root.Commands() {
		requireVerbs(c)
	}
	return root
}

// requireVerbs makes every command under c that only groups verbs (as
// state does) refuse to run without one: cobra would print its help and
// exit 0, which a script reads as success. It exits 2 with the usage on
// stderr instead.
func requireVerbs(c *cobra.Command) {
	for _, sub := range c.Commands() {
		requireVerbs(sub)
	}
	if !c.HasSubCommands() || c.Runnable() {
		return
	}
	c.Args = cobra.ArbitraryArgs
	c.RunE = func(cmd *cobra.Command, args []string) error {
		var verbs []string
		for _, sub := range cmd.Commands() {
			if sub.IsAvailableCommand() {
				verbs = append(verbs, sub.Name())
			}
		}
		what := "needs a verb"
		if len(args) > 0 {
			what = fmt.Sprintf("has no verb %q", args[0])
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "Error: %s %s: give one of %s.\n\n%s", cmd.CommandPath(), what, strings.Join(verbs, ", "), cmd.UsageString())
		return exitError{2}
	}
}

// normalizeFlags lets users write long flags with one dash, as in
// terraform ("-json", "-target=linux-6.1-amd64"): pflag wants two. Only
// the names of real flags are rewritten, and the argument after a flag that
// takes a value is that value, left as written ("-workspace -x" names the
// workspace "-x", which is then refused as a name, not read as a flag).
func normalizeFlags(root *cobra.Command, args []string) []string {
	takesValue := flagsTakingValues(root)
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		flag, valueNext := normalizeFlag(a, takesValue)
		out = append(out, flag)
		if valueNext && i+1 < len(args) {
			i++
			out = append(out, args[i])
		}
	}
	return out
}

// flagsTakingValues maps the name of every flag of root and its
// subcommands to whether it takes a value.
func flagsTakingValues(root *cobra.Command) map[string]bool {
	takesValue := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, fs := range []*pflag.FlagSet{c.PersistentFlags(), c.Flags()} {
			fs.VisitAll(func(f *pflag.Flag) { takesValue[f.Name] = f.NoOptDefVal == "" })
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return takesValue
}

// normalizeFlag gives a long flag written with one dash its second, and
// says whether the argument after it is its value.
func normalizeFlag(a string, takesValue map[string]bool) (flag string, valueNext bool) {
	if len(a) > 2 && a[0] == '-' && a[1] != '-' {
		name, _, hasValue := strings.Cut(a[1:], "=")
		if needs, known := takesValue[name]; known && len(name) > 1 {
			return "-" + a, needs && !hasValue
		}
	}
	if len(a) > 2 && strings.HasPrefix(a, "--") {
		name, _, hasValue := strings.Cut(a[2:], "=")
		return a, takesValue[name] && !hasValue
	}
	return a, false
}

// longRunning names the commands that stay up (serve, the agents) or can
// (run until interrupted, events -follow): they keep Go's default GC.
var longRunning = map[string]bool{"serve": true, "agent": true, "run": true, "events": true}

// The collector of the commands that do one thing and exit: they live
// for tens of milliseconds and most of what they allocate stays live until
// exit (the spec, the plan, the kernel facts), so collecting at Go's 4 MiB
// first goal only costs time. They collect when the heap has grown five
// times over what was live (oneShotGCPercent) rather than twice, within a
// soft limit (oneShotMemoryLimit) that a huge spec set meets first. A
// one-probe apply ran one or two collections at 100 and none at 400
// (GODEBUG=gctrace=1); planning 1,000 mixed probes (bench/plan1k.sh) took
// about 0.82 of the CPU it takes under Go's default, and about 15 MiB more
// at its peak.
const (
	oneShotGCPercent   = 400
	oneShotMemoryLimit = 256 << 20
)

// tuneGC sets the GC of cmd's process for the command it runs, unless the
// user set GOGC or GOMEMLIMIT.
func tuneGC(cmd *cobra.Command) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	top := cmd
	for top.HasParent() && top.Parent().HasParent() {
		top = top.Parent()
	}
	if !longRunning[top.Name()] {
		debug.SetGCPercent(oneShotGCPercent)
		debug.SetMemoryLimit(oneShotMemoryLimit)
	}
}
