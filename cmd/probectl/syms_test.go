package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// usym on the host, for real: a uprobe on the workload's stk_call, which
// takes a function pointer (stk_target), as pthread_create takes a start
// routine.

// symWork builds the stack tests' workload under a task name of the
// symbol tests' own.
func symWork(t *testing.T) (path, comm string) { return buildStackWork(t, "sym") }

func newSymCLI(t *testing.T) *stkCLI {
	c := &stkCLI{t: t, state: t.TempDir(), ws: fmt.Sprintf("sym-%d-%d", os.Getpid(), time.Now().UnixNano()%1000000)}
	t.Cleanup(func() { c.run("destroy", "-auto-approve") })
	return c
}

type symShow struct {
	Probes []struct {
		Aggregations []struct {
			Entries []struct {
				Key   map[string]string `json:"key"`
				Value int64             `json:"value"`
			} `json:"entries"`
		} `json:"aggregations"`
	} `json:"probes"`
}

func TestUsymFunctionPointer(t *testing.T) {
	path, comm := symWork(t)
	c := newSymCLI(t)
	c.apply(fmt.Sprintf(`
probe "user" "call" {
  binary    = %q
  functions = ["stk_call"]
  on_entry {
    when = comm == %q
    count "calls" {
      by = { fn = usym(arg0) }
    }
  }
}
`, path, comm))
	const n = 333
	exit := startWork(t, -1, path, "call", fmt.Sprint(n))

	// While the process lives: the function, and the file it is in.
	want := "stk_target [" + comm + "]"
	read := func() (string, int64) {
		t.Helper()
		out := c.must("show", "-json")
		var res symShow
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		entries := res.Probes[0].Aggregations[0].Entries
		if len(entries) != 1 {
			t.Fatalf("want one key, got %d:\n%s", len(entries), out)
		}
		return entries[0].Key["fn"], entries[0].Value
	}
	if fn, v := read(); fn != want || v != n {
		t.Errorf("show -json: fn=%q count %d, want fn=%q count %d", fn, v, want, n)
	}
	text := c.must("show")
	if !strings.Contains(text, want) || !strings.Contains(text, fmt.Sprint(n)) {
		t.Errorf("show: want %q and %d in\n%s", want, n, text)
	}

	// After it has exited: named still, by the maps this probectl read
	// while it ran (issue 21). A probectl that never saw it run shows the
	// address and "[process PID exited]" (runtime's TestDecodeUsym).
	exit()
	if fn, v := read(); fn != want || v != n {
		t.Errorf("after exit: fn=%q count %d, want fn=%q count %d", fn, v, want, n)
	}
}

// ksym on the host: the functions the kernel's workqueues run
// (workqueue:workqueue_execute_start's function pointer). Each name shown
// is the kallsyms name at the address shown beside it through hex.
func TestKsymWorkqueueFunction(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to load BPF")
	}
	c := newSymCLI(t)
	c.apply(`
probe "tracepoint" "work" {
  event = "workqueue:workqueue_execute_start"
  on_entry {
    count "runs" {
      by = { fn = ksym(args.function), addr = hex(args.function) }
    }
  }
}
`)
	kallsyms, err := os.ReadFile("/proc/kallsyms")
	if err != nil {
		t.Fatal(err)
	}
	// Every text symbol by address (aliases: several names).
	names := map[string][]string{}
	for _, line := range strings.Split(string(kallsyms), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || !strings.ContainsAny(f[1], "tTwW") {
			continue
		}
		name := f[2]
		if len(f) > 3 {
			name += " " + f[3] // [module]
		}
		addr := "0x" + strings.TrimLeft(f[0], "0")
		names[addr] = append(names[addr], name)
	}
	// Kernel workqueues run every second or so (vmstat_update,
	// flush_to_ldisc, ...): wait for some.
	var entries []struct {
		Key   map[string]string `json:"key"`
		Value int64             `json:"value"`
	}
	for i := 0; i < 300 && len(entries) < 3; i++ {
		time.Sleep(200 * time.Millisecond)
		var res struct {
			Probes []struct {
				Aggregations []struct {
					Entries []struct {
						Key   map[string]string `json:"key"`
						Value int64             `json:"value"`
					} `json:"entries"`
				} `json:"aggregations"`
			} `json:"probes"`
		}
		out := c.must("show", "-json")
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		entries = res.Probes[0].Aggregations[0].Entries
	}
	if len(entries) == 0 {
		t.Fatal("no workqueue function ran in 60 s")
	}
	for _, e := range entries {
		fn, addr := e.Key["fn"], e.Key["addr"]
		known := names[addr]
		if len(known) == 0 {
			t.Errorf("%s (shown as %q): no kallsyms symbol starts there", addr, fn)
			continue
		}
		// A work function is a function's start: no offset, one of the
		// names kallsyms gives that address.
		if !slices.Contains(known, fn) {
			t.Errorf("%s shown as %q; kallsyms has %q there", addr, fn, known)
		}
		t.Logf("%s %s: %d", addr, fn, e.Value)
	}
}

// examples/bpftrace/threadsnoop.hcl as it is: each thread the workload
// starts is an event naming its start routine. Other processes' threads
// are in the stream too: the test keeps the workload's.
func TestUsymThreadsnoop(t *testing.T) {
	path, comm := symWork(t)
	c := newSymCLI(t)
	c.must("apply", "-auto-approve", "../../examples/bpftrace/threadsnoop.hcl")
	const n = 4
	exit := startWork(t, -1, path, "threads", fmt.Sprint(n))
	defer exit()
	out := c.must("events", "-json")
	want := "stk_thread [" + comm + "]"
	got := 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var ev struct {
			Type   string         `json:"type"`
			Event  string         `json:"event"`
			Fields map[string]any `json:"fields"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		if ev.Type != "event" || ev.Fields["comm"] != comm {
			continue
		}
		got++
		if ev.Event != "thread" || ev.Fields["func"] != want {
			t.Errorf("event %s, want func %q", line, want)
		}
	}
	if got != n {
		t.Errorf("%d thread events of %s, want %d:\n%s", got, comm, n, out)
	}
}
