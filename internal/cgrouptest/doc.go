// Package cgrouptest makes real cgroups for tests in the cgroup v2
// hierarchy (the unified one of a v1 hybrid host), in kubelet's layouts,
// and starts real processes in them: what a tenant filter or a pod
// resolver must tell apart. Every cgroup it makes is removed when the
// test ends (its processes are killed first). Imports nothing of
// probectl.
package cgrouptest
