package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
)

// Mode says whether the nodes only plan a ProbeSet or apply it.
// +kubebuilder:validation:Enum=plan;apply
type Mode string

// The modes.
const (
	ModePlan  Mode = "plan"
	ModeApply Mode = "apply"
)

// ProbeSet is a namespace's set of probe specs for the nodes it selects:
// a tenant's. Its specs are planned under the tenant policy (no raw
// addresses, kernel stacks, other tasks' data or node-wide probes:
// refused at plan, with the reason) and every program is filtered in the
// kernel to the tasks of the namespace's pods on the node; its records
// stay in its namespace. Node-wide tracing is a ClusterProbeSet's.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ps,categories=probectl
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`
// +kubebuilder:printcolumn:name="Selected",type=integer,JSONPath=`.status.selected`
// +kubebuilder:printcolumn:name="Planned",type=integer,JSONPath=`.status.planned`
// +kubebuilder:printcolumn:name="Applied",type=integer,JSONPath=`.status.applied`
// +kubebuilder:printcolumn:name="Failed",type=integer,JSONPath=`.status.failed`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="!self.metadata.name.startsWith('cluster.')",message="a ProbeSet's name may not begin with \"cluster.\": the records of ClusterProbeSets are named so"
type ProbeSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ProbeSetSpec   `json:"spec"`
	Status ProbeSetStatus `json:"status,omitempty"`
}

// ClusterProbeSet is a node-wide set of probe specs, for cluster admins:
// its probes see every task of the nodes it selects (what a ProbeSet was
// before tenants). Its configMapRef names a ConfigMap in the agents'
// namespace (probectl-system); its records are there, named
// "cluster.<name>.<node>".
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=cps,categories=probectl
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`
// +kubebuilder:printcolumn:name="Selected",type=integer,JSONPath=`.status.selected`
// +kubebuilder:printcolumn:name="Planned",type=integer,JSONPath=`.status.planned`
// +kubebuilder:printcolumn:name="Applied",type=integer,JSONPath=`.status.applied`
// +kubebuilder:printcolumn:name="Failed",type=integer,JSONPath=`.status.failed`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterProbeSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ProbeSetSpec   `json:"spec"`
	Status ProbeSetStatus `json:"status,omitempty"`
}

// ClusterProbeSetList is a list of ClusterProbeSets.
// +kubebuilder:object:root=true
type ClusterProbeSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterProbeSet `json:"items"`
}

// ProbeSetSpec is what the user declares.
// +kubebuilder:validation:XValidation:rule="has(self.hcl) != has(self.configMapRef)",message="set exactly one of hcl (the spec inline) and configMapRef (a ConfigMap whose *.hcl keys are the spec files)"
type ProbeSetSpec struct {
	// HCL is the spec inline, as one file named "<probeset>.hcl".
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=262144
	HCL string `json:"hcl,omitempty"`
	// ConfigMapRef names a ConfigMap in the ProbeSet's namespace whose keys
	// ending in ".hcl" are the spec files (file names in diagnostics).
	// +optional
	ConfigMapRef *ConfigMapRef `json:"configMapRef,omitempty"`
	// NodeSelector selects the nodes by their labels; empty selects all.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Mode is "plan" (each node writes its plan, nothing is applied) or
	// "apply" (each node applies the spec set atomically).
	// +optional
	// +kubebuilder:default=plan
	Mode Mode `json:"mode,omitempty"`
}

