package kube_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/aidlc/dlc/dlctest/kubetest"
)

// TestMain shares one control plane (a real kube-apiserver and etcd with
// KubeRay's CRDs) across this package's tests; it starts only if a test
// asks for it. envtest logs through controller-runtime's logger, which
// complains when none is set.
func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	os.Exit(kubetest.RunMain(m))
}

// TestRenderAcceptedByAPIServer creates every rendered object on a real API
// server, which checks it against KubeRay's CRD schemas, and reads it back
// unchanged: nothing rendered is pruned or defaulted away.
func TestRenderAcceptedByAPIServer(t *testing.T) {
	cp := kubetest.StartControlPlane(t)
	ns := cp.NewNamespace(t)
	for _, rc := range renderCases() {
		t.Run(rc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			c := cp.Client()
			obj := rc.render(t, ns)
			sent := obj.DeepCopyObject().(client.Object)
			if err := c.Create(ctx, obj); err != nil {
				t.Fatalf("Create: %v", err)
			}
			got := sent.DeepCopyObject().(client.Object)
			if err := c.Get(ctx, client.ObjectKeyFromObject(sent), got); err != nil {
				t.Fatalf("Get: %v", err)
			}
			if !equality.Semantic.DeepEqual(got.GetLabels(), sent.GetLabels()) ||
				!equality.Semantic.DeepEqual(got.GetAnnotations(), sent.GetAnnotations()) {
				t.Errorf("metadata read back: labels %v, annotations %v", got.GetLabels(), got.GetAnnotations())
			}
			var gotSpec, sentSpec any
			switch s := sent.(type) {
			case *rayv1.RayCluster:
				gotSpec, sentSpec = got.(*rayv1.RayCluster).Spec, s.Spec
				defaultReplicas(s.Spec.WorkerGroupSpecs)
			case *rayv1.RayJob:
				gotSpec, sentSpec = got.(*rayv1.RayJob).Spec, s.Spec
				if s.Spec.RayClusterSpec != nil {
					defaultReplicas(s.Spec.RayClusterSpec.WorkerGroupSpecs)
				}
			}
			if !equality.Semantic.DeepEqual(gotSpec, sentSpec) {
				want, _ := yaml.Marshal(sentSpec)
				have, _ := yaml.Marshal(gotSpec)
				t.Errorf("spec read back differs from the rendered one, %s", lineDiff(string(want), string(have)))
			}
		})
	}
}

// defaultReplicas sets what the CRD defaults an autoscaling group's
// replicas to, which rendering leaves to the autoscaler: 0 (KubeRay then
// runs the group's minimum).
func defaultReplicas(groups []rayv1.WorkerGroupSpec) {
	for i := range groups {
		if groups[i].Replicas == nil {
			groups[i].Replicas = ptr.To[int32](0)
		}
	}
}
