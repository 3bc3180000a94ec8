package main

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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
			// U makes a script's workload comms its own (evt-flood$U): a
			// spec that counts by comm must not count the same script run
			// at the same time by another checkout. Files say ${U}.
			u, err := uniqueSuffix()
			if err != nil {
				return err
			}
			env.Setenv("U", u)
			if err := substituteU(env.WorkDir, u); err != nil {
				return err
			}
			// A script that fails half-way leaves nothing attached.
			state := filepath.Join(env.WorkDir, "state")
			env.Defer(func() {
				// A background probectl a script started (its pid in
				// $WORK/pid) is stopped, even when the script failed.
				if b, err := os.ReadFile(filepath.Join(env.WorkDir, "pid")); err == nil {
					pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
					cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
					if pid > 0 && bytes.HasPrefix(cmdline, []byte("probectl\x00")) {
						syscall.Kill(pid, syscall.SIGKILL)
					}
				}
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

// uniqueSuffix is four random base-36 digits: with a 10-letter name, a comm
// still fits in the kernel's 15 bytes.
func uniqueSuffix() (string, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	const digits = "0123456789abcdefghijklmnopqrstuvwxyz"
	for i := range b {
		b[i] = digits[int(b[i])%len(digits)]
	}
	return string(b[:]), nil
}

// substituteU writes u for every ${U} in the script's files.
func substituteU(dir, u string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		p := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte("${U}")) {
			if err := os.WriteFile(p, bytes.ReplaceAll(b, []byte("${U}"), []byte(u)), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}
