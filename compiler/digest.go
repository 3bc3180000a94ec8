package compiler

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/cilium/ebpf/asm"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler/compiled"
	"github.com/probectl/probectl/spec"
)

// showsKeys reports whether the probe names its key columns (sp, as
// written) or shows a key or an event field through a decoder.
func showsKeys(p *Probe, sp *spec.Probe) bool {
	for _, a := range sp.Actions() {
		if a.ByNames != nil {
			return true
		}
	}
	for _, fields := range p.Display() {
		for _, f := range fields {
			if f.Decode != "" {
				return true
			}
		}
	}
	return false
}

// opNames caches asm.OpCode.String, which builds its text anew each time
// (a fifth of the bytes planning a large spec allocated): an OpCode is a
// byte, so a table beats a map. Each entry is filled when its opcode is
// first named, not at package init: a program uses a few dozen of the 256,
// and building them all cost every command's start-up 676 allocations.
var opNames [256]atomic.Pointer[string]

func opName(op asm.OpCode) string {
	if s := opNames[op].Load(); s != nil {
		return *s
	}
	s := op.String()
	opNames[op].Store(&s)
	return s
}

// digest is a hash of everything that makes the probe's kernel objects:
// programs, maps, functions and attach families (sp is the probe as
// written). Two compilations with the same digest need no change in the
// kernel.
// text is programsText(p.Programs), or nil to build it.
func digest(p *Probe, sp *spec.Probe, text []byte) string {
	h := sha256.New()
	enc := json.NewEncoder(h)
	what := []any{p.Address.String(), p.Route, p.Attach, p.Patterns, p.Exclude, p.Functions, p.Binary, p.PID, p.Event, p.EntryData}
	if len(p.Tracepoints) > 1 {
		what = append(what, p.Tracepoints)
	}
	if p.Root != "" {
		what = append(what, p.Root) // left out for "/": digests stay as they were
	}
	if p.USDT != "" {
		what = append(what, p.USDT, p.Sites)
	}
	_ = enc.Encode(what)
	for _, m := range p.Maps {
		_ = enc.Encode(m)
	}
	// How keys show (named columns, decoders) changes no kernel object,
	// but an applied probe keeps its layouts in the state: shown otherwise,
	// it is another probe. Left out when nothing is named or decoded, so
	// that the digests of other probes stay as they were.
	if showsKeys(p, sp) {
		_ = enc.Encode(p.Display())
	}
	// So is a sum served as a gauge: a probe applied before the state
	// said so is applied again. Left out when none is.
	for _, a := range p.Aggregations {
		if a.Signed {
			_ = enc.Encode([]string{"signed", a.Name})
		}
		servedAs(enc, a)
	}
	// The tables' maps are in the programs: a table laid out anew is a
	// new map, and its users must be loaded again. So is the event buffer.
	for _, t := range p.Shared {
		_ = enc.Encode(t.Digest)
	}
	if p.Buffer != nil {
		_ = enc.Encode([]string{"events", p.Buffer.Digest})
	}
	if text == nil {
		text = programsText(p.Programs)
	}
	h.Write(text)
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// programsText is what the digest hashes of the programs: each one's
// role, family, types, and every instruction as text.
func programsText(progs []*Program) []byte {
	var text, line []byte
	for _, prog := range progs {
		text = fmt.Appendf(text, "%s %s %v %v %v\n", prog.Role, prog.Family, prog.Type, prog.AttachType, prog.PerFunction)
		for _, ins := range prog.Instructions {
			// The text of fmt's "%v %d %d %d %d %s %s %s\n", built without
			// fmt: this loop is most of planning a large spec.
			name, _ := bpf.KfuncName(&ins)
			line = append(line[:0], opName(ins.OpCode)...)
			line = append(strconv.AppendUint(append(line, ' '), uint64(ins.Dst), 10), ' ')
			line = append(strconv.AppendUint(line, uint64(ins.Src), 10), ' ')
			line = append(strconv.AppendInt(line, int64(ins.Offset), 10), ' ')
			line = append(strconv.AppendInt(line, ins.Constant, 10), ' ')
			line = append(append(append(append(append(line, ins.Reference()...), ' '), ins.Symbol()...), ' '), name...)
			text = append(append(text, line...), '\n')
		}
	}
	return text
}

// servedAs adds to the digest how a scrape serves the aggregation, where
// it differs from how one served it before the state said: its unit, its
// stacks, its labels other than the columns' names. A probe applied
// before is applied again.
func servedAs(enc *json.Encoder, a *Aggregation) {
	if a.Unit != "" {
		_ = enc.Encode([]string{"unit", a.Name, a.Unit})
	}
	if a.ExportStacks {
		_ = enc.Encode([]string{"export_stacks", a.Name})
	}
	// A scrape labelled a column by its name, cleaned.
	for _, f := range a.Key {
		if f.Label != compiled.CleanName(f.Name) {
			_ = enc.Encode([]string{"label", a.Name, f.Name, f.Label})
		}
	}
}
