package compiled

import (
	"fmt"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/probectl/probectl/bpf"
)

// License of every generated program: kfuncs, bpf_get_func_ip and the
// probe_read helpers need a GPL-compatible one.
const License = "GPL"

// ProgramKey names a program in a probe's collection: its role, and for
// per-function programs the function ("exit:vfs_read").
func ProgramKey(prog *Program, function string) string {
	if prog.PerFunction {
		return string(prog.Role) + ":" + function
	}
	return string(prog.Role)
}

// CollectionSpec returns the probe's maps and programs as cilium/ebpf
// specs, with kfunc calls resolved against kernel (the target's BTF). A
// per-function program appears once per function in functions.
func (p *Probe) CollectionSpec(kernel *btf.Spec, functions []string) (*ebpf.CollectionSpec, error) {
	cs := &ebpf.CollectionSpec{Maps: map[string]*ebpf.MapSpec{}, Programs: map[string]*ebpf.ProgramSpec{}}
	for _, m := range p.Maps {
		cs.Maps[m.Ref] = m.Spec()
	}
	for _, t := range p.Shared {
		for _, m := range t.Maps {
			cs.Maps[m.Ref] = m.Spec() // replaced by the table's own map at load
		}
	}
	if p.Buffer != nil {
		for _, m := range p.Buffer.Maps {
			cs.Maps[m.Ref] = m.Spec() // replaced by the spec set's buffer at load
		}
	}
	for _, prog := range p.Programs {
		insns, err := bpf.ResolveKfuncs(prog.Instructions, kernel)
		if err != nil {
			return nil, fmt.Errorf("%s %s program: %w", p.Address, prog.Role, err)
		}
		ps := &ebpf.ProgramSpec{
			Name: prog.Name, Type: prog.Type, AttachType: prog.AttachType,
			Instructions: insns, License: License,
		}
		if !prog.PerFunction {
			cs.Programs[ProgramKey(prog, "")] = ps
			continue
		}
		if p.Address.Kind == bpf.KindTracepoint {
			functions = p.EventNames() // tp_btf: a program per event, on btf_trace_NAME
		}
		if len(functions) == 0 {
			return nil, fmt.Errorf("%s %s program: per-function program with no functions", p.Address, prog.Role)
		}
		for _, fn := range functions {
			cp := ps.Copy()
			cp.AttachTo = fn
			if _, name, ok := strings.Cut(fn, ":"); ok {
				cp.AttachTo = name
			}
			cs.Programs[ProgramKey(prog, fn)] = cp
		}
	}
	return cs, nil
}

// EventNames are a tracepoint probe's events, sorted: its Tracepoints, or its
// one Event in a plan that lists none.
func (p *Probe) EventNames() []string {
	if len(p.Tracepoints) == 0 && p.Event != "" {
		return []string{p.Event}
	}
	return p.Tracepoints
}
