// Package compiled is what the compiler outputs, as data: compiled probes
// (programs, maps, and the layouts that decode them), the spec set's
// tables and event buffer, their routes and link families (one table,
// [Families], that the compiler, the plan, the runtime and the displays
// read), and the plan made of them (what would change on a target, and
// its JSON).
//
// It holds what runtime and metrics read, and nothing of the spec: a saved
// plan is self-contained, and what a scrape or show decodes is what the
// state recorded.
//
// Package compiled imports bpf and bpf/sys (the fsession attach type),
// never spec or HCL (directly or through any other package:
// cmd/probectl's TestLayering checks every package it reaches).
package compiled
