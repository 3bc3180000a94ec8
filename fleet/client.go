package fleet

import (
	"context"
	"fmt"

	"github.com/probectl/probectl/fleet/api/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// Client reads and writes the objects the fleet uses — probectl.dev/v1alpha1
// ProbeSets, ProbeSetNodes and NodeFacts, and the Nodes and ConfigMaps the
// agents read — through the API server's dynamic interface, converting by
// their JSON fields. It is not a generic client: it knows those types only,
// and that is its point: the probectl binary then links neither
// controller-runtime nor client-go's scheme of every Kubernetes type, whose
// package initialisation every command paid at start (tens of milliseconds
// and megabytes), Kubernetes or not.
type Client struct {
	dyn dynamic.Interface
}

// NewClient connects with cfg.
func NewClient(cfg *rest.Config) (*Client, error) {
	d, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Client{dyn: d}, nil
}

// Dynamic is the client's dynamic interface, for what reads other
// objects (fleet/podwatch: the node's pods).
func (c *Client) Dynamic() dynamic.Interface { return c.dyn }

// Node is the part of a core/v1 Node the fleet reads: its name and labels.
type Node struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
}

// NodeList is a list of Nodes.
type NodeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Node `json:"items"`
}

// Pod is the part of a core/v1 Pod the fleet reads: its name, namespace
// and uid (the uid names its cgroup).
type Pod struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
}

// PodList is a list of Pods.
type PodList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Pod `json:"items"`
}

// ConfigMap is the part of a core/v1 ConfigMap the fleet reads.
type ConfigMap struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Data              map[string]string `json:"data,omitempty"`
}

// resource is where an object (or a list of them) lives in the API.
type resource struct {
	gvr        schema.GroupVersionResource
	kind       string
	namespaced bool
}

var (
	coreV1 = schema.GroupVersion{Version: "v1"}

	resProbeSet     = resource{v1alpha1.GroupVersion.WithResource("probesets"), "ProbeSet", true}
	resClusterSet   = resource{v1alpha1.GroupVersion.WithResource("clusterprobesets"), "ClusterProbeSet", false}
	resProbeSetNode = resource{v1alpha1.GroupVersion.WithResource("probesetnodes"), "ProbeSetNode", true}
	resNodeFacts    = resource{v1alpha1.GroupVersion.WithResource("nodefacts"), "NodeFacts", false}
	resNode         = resource{coreV1.WithResource("nodes"), "Node", false}
	resConfigMap    = resource{coreV1.WithResource("configmaps"), "ConfigMap", true}
	resPod          = resource{coreV1.WithResource("pods"), "Pod", true}
)

func resourceOf(obj any) (resource, error) {
	switch obj.(type) {
	case *v1alpha1.ProbeSet, *v1alpha1.ProbeSetList:
		return resProbeSet, nil
	case *v1alpha1.ClusterProbeSet, *v1alpha1.ClusterProbeSetList:
		return resClusterSet, nil
	case *v1alpha1.ProbeSetNode, *v1alpha1.ProbeSetNodeList:
		return resProbeSetNode, nil
	case *v1alpha1.NodeFacts, *v1alpha1.NodeFactsList:
		return resNodeFacts, nil
	case *Node, *NodeList:
		return resNode, nil
	case *ConfigMap:
		return resConfigMap, nil
	case *Pod, *PodList:
		return resPod, nil
	}
	return resource{}, fmt.Errorf("fleet.Client: %T is not a type the fleet reads or writes", obj)
}

func (c *Client) resource(r resource, namespace string) dynamic.ResourceInterface {
	ri := c.dyn.Resource(r.gvr)
	if r.namespaced {
		return ri.Namespace(namespace)
	}
	return ri
}

// fromUnstructured fills obj from u's fields.
func fromUnstructured(u map[string]any, obj any) error {
	return k8sruntime.DefaultUnstructuredConverter.FromUnstructured(u, obj)
}

// toUnstructured is obj as the API's JSON fields, with its apiVersion and
// kind set (the typed objects here often leave TypeMeta empty).
func toUnstructured(r resource, obj metav1.Object) (*unstructured.Unstructured, error) {
	m, err := k8sruntime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(r.gvr.GroupVersion().String())
	u.SetKind(r.kind)
	return u, nil
}

