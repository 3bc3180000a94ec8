package runtime_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/bpf/sys"
	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/spec"
)

// TestKernelFsession probes a write and a read function with attach =
// "fsession" on each kernel of the matrix. Where the kernel has fsession
// (7.0 on x86_64, 7.1 on arm64: detected by loading one, which must
// agree), one trampoline program per function counts exactly in each way
// the entry data can travel: the session cookie (8 bytes of entry data),
// the cookie as a mark that on_entry's when held (no entry data), and the
// per-call slot (when and data); and so does what auto picks without
// fprobe. Elsewhere plan refuses it, naming what it needs.
func TestKernelFsession(t *testing.T) {
	f := kernelFacts(t)
	// x86_64 from 7.0; arm64's JIT followed (7.1 [unchecked]; the
	// matrix has 6.12, without, and 7.2, with).
	want := f.BTF && f.Links.Fentry && (f.Arch == bpf.ArchX86_64 && f.Kernel.AtLeast(7, 0) || f.Arch == bpf.ArchArm64 && f.Kernel.AtLeast(7, 1))
	if f.Links.Fsession != want {
		t.Fatalf("%s: fsession detected %v, want %v (7.0 on x86_64, 7.1 on arm64, with trampolines)", f.Label(), f.Links.Fsession, want)
	}
	wfn, rfn := writeFunction(t, f), readFunction(t, f)
	const fails, oks, reads = 23, 11, 7
	variants := []struct {
		name, entry, exitWhen string
		storage               compiler.Storage
		latency               bool
		auto                  bool // attach = "auto" on the facts without fprobe
	}{
		// No when at entry: every call's start goes through the cookie,
		// and the exit filters.
		{"cookie", "save = { start = ktime }", "tid == TID", compiler.StorageCookie, true, false},
		{"flag", "when = tid == TID", "", compiler.StorageCookie, false, false},
		{"slot", "when = tid == TID\n    save = { start = ktime }", "", compiler.StorageMap, true, false},
		// What auto picks for this kernel if it had no fprobe (CONFIG_FPROBE
		// off), run on this kernel.
		{"auto-without-fprobe", "save = { start = ktime }", "tid == TID", compiler.StorageCookie, true, true},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			wk := newWorker(t)
			// and joins the exit's conditions.
			and := func(conds ...string) string {
				var out []string
				for _, c := range conds {
					if c != "" {
						out = append(out, c)
					}
				}
				if len(out) == 0 {
					return ""
				}
				return "\n      when = " + strings.Join(out, " && ")
			}
			latency, ordered := "", ""
			if v.latency {
				latency = `
    hist "latency" {
      value = ktime - entry.start` + and(v.exitWhen) + `
    }`
				ordered = "ktime >= entry.start && entry.start > 0"
			}
			src := `probe "kernel" "fs" {
  functions = ["` + wfn + `", "` + rfn + `"]
  attach    = "fsession"
  on_entry {
    ` + v.entry + `
  }
  on_exit {
    count "rets" {
      by   = [func, ret]` + and(v.exitWhen) + `
    }
    count "ordered" {` + and(v.exitWhen, ordered) + `
    }` + latency + `
  }
}`
			target := f
			if v.auto {
				needCookies(t, f) // a write and a read function
				src = strings.Replace(src, `attach    = "fsession"`, "", 1)
				noFprobe := *f
				noFprobe.Links.KprobeMulti, noFprobe.Links.KprobeSession = false, false
				noFprobe.Derive()
				target = &noFprobe
			}
			src = strings.NewReplacer("TID", fmt.Sprint(wk.tid)).Replace(src)
			cfg, diags := spec.Parse(map[string][]byte{"kernel.hcl": []byte(src)})
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			out, diags := compiler.Compile(cfg, target)
			if v.auto && !f.Links.Fsession {
				if diags.HasErrors() {
					t.Fatal(diags)
				}
				if fams := compiler.JoinFamilies(out.Probes[0].Attach); fams == "fsession" {
					t.Fatalf("auto without fprobe nor fsession: %s", fams)
				}
				return
			}
			if !f.Links.Fsession {
				if !diags.HasErrors() || diags[0].Summary != "Attach family not available" || !strings.Contains(diags[0].Detail, "Linux 7.0 on x86_64, or a later kernel on arm64") ||
					diags[0].Subject == nil || diags[0].Subject.Start.Line != 3 {
					t.Fatalf("attach = fsession on %s: %v, want a refusal at line 3 naming Linux 7.0 on x86_64", f.Label(), diags)
				}
				t.Logf("%s: %s: %s", f.Label(), diags[0].Subject, diags[0].Detail)
				return
			}
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			p := out.Probes[0]
			if got := compiler.JoinFamilies(p.Attach); got != "fsession" || p.EntryData.Storage != v.storage {
				t.Fatalf("plan: %s with entry data in %s, want fsession with %s (%s)", got, p.EntryData.Storage, v.storage, p.Reason)
			}
			w := workspace(t)
			s, err := kapply(t, w, out)
			if err != nil {
				t.Fatal(err)
			}
			wk.syscalls(t, fails, oks, reads)
			got := values(aggregation(t, w, s, "kernel.fs", "rets"))
			wantRets := map[string]int64{wfn + ",-9": fails, wfn + ",5": oks, rfn + ",5": reads}
			if fmt.Sprint(got) != fmt.Sprint(wantRets) {
				t.Errorf("rets = %v, want %v", got, wantRets)
			}
			if n := values(aggregation(t, w, s, "kernel.fs", "ordered"))[""]; n != fails+oks+reads {
				t.Errorf("ordered = %d, want %d", n, fails+oks+reads)
			}
			if v.latency {
				var total uint64
				for _, e := range aggregation(t, w, s, "kernel.fs", "latency").Entries {
					for _, b := range e.Buckets {
						total += b.Count
					}
				}
				if total != fails+oks+reads {
					t.Errorf("latency histogram holds %d calls, want %d", total, fails+oks+reads)
				}
			}
			st := w.Status(s)
			if len(st[0].Links) != 2 || len(st[0].Drift) != 0 {
				t.Errorf("status: %d links (want one per function), drift %v", len(st[0].Links), st[0].Drift)
			}
			t.Logf("%s on %s: %s; %d links, hits %d entry / %d exit, missed %d", p.Attach, f.Label(), p.Reason,
				len(st[0].Links), st[0].EntryHits, st[0].ExitHits, st[0].Missed)
			if _, _, err := w.Destroy(s, nil); err != nil {
				t.Fatal(err)
			}
			leakFree(t, w, nil)
		})
	}
	if !f.Links.Fsession {
		return
	}
	t.Run("cookie-limit", func(t *testing.T) { fsessionCookieLimit(t, f, wfn) })
	// A program the verifier refuses: the error names the function and
	// carries the kernel's reason and log.
	kernel, err := bpf.KernelBTF()
	if err != nil {
		t.Fatal(err)
	}
	bad := &ebpf.ProgramSpec{Name: "fs_bad", License: "GPL", Instructions: asm.Instructions{asm.Return()}}
	_, err = sys.LoadFsession(bad, wfn, func(string) *ebpf.Map { return nil }, kernel)
	var ve *ebpf.VerifierError
	if !errors.As(err, &ve) || !strings.Contains(err.Error(), wfn) || len(ve.Log) == 0 {
		t.Fatalf("loading an fsession program that returns nothing: %v, want a verifier error naming %s with its log", err, wfn)
	}
	t.Logf("refused as it should be: %v", err)
	if _, err := sys.LoadFsession(bad, "no_such_function_xyz", func(string) *ebpf.Map { return nil }, kernel); err == nil || !strings.Contains(err.Error(), "no_such_function_xyz") {
		t.Errorf("fsession on a missing function: %v", err)
	}
}

