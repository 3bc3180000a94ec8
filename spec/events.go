package spec

import (
	"math/big"
	"regexp"
	"strconv"
	"sync"

	"github.com/hashicorp/hcl/v2"
	"github.com/probectl/probectl/bpf"
	"github.com/zclconf/go-cty/cty"
)

// Events is the top-level events block: the settings of the spec set's
// event buffer, the one ring buffer every probe's events go through, in
// the order they happened.
type Events struct {
	DeclRange hcl.Range
	// BufferSize is the ring buffer's size in bytes: a power of two from
	// MinEventBuffer to MaxEventBuffer. BufferSizeRange is where it was
	// set (the block, when it was not).
	BufferSize      int
	BufferSizeRange hcl.Range
}

// The event buffer's size: its default, and the kernel's bounds as
// probectl takes them (a ring buffer is a power of two pages; 1 GiB of
// locked kernel memory is already more than a machine should give).
const (
	DefaultEventBuffer = 4 << 20
	MinEventBuffer     = 4 << 10
	MaxEventBuffer     = 1 << 30
)

var eventsSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "buffer_size"}}}

// sizePattern is a size with its unit: "512KiB", "4MiB", "1GiB"
// (compiled when first used: its {1,10} compiles into ten copies, which
// every command would pay at start).
var sizePattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([0-9]{1,10})\s*(KiB|MiB|GiB)$`) })

// eventsBlock decodes an events block; first is the one already seen, if any.
func (d *decoder) eventsBlock(b *hcl.Block, first *Events) *Events {
	if first != nil {
		d.errorf(b.DefRange, "Duplicate events block",
			"An events block is already at %s. A spec set has one event buffer: keep one block.", pos(first.DeclRange))
		return first
	}
	ev := &Events{DeclRange: b.DefRange, BufferSize: DefaultEventBuffer, BufferSizeRange: b.DefRange}
	content, diags := b.Body.Content(eventsSchema)
	d.diags = append(d.diags, diags...)
	if attr, ok := content.Attributes["buffer_size"]; ok {
		ev.BufferSizeRange = attr.Expr.Range()
		if n, ok := d.bufferSize(attr); ok {
			ev.BufferSize = n
		}
	}
	return ev
}

// bufferSize reads a size: a number of bytes, or a string with a binary
// unit ("4MiB").
func (d *decoder) bufferSize(attr *hcl.Attribute) (int, bool) {
	rng := attr.Expr.Range()
	v, diags := attr.Expr.Value(nil)
	if diags.HasErrors() || v.IsNull() || !v.IsKnown() || (v.Type() != cty.String && v.Type() != cty.Number) {
		d.errorf(rng, "Invalid buffer size", "buffer_size takes a size such as \"4MiB\" (KiB, MiB or GiB), or a number of bytes.")
		return 0, false
	}
	n, ok := d.sizeBytes(rng, v)
	if !ok {
		return 0, false
	}
	if n.Cmp(big.NewInt(MinEventBuffer)) < 0 || n.Cmp(big.NewInt(MaxEventBuffer)) > 0 {
		d.errorf(rng, "Buffer size out of range", "The event buffer is from 4KiB to 1GiB; %s bytes is outside. The default is 4MiB.", n)
		return 0, false
	}
	size := int(n.Int64())
	if size&(size-1) != 0 {
		lo := 1
		for lo*2 < size {
			lo *= 2
		}
		d.errorf(rng, "Buffer size not a power of two",
			"The kernel's ring buffers are a power of two bytes, and %d is not one: use %s or %s.", size, bpf.SizeText(lo), bpf.SizeText(lo*2))
		return 0, false
	}
	return size, true
}

// sizeBytes is the number of bytes v says: a whole number, or a string of
// one with a binary unit.
func (d *decoder) sizeBytes(rng hcl.Range, v cty.Value) (*big.Int, bool) {
	if v.Type() == cty.Number {
		bf := v.AsBigFloat()
		if !bf.IsInt() {
			d.errorf(rng, "Invalid buffer size", "buffer_size is a whole number of bytes, or a size such as \"4MiB\".")
			return nil, false
		}
		n, _ := bf.Int(nil)
		return n, true
	}
	m := sizePattern().FindStringSubmatch(v.AsString())
	if m == nil {
		d.errorf(rng, "Invalid buffer size",
			"%s is not a size: write a whole number with KiB, MiB or GiB (powers of 1024), such as \"4MiB\". MB and K are not accepted: they would leave the power of two in doubt.", strconv.Quote(v.AsString()))
		return nil, false
	}
	units := map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
	n := new(big.Int).SetInt64(units[m[2]])
	count, _ := new(big.Int).SetString(m[1], 10)
	return n.Mul(n, count), true
}

// checkEvents warns of an events block in a spec set whose probes emit no
// events: there is no buffer to size.
func checkEvents(cfg *Config) hcl.Diagnostics {
	if cfg.Events == nil || cfg.EmitsEvents() {
		return nil
	}
	return hcl.Diagnostics{{Severity: hcl.DiagWarning, Summary: "No events to buffer",
		Detail:  "No probe of the spec set has an event action, so no event buffer is made and this block has no effect. Remove it, or add an event action.",
		Subject: cfg.Events.DeclRange.Ptr()}}
}

// EmitsEvents reports whether a probe of the spec set has an event action.
func (cfg *Config) EmitsEvents() bool {
	for _, p := range cfg.Probes {
		for _, a := range p.Actions() {
			if a.Kind == Event {
				return true
			}
		}
	}
	return false
}
