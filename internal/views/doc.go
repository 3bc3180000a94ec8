// Package views renders what the commands show, the views of terraform's
// arguments → command → views: the plan (as terraform plan draws it), the
// results of show and run, status, a kernel's facts, the plan per node of
// plan -cluster, the probe points of probectl list (bpftrace -l's lines),
// the Grafana dashboard of a spec's metrics, and the build of probectl
// version. A command with a -json option has one interface here (Plan,
// Results, Status, Facts, ClusterPlan, Version, List) with a human
// and a JSON implementation; the command picks one and never formats
// output itself.
//
// Imports compiler/compiled, runtime, metrics, fleet, bpf,
// internal/termtext and internal/buildinfo; never spec, the compiler or
// internal/engine.
package views
