// Package spec reads probe specs: HCL files of probe blocks. It decodes them
// into a typed AST ([Config], [Probe], [Handler], [Action], [Expr]) and
// checks them strictly, so that every mistake it can see without a target
// kernel becomes an hcl.Diagnostic with the exact source range and the fix.
// Input is bounded before the HCL parser sees it ([ReadFile], [ParseFile]):
// regular files of at most [MaxFileSize] bytes, [MaxNesting] levels of
// nesting and [MaxOperators] operators an expression, so that no pass over a
// spec recurses without bound.
//
// The built-in values (pid, ret, task.FIELD, ...) are one table, [Builtins]:
// each entry's type, the probe kinds and handler it exists in, the error
// elsewhere, its BTF path, doc line and bpftrace spelling. The lowering, the
// diagnostics' lists, the bpftrace hints and the README's list read it; the
// compiler keeps each value's code under the same name.
//
// A [Policy] refuses classes of constructs ([DenyClasses]: a read of kernel
// memory at a raw address is root on the machine); [Config.Enforce] checks
// a spec set under one.
//
// What depends on a target kernel (routes, tracepoint field layouts,
// function lists) is the compiler's; [Config.CheckKernels] only says
// which of the kernels it is given lack a tracepoint or field a probe
// names (validate gives it the built-in profiles). Package spec imports only bpf (for
// probe addresses) and never loads anything into a kernel.
package spec
