package compiler

import (
	"slices"
	"strconv"

	"github.com/cilium/ebpf/asm"
	"github.com/hashicorp/hcl/v2"
	"github.com/probectl/probectl/compiler/internal/emit"
)

// The code cache: probes whose bodies read alike (same file, same kind,
// the same text from { to }), on the same route and families, with the
// same entry storage, functions, events and map layout, compile to the
// same instructions. The first of them (the leader) is generated; each
// other (a follower) gets a copy of its programs, relocated: the program
// names and the first comment name the follower, and every origin (the
// spec range an instruction came from, which verifier errors point at)
// is moved by the distance between the two bodies. A large spec of
// copied probes spends its codegen once per distinct body.
//
// Left to their own codegen: probes with events (a record's layout id is
// in the code, and it digests the probe's address), a leader whose
// codegen reported anything or changed the probe's output other than by
// adding programs, and one with an origin outside its body other than
// its header.

// codeKey is what makes a probe's code, or "" when the probe is left to
// its own codegen. It is read after layoutMaps.
func (g *gen) codeKey() string {
	body := g.p.BodyRange
	src, ok := g.u.sources[body.Filename]
	if !g.u.cache || !ok || body.Start.Byte >= body.End.Byte || body.End.Byte > len(src) || len(g.out.Events) > 0 {
		return ""
	}
	// Built without fmt: a key per probe is a large spec's hot path.
	var b []byte
	field := func(s string) { b = append(strconv.AppendQuote(b, s), ' ') }
	number := func(n int) { b = append(strconv.AppendInt(b, int64(n), 10), ' ') }
	field(body.Filename)
	field(string(g.p.Addr.Kind))
	field(string(g.d.route))
	number(len(g.d.families))
	for _, f := range g.d.families {
		field(string(f))
	}
	b = append(strconv.AppendBool(append(strconv.AppendBool(b, g.d.session), ' '), g.d.fsession), ' ')
	field(string(g.storage))
	number(g.out.EntryData.Size)
	for _, list := range [][]string{g.out.Functions, g.out.Tracepoints, g.out.Deferred} {
		number(len(list))
		for _, s := range list {
			field(s)
		}
	}
	field(g.out.Event)
	field(g.out.USDT)
	number(len(g.out.Sites))
	st := g.out.Stats
	for _, n := range []int{st.EventsDropped, st.EntryHits, st.ExitHits, st.Size, len(g.out.Maps)} {
		number(n)
	}
	for _, m := range g.out.Maps {
		field(m.Ref)
		field(m.Name)
		for _, n := range []uint32{uint32(m.Type), m.KeySize, m.ValueSize, m.MaxEntries, m.Flags} {
			number(int(n))
		}
	}
	b = append(b, '\n')
	b = append(b, src[body.Start.Byte:body.End.Byte]...)
	return string(b)
}

// outShape is what a probe's codegen may change of its output besides
// its programs: a leader whose codegen changes it is not copied.
type outShape struct{ maps, deferred, podWhen, aggs, shared, tables int }

func (g *gen) shape() outShape {
	o := g.out
	return outShape{len(o.Maps), len(o.Deferred), len(o.PodWhen), len(o.Aggregations), len(o.Shared), len(o.Tables)}
}

// leaderCode is what a leader hands its followers: its programs, and the
// text of them that the digest hashes.
type leaderCode struct {
	g        *gen
	programs []*Program
	text     []byte
	// origins are each program's instructions that have an origin.
	origins [][]origin
}

// origin is an instruction's index and the spec range it came from.
type origin struct {
	i   int
	rng hcl.Range
}

// buildLeader generates the leader's programs and says whether they may
// be copied.
func (g *gen) buildLeader() *leaderCode {
	before := g.shape()
	g.programs()
	if len(g.diags) > 0 || g.shape() != before || len(g.out.Programs) != len(g.d.families) {
		return nil
	}
	l := &leaderCode{g: g, programs: g.out.Programs}
	for _, prog := range g.out.Programs {
		if len(prog.Instructions) == 0 || prog.Instructions[0].Source() == nil ||
			prog.Instructions[0].Source().String() != programComment(prog.Family, prog.Role, g) {
			return nil
		}
		var origins []origin
		for i := range prog.Instructions {
			o := emit.Origin(&prog.Instructions[i])
			if o == nil {
				continue
			}
			r, ok := o.(hcl.Range)
			if !ok || r != g.p.DeclRange && !within(r, g.p.BodyRange) {
				return nil
			}
			origins = append(origins, origin{i, r})
		}
		l.origins = append(l.origins, origins)
	}
	l.text = programsText(g.out.Programs)
	return l
}

// within reports whether r lies in body, of the same file.
func within(r, body hcl.Range) bool {
	return r.Filename == body.Filename && r.Start.Byte >= body.Start.Byte && r.End.Byte <= body.End.Byte
}

// copyCode gives g copies of the leader's programs, relocated to g.
func (g *gen) copyCode(l *leaderCode) {
	from, to := l.g.p.BodyRange, g.p.BodyRange
	move := func(p hcl.Pos) hcl.Pos {
		if p.Line == from.Start.Line {
			p.Column += to.Start.Column - from.Start.Column
		}
		p.Line += to.Start.Line - from.Start.Line
		p.Byte += to.Start.Byte - from.Start.Byte
		return p
	}
	relocate := func(r hcl.Range) hcl.Range {
		if r == l.g.p.DeclRange {
			return g.p.DeclRange
		}
		return hcl.Range{Filename: to.Filename, Start: move(r.Start), End: move(r.End)}
	}
	for k, lp := range l.programs {
		prog := *lp
		prog.Name = programName(g.p.Addr.Name, prog.Role)
		prog.Instructions = slices.Clone(lp.Instructions)
		for _, o := range l.origins[k] {
			emit.SetOrigin(&prog.Instructions[o.i], relocate(o.rng))
		}
		prog.Instructions[0] = prog.Instructions[0].WithSource(asm.Comment(programComment(prog.Family, prog.Role, g)))
		g.out.Programs = append(g.out.Programs, &prog)
	}
	g.codeText = l.text
	g.u.copied.Add(1)
}
