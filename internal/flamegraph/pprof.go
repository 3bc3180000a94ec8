package flamegraph

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/google/pprof/profile"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/bpf/symbols"
	"github.com/probectl/probectl/runtime"
)

// KernelMapping is the file pprof profiles name for kernel frames, as
// perf does.
const KernelMapping = "[kernel.kallsyms]"

// ProfileOptions say what a profile was sampled by and when.
type ProfileOptions struct {
	// Sampler is the profile probe's sampler, nil for other probes: its
	// frequency (or period) is the profile's Period, in cpu nanoseconds.
	Sampler *bpf.Sampler
	// Time is when the profile was read; Duration how long it covers
	// (0: unknown).
	Time     time.Time
	Duration time.Duration
}

// Profile turns an aggregation keyed by stacks into a pprof profile: one
// sample type for its value (samples/count for a profile probe's count,
// NAME/count for another count, NAME/UNIT for a sum, the unit read from
// the name's suffix: sumUnit), one sample per entry with its stacks leaf
// first (the last stack field's innermost frame first, as the folded
// output reads backwards), the other key fields as labels (strings as
// labels, numbers as numeric labels), a Function and a Location per frame
// and a Mapping per file (with its build id and the process's mapping of
// it, so that pprof can symbolize the addresses again; kernel frames
// under [kernel.kallsyms]). A stack the kernel lost is one frame saying
// why, as in the folded output. A histogram is an error: a profile
// weighs stacks by one number.
func Profile(ar *runtime.AggregationResult, o ProfileOptions) (*profile.Profile, error) {
	if ar.Kind.IsHistogram() {
		return nil, fmt.Errorf("%q is a histogram: a profile weighs stacks by a count or a sum", ar.Name)
	}
	b := newProfileBuilder()
	b.p.SampleType = []*profile.ValueType{sampleType(ar, o.Sampler)}
	b.p.DefaultSampleType = b.p.SampleType[0].Type
	if s := o.Sampler; s != nil && (s.Frequency > 0 || s.PeriodNS > 0) {
		b.p.PeriodType = &profile.ValueType{Type: "cpu", Unit: "nanoseconds"}
		b.p.Period = s.PeriodNS
		if s.PeriodNS == 0 {
			b.p.Period = int64(time.Second) / s.Frequency
		}
	}
	if !o.Time.IsZero() {
		b.p.TimeNanos = o.Time.UnixNano()
	}
	b.p.DurationNanos = o.Duration.Nanoseconds()
	for _, e := range ar.Entries {
		if e.Value != nil && *e.Value != 0 {
			b.sample(e, *e.Value)
		}
	}
	if err := b.p.CheckValid(); err != nil {
		return nil, fmt.Errorf("profile of %q: %w", ar.Name, err)
	}
	return b.p, nil
}

// sampleType is the aggregation's value as a pprof sample type.
func sampleType(ar *runtime.AggregationResult, s *bpf.Sampler) *profile.ValueType {
	switch {
	case ar.Kind == "count" && s != nil:
		return &profile.ValueType{Type: "samples", Unit: "count"}
	case ar.Kind == "count":
		return &profile.ValueType{Type: ar.Name, Unit: "count"}
	}
	return &profile.ValueType{Type: ar.Name, Unit: sumUnit(ar.Name)}
}

// sumUnit is the unit a sum's name says, by its suffix: _ns nanoseconds,
// _us microseconds, _ms milliseconds, _bytes bytes; else count.
func sumUnit(name string) string {
	for _, u := range []struct{ suffix, unit string }{
		{"_ns", "nanoseconds"}, {"_us", "microseconds"}, {"_ms", "milliseconds"}, {"_bytes", "bytes"},
	} {
		if strings.HasSuffix(name, u.suffix) {
			return u.unit
		}
	}
	return "count"
}

// profileBuilder gives each function, location and mapping one ID.
type profileBuilder struct {
	p         *profile.Profile
	functions map[string]*profile.Function
	locations map[locationKey]*profile.Location
	mappings  map[mappingKey]*profile.Mapping
}

type mappingKey struct {
	file, buildID string
	start         uint64
}

type locationKey struct {
	m    *profile.Mapping
	addr uint64
	name string
}

func newProfileBuilder() *profileBuilder {
	return &profileBuilder{p: &profile.Profile{}, functions: map[string]*profile.Function{},
		locations: map[locationKey]*profile.Location{}, mappings: map[mappingKey]*profile.Mapping{}}
}

