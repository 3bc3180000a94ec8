package runtime_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/probectl/probectl/runtime"
)

const faultBase = `probe "user" "calls" {
  binary    = "WORK"
  functions = ["target"]
  on_entry {
    count "n" {}
  }
}`

// faultNext replaces user.calls and adds two probes and a table they
// share: loads, attaches of several families, pins of maps and links, and
// the state write.
const faultNext = `table "last" {}

probe "user" "calls" {
  binary    = "WORK"
  functions = ["target", "other"]
  attach    = "uprobe"
  on_entry {
    count "n" { by = [func] }
  }
}

probe "user" "rets" {
  binary    = "WORK"
  functions = ["fails"]
  on_entry {
    save = { x = arg0 }
  }
  on_exit {
    hist "x" { value = entry.x }
    count "seen" { when = has(last, [tid]) }
  }
}

probe "tracepoint" "opens" {
  event = "syscalls:sys_exit_openat"
  on_entry {
    count "n" { by = [args.ret] }
    event "e" { fields = { r = args.ret } }
    store "last" {
      key   = [tid]
      value = args.ret
    }
  }
}`

var errInjected = errors.New("injected fault")

// For every step of an apply before its commit (each load, attach, pin
// and the state write), make that step fail: the kernel and the state
// must be exactly as before, and the applied probe must keep counting.
func TestFaultInjectionEveryStep(t *testing.T) {
	requireRoot(t)
	w := workspace(t)
	apply(t, w, faultBase)

	// Learn the steps of the apply.
	var steps []string
	w.SetFault(func(step string) error { steps = append(steps, step); return nil })
	apply(t, w, faultNext)
	w.SetFault(nil)
	apply(t, w, faultBase) // back to the base state
	commit := -1
	for i, s := range steps {
		if s == "write state" {
			commit = i
		}
	}
	if commit < 10 {
		t.Fatalf("too few steps before the commit: %v", steps)
	}
	kinds := map[string]int{}
	for _, s := range steps[:commit+1] {
		kinds[strings.Fields(s)[0]]++
	}
	t.Logf("%d steps before the commit: %v", commit+1, kinds)

	for k := 0; k <= commit; k++ {
		s, err := w.State()
		if err != nil {
			t.Fatal(err)
		}
		stateBytes, err := os.ReadFile(filepath.Join(w.StateDir, w.Name, "state.json"))
		if err != nil {
			t.Fatal(err)
		}
		pins := listPins(t, w)

		i := 0
		w.SetFault(func(step string) error {
			defer func() { i++ }()
			if i == k {
				return errInjected
			}
			return nil
		})
		out := compile(t, faultNext)
		_, _, err = w.Apply(s, out, runtime.Diff(s, out, nil))
		w.SetFault(nil)
		if !errors.Is(err, errInjected) {
			t.Fatalf("fault at step %d (%s): apply returned %v", k, steps[k], err)
		}
		after, _ := os.ReadFile(filepath.Join(w.StateDir, w.Name, "state.json"))
		if !bytes.Equal(stateBytes, after) {
			t.Errorf("fault at step %d (%s): the state changed", k, steps[k])
		}
		if got := listPins(t, w); got != pins {
			t.Errorf("fault at step %d (%s): pins changed:\n%s\nwas\n%s", k, steps[k], got, pins)
		}
		leakFree(t, w, s)
		if d := w.Drift(s); len(d) > 0 {
			t.Errorf("fault at step %d (%s): drift %v", k, steps[k], d)
		}
		// The applied probe is still live and counting.
		c0 := values(aggregation(t, w, s, "user.calls", "n"))[""]
		runWork(t, 3)
		if c1 := values(aggregation(t, w, s, "user.calls", "n"))[""]; c1 != c0+3 {
			t.Errorf("fault at step %d (%s): the applied probe counted %d, want %d", k, steps[k], c1, c0+3)
		}
	}
	s, _ := w.State()
	if _, _, err := w.Destroy(s, nil); err != nil {
		t.Fatal(err)
	}
	leakFree(t, w, nil)
}

// listPins lists every file under the workspace's pin directory.
func listPins(t *testing.T, w *runtime.Workspace) string {
	t.Helper()
	var out []string
	err := filepath.Walk(w.PinDir(), func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		out = append(out, strings.TrimPrefix(path, w.PinDir()))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(out, "\n")
}
