// Package examples holds the example specs, and embeds the one that
// "probectl run" uses when it is given no spec, and the bpftrace tools
// the kernel matrix runs.
package examples

import "embed"

// Demo is the built-in example: tracepoints on system calls, which every
// kernel probectl runs on has.
//
//go:embed demo.hcl
var Demo []byte

// DemoName is the file name diagnostics use for Demo.
const DemoName = "demo.hcl"

// BPFtrace holds bpftrace's tools written as specs (examples/bpftrace),
// which the kernel matrix applies as they are.
//
//go:embed bpftrace/*.hcl
var BPFtrace embed.FS
