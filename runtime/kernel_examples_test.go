package runtime_test

import (
	"io/fs"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/examples"
	"github.com/probectl/probectl/spec"
)

// Every bpftrace example that probes the kernel (functions and
// tracepoints) plans, applies and destroys on each kernel of the matrix:
// what the plan accepts, the kernel attaches. A plan may refuse an
// example only because the kernel lacks a function or tracepoint it names
// (biosnoop's block_io_start before 6.5); any other refusal, and any
// apply error, fails. Optional patterns that matched nothing are logged.
func TestKernelBPFtraceExamplesApply(t *testing.T) {
	f := kernelFacts(t)
	names, err := fs.Glob(examples.BPFtrace, "bpftrace/*.hcl")
	if err != nil || len(names) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	applied := 0
	for _, name := range names {
		src, err := fs.ReadFile(examples.BPFtrace, name)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(path.Base(name), func(t *testing.T) {
			cfg, diags := spec.Parse(map[string][]byte{name: src})
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			facts := *f
			var events []string
			for _, p := range cfg.Probes {
				if p.Addr.Kind == bpf.KindUser {
					t.Skipf("%s probes a user binary (%s): the VM has only the kernel", p.Addr, p.Binary)
				}
				for _, ev := range p.Events {
					events = append(events, ev.Text) // names and globs
				}
			}
			if err := facts.LoadTracepoints(events); err != nil {
				t.Fatal(err)
			}
			out, diags := compiler.Compile(cfg, &facts)
			if diags.HasErrors() {
				for _, d := range diags {
					// Below 5.15: no attach cookies, no BPF perf links
					// for samples; below 5.17 skb:kfree_skb has no
					// reason: refusals named by those facts, and a
					// function its BTF lacks.
					old := !f.Helpers.AttachCookie && d.Summary == "No attach cookies" || !f.Perf.Link && d.Summary == "Cannot sample" ||
						!f.Kernel.AtLeast(5, 17) && d.Summary == "Unknown tracepoint field" && strings.Contains(d.Detail, `skb:kfree_skb has no field "reason"`) ||
						// Debian 11's arm64 BTF does not declare
						// tcp_v6_syn_recv_sock (tcpsynbl).
						!f.Kernel.AtLeast(5, 15) && d.Summary == "Function has no BTF"
					if d.Summary != "Tracepoint not found" && d.Summary != "Function not found" && !old {
						t.Fatalf("%s refused for another reason than an absence: %s", f.Label(), diags)
					}
				}
				t.Logf("%s lacks what it names: %s", f.Label(), strings.TrimSpace(diags.Error()))
				return
			}
			for _, p := range out.Probes {
				if len(p.Missing) > 0 {
					t.Logf("%s: %v", p.Address, p.Missing)
				}
			}
			w := workspace(t)
			start := time.Now()
			k := khold(t, w, out)
			attached := time.Since(start)
			var routes []string
			for _, p := range out.Probes {
				routes = append(routes, p.Address.String()+" via "+string(p.Route))
			}
			t.Logf("%s: %s", f.Label(), strings.Join(routes, ", "))
			applied++
			start = time.Now()
			k.done(t)
			// Where a slow kernel's time goes (fentry's detach waits
			// for RCU grace periods, one link at a time): the log only.
			t.Logf("apply %s, destroy %s", attached.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
		})
	}
	if applied == 0 {
		t.Error("no example applied")
	}
}
