package flamegraph

import (
	"bytes"
	"testing"

	"github.com/probectl/probectl/bpf/symbols"
	"github.com/probectl/probectl/runtime"
)

// Folding: by fields in order, stacks root first, kernel frames marked,
// unknown user functions by their file, separators kept out of names,
// equal stacks merged; "no stack" adds nothing, a lost one says so.
func TestFoldStacks(t *testing.T) {
	v := func(n int64) *int64 { return &n }
	user := &runtime.Stack{User: true, Frames: []symbols.Frame{
		{Symbol: "hot", Offset: 4, Module: "/bin/w"}, {Symbol: "main", Offset: 9, Module: "/bin/w"}, {Addr: 0x1234, Module: "/lib/libc.so.6"}}}
	user2 := &runtime.Stack{User: true, Frames: []symbols.Frame{
		{Symbol: "hot", Offset: 8, Module: "/bin/w"}, {Symbol: "main", Offset: 9, Module: "/bin/w"}, {Addr: 0x1234, Module: "/lib/libc.so.6"}}}
	kern := &runtime.Stack{Frames: []symbols.Frame{{Symbol: "irq;x"}, {Addr: 0xffff}}}
	none := &runtime.Stack{Err: "no kernel stack"}
	lost := &runtime.Stack{User: true, Err: "stack lost: stack map full"}
	ar := &runtime.AggregationResult{Kind: "count", Entries: []runtime.Entry{
		{Key: runtime.OrderedKey{{Name: "comm", Value: "w;1"}, {Name: "ustack", Value: user}, {Name: "kstack", Value: kern}}, Value: v(3)},
		{Key: runtime.OrderedKey{{Name: "comm", Value: "w;1"}, {Name: "ustack", Value: user2}, {Name: "kstack", Value: kern}}, Value: v(4)},
		{Key: runtime.OrderedKey{{Name: "comm", Value: "w;1"}, {Name: "ustack", Value: user}, {Name: "kstack", Value: none}}, Value: v(5)},
		{Key: runtime.OrderedKey{{Name: "comm", Value: "k\n"}, {Name: "ustack", Value: lost}, {Name: "kstack", Value: none}}, Value: v(1)},
	}}
	var b bytes.Buffer
	if err := WriteFolded(&b, Fold(ar)); err != nil {
		t.Fatal(err)
	}
	want := `k?;[stack lost: stack map full] 1
w:1;[libc.so.6];main;hot 5
w:1;[libc.so.6];main;hot;[unknown]_[k];irq:x_[k] 7
`
	if b.String() != want {
		t.Errorf("folded:\n%s\nwant:\n%s", b.String(), want)
	}
}