// ConfigMapRef names a ConfigMap in the ProbeSet's namespace.
type ConfigMapRef struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// ProbeSetStatus rolls up the ProbeSetNode records of the ProbeSet.
type ProbeSetStatus struct {
	// ObservedGeneration is the generation the counts below were computed for.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Selected counts the nodes with published facts that the selector selects.
	Selected int32 `json:"selected"`
	// Planned, Applied and Failed count the nodes whose record is for
	// this generation, by outcome (an applied node is planned too).
	Planned int32 `json:"planned"`
	Applied int32 `json:"applied"`
	Failed  int32 `json:"failed"`
	// Nodes has one short line per selected node; the node's record
	// (ProbeSetNode "<probeset>.<node>") has the details.
	// +listType=map
	// +listMapKey=node
	// +optional
	Nodes []NodeSummary `json:"nodes,omitempty"`
	// Conditions: Planned (every selected node planned this generation),
	// Applied (every selected node applied it; mode apply), Degraded (some
	// node failed).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// NodeSummary is one node's line in a ProbeSet's status.
type NodeSummary struct {
	Node   string `json:"node"`
	Kernel string `json:"kernel,omitempty"`
	Phase  Phase  `json:"phase"`
	// Digest is the digest of the applied spec set.
	// +optional
	Digest string `json:"digest,omitempty"`
	// Message is the first error, at its spec line, when the node failed.
	// +optional
	Message string `json:"message,omitempty"`
}

// Phase is a node's outcome for a ProbeSet.
// +kubebuilder:validation:Enum=Pending;Planned;Applied;Failed
type Phase string

// The phases.
const (
	PhasePending Phase = "Pending"
	PhasePlanned Phase = "Planned"
	PhaseApplied Phase = "Applied"
	PhaseFailed  Phase = "Failed"
)

// Condition types of a ProbeSet.
const (
	ConditionPlanned  = "Planned"
	ConditionApplied  = "Applied"
	ConditionDegraded = "Degraded"
)

// ProbeSetList is a list of ProbeSets.
// +kubebuilder:object:root=true
type ProbeSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ProbeSet `json:"items"`
}

