package runtime_test

import (
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/runtime"
	"github.com/probectl/probectl/spec"
)

// TestMain lets the test binary act as a probectl process that the crash
// test kills: PROBECTL_TEST_CHILD=apply|destroy.
func TestMain(m *testing.M) {
	if mode := os.Getenv("PROBECTL_TEST_CHILD"); mode != "" {
		if err := child(mode); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// child applies or destroys, sleeping a little before every step so that
// a kill lands anywhere in it.
func child(mode string) error {
	w, err := runtime.Open(os.Getenv("PROBECTL_TEST_STATE"), os.Getenv("PROBECTL_TEST_WS"))
	if err != nil {
		return err
	}
	w.LockTimeout = 10 * time.Second
	if err := w.Lock(); err != nil {
		return err
	}
	defer w.Unlock()
	s, err := w.State()
	if err != nil {
		return err
	}
	if _, err := w.Repair(s); err != nil {
		return err
	}
	w.SetFault(func(string) error { time.Sleep(time.Duration(2+rand.Intn(10)) * time.Millisecond); return nil })
	if mode == "destroy" {
		fmt.Println("go")
		_, _, err = w.Destroy(s, nil)
		return err
	}
	src, err := os.ReadFile(os.Getenv("PROBECTL_TEST_SPEC"))
	if err != nil {
		return err
	}
	cfg, diags := spec.Parse(map[string][]byte{"crash.hcl": src})
	if diags.HasErrors() {
		return diags
	}
	f, err := bpf.Detect(bpf.DetectOptions{})
	if err != nil {
		return err
	}
	if err := f.LoadTracepoints([]string{"syscalls:sys_exit_openat"}); err != nil {
		return err
	}
	out, diags := compiler.Compile(cfg, f)
	if diags.HasErrors() {
		return diags
	}
	fmt.Println("go") // the parent kills from here on
	_, _, err = w.Apply(s, out, runtime.Diff(s, out, nil))
	return err
}

// kill -9 at random points of applies and destroys: the next command
// repairs, the state's probes are intact, and nothing else is left.
func TestKill9DuringApplyAndDestroy(t *testing.T) {
	requireRoot(t)
	baseline := snapshot(t)
	w := workspace(t)
	w.Unlock() // the children take the lock
	specs := []string{faultBase, faultNext}
	for i := range specs {
		specs[i] = strings.ReplaceAll(specs[i], "WORK", workload(t))
	}
	dir := t.TempDir()
	trials := 60
	killed, finished := 0, 0
	r := rand.New(rand.NewSource(time.Now().UnixNano()))
	for trial := 0; trial < trials; trial++ {
		mode := "apply"
		if trial%4 == 3 {
			mode = "destroy"
		}
		specPath := fmt.Sprintf("%s/spec-%d.hcl", dir, trial)
		if err := os.WriteFile(specPath, []byte(specs[trial%2]), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "PROBECTL_TEST_CHILD="+mode, "PROBECTL_TEST_STATE="+w.StateDir,
			"PROBECTL_TEST_WS="+w.Name, "PROBECTL_TEST_SPEC="+specPath)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ready := make([]byte, 3)
		_, _ = io.ReadFull(stdout, ready) // "go\n": the child starts its steps
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		delay := time.Duration(r.Intn(160)) * time.Millisecond
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("trial %d: child failed on its own: %v\n%s", trial, err, stderr.String())
			}
			finished++
		case <-time.After(delay):
			_ = cmd.Process.Signal(syscall.SIGKILL)
			if err := <-done; err == nil {
				finished++
			} else {
				killed++
			}
		}

		// The next command: lock, read, repair.
		if err := w.Lock(); err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		s, err := w.State()
		if err != nil {
			t.Fatalf("trial %d: state unreadable after kill -9: %v", trial, err)
		}
		if _, err := w.Repair(s); err != nil {
			t.Fatalf("trial %d: repair: %v", trial, err)
		}
		if d := w.Drift(s); len(d) > 0 {
			t.Errorf("trial %d (%s): the state's probes are damaged: %v", trial, mode, d)
		}
		noLeaks(t, baseline, s)
		w.Unlock()
	}
	t.Logf("%d trials: %d killed mid-way, %d finished first", trials, killed, finished)
	if killed < trials/3 {
		t.Errorf("only %d of %d trials were killed mid-way: the kill points do not cover the command", killed, trials)
	}
	if err := w.Lock(); err != nil {
		t.Fatal(err)
	}
}
