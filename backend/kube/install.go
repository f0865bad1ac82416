package kube

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// crdFiles are the CRDs of dlc's API group (package api/v1alpha1), as
// controller-gen generates them; config/crd/bases holds a copy for kubectl.
//
//go:embed crds/*.yaml
var crdFiles embed.FS

// CRDs returns the CustomResourceDefinitions of dlc's own API group,
// dlc.aidlc.io, decoded afresh on each call, sorted by name.
func CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	entries, err := crdFiles.ReadDir("crds")
	if err != nil {
		return nil, fmt.Errorf("reading the embedded CRDs: %w", err)
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, e := range entries {
		data, err := crdFiles.ReadFile(path.Join("crds", e.Name()))
		if err != nil {
			return nil, fmt.Errorf("reading the embedded CRD %s: %w", e.Name(), err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := dec.Decode(crd); err == io.EOF {
				break
			} else if err != nil {
				return nil, fmt.Errorf("decoding the embedded CRD %s: %w", e.Name(), err)
			}
			if crd.Name == "" {
				continue // an empty document
			}
			out = append(out, crd)
		}
	}
	slices.SortFunc(out, func(a, b *apiextensionsv1.CustomResourceDefinition) int {
		return strings.Compare(a.Name, b.Name)
	})
	return out, nil
}

// InstallCRDs creates the CRDs of dlc's API group on the API server cfg
// points at, or updates them where they exist (an update that meets a
// concurrent one is retried), and waits until the API server serves every
// one of them (the Established condition), or until ctx ends. It needs the
// rights to get, create and update customresourcedefinitions.
func InstallCRDs(ctx context.Context, cfg *rest.Config) error {
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return fmt.Errorf("installing dlc's CRDs: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("installing dlc's CRDs: creating a client: %w", err)
	}
	crds, err := CRDs()
	if err != nil {
		return err
	}
	for _, crd := range crds {
		if err := applyCRD(ctx, c, crd); err != nil {
			return fmt.Errorf("installing CRD %s: %w", crd.Name, err)
		}
	}
	for _, crd := range crds {
		if err := waitEstablished(ctx, c, crd.Name); err != nil {
			return fmt.Errorf("installing CRD %s: waiting until it is established: %w", crd.Name, err)
		}
	}
	return nil
}

// applyCRD creates crd, or replaces the spec of the one that exists.
func applyCRD(ctx context.Context, c client.Client, crd *apiextensionsv1.CustomResourceDefinition) error {
	err := c.Create(ctx, crd.DeepCopy())
	if err == nil || !apierrors.IsAlreadyExists(err) {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: crd.Name}, cur); err != nil {
			return err
		}
		cur.Spec = *crd.Spec.DeepCopy()
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		for k, v := range crd.Annotations {
			cur.Annotations[k] = v
		}
		return c.Update(ctx, cur)
	})
}

// waitEstablished polls until the named CRD is Established and its names
// are accepted.
func waitEstablished(ctx context.Context, c client.Client, name string) error {
	var last error
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			last = err
			return false, nil
		}
		established, named := false, false
		for _, cond := range crd.Status.Conditions {
			switch cond.Type {
			case apiextensionsv1.Established:
				established = cond.Status == apiextensionsv1.ConditionTrue
			case apiextensionsv1.NamesAccepted:
				named = cond.Status == apiextensionsv1.ConditionTrue
				if cond.Status == apiextensionsv1.ConditionFalse {
					last = fmt.Errorf("names not accepted: %s", cond.Message)
				}
			}
		}
		return established && named, nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("%w (last: %w)", err, last)
	}
	return err
}