// ProbeSetNode is one node's record of one ProbeSet, named
// "<probeset>.<node>" in the ProbeSet's namespace. Only the agent of
// spec.nodeName may create, change or delete it (the admission policy).
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=psn,categories=probectl
// +kubebuilder:printcolumn:name="ProbeSet",type=string,JSONPath=`.spec.probeSet`
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.spec.nodeName`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Kernel",type=string,JSONPath=`.status.kernel`
// +kubebuilder:printcolumn:name="Digest",type=string,JSONPath=`.status.appliedDigest`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name == (has(self.spec.cluster) && self.spec.cluster ? 'cluster.' : ”) + self.spec.probeSet + '.' + self.spec.nodeName",message="a ProbeSetNode is named <probeSet>.<nodeName> (cluster.<probeSet>.<nodeName> for a ClusterProbeSet)"
type ProbeSetNode struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ProbeSetNodeSpec   `json:"spec"`
	Status ProbeSetNodeStatus `json:"status,omitempty"`
}

// ProbeSetNodeSpec names the ProbeSet and the node; neither changes.
type ProbeSetNodeSpec struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="probeSet is immutable"
	ProbeSet string `json:"probeSet"`
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="nodeName is immutable"
	NodeName string `json:"nodeName"`
	// Cluster: the record is of the ClusterProbeSet probeSet (in the
	// agents' namespace), not of a ProbeSet of its own namespace.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="cluster is immutable"
	Cluster bool `json:"cluster,omitempty"`
}

// ProbeSetNodeStatus is what a node did with a ProbeSet.
type ProbeSetNodeStatus struct {
	// ObservedGeneration is the ProbeSet generation this record is for.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	Phase Phase `json:"phase,omitempty"`
	// Kernel summarises the facts planned against ("linux 6.12.0 x86_64").
	// +optional
	Kernel string `json:"kernel,omitempty"`
	// Facts names where the facts came from ("live", "file NAME").
	// +optional
	Facts string `json:"facts,omitempty"`
	// Scope is whose tasks the probes see: "node", or "namespace NS
	// (tasks of its pods on this node)".
	// +optional
	Scope string `json:"scope,omitempty"`
	// Cgroups counts the cgroups of the namespace's pods on the node the
	// tenant filter admits (a ProbeSet applied).
	// +optional
	Cgroups *int32 `json:"cgroups,omitempty"`
	// Probes is the plan: route and link families per probe, and why.
	// +optional
	Probes []ProbePlan `json:"probes,omitempty"`
	// SpecDigest is the digest of the spec set this record is for;
	// AppliedDigest the one live on the node (unchanged by a failure).
	// +optional
	SpecDigest string `json:"specDigest,omitempty"`
	// +optional
	AppliedDigest string `json:"appliedDigest,omitempty"`
	// Errors are the diagnostics, "file:line:col: summary: detail".
	// +optional
	Errors []string `json:"errors,omitempty"`
	// +optional
	LastTransitionTime *metav1.Time `json:"lastTransitionTime,omitempty"`
}

// ProbePlan is one probe of a node's plan, and its counters once applied.
type ProbePlan struct {
	// Address is the probe's address ("kernel.vfs_latency").
	Address string `json:"address"`
	Route   string `json:"route"`
	// Attach lists the link families.
	Attach []string `json:"attach"`
	Reason string   `json:"reason"`
	// Links is the number of links, when known before apply.
	// +optional
	Links *int32 `json:"links,omitempty"`
	// +optional
	Hits *int64 `json:"hits,omitempty"`
	// +optional
	Missed *int64 `json:"missed,omitempty"`
	// +optional
	Drops *int64 `json:"drops,omitempty"`
}

// ProbeSetNodeList is a list of ProbeSetNodes.
// +kubebuilder:object:root=true
type ProbeSetNodeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ProbeSetNode `json:"items"`
}

// NodeFacts are a node's kernel facts, named after the node. Only that
// node's agent may write them (the admission policy).
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=nf,categories=probectl
// +kubebuilder:printcolumn:name="Arch",type=string,JSONPath=`.spec.arch`
// +kubebuilder:printcolumn:name="Kernel",type=string,JSONPath=`.spec.kernel`
// +kubebuilder:printcolumn:name="Source",type=string,JSONPath=`.spec.source`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NodeFacts struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec NodeFactsSpec `json:"spec"`
}

// NodeFactsSpec is what a node's agent publishes.
type NodeFactsSpec struct {
	// Arch is x86_64 or arm64.
	// +kubebuilder:validation:Enum=x86_64;arm64
	Arch string `json:"arch"`
	// Kernel is the kernel version ("6.12.117").
	// +kubebuilder:validation:MinLength=1
	Kernel string `json:"kernel"`
	// Source says where the facts came from: "live", or "file NAME" for a
	// plan-only agent that publishes a facts file.
	// +kubebuilder:validation:MinLength=1
	Source string `json:"source"`
	// Facts is bpf.Facts as "probectl target -o" writes them, without
	// the function list, the tracepoint list and the BTF.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Type=object
	Facts k8sruntime.RawExtension `json:"facts"`
	// Functions is the node's list of probe-able kernel functions, one a
	// line, sorted, gzipped: it lets a cluster plan resolve patterns and
	// name the nodes that lack a function. Empty when not published.
	// +optional
	// +kubebuilder:validation:MaxLength=1048576
	Functions []byte `json:"functions,omitempty"`
	// Binaries are the user binaries the ProbeSets selecting the node
	// name, and those its agent's -publish-binary names, as the node
	// resolved them under its host root: what a cluster plan checks user
	// probes against. A binary missing here is not checked there.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=256
	Binaries []NodeBinary `json:"binaries,omitempty"`
	// BTF identifies the node's kernel BTF (/sys/kernel/btf/vmlinux):
	// a planner whose own kernel's BTF is the same resolves BTF reads
	// (->, typed args, task) with it; otherwise they are not checked.
	// +optional
	BTF *NodeBTF `json:"btf,omitempty"`
}

// NodeBinary is a user binary as a node resolved it.
type NodeBinary struct {
	// Name is the binary as specs name it: a path, or a library name
	// looked up in the node's ld.so.cache.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Name string `json:"name"`
	// Path is the file it resolved to on the node.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Path string `json:"path,omitempty"`
	// BuildID is the file's GNU build id, hex.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	BuildID string `json:"buildID,omitempty"`
	// Functions are its function symbols, one a line, sorted, gzipped;
	// empty when the list would not fit (Digest still names it).
	// +optional
	Functions []byte `json:"functions,omitempty"`
	// Digest is the sha256 of the function list, one name a line.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Digest string `json:"digest,omitempty"`
	// Refused are the functions the kernel refuses uprobes on, with why.
	// +optional
	// +kubebuilder:validation:MaxProperties=4096
	Refused map[string]string `json:"refused,omitempty"`
	// Error says why the node could not read the binary.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Error string `json:"error,omitempty"`
}

// NodeBTF identifies a kernel's BTF.
type NodeBTF struct {
	// SHA256 is the hash of the raw vmlinux BTF, hex.
	// +kubebuilder:validation:MaxLength=64
	SHA256 string `json:"sha256"`
	// Size is its length in bytes.
	Size int64 `json:"size"`
	// Release is the kernel's release (uname -r).
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Release string `json:"release,omitempty"`
}

// NodeFactsList is a list of NodeFacts.
// +kubebuilder:object:root=true
type NodeFactsList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeFacts `json:"items"`
}
