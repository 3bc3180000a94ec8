// Package fleet is probectl on Kubernetes: the objects of the API
// (fleet/api/v1alpha1) turned into plans, and plans into per-node records.
//
//   - A node's facts travel as a NodeFacts object ([NodeFactsOf] /
//     [FactsOf]): bpf.Facts without the BTF, with the function list
//     gzipped, the BTF's identity, and the user binaries the node
//     resolved ([DescribeBinaries]): a plan from them never reads this
//     machine's binaries.
//   - [PlanNode] compiles a spec set against one node's facts, exactly as
//     "probectl plan -target FILE" does, and keeps what a per-node record
//     shows: route, link families and reason per probe, or the
//     diagnostics at their spec lines.
//   - [PlanCluster] does it for every node a selector selects: what
//     "probectl plan -cluster" prints and what a plan-only ProbeSet's
//     records hold.
//   - [NodeAgent] is the Kubernetes side of a node's agent: it publishes
//     the facts, plans (and through an [Applier], applies) the ProbeSets
//     and ClusterProbeSets that select the node, writes the node's records
//     and rolls them up into their status ([RollUp]). A namespaced
//     ProbeSet is a tenant's: planned and applied under [Policy] of its
//     namespace, its tenant filter filled with the cgroups of the
//     namespace's pods on the node ([PodCgroups]) as they come and go.
//   - [Client] is how it talks to the API server: client-go's dynamic
//     client and the few types it reads, so that the probectl binary
//     links neither controller-runtime nor client-go's scheme.
//
// Imports: spec, compiler, bpf (never runtime: applying belongs to the
// node agent, which hands its applier in), and the API types.
package fleet
