package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/probectl/probectl/internal/testenv"
)

// inKallsyms says whether /proc/kallsyms lists sym.
func inKallsyms(t *testing.T, sym string) bool {
	b, err := os.ReadFile("/proc/kallsyms")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[2] == sym {
			return true
		}
	}
	return false
}

// kaddrCLI is a CLI of its own workspace and state, destroyed at the end.
func kaddrCLI(t *testing.T, name string) *stkCLI {
	c := &stkCLI{t: t, state: t.TempDir(), ws: fmt.Sprintf("kaddr-%s-%d", name, os.Getpid())}
	t.Cleanup(func() { c.run("destroy", "-auto-approve") })
	return c
}

func kaddrFile(t *testing.T, src string) string {
	file := filepath.Join(t.TempDir(), "kaddr.hcl")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// procLoadavg is how /proc/loadavg prints three avenrun values
// (fs/proc/loadavg.c): LOAD_INT and LOAD_FRAC of x + FIXED_1/200, two
// decimals rounded.
func procLoadavg(a [3]uint64) string {
	var parts []string
	for _, x := range a {
		x += 2048 / 200
		parts = append(parts, fmt.Sprintf("%d.%02d", x>>11, ((x&2047)*100)>>11))
	}
	return strings.Join(parts, " ")
}

// TestKaddrLoadAverages: a one_cpu timer reads the kernel's avenrun by
// kaddr("avenrun") and kernel_u64, resolved from /proc/kallsyms at apply:
// the three values last sampled, printed as /proc/loadavg prints them,
// are /proc/loadavg's first three fields read in the same 5 s window
// (retried when the kernel updated them in between).
//
// A kernel without CONFIG_KALLSYMS_ALL (this development host's) lists no
// variables in kallsyms, and bpftrace's kaddr fails there too: apply must
// then refuse, naming the probe and the symbol, and leave nothing applied.
// runtime's TestKernelKaddrLoadAverages compares the values in the VMs.
func TestKaddrLoadAverages(t *testing.T) {
	c := kaddrCLI(t, "loads")
	file := kaddrFile(t, `
probe "profile" "loads" {
  event     = "cpu-clock"
  period_ns = 20000000
  one_cpu   = true
  on_entry {
    max "seen" {
      value = ktime
      by    = [kernel_u64(kaddr("avenrun")), kernel_u64(kaddr("avenrun") + 8), kernel_u64(kaddr("avenrun") + 16)]
    }
  }
}
`)
	if !inKallsyms(t, "avenrun") {
		out, errOut, code := c.run("apply", "-auto-approve", file)
		if code == 0 || !strings.Contains(errOut, "profile.loads") || !strings.Contains(errOut, `"avenrun"`) {
			t.Fatalf("apply without avenrun in kallsyms: exit %d\n%s%s", code, out, errOut)
		}
		if st, _, _ := c.run("status"); strings.Contains(st, "profile.loads") {
			t.Fatalf("a refused apply left the probe applied:\n%s", st)
		}
		t.Logf("refused: %s", strings.TrimSpace(errOut))
		return
	}
	c.must("apply", "-auto-approve", file)
	var res struct {
		Probes []struct {
			Aggregations []struct {
				Entries []struct {
					Key   map[string]uint64 `json:"key"`
					Value int64             `json:"value"`
				} `json:"entries"`
			} `json:"aggregations"`
		} `json:"probes"`
	}
	for try := 1; ; try++ {
		before, err := os.ReadFile("/proc/loadavg")
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		out := c.must("show", "-json")
		after, err := os.ReadFile("/proc/loadavg")
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if len(res.Probes) != 1 || len(res.Probes[0].Aggregations) != 1 {
			t.Fatalf("want one probe, one aggregation:\n%s", out)
		}
		var last [3]uint64
		var at int64 = -1
		for _, e := range res.Probes[0].Aggregations[0].Entries {
			if len(e.Key) != 3 {
				t.Fatalf("key %v: want three values\n%s", e.Key, out)
			}
			if e.Value > at {
				at = e.Value
				i := 0
				for _, k := range []string{"kernel_u64(kaddr(\"avenrun\"))", "kernel_u64(kaddr(\"avenrun\") + 8)", "kernel_u64(kaddr(\"avenrun\") + 16)"} {
					v, ok := e.Key[k]
					if !ok {
						t.Fatalf("no key %s in %v", k, e.Key)
					}
					last[i] = v
					i++
				}
			}
		}
		want := strings.Join(strings.Fields(string(before))[:3], " ")
		same := want == strings.Join(strings.Fields(string(after))[:3], " ")
		got := procLoadavg(last)
		if at >= 0 && same && got == want {
			t.Logf("try %d: avenrun %v prints %q, /proc/loadavg %q (%d distinct samples)", try, last, got, strings.TrimSpace(string(before)), len(res.Probes[0].Aggregations[0].Entries))
			return
		}
		t.Logf("try %d: avenrun %v prints %q, /proc/loadavg %q then %q", try, last, got, strings.TrimSpace(string(before)), strings.TrimSpace(string(after)))
		if try == 20 {
			t.Fatalf("avenrun as sampled never matched /proc/loadavg in one window")
		}
	}
}

// TestKaddrKernelNotes: kaddr of the kernel's notes (__start_notes, a
// data symbol every kallsyms lists) and kernel_u64 read the kernel's own
// bytes: the first two u64 are /sys/kernel/notes's first 16 bytes, and
// __stop_notes less __start_notes is that file's size.
func TestKaddrKernelNotes(t *testing.T) {
	notes, err := os.ReadFile("/sys/kernel/notes")
	if err != nil || len(notes) < 16 {
		testenv.Absent(t, "no /sys/kernel/notes of 16 bytes: %v", err)
	}
	c := kaddrCLI(t, "notes")
	file := kaddrFile(t, `
probe "profile" "notes" {
  event     = "cpu-clock"
  period_ns = 20000000
  one_cpu   = true
  on_entry {
    count "n" {
      by = [kernel_u64(kaddr("__start_notes")), kernel_u64(kaddr("__start_notes") + 8), kaddr("__stop_notes") - kaddr("__start_notes")]
    }
  }
}
`)
	c.must("apply", "-auto-approve", file)
	e, _ := waitAggregation[uint64](t, c)
	if len(e) != 1 {
		t.Fatalf("want one key, the same bytes each sample: %+v", e)
	}
	want := map[string]uint64{
		`kernel_u64(kaddr("__start_notes"))`:             binary.NativeEndian.Uint64(notes[0:8]),
		`kernel_u64(kaddr("__start_notes") + 8)`:         binary.NativeEndian.Uint64(notes[8:16]),
		`kaddr("__stop_notes") - kaddr("__start_notes")`: uint64(len(notes)),
	}
	for k, v := range want {
		if got, ok := e[0].Key[k]; !ok || got != v {
			t.Errorf("%s = %#x (present %v), want %#x", k, got, ok, v)
		}
	}
	t.Logf("%d samples: key %v, /sys/kernel/notes %d bytes starting % x", e[0].Value, e[0].Key, len(notes), notes[:16])
}

// TestKaddrMissingSymbol: a symbol /proc/kallsyms lacks stops apply,
// naming the probe and the symbol, and nothing is left attached.
func TestKaddrMissingSymbol(t *testing.T) {
	c := kaddrCLI(t, "missing")
	file := kaddrFile(t, `
probe "profile" "nosym" {
  event     = "cpu-clock"
  period_ns = 20000000
  one_cpu   = true
  on_entry {
    max "v" { value = kernel_u64(kaddr("kaddr_no_such_variable")) }
  }
}
`)
	out, errOut, code := c.run("apply", "-auto-approve", file)
	if code == 0 {
		t.Fatalf("apply of a missing symbol succeeded:\n%s%s", out, errOut)
	}
	msg := out + errOut
	for _, want := range []string{"profile.nosym", `"kaddr_no_such_variable"`, "not in /proc/kallsyms"} {
		if !strings.Contains(msg, want) {
			t.Errorf("apply's refusal does not say %q:\n%s", want, msg)
		}
	}
	if show := c.must("show", "-json"); strings.Contains(show, "nosym") {
		t.Errorf("the refused probe is in show:\n%s", show)
	}
}
