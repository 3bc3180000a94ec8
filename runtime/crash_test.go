package runtime_test

import (
	"bufio"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/runtime"
	"github.com/probectl/probectl/runtime/internal/uwork"
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
	code := m.Run()
	for _, dir := range builtIn {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

// child applies or destroys, sleeping a little before every step so that
// a kill lands anywhere in it; or, as "session", attaches without pins,
// reports its objects and waits to be killed.
func child(mode string) error {
	switch mode {
	case "session":
		return sessionChild()
	case "exit":
		return exitChild()
	case "ucalls":
		// The user-probe workload of the kernel matrix (uwork's doc says
		// why the garbage collector is off).
		debug.SetGCPercent(-1)
		n, _ := strconv.Atoi(os.Getenv("PROBECTL_TEST_N"))
		fmt.Println(uwork.Loop(n))
		return nil
	}
	w, err := runtime.Open(os.Getenv("PROBECTL_TEST_STATE"), os.Getenv("PROBECTL_TEST_WS"))
	if err != nil {
		return err
	}
	w.LockTimeout = 10 * time.Second
	if v := os.Getenv("PROBECTL_TEST_LOCK_TIMEOUT"); v != "" {
		w.LockTimeout, _ = time.ParseDuration(v)
	}
	// Every object is reported to the parent as soon as it exists: a kill
	// can only leave behind what was pinned, which was created earlier.
	w.SetObserver(func(kind string, id uint32) { fmt.Printf("obj %s %d\n", kind, id) })
	s, _, err := w.Begin()
	if err != nil {
		return err
	}
	defer w.Unlock()
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
	w := workspace(t)
	w.Unlock() // the children take the lock
	objs := trackers[w]
	specs := []string{faultBase, faultNext}
	for i := range specs {
		specs[i] = strings.ReplaceAll(specs[i], "WORK", workload(t))
	}
	dir := t.TempDir()
	trials := 60
	killed, finished := 0, 0
	seed := time.Now().UnixNano()
	if v := os.Getenv("PROBECTL_TEST_SEED"); v != "" {
		seed, _ = strconv.ParseInt(v, 10, 64)
	}
	t.Logf("kill points from seed %d (replay: PROBECTL_TEST_SEED=%d go test -run TestKill9 ./runtime)", seed, seed)
	r := rand.New(rand.NewSource(seed))
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
		started := collect(stdout, objs) // "go": the child starts its steps
		<-started
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
		s, _, err := w.Begin()
		if err != nil {
			t.Fatalf("trial %d: after kill -9: %v", trial, err)
		}
		if d := w.Drift(s); len(d) > 0 {
			t.Errorf("trial %d (%s): the state's probes are damaged: %v", trial, mode, d)
		}
		leakFree(t, w, s)
		w.Unlock()
	}
	t.Logf("%d trials: %d killed mid-way, %d finished first", trials, killed, finished)
	if killed < trials/4 {
		t.Errorf("only %d of %d trials were killed mid-way: the kill points do not cover the command", killed, trials)
	}
}

// collect reads a child's stdout: "obj KIND ID" lines go to objs, and the
// returned channel closes at "go".
func collect(r io.Reader, objs *objects) <-chan struct{} {
	started := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(r)
		once := false
		for sc.Scan() {
			var kind string
			var id uint32
			if n, _ := fmt.Sscanf(sc.Text(), "obj %s %d", &kind, &id); n == 2 {
				objs.add(kind, id)
			} else if sc.Text() == "go" && !once {
				once = true
				close(started)
			}
		}
		if !once {
			close(started)
		}
	}()
	return started
}

func sessionChild() error {
	src, err := os.ReadFile(os.Getenv("PROBECTL_TEST_SPEC"))
	if err != nil {
		return err
	}
	cfg, diags := spec.Parse(map[string][]byte{"session.hcl": src})
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
	sess, err := runtime.Attach(out)
	if err != nil {
		return err
	}
	for _, o := range sess.Objects() {
		fmt.Println("obj", o)
	}
	fmt.Println("go")
	select {} // until killed
}

// A session's probes live exactly as long as its process: kill -9 it, and
// the kernel detaches and frees everything (issue 7, defect 12: probectl
// run killed used to leave its probes attached forever).
func TestSessionDiesWithProcess(t *testing.T) {
	requireRoot(t)
	specPath := t.TempDir() + "/session.hcl"
	if err := os.WriteFile(specPath, []byte(strings.ReplaceAll(faultNext, "WORK", workload(t))), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "PROBECTL_TEST_CHILD=session", "PROBECTL_TEST_SPEC="+specPath)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	objs := &objects{}
	<-collect(stdout, objs)
	if len(objs.ids) < 10 {
		t.Fatalf("the session reported %d objects: %v\n%s", len(objs.ids), objs.ids, stderr.String())
	}
	for id := range objs.ids {
		var kind string
		var n uint32
		fmt.Sscanf(id, "%s %d", &kind, &n)
		if !exists(kind, n) {
			t.Fatalf("%s does not exist while the session runs", id)
		}
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	noLeaks(t, objs, nil, nil)
	t.Logf("%d objects, all gone after kill -9", len(objs.ids))
}

// startChild starts the test binary as a probectl process.
func startChild(t *testing.T, w *runtime.Workspace, mode, specPath, lockTimeout string, stderr *strings.Builder) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "PROBECTL_TEST_CHILD="+mode, "PROBECTL_TEST_STATE="+w.StateDir,
		"PROBECTL_TEST_WS="+w.Name, "PROBECTL_TEST_SPEC="+specPath, "PROBECTL_TEST_LOCK_TIMEOUT="+lockTimeout)
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	collect(stdout, trackers[w])
	return cmd
}

// Two applies at once: with a lock timeout both succeed, one after the
// other; without one, the second fails naming the first. Either way the
// state is consistent and nothing leaks.
func TestConcurrentApplies(t *testing.T) {
	requireRoot(t)
	w := workspace(t)
	w.Unlock()
	dir := t.TempDir()
	paths := []string{dir + "/a.hcl", dir + "/b.hcl"}
	for i, src := range []string{faultBase, faultNext} {
		if err := os.WriteFile(paths[i], []byte(expectComm(strings.ReplaceAll(src, "WORK", workload(t)))), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, timeout := range []string{"20s", "0s"} {
		var e1, e2 strings.Builder
		c1 := startChild(t, w, "apply", paths[0], timeout, &e1)
		c2 := startChild(t, w, "apply", paths[1], timeout, &e2)
		err1, err2 := c1.Wait(), c2.Wait()
		switch timeout {
		case "20s":
			if err1 != nil || err2 != nil {
				t.Fatalf("with a lock timeout both applies succeed: %v %s / %v %s", err1, e1.String(), err2, e2.String())
			}
		default:
			if (err1 == nil) == (err2 == nil) && !(err1 == nil && err2 == nil) {
				t.Fatalf("both failed: %s / %s", e1.String(), e2.String())
			}
			for _, e := range []string{e1.String(), e2.String()} {
				if e != "" && !strings.Contains(e, "is held by ") {
					t.Errorf("the refused apply must name the holder: %s", e)
				}
			}
		}
		s, _, err := w.Begin()
		if err != nil {
			t.Fatal(err)
		}
		if n := len(s.Probes); n != 1 && n != 3 {
			t.Errorf("state holds %d probes, want one spec's (1 or 3)", n)
		}
		if d := w.Drift(s); len(d) > 0 {
			t.Errorf("drift: %v", d)
		}
		leakFree(t, w, s)
		w.Unlock()
	}
}
