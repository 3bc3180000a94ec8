package compiler_test

import (
	"errors"
	"os"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/probectl/probectl/compiler"
)

// requireBPF skips unless the test can load programs: that needs root. The
// host kernel's verifier accepts every kprobe-family program even though it
// cannot attach them; fentry/fexit loads are refused by its policy and are
// checked in the VM matrix.
func requireBPF(t *testing.T) *btf.Spec {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("loading BPF programs needs root (CAP_BPF, CAP_PERFMON)")
	}
	kernel, err := btf.LoadKernelSpec()
	if err != nil {
		t.Fatalf("kernel BTF: %v", err)
	}
	return kernel
}

// loadAll loads every program of out that the host can load, and fails on
// any verifier rejection, reported the way users see it.
func loadAll(t *testing.T, out *compiler.Output, kernel *btf.Spec) int {
	t.Helper()
	loaded := 0
	for _, p := range out.Probes {
		cs, err := p.CollectionSpec(kernel, []string{"vfs_read"})
		if err != nil {
			t.Fatalf("%s: %v", p.Address, err)
		}
		for _, prog := range p.Programs {
			if prog.Type == ebpf.Tracing {
				continue
			}
			key := compiler.ProgramKey(prog, "vfs_read")
			one := &ebpf.CollectionSpec{Maps: cs.Maps, Programs: map[string]*ebpf.ProgramSpec{key: cs.Programs[key]}}
			coll, err := ebpf.NewCollection(one)
			if err != nil {
				if d := compiler.VerifierDiagnostic(nil, p, prog, err); d != nil {
					t.Errorf("%s %s (%s) on %s: %s: %s", p.Address, prog.Role, prog.Family, out.Facts.Name, d.Subject, d.Detail)
				} else {
					t.Errorf("%s %s (%s) on %s: %v", p.Address, prog.Role, prog.Family, out.Facts.Name, err)
				}
				continue
			}
			coll.Close()
			loaded++
		}
	}
	return loaded
}

func TestVerifierAcceptsExamples(t *testing.T) {
	kernel := requireBPF(t)
	for _, name := range []string{"linux-6.1-amd64", "linux-6.12-amd64", "linux-7.2-amd64"} {
		t.Run(name, func(t *testing.T) {
			out := compileFiles(t, mustProfile(t, name), "../examples")
			n := loadAll(t, out, kernel)
			t.Logf("%s: %d programs loaded", name, n)
			if n == 0 {
				t.Fatal("no program loaded")
			}
		})
	}
}

func TestVerifierAcceptsRouteVariants(t *testing.T) {
	kernel := requireBPF(t)
	for _, name := range []string{"linux-6.12-amd64", "linux-7.2-amd64"} {
		t.Run(name, func(t *testing.T) {
			out := compileFiles(t, mustProfile(t, name), "testdata/routes")
			if n := loadAll(t, out, kernel); n == 0 {
				t.Fatal("no program loaded")
			}
		})
	}
}

// A rejected program is reported at the spec range that generated the
// instruction the verifier stopped at.
func TestVerifierDiagnostic(t *testing.T) {
	kernel := requireBPF(t)
	out := compileText(t, mustProfile(t, "linux-7.2-amd64"), `probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    sum "s" {
      value = args.count
    }
  }
}`)
	p := out.Probes[0]
	prog := p.Programs[0]
	// Break the program: read R9, which nothing wrote, right where the
	// value expression's code starts.
	for i, ins := range prog.Instructions {
		if src := ins.Source(); src != nil && src.String() == "value args.count" {
			prog.Instructions[i].Src = 9
			break
		}
	}
	cs, err := p.CollectionSpec(kernel, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = ebpf.NewCollection(cs)
	if err == nil {
		t.Fatal("broken program loaded")
	}
	var ve *ebpf.VerifierError
	if !errors.As(err, &ve) {
		t.Fatalf("not a verifier error: %v", err)
	}
	d := compiler.VerifierDiagnostic(nil, p, prog, err)
	if d == nil || d.Subject == nil {
		t.Fatalf("no diagnostic for %v", err)
	}
	if d.Subject.Start.Line != 5 {
		t.Errorf("diagnostic at line %d, want 5 (value = args.count): %s", d.Subject.Start.Line, d.Detail)
	}
	t.Logf("%s: %s\n%s", d.Subject, d.Summary, d.Detail)
}
