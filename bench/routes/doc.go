// Package routes measures what each kernel link family costs, in the VM
// matrix: per hit (the added time of a call to a cheap kernel function with
// a trivial program attached, against the same calls unprobed, medians of
// interleaved rounds) and to attach (link create + close for 1, 10, 100
// and 1,000 functions). Its test, run in each kernel by make routes-table,
// prints one PROBECTL-ROUTECOST line that mktable merges into
// compiler/routecost.json, the table the compiler embeds. The tracepoint
// families (perf tracepoint, raw tracepoint, tp_btf) are measured the same
// way on raw_syscalls:sys_enter, after a counting program has checked
// that each fires exactly once per call; TestTracepointRouteCost takes
// them alone (make routes-table ROUTES_TEST=tracepoints), and mktable
// merges its line into the kernel's entry, keeping the function families.
//
// TestScaleKprobeMulti compares probectl's apply of a glob over thousands
// of functions with the bare kprobe.multi link-create for the same list.
//
// It imports compiler (the table's types), runtime and spec (for the
// scale comparison) and bpf; nothing imports it.
package routes
