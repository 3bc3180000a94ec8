package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCommitMsgHook holds the commit-msg hook (.githooks, make hooks) to
// the rule house.md and the README state: "pkg: summary", at most 72
// characters, the detail in the body.
func TestCommitMsgHook(t *testing.T) {
	hook, err := filepath.Abs("../../.githooks/commit-msg")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		msg string
		ok  bool
	}{
		{"runtime: apply as phase methods\n\nThe detail.\n", true},
		{"cmd/probectl tests: one helper\n", true},
		{"spec, compiler: -deny raw-address\n", true},
		{"Merge branch 'x' into main\n", true},
		{"# a comment git strips\nbpf: split\n", true},
		{"fixed the thing\n", false},
		{"runtime: " + strings.Repeat("x", 70) + "\n", false},
		{"runtime: subject\nbody without a blank line\n", false},
		{"runtime:no space\n", false},
	} {
		f := filepath.Join(t.TempDir(), "msg")
		if err := os.WriteFile(f, []byte(c.msg), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("sh", hook, f).CombinedOutput()
		if (err == nil) != c.ok {
			t.Errorf("%q: accepted %v, want %v (%s)", c.msg, err == nil, c.ok, out)
		}
	}
}
