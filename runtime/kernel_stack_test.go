package runtime_test

import (
	goruntime "runtime"
	"strings"
	"testing"

	"github.com/probectl/probectl/bpf/symbols"
	"github.com/probectl/probectl/runtime"
)

// kstack keys, exactly: every write the worker makes reaches the write
// function by one path, so the aggregation by kstack has one key, counted
// once per call, whose frames are the probed function (after the BPF
// frames of a trampoline, whose program walks the stack from itself) and
// its callers up to the system call entry. Every entry family the kernel
// offers, forced; and the sys_enter_write tracepoint.
func TestKernelStacks(t *testing.T) {
	f := kernelFacts(t)
	wfn := writeFunction(t, f)
	const fails, oks = 7, 13
	entry := map[string]bool{}
	for _, fam := range families(f) {
		if fam.entry && fam.needs(f) && fam.attach != "kprobe.session" {
			entry[fam.attach] = true
		}
	}
	entry["kprobe.session"] = f.Links.KprobeSession && f.Helpers.SessionKfuncs
	entry["fsession"] = f.Links.Fsession
	for _, attach := range []string{"kprobe.multi", "kprobe.session", "fentry", "fsession", "kprobe", "tracepoint"} {
		if attach != "tracepoint" && !entry[attach] {
			t.Logf("%s is not offered by %s", attach, f.Label())
			continue
		}
		t.Run(attach, func(t *testing.T) {
			wk := newWorker(t)
			src := `probe "kernel" "s" {
  functions = ["` + wfn + `"]
  attach    = "` + attach + `"
  on_entry {
    count "stacks" {
      when = tid == TID
      by   = [kstack(12)]
    }
  }
}`
			addr, top := "kernel.s", wfn
			if attach == "fsession" { // which needs an on_exit
				src = strings.Replace(src, "\n  }\n}", "\n  }\n  on_exit {\n    count \"returns\" {}\n  }\n}", 1)
				// On x86_64 its trampoline calls the function itself and
				// skips the function's frame (as for fexit): the stack goes
				// from the BPF frames to the function's caller. arm64's
				// keeps it.
				if goruntime.GOARCH == "amd64" {
					top = ""
				}
			}
			if attach == "tracepoint" {
				src = `probe "tracepoint" "s" {
  event = "syscalls:sys_enter_write"
  on_entry {
    count "stacks" {
      when = tid == TID
      by   = [kstack(12)]
    }
  }
}`
				addr, top = "tracepoint.s", ""
			}
			w := workspace(t)
			if attach == "tracepoint" {
				// The live kernel's formats, as compile reads them.
				if err := f.LoadTracepoints([]string{"syscalls:sys_enter_write"}); err != nil {
					t.Fatal(err)
				}
			}
			out := kcompile(t, f, src, wk.tid)
			k := khold(t, w, out)
			wk.syscalls(t, fails, oks, 0)
			agg := k.agg(t, addr, "stacks")
			if len(agg.Entries) != 1 {
				for _, e := range agg.Entries {
					t.Logf("%v: %d", e.Key[0].Value, *e.Value)
				}
				t.Fatalf("%d stacks, want 1", len(agg.Entries))
			}
			e := agg.Entries[0]
			st, ok := e.Key[0].Value.(*runtime.Stack)
			if !ok {
				t.Fatalf("key %#v is not a stack", e.Key[0].Value)
			}
			t.Logf("%s on %s (%s): %d calls, %s", attach, f.Label(), out.Probes[0].Route, *e.Value, st)
			if *e.Value != fails+oks {
				t.Errorf("count %d, want %d", *e.Value, fails+oks)
			}
			switch {
			case attach == "tracepoint" && !f.Kernel.AtLeast(6, 12) && st.Err == "no kernel stack":
				// Before 6.12 (6.1 here) a syscall tracepoint hands BPF
				// the user registers of the system call: bpf_get_stackid
				// finds no kernel stack (EFAULT), for every call alike.
			case st.Err != "":
				t.Fatalf("no stack: %s", st.Err)
			default:
				checkKernelStack(t, st.Frames, top, attach == "fentry" || attach == "fsession")
				if attach == "fsession" && top == "" {
					for _, fr := range st.Frames {
						if fr.Symbol == wfn {
							t.Errorf("fsession stack %s has %s: the trampoline no longer skips its frame (update README, Stacks)", st, wfn)
						}
					}
				}
			}
			k.done(t)
		})
	}
}

// checkKernelStack checks a write's kernel stack: top first (after BPF
// frames when bpfFirst), and down to the system call entry: do_syscall_64
// then entry_SYSCALL_64* on amd64, el0_svc* on arm64. Every frame has a
// symbol.
func checkKernelStack(t *testing.T, frames []symbols.Frame, top string, bpfFirst bool) {
	t.Helper()
	var names []string
	for _, fr := range frames {
		if fr.Symbol == "" {
			t.Errorf("frame %#x has no symbol", fr.Addr)
		}
		names = append(names, fr.Symbol)
	}
	i := 0
	for bpfFirst && i < len(frames) && (frames[i].Module == "bpf" || strings.HasPrefix(frames[i].Symbol, "bpf_") || strings.HasPrefix(frames[i].Symbol, "__bpf")) {
		i++
	}
	if top != "" && (i >= len(names) || names[i] != top) {
		t.Errorf("stack %v: want %s first", names, top)
	}
	last := "entry_SYSCALL_64"
	caller := "do_syscall_64"
	lastOld := last
	if goruntime.GOARCH == "arm64" {
		// The vector was el0_sync before 5.13 (Debian 11's 5.10).
		last, lastOld, caller = "el0t_64_sync", "el0_sync", "el0_svc"
	}
	c, l := -1, -1
	for j, n := range names {
		if c < 0 && strings.HasPrefix(n, caller) {
			c = j
		}
		if strings.HasPrefix(n, last) || n == lastOld {
			l = j
		}
	}
	if c < 0 || l < c {
		t.Errorf("stack %v: want %s, then %s", names, caller, last)
	}
}
