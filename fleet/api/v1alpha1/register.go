package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is probectl.dev/v1alpha1.
var GroupVersion = schema.GroupVersion{Group: "probectl.dev", Version: "v1alpha1"}

// AddToScheme registers the types of this package.
func AddToScheme(s *k8sruntime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&ProbeSet{}, &ProbeSetList{},
		&ClusterProbeSet{}, &ClusterProbeSetList{},
		&ProbeSetNode{}, &ProbeSetNodeList{},
		&NodeFacts{}, &NodeFactsList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
