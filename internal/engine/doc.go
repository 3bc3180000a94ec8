// Package engine holds probectl's engines: the one apply path that
// "probectl apply", the directory agent and the Kubernetes node agent all
// call, and the two agents built on it.
//
// The apply path is three steps: TargetFacts (the kernel the specs are
// for), Compile (the policy, then the compiler) and Workspace.Apply (lock,
// repair, diff, review, apply, with a verifier rejection returned as a
// diagnostic at its spec range). One locking rule holds for every caller:
// specs are parsed and compiled before the workspace is locked; the lock
// is then waited for up to Workspace.LockTimeout and held from reading the
// state to committing the next one, so the plan a review sees (the one a
// user confirms, a saved plan's check) is the one applied.
//
// DirAgent applies a directory of specs whenever it changes and settles
// (the trust checks on the directory and its files, the watcher, the
// settle rule, the reconcile loop and its /status). KubeApplier is the
// fleet.Applier the node agent is handed: fleet never imports runtime.
//
// Imports: spec, compiler, runtime, metrics, bpf, fleet,
// fleet/api/v1alpha1, internal/termtext. Only cmd/probectl imports it.
package engine
