package kube_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/dlctest/kubetest"
	"github.com/aidlc/dlc/quota"
)

// docs/kubernetes.md's production backend snippet, on the package's control
// plane: kube.New over a rest.Config, a client on it (TestReadmeSnippets,
// in the repository's root, checks the region against docs/kubernetes.md).
func TestReadmeKubeNew(t *testing.T) {
	cp := kubetest.StartControlPlane(t)
	ctx := t.Context()
	if err := cp.Client().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "dlc-system"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if err := readmeKubeNew(ctx, cp.Config()); err != nil {
		t.Fatal(err)
	}
}

func readmeKubeNew(ctx context.Context, restConfig *rest.Config) error {
	// snippet kubenew
	be, err := kube.New(ctx, restConfig, kube.Options{Namespace: "dlc-system"})
	if err != nil {
		return err
	}
	defer be.Close()
	c, err := dlc.New(dlc.WithBackend(be))
	// end snippet kubenew
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.ResourceGroups().Register(ctx, quota.Group{ID: "rg-readme", Package: "pkg-1",
		Capacity: quota.Resources{MilliCPU: 8000}})
	return err
}
