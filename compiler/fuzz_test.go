package compiler_test

import (
	"os"
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/spec"
	"github.com/probectl/probectl/spec/spectest"
)

// FuzzCompileVerify: every spec that passes the checks compiles on every
// profile (and on one given the host's BTF, which resolves kernel data),
// and (as root) every program it yields that the host can load
// is accepted by the host's verifier. A rejection is a compiler bug.
func FuzzCompileVerify(f *testing.F) {
	spectest.AddSeeds(f, "../examples/*.hcl", "../examples/bpftrace/*.hcl", "testdata/routes/*.hcl", "testdata/invalid/*.hcl", "../spec/testdata/invalid/*.hcl", "../spec/testdata/seeds/*.hcl")
	var kernel *btf.Spec
	if os.Geteuid() == 0 {
		k, err := btf.LoadKernelSpec()
		if err != nil {
			f.Fatal(err)
		}
		kernel = k
	}
	_, err := os.Stat(bpf.VmlinuxBTF)
	hostHasBTF := err == nil
	f.Fuzz(func(t *testing.T, src []byte) {
		cfg, diags := spec.Parse(map[string][]byte{"fuzz.hcl": src})
		if diags.HasErrors() {
			return
		}
		for _, name := range []string{"linux-6.1-amd64", "linux-7.2-amd64", "linux-7.2-arm64", "linux-7.2-amd64 with the host's BTF"} {
			var facts *bpf.Facts
			if profile, ok := strings.CutSuffix(name, " with the host's BTF"); ok {
				if !hostHasBTF {
					continue
				}
				facts = withHostBTF(t, profile) // kernel data resolved, not deferred
			} else {
				facts = mustProfile(t, name)
			}
			out, diags := compiler.Compile(cfg, facts)
			if diags.HasErrors() {
				// Target-dependent refusals (a pinned family, an unknown
				// tracepoint field) are fine; they must point somewhere.
				for _, d := range diags {
					if d.Subject == nil {
						t.Fatalf("%s: diagnostic without a range: %v", name, d)
					}
				}
				continue
			}
			if kernel != nil && facts.Arch == "x86_64" {
				loadAll(t, out, kernel)
			}
		}
	})
}
