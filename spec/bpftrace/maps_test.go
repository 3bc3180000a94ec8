package bpftrace

import (
	"reflect"
	"testing"
	"time"
)

// ImportRun says which spec aggregations hold each bpftrace map, and
// what BEGIN, END and interval probes print, in order.
func TestImportMapsAndSteps(t *testing.T) {
	src := `BEGIN { printf("%s %d\n", "start", 3); }
macro show(title, @m) { printf(title); print(@m, 2); clear(@m); }
tracepoint:syscalls:sys_enter_read { @bytes[comm] = sum(args.count); @lat = avg(args.count); @ = count(); }
tracepoint:syscalls:sys_enter_write { @bytes[comm] = sum(args.count); @l = lhist(args.count, 0, 100, 10); }
interval:s:2 { time("%H\n"); print(@lat); zero(@lat); }
END { show("\nbytes:\n", @bytes); exit(); }
`
	r, diags := ImportRun("t.bt", []byte(src), Options{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	want := []Map{
		{Name: "@", Kind: "count", Parts: []MapPart{{"tracepoint.sys_enter_read", "calls", ""}}},
		{Name: "@bytes", Kind: "sum", Keyed: true, Keys: []string{""}, Parts: []MapPart{{"tracepoint.sys_enter_read", "bytes", ""}, {"tracepoint.sys_enter_write", "bytes", ""}}},
		{Name: "@l", Kind: "lhist", Min: 0, Max: 100, Step: 10, Parts: []MapPart{{"tracepoint.sys_enter_write", "l", ""}}},
		{Name: "@lat", Kind: "avg", Parts: []MapPart{{"tracepoint.sys_enter_read", "lat_count", "count"}, {"tracepoint.sys_enter_read", "lat_sum", "sum"}}},
	}
	if !reflect.DeepEqual(r.Maps, want) {
		t.Errorf("maps:\n%+v\nwant\n%+v", r.Maps, want)
	}
	if want := []Step{{Op: "printf", Format: "%s %d\n", Args: []any{"start", int64(3)}}}; !reflect.DeepEqual(r.Begin, want) {
		t.Errorf("BEGIN %+v, want %+v", r.Begin, want)
	}
	wantEnd := []Step{{Op: "printf", Format: "\nbytes:\n"}, {Op: "print", Map: "@bytes", Top: 2}, {Op: "clear", Map: "@bytes"}, {Op: "exit"}}
	if !reflect.DeepEqual(r.End, wantEnd) {
		t.Errorf("END %+v, want %+v", r.End, wantEnd)
	}
	wantInt := []Interval{{Every: 2 * time.Second, Steps: []Step{{Op: "time", Format: "%H\n"}, {Op: "print", Map: "@lat"}, {Op: "zero", Map: "@lat"}}}}
	if !reflect.DeepEqual(r.Intervals, wantInt) {
		t.Errorf("intervals %+v, want %+v", r.Intervals, wantInt)
	}
}
