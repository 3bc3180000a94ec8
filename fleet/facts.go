package fleet

import (
	"encoding/json"
	"fmt"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/fleet/api/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
)

// MaxFunctionsGz bounds the gzipped function list of a NodeFacts object
// (the CRD's limit): an object must stay well under etcd's 1.5 MiB.
const MaxFunctionsGz = 1 << 20

// MaxFunctions bounds the function list a NodeFacts object unpacks to
// (a kernel's is 1 to 3 MB): published facts are another node's input.
const MaxFunctions = 16 << 20

// NodeFactsOf is the NodeFacts object a node publishes for facts: the
// facts without the kernel's BTF (megabytes; a node plan resolves BTF
// reads at apply, as a profile's does) and with the function list
// gzipped. A profile's facts keep only their name: the profile is built
// in everywhere.
func NodeFactsOf(node string, f *bpf.Facts) (*v1alpha1.NodeFacts, error) {
	c := *f
	c.KernelBTF = nil
	c.Functions = nil
	var gz []byte
	if c.Source == "profile" {
		c.TracepointFormats = nil
	} else if len(f.Functions) > 0 {
		gz = gzipLines(f.Functions)
		if len(gz) > MaxFunctionsGz {
			return nil, fmt.Errorf("node %s: its %d functions take %d bytes gzipped, more than a NodeFacts object may hold (%d)", node, len(f.Functions), len(gz), MaxFunctionsGz)
		}
	}
	raw, err := json.Marshal(&c)
	if err != nil {
		return nil, err
	}
	source := c.Source
	if source != "live" {
		source += " " + c.Name
	}
	return &v1alpha1.NodeFacts{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "NodeFacts"},
		ObjectMeta: metav1.ObjectMeta{Name: node},
		Spec: v1alpha1.NodeFactsSpec{Arch: string(c.Arch), Kernel: c.Kernel.String(), Source: source,
			Facts: k8sruntime.RawExtension{Raw: raw}, Functions: gz},
	}, nil
}

// FactsOf reads the facts a node published. Facts published from a
// built-in profile are that profile.
func FactsOf(nf *v1alpha1.NodeFacts) (*bpf.Facts, error) {
	var head struct{ Source, Name string }
	if err := json.Unmarshal(nf.Spec.Facts.Raw, &head); err != nil {
		return nil, fmt.Errorf("NodeFacts %s: %w", nf.Name, err)
	}
	if head.Source == "profile" {
		f, err := bpf.Profile(head.Name)
		if err != nil {
			return nil, fmt.Errorf("NodeFacts %s: %w", nf.Name, err)
		}
		f.Binaries, err = binariesOf(nf)
		return f, err
	}
	f, err := bpf.ParseFacts(nf.Spec.Facts.Raw, "NodeFacts "+nf.Name)
	if err != nil {
		return nil, err
	}
	if len(nf.Spec.Functions) > 0 {
		if f.Functions, err = gunzipLines(nf.Spec.Functions); err != nil {
			return nil, fmt.Errorf("NodeFacts %s: functions: %w", nf.Name, err)
		}
	}
	if f.Binaries, err = binariesOf(nf); err != nil {
		return nil, err
	}
	f.LocalBTF = f.BTF && sameBTF(nf.Spec.BTF)
	return f, nil
}
