package kubetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ReadObjects reads the objects of YAML files (several documents each).
func ReadObjects(paths ...string) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
		for {
			var m map[string]any
			if err := dec.Decode(&m); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return nil, fmt.Errorf("%s: %w", p, err)
			}
			if len(m) == 0 {
				continue
			}
			objs = append(objs, &unstructured.Unstructured{Object: m})
		}
	}
	return objs, nil
}

// Apply creates the objects of YAML files, as "kubectl apply" would on an
// empty cluster (server-side apply, field manager "kubetest"), in the
// files' order, and waits for every CustomResourceDefinition among them
// to be established. dryRun asks the server to validate without storing.
func Apply(ctx context.Context, cfg *rest.Config, dryRun bool, paths ...string) ([]*unstructured.Unstructured, error) {
	c, err := newClient(cfg)
	if err != nil {
		return nil, err
	}
	objs, err := ReadObjects(paths...)
	if err != nil {
		return nil, err
	}
	opts := []client.PatchOption{client.ForceOwnership, client.FieldOwner("kubetest")}
	if dryRun {
		opts = append(opts, client.DryRunAll)
	}
	for _, o := range objs {
		//lint:ignore SA1019 server-side apply of unstructured objects
		if err := c.Patch(ctx, o, client.Apply, opts...); err != nil {
			return nil, fmt.Errorf("apply %s %s: %w", o.GetKind(), o.GetName(), err)
		}
		if o.GetKind() == "CustomResourceDefinition" && !dryRun {
			if err := waitEstablished(ctx, c, o.GetName()); err != nil {
				return nil, err
			}
		}
	}
	return objs, nil
}

// newClient is a client of cfg's cluster that knows the built-in kinds and
// CustomResourceDefinitions.
func newClient(cfg *rest.Config) (client.Client, error) {
	scheme := k8sruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}

func waitEstablished(ctx context.Context, c client.Client, name string) error {
	return wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &crd); err != nil {
			return false, fmt.Errorf("CRD %s: %w", name, err)
		}
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}
