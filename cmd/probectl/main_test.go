package main

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"probectl": func() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) },
	})
}

// TestScripts runs the CLI cases in testdata/script: each is a txtar file
// of commands, their expected output and exit codes.
func TestScripts(t *testing.T) {
	examples, err := filepath.Abs("../../examples")
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			env.Setenv("EXAMPLES", examples)
			// Each script has its own state and its own workspace: pins
			// under /sys/fs/bpf/probectl/<workspace> are machine-wide.
			env.Setenv("PROBECTL_STATE_DIR", filepath.Join(env.WorkDir, "state"))
			id := strings.TrimPrefix(filepath.Base(filepath.Dir(env.WorkDir)), "go-test-script")
			ws := "ts-" + id + "-" + strings.TrimPrefix(filepath.Base(env.WorkDir), "script-")
			env.Setenv("PROBECTL_WORKSPACE", ws)
			// A script that fails half-way leaves nothing attached.
			state := filepath.Join(env.WorkDir, "state")
			env.Defer(func() {
				if os.Geteuid() == 0 {
					run([]string{"-state-dir", state, "-workspace", ws, "destroy", "-auto-approve"}, io.Discard, io.Discard)
				}
			})
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			// validjson-lines FILE: every line of the file is one JSON value (NDJSON).
			"validjson-lines": func(ts *testscript.TestScript, neg bool, args []string) {
				if len(args) != 1 {
					ts.Fatalf("usage: validjson-lines FILE")
				}
				ok := true
				for _, line := range strings.Split(strings.TrimSuffix(ts.ReadFile(args[0]), "\n"), "\n") {
					ok = ok && json.Valid([]byte(line))
				}
				if ok == neg {
					ts.Fatalf("%s: NDJSON is %v", args[0], ok)
				}
			},
			// validjson FILE: the file (stdout, stderr or a file) is valid JSON.
			"validjson": func(ts *testscript.TestScript, neg bool, args []string) {
				if len(args) != 1 {
					ts.Fatalf("usage: validjson FILE")
				}
				if ok := json.Valid([]byte(ts.ReadFile(args[0]))); ok == neg {
					ts.Fatalf("%s: valid JSON is %v", args[0], ok)
				}
			},
		},
		Condition: func(cond string) (bool, error) {
			switch cond {
			case "root":
				return os.Geteuid() == 0, nil
			case "gcc":
				_, err := exec.LookPath("gcc")
				return err == nil, nil
			}
			return false, nil
		},
	})
}