// Get reads the object named key into obj.
func (c *Client) Get(ctx context.Context, key types.NamespacedName, obj metav1.Object) error {
	r, err := resourceOf(obj)
	if err != nil {
		return err
	}
	u, err := c.resource(r, key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	return fromUnstructured(u.Object, obj)
}

// ListOptions narrow a List or a Watch: one namespace ("" for all),
// labels that must all match, and fields (a field selector: of a Pod,
// spec.nodeName).
type ListOptions struct {
	Namespace string
	Labels    map[string]string
	Fields    map[string]string
}

func (o ListOptions) api() metav1.ListOptions {
	lo := metav1.ListOptions{}
	if len(o.Labels) > 0 {
		lo.LabelSelector = metav1.FormatLabelSelector(metav1.SetAsLabelSelector(o.Labels))
	}
	if len(o.Fields) > 0 {
		lo.FieldSelector = fields.SelectorFromSet(o.Fields).String()
	}
	return lo
}

// List reads the objects of list's type into list.
func (c *Client) List(ctx context.Context, list any, o ListOptions) error {
	r, err := resourceOf(list)
	if err != nil {
		return err
	}
	ul, err := c.resource(r, o.Namespace).List(ctx, o.api())
	if err != nil {
		return err
	}
	return fromUnstructured(ul.UnstructuredContent(), list)
}

// Create creates obj and reads back what the server stored (its uid,
// resourceVersion, defaults).
func (c *Client) Create(ctx context.Context, obj metav1.Object) error {
	return c.write(ctx, obj, func(ri dynamic.ResourceInterface, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		return ri.Create(ctx, u, metav1.CreateOptions{})
	})
}

// Update writes obj's spec and metadata; it fails with a conflict when
// obj's resourceVersion is stale.
func (c *Client) Update(ctx context.Context, obj metav1.Object) error {
	return c.write(ctx, obj, func(ri dynamic.ResourceInterface, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		return ri.Update(ctx, u, metav1.UpdateOptions{})
	})
}

// UpdateStatus writes obj's status subresource.
func (c *Client) UpdateStatus(ctx context.Context, obj metav1.Object) error {
	return c.write(ctx, obj, func(ri dynamic.ResourceInterface, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		return ri.UpdateStatus(ctx, u, metav1.UpdateOptions{})
	})
}

func (c *Client) write(ctx context.Context, obj metav1.Object, do func(dynamic.ResourceInterface, *unstructured.Unstructured) (*unstructured.Unstructured, error)) error {
	r, err := resourceOf(obj)
	if err != nil {
		return err
	}
	u, err := toUnstructured(r, obj)
	if err != nil {
		return err
	}
	out, err := do(c.resource(r, obj.GetNamespace()), u)
	if err != nil {
		return err
	}
	return fromUnstructured(out.Object, obj)
}

// Delete deletes obj.
func (c *Client) Delete(ctx context.Context, obj metav1.Object) error {
	r, err := resourceOf(obj)
	if err != nil {
		return err
	}
	return c.resource(r, obj.GetNamespace()).Delete(ctx, obj.GetName(), metav1.DeleteOptions{})
}

// Watch watches the objects of list's type that o selects (o.Namespace
// "": every namespace); the events carry unstructured objects (the agent
// only needs to know that something changed).
func (c *Client) Watch(ctx context.Context, list any, o ListOptions) (watch.Interface, error) {
	r, err := resourceOf(list)
	if err != nil {
		return nil, err
	}
	return c.resource(r, o.Namespace).Watch(ctx, o.api())
}

// keyOf is an object's namespace and name.
func keyOf(obj metav1.Object) types.NamespacedName {
	return types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

var (
	resTokenReview  = schema.GroupVersionResource{Group: "authentication.k8s.io", Version: "v1", Resource: "tokenreviews"}
	resAccessReview = schema.GroupVersionResource{Group: "authorization.k8s.io", Version: "v1", Resource: "subjectaccessreviews"}
)

// MayReadResults says whether the bearer of token may read the results of
// the ProbeSets of namespace: the API server authenticates it (a
// TokenReview) and authorizes its user to get probesetnodes there (a
// SubjectAccessReview), as it would a request for the records. When not,
// why says the API server's reason. The agent's credentials need create
// on both reviews (the system:auth-delegator role's).
func (c *Client) MayReadResults(ctx context.Context, token, namespace string) (ok bool, why string, err error) {
	tr := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
		"spec": map[string]any{"token": token}}}
	out, err := c.dyn.Resource(resTokenReview).Create(ctx, tr, metav1.CreateOptions{})
	if err != nil {
		return false, "", fmt.Errorf("TokenReview: %w", err)
	}
	if authed, _, _ := unstructured.NestedBool(out.Object, "status", "authenticated"); !authed {
		msg, _, _ := unstructured.NestedString(out.Object, "status", "error")
		return false, "the token is not valid: " + msg, nil
	}
	user, _, _ := unstructured.NestedMap(out.Object, "status", "user")
	spec := map[string]any{"user": user["username"], "groups": user["groups"], "uid": user["uid"], "extra": user["extra"],
		"resourceAttributes": map[string]any{"group": v1alpha1.GroupVersion.Group, "resource": "probesetnodes", "verb": "get", "namespace": namespace}}
	sar := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}}
	out, err = c.dyn.Resource(resAccessReview).Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return false, "", fmt.Errorf("SubjectAccessReview: %w", err)
	}
	if allowed, _, _ := unstructured.NestedBool(out.Object, "status", "allowed"); allowed {
		return true, "", nil
	}
	reason, _, _ := unstructured.NestedString(out.Object, "status", "reason")
	return false, fmt.Sprintf("%v may not get probesetnodes in namespace %s (the results of its ProbeSets) %s", user["username"], namespace, reason), nil
}