// fsessionCookieLimit: the series' v4 limited a trampoline to four
// fsession programs using the cookie (BPF_TRAMP_MAX_COOKIES); 7.2 takes
// eight on one function, each with its own cookie, all counting exactly.
func fsessionCookieLimit(t *testing.T, f *bpf.Facts, wfn string) {
	wk := newWorker(t)
	probes := func(n int) string {
		var b strings.Builder
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, `probe "kernel" "c%d" {
  functions = ["%s"]
  attach    = "fsession"
  on_entry {
    save = { start = ktime }
  }
  on_exit {
    count "n" { when = tid == TID && entry.start > 0 }
  }
}
`, i, wfn)
		}
		return b.String()
	}
	w := workspace(t)
	const n = 8
	s, err := kapply(t, w, kcompile(t, f, probes(n), wk.tid))
	if err != nil {
		t.Fatal(err)
	}
	wk.syscalls(t, 5, 8, 0)
	for i := 0; i < n; i++ {
		if n := values(aggregation(t, w, s, fmt.Sprintf("kernel.c%d", i), "n"))[""]; n != 13 {
			t.Errorf("c%d: n = %d, want 13", i, n)
		}
	}
	if _, _, err := w.Destroy(s, nil); err != nil {
		t.Fatal(err)
	}
	leakFree(t, w, nil)
}