// sample adds an entry: its stacks (leaf first) and its labels.
func (b *profileBuilder) sample(e runtime.Entry, v int64) {
	s := &profile.Sample{Value: []int64{v}}
	for i := len(e.Key) - 1; i >= 0; i-- {
		f := e.Key[i]
		switch val := f.Value.(type) {
		case *runtime.Stack:
			s.Location = append(s.Location, b.stack(val)...)
		case string:
			s.Label = addLabel(s.Label, f.Name, val)
		case int64:
			s.NumLabel = addNumLabel(s.NumLabel, f.Name, val)
		case uint64:
			s.NumLabel = addNumLabel(s.NumLabel, f.Name, int64(val))
		default:
			s.Label = addLabel(s.Label, f.Name, fmt.Sprint(val))
		}
	}
	if len(s.Location) == 0 {
		s.Location = []*profile.Location{b.location(nil, 0, "[empty]")}
	}
	b.p.Sample = append(b.p.Sample, s)
}

func addLabel(m map[string][]string, k, v string) map[string][]string {
	if m == nil {
		m = map[string][]string{}
	}
	m[k] = append(m[k], v)
	return m
}

func addNumLabel(m map[string][]int64, k string, v int64) map[string][]int64 {
	if m == nil {
		m = map[string][]int64{}
	}
	m[k] = append(m[k], v)
	return m
}

// stack is a stack's locations, innermost first; a lost stack is one
// location saying why.
func (b *profileBuilder) stack(s *runtime.Stack) []*profile.Location {
	var out []*profile.Location
	for _, f := range s.Frames {
		out = append(out, b.location(b.mapping(f, s.User), f.Addr, frameName(f, s.User)))
	}
	if s.Err != "" && !strings.HasPrefix(s.Err, "no ") {
		out = append(out, b.location(nil, 0, "["+s.Err+"]"))
	}
	return out
}

// mapping is the file a frame is in: the kernel's, or the user file with
// its build id; nil when nothing names it.
func (b *profileBuilder) mapping(f symbols.Frame, user bool) *profile.Mapping {
	k := mappingKey{file: KernelMapping}
	if user {
		if f.Module == "" {
			return nil
		}
		k = mappingKey{f.Module, f.BuildID, f.MapStart}
	}
	if m := b.mappings[k]; m != nil {
		return m
	}
	m := &profile.Mapping{ID: uint64(len(b.p.Mapping) + 1), File: k.file, BuildID: k.buildID,
		Start: f.MapStart, Limit: f.MapLimit, Offset: f.MapOffset, HasFunctions: true}
	if !user {
		m.Start, m.Limit, m.Offset = 0, 0, 0
	}
	b.mappings[k] = m
	b.p.Mapping = append(b.p.Mapping, m)
	return m
}

// location is the frame at addr named name in m, once per profile.
func (b *profileBuilder) location(m *profile.Mapping, addr uint64, name string) *profile.Location {
	k := locationKey{m, addr, name}
	if l := b.locations[k]; l != nil {
		return l
	}
	fn := b.functions[name]
	if fn == nil {
		fn = &profile.Function{ID: uint64(len(b.p.Function) + 1), Name: name, SystemName: name}
		if m != nil {
			fn.Filename = m.File
		}
		b.functions[name] = fn
		b.p.Function = append(b.p.Function, fn)
	}
	l := &profile.Location{ID: uint64(len(b.p.Location) + 1), Mapping: m, Address: addr,
		Line: []profile.Line{{Function: fn}}}
	b.locations[k] = l
	b.p.Location = append(b.p.Location, l)
	return l
}

// WriteProfile writes the profile of ar, gzipped profile.proto.
func WriteProfile(w io.Writer, ar *runtime.AggregationResult, o ProfileOptions) error {
	p, err := Profile(ar, o)
	if err != nil {
		return err
	}
	return p.Write(w)
}

// WriteProfileFile writes the profile of ar to path, as WriteFile writes
// a flame graph: a new file renamed over it.
func WriteProfileFile(path string, ar *runtime.AggregationResult, o ProfileOptions) error {
	var b bytes.Buffer
	if err := WriteProfile(&b, ar, o); err != nil {
		return err
	}
	return bpf.WriteNew(path, b.Bytes(), 0o644)
}
