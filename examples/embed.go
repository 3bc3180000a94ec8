// Package examples holds the example specs, and embeds the one that
// "probectl run" uses when it is given no spec.
package examples

import _ "embed"

// Demo is the built-in example: tracepoints on system calls, which every
// kernel probectl runs on has.
//
//go:embed demo.hcl
var Demo []byte

// DemoName is the file name diagnostics use for Demo.
const DemoName = "demo.hcl"
