package compiler_test

import (
	"testing"

	"github.com/cilium/ebpf"
	"github.com/probectl/probectl/compiler"
)

// cwd's unrolled walk loads on the host's verifier (a kprobe: the
// tracepoint's is TestRunCwd's, in cmd/probectl), and what the verifier walked stays
// near the program's length: the two branches of each step (a name, or
// a mount crossed) meet in one state, so the paths do not double per
// step. The figures are logged; the bound is 4 times the instructions
// (2^35 paths would be far beyond the verifier's million).
func TestVerifierCwdWalk(t *testing.T) {
	facts := liveTarget(t)
	kernel := hostSpec(t)
	out := compileText(t, facts, `
probe "kernel" "cwd" {
  functions = ["vfs_read"]
  attach    = "kprobe"
  on_entry {
    event "read" {
      fields = { cwd = cwd }
    }
  }
}
`)
	for _, p := range out.Probes {
		cs, err := p.CollectionSpec(kernel, []string{"vfs_read"})
		if err != nil {
			t.Fatalf("%s: %v", p.Address, err)
		}
		for _, prog := range p.Programs {
			key := compiler.ProgramKey(prog, "vfs_read")
			coll, err := ebpf.NewCollection(&ebpf.CollectionSpec{Maps: cs.Maps, Programs: map[string]*ebpf.ProgramSpec{key: cs.Programs[key]}})
			if err != nil {
				t.Fatalf("%s %s: %v", p.Address, prog.Family, err)
			}
			insns := len(cs.Programs[key].Instructions)
			info, err := coll.Programs[key].Info()
			coll.Close()
			if err != nil {
				t.Fatal(err)
			}
			verified, ok := info.VerifiedInstructions()
			if !ok {
				t.Logf("%s %s: %d instructions (the kernel does not say how many it verified)", p.Address, prog.Family, insns)
				continue
			}
			t.Logf("%s %s: %d instructions, %d verified", p.Address, prog.Family, insns, verified)
			if int(verified) > 4*insns {
				t.Errorf("%s %s: the verifier walked %d instructions of %d: the walk's paths multiply", p.Address, prog.Family, verified, insns)
			}
		}
	}
}
