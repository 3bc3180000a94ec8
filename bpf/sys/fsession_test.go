package sys

import (
	"bytes"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
)

// TestLoadFsessionRefusals holds LoadFsession's refusals before the
// kernel is asked (no kernel BTF, no such function, a map reference
// without its map, no instructions) to their exact errors, on any host:
// the loads themselves run in the VM matrix (runtime's TestKernelFsession).
func TestLoadFsessionRefusals(t *testing.T) {
	fn := &btf.Func{Name: "probed_fn", Type: &btf.FuncProto{Return: &btf.Void{}}, Linkage: btf.GlobalFunc}
	b, err := btf.NewBuilder([]btf.Type{fn}, nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := b.Marshal(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	kernel, err := btf.LoadSpecFromReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	exit := asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}
	withMap := asm.Instructions{asm.LoadMapPtr(asm.R1, 0).WithReference("counts"), asm.Mov.Imm(asm.R0, 0), asm.Return()}
	noMaps := func(string) *ebpf.Map { return nil }
	for _, tt := range []struct {
		name   string
		fn     string
		insns  asm.Instructions
		kernel *btf.Spec
		want   string
	}{
		{"no kernel BTF", "probed_fn", exit, nil, "fsession probed_fn: no kernel BTF"},
		{"no such function", "other_fn", exit, kernel,
			`fsession other_fn: no such function in vmlinux's BTF (a kernel module's functions need attach = "fentry"): not found`},
		{"map not given", "probed_fn", withMap, kernel, `fsession probed_fn: no map "counts"`},
		{"no instructions", "probed_fn", nil, kernel, "fsession probed_fn: no instructions"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			spec := &ebpf.ProgramSpec{Name: "fs", Type: ebpf.Tracing, License: "GPL", Instructions: tt.insns}
			prog, err := LoadFsession(spec, tt.fn, noMaps, tt.kernel)
			if err == nil {
				prog.Close()
				t.Fatalf("LoadFsession loaded; want %q", tt.want)
			}
			if err.Error() != tt.want {
				t.Errorf("LoadFsession: %v\nwant %s", err, tt.want)
			}
		})
	}
}
