// Package metrics exposes what the applied probes measured to Prometheus:
// a prometheus.Collector that, at each scrape, reads the workspace's state
// and its pinned maps (no polling loop, nothing kept between scrapes) and
// turns every aggregation into one metric family, with per-probe health
// counters and an info metric. README.md, "Serve: Prometheus metrics",
// documents the names, labels and histogram bounds.
//
// Package metrics imports runtime, compiler/compiled and bpf. It never
// reaches spec or HCL, directly or through another package: like runtime,
// it reads only what the state recorded.
package metrics
