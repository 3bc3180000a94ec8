package flamegraph

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/bpf/symbols"
	"github.com/probectl/probectl/runtime"
)

// profileStacks is an aggregation keyed by comm, pid, ustack and kstack.
func profileStacks() *runtime.AggregationResult {
	v := func(n int64) *int64 { return &n }
	w := func(sym string, addr uint64) symbols.Frame {
		return symbols.Frame{Addr: addr, Symbol: sym, Module: "/bin/w", BuildID: "abcdef01",
			MapStart: 0x400000, MapLimit: 0x500000, MapOffset: 0x1000}
	}
	user := &runtime.Stack{User: true, Frames: []symbols.Frame{w("hot", 0x401004), w("main", 0x402009),
		{Addr: 0x7f0000001234, Module: "/lib/libc.so.6", MapStart: 0x7f0000000000, MapLimit: 0x7f0000100000}}}
	kern := &runtime.Stack{Frames: []symbols.Frame{{Addr: 0xffffffff81000010, Symbol: "irq_handler"}, {Addr: 0xffffffff81000100, Symbol: "entry"}}}
	none := &runtime.Stack{Err: "no kernel stack"}
	lost := &runtime.Stack{User: true, Err: "stack lost: stack map full"}
	key := func(comm string, pid int64, u, k *runtime.Stack) runtime.OrderedKey {
		return runtime.OrderedKey{{Name: "comm", Value: comm}, {Name: "pid", Value: pid}, {Name: "ustack", Value: u}, {Name: "kstack", Value: k}}
	}
	return &runtime.AggregationResult{Name: "samples", Kind: "count", Entries: []runtime.Entry{
		{Key: key("w", 42, user, none), Value: v(7)},
		{Key: key("w", 42, user, kern), Value: v(3)},
		{Key: key("k", 43, lost, none), Value: v(2)},
	}}
}

// A profile of stacks, written and read back through pprof's own
// parser: valid, its sample type and period from the profile probe, each
// sample's stack leaf first (kernel frames on top of user frames, under
// [kernel.kallsyms]), user frames in a mapping with the file's build id
// and the process's mapping, comm and pid as labels, a lost stack as a
// frame saying why; and the hottest function (flat) is the folded
// output's hottest leaf.
func TestProfile(t *testing.T) {
	ar := profileStacks()
	at := time.Unix(1700000000, 0)
	var b bytes.Buffer
	err := WriteProfile(&b, ar, ProfileOptions{Sampler: &bpf.Sampler{Event: "cpu-clock", Frequency: 99}, Time: at, Duration: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b.Bytes(), []byte{0x1f, 0x8b}) {
		t.Errorf("the profile is not gzipped: % x", b.Bytes()[:4])
	}
	p, err := profile.Parse(&b)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.CheckValid(); err != nil {
		t.Fatal(err)
	}
	if len(p.SampleType) != 1 || p.SampleType[0].Type != "samples" || p.SampleType[0].Unit != "count" {
		t.Errorf("sample types %v, want [samples/count]", p.SampleType)
	}
	if p.PeriodType == nil || p.PeriodType.Type != "cpu" || p.PeriodType.Unit != "nanoseconds" || p.Period != 1000000000/99 {
		t.Errorf("period %v %d, want cpu/nanoseconds %d", p.PeriodType, p.Period, 1000000000/99)
	}
	if p.TimeNanos != at.UnixNano() || p.DurationNanos != int64(10*time.Second) {
		t.Errorf("time %d duration %d", p.TimeNanos, p.DurationNanos)
	}
	var got []string
	for _, s := range p.Sample {
		got = append(got, sampleText(s))
	}
	want := []string{
		"7 comm=w pid=42: hot@/bin/w;main@/bin/w;[libc.so.6]@/lib/libc.so.6",
		"3 comm=w pid=42: irq_handler@[kernel.kallsyms];entry@[kernel.kallsyms];hot@/bin/w;main@/bin/w;[libc.so.6]@/lib/libc.so.6",
		"2 comm=k pid=43: [stack lost: stack map full]@",
	}
	if !slices.Equal(got, want) {
		t.Errorf("samples:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	checkMappings(t, p)
	if top := hottest(p); top != "hot" {
		t.Errorf("hottest function %q, want hot (the folded output's hottest leaf)", top)
	}
	if leaf := foldedHottestLeaf(Fold(ar)); leaf != "hot" {
		t.Errorf("folded hottest leaf %q", leaf)
	}
}

// sampleText is a sample as "VALUE comm=C pid=P: f@file;...".
func sampleText(s *profile.Sample) string {
	var fs []string
	for _, l := range s.Location {
		file := ""
		if l.Mapping != nil {
			file = l.Mapping.File
		}
		fs = append(fs, l.Line[0].Function.Name+"@"+file)
	}
	return fmt.Sprintf("%d comm=%s pid=%d: %s", s.Value[0], s.Label["comm"][0], s.NumLabel["pid"][0], strings.Join(fs, ";"))
}

// checkMappings: the kernel's, /bin/w's with its build id and range, libc's.
func checkMappings(t *testing.T, p *profile.Profile) {
	t.Helper()
	byFile := map[string]*profile.Mapping{}
	for _, m := range p.Mapping {
		byFile[m.File] = m
	}
	if m := byFile["/bin/w"]; m == nil || m.BuildID != "abcdef01" || m.Start != 0x400000 || m.Limit != 0x500000 || m.Offset != 0x1000 || !m.HasFunctions {
		t.Errorf("mapping of /bin/w: %+v", m)
	}
	if m := byFile[KernelMapping]; m == nil {
		t.Errorf("no %s mapping", KernelMapping)
	}
	if len(p.Mapping) != 3 {
		t.Errorf("%d mappings, want 3", len(p.Mapping))
	}
}

// hottest is the function with the most flat samples.
func hottest(p *profile.Profile) string {
	flat := map[string]int64{}
	for _, s := range p.Sample {
		flat[s.Location[0].Line[0].Function.Name] += s.Value[0]
	}
	best := ""
	for f, n := range flat {
		if best == "" || n > flat[best] || n == flat[best] && f < best {
			best = f
		}
	}
	return best
}

// foldedHottestLeaf is the leaf with the most samples in folded stacks,
// kernel mark dropped.
func foldedHottestLeaf(stacks []Stack) string {
	flat := map[string]int64{}
	for _, s := range stacks {
		flat[strings.TrimSuffix(s.Frames[len(s.Frames)-1], "_[k]")] += s.Value
	}
	best := ""
	for f, n := range flat {
		if best == "" || n > flat[best] || n == flat[best] && f < best {
			best = f
		}
	}
	return best
}

// A sum's unit comes from its name; a histogram has no profile.
func TestProfileSumAndHistogram(t *testing.T) {
	ar := profileStacks()
	ar.Kind, ar.Name = "sum", "wait_ns"
	p, err := Profile(ar, ProfileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st := p.SampleType[0]; st.Type != "wait_ns" || st.Unit != "nanoseconds" || p.PeriodType != nil {
		t.Errorf("sample type %v, period %v", st, p.PeriodType)
	}
	ar.Kind = "hist"
	if _, err := Profile(ar, ProfileOptions{}); err == nil || !strings.Contains(err.Error(), "histogram") {
		t.Errorf("a histogram: %v", err)
	}
}
