package compiler_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/spec"
)

// Each file of examples/bpftrace is a spec set of its own (as probectl
// validate and plan take it), with a header that starts with its name
// ("# runqlat: ..."). Each plans for every profile, but for those that
// examplesNotEverywhere names: there, one "Tracepoint not found" per event
// the profile's kernel lacks, at that event, is the only error. (A user
// probe's binary is this machine's, whatever the profile: without it the
// example is skipped.) TestBPFtraceExamplesLoad loads them on the host;
// runtime's TestTool* run the bpftrace tools.
func TestBpftraceExamplesPlanForProfile(t *testing.T) {
	files, err := filepath.Glob("../examples/bpftrace/*.hcl")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples/bpftrace/*.hcl: %v", err)
	}
	for name := range examplesNotEverywhere {
		if !slices.Contains(files, "../examples/bpftrace/"+name+".hcl") {
			t.Errorf("examplesNotEverywhere names %s, which is not an example", name)
		}
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".hcl")
		t.Run(name, func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(src), "# "+name+": ") {
				t.Errorf("the header does not start \"# %s: \"", name)
			}
			cfg, diags := spec.LoadPaths([]string{file})
			if len(diags) > 0 {
				t.Fatal(diags)
			}
			for _, p := range cfg.Probes {
				if p.Addr.Kind != bpf.KindUser {
					continue
				}
				if _, err := os.Stat(p.Binary); err != nil {
					t.Skipf("%s probes %s, which this machine lacks: %v", p.Addr, p.Binary, err)
				}
			}
			only := examplesNotEverywhere[name]
			for _, profile := range bpf.ProfileNames() {
				pf := mustProfile(t, profile)
				_, diags := compiler.Compile(cfg, pf)
				if !pf.Kernel.AtLeast(5, 15) && diags.HasErrors() {
					// Below 5.15 the plan refuses, at the probe, only what
					// the kernel lacks (old5Lacks).
					for _, d := range diags {
						if !old5Lacks[d.Summary] {
							t.Errorf("does not plan for %s: %s: %s", profile, d.Summary, d.Detail)
						}
					}
					continue
				}
				if only.profiles == nil || slices.Contains(only.profiles, profile) {
					if diags.HasErrors() {
						t.Errorf("does not plan for %s: %v", profile, diags)
					}
					continue
				}
				// One error per missing event, at the event, in line order.
				var got []string
				for _, d := range diags {
					line := bytes.Split(src, []byte("\n"))[d.Subject.Start.Line-1]
					at := string(line[d.Subject.Start.Column-1 : d.Subject.End.Column-1])
					got = append(got, d.Summary+" "+at)
					if !strings.Contains(d.Detail, "is not on "+profile+":") {
						t.Errorf("for %s: %s does not name the profile", profile, d.Detail)
					}
				}
				var want []string
				for _, ev := range only.missing {
					want = append(want, fmt.Sprintf("Tracepoint not found %q", ev))
				}
				if !slices.Equal(got, want) {
					t.Errorf("for %s (%s):\n got %q\nwant %q", profile, only.why, got, want)
				}
			}
		})
	}
}

// old5Lacks are the refusals a plan for Linux 5.10 gives: no
// bpf_get_attach_cookie (5.15) for func, event and per-call entry data, no
// BPF links on perf events (5.15) for profile probes, a tracepoint field
// added later (skb:kfree_skb's reason, 5.17), an event missing.
var old5Lacks = map[string]bool{"No attach cookies": true, "Cannot sample": true, "Unknown tracepoint field": true, "Tracepoint not found": true}

// examplesNotEverywhere says which examples plan on some profiles only,
// on which, and why not on the others: the events their kernels lack.
var examplesNotEverywhere = map[string]struct {
	profiles []string
	why      string
	missing  []string
}{
	"biosnoop": {
		profiles: []string{"linux-6.12-amd64", "linux-7.2-amd64", "linux-6.12-arm64", "linux-7.2-arm64"},
		why:      "block_io_start and block_io_done came in Linux 6.5",
		missing:  []string{"block:block_io_start", "block:block_io_done"},
	},
	"opensnoop": {
		profiles: []string{"linux-5.10-amd64", "linux-6.1-amd64", "linux-6.12-amd64", "linux-7.2-amd64"},
		why:      "open(2) is x86-64's: arm64 has openat(2) and openat2(2) only",
		missing:  []string{"syscalls:sys_enter_open", "syscalls:sys_exit_open"},
	},
	"statsnoop": {
		profiles: []string{"linux-5.10-amd64", "linux-6.1-amd64", "linux-6.12-amd64", "linux-7.2-amd64"},
		why:      "stat(2) and lstat(2) are x86-64's: arm64 has newfstatat(2) and statx(2)",
		missing: []string{"syscalls:sys_enter_newstat", "syscalls:sys_enter_newlstat",
			"syscalls:sys_exit_newstat", "syscalls:sys_exit_newlstat"},
	},
}

// The tcp examples show addresses as their tools' ntop prints them, as
// text (issue 21): every event field and by key named laddr, raddr, saddr
// or daddr goes through inet or inet6, and tcpretrans's state through
// its labels.
func TestBpftraceTCPExamplesShowAddresses(t *testing.T) {
	files, err := filepath.Glob("../examples/bpftrace/tcp*.hcl")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples/bpftrace/tcp*.hcl: %v", err)
	}
	addresses := 0
	for _, file := range files {
		cfg, diags := spec.LoadPaths([]string{file})
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		out, diags := compiler.Compile(cfg, mustProfile(t, "linux-7.2-amd64"))
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		check := func(where string, f compiler.KeyField) {
			switch {
			case strings.HasSuffix(f.Name, "addr"):
				addresses++
				if f.Decode != "inet" && f.Decode != "inet6" {
					t.Errorf("%s: %s %s shows as %s, not through inet or inet6", filepath.Base(file), where, f.Name, f.Kind)
				}
			case f.Name == "state" && f.Decode != "labels":
				t.Errorf("%s: %s state shows as a number, not by name", filepath.Base(file), where)
			}
		}
		for _, p := range out.Probes {
			for _, ev := range p.Events {
				for _, f := range ev.Fields {
					check("event "+ev.Name, f)
				}
			}
			for _, a := range p.Aggregations {
				for _, f := range a.Key {
					check("by of "+a.Name, f)
				}
			}
		}
	}
	// Four fields in each of tcpaccept, tcplife and tcpretrans, six in
	// tcpconnect (its counts' daddr keys too).
	if addresses != 18 {
		t.Errorf("%d addresses in the tcp examples, want 18", addresses)
	}
}
