package main

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestGroupsNeedAVerb replays "probectl state" exiting 0 with its help
// printed: every command that only groups verbs exits 2 without one, or
// with one it does not have, the usage on stderr and nothing on stdout.
func TestGroupsNeedAVerb(t *testing.T) {
	var groups [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		for _, sub := range c.Commands() {
			p := append(append([]string(nil), path...), sub.Name())
			if sub.HasSubCommands() {
				groups = append(groups, p)
			}
			walk(sub, p)
		}
	}
	walk(newRoot(io.Discard, io.Discard), nil)
	if len(groups) == 0 {
		t.Fatal("no command groups found; state should be one")
	}
	for _, g := range groups {
		for _, args := range [][]string{g, append(g, "no-such-verb")} {
			var stdout, stderr bytes.Buffer
			code := run(args, &stdout, &stderr)
			if code != 2 || stdout.Len() != 0 || !strings.Contains(stderr.String(), "Usage:") {
				t.Errorf("probectl %s: exit %d, stdout %q, stderr %q; want exit 2, the usage on stderr only",
					strings.Join(args, " "), code, stdout.String(), stderr.String())
			}
		}
	}
}
