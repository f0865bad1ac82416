package kube_test

import (
	"reflect"
	"testing"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/cluster"
)

// TestSlimRayClusterKeepsWhatIsRead: what the provisioner reads of a
// cached RayCluster is the same of what its informer keeps
// (SlimRayCluster) as of the whole object — the Ray token's Secret, the
// generation, the head service, the worker groups' counts and what an
// apply carries over or names to delete — with and without a token; the
// pod templates' specs are gone.
func TestSlimRayClusterKeepsWhatIsRead(t *testing.T) {
	for _, token := range []bool{true, false} {
		env := cpuEnv()
		env.Image = "ray-2.52.0-py311-cpu"
		env.Workers[0].Instances = cluster.Range(1, 3)
		c := running("cls-slim000001", "瘦身", env)
		c.Replicas = map[string]int{"cpu": 3}
		if token {
			c.Spec.RayToken = &cluster.SecretKeyRef{Secret: "dlc-env-ray-token", Key: "token"}
		}
		whole, err := kube.RenderRayCluster(c, kube.RenderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		whole.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kuberay"}}
		whole.Spec.WorkerGroupSpecs[0].Replicas = ptr.To[int32](2) // what the autoscaler wrote
		whole.Spec.WorkerGroupSpecs[0].ScaleStrategy.WorkersToDelete = []string{"w-old"}
		slim := kube.SlimRayCluster(whole)

		if a, b := kube.RayTokenOf(whole), kube.RayTokenOf(slim); !reflect.DeepEqual(a, b) || (a != nil) != token {
			t.Errorf("token %v: RayTokenOf whole %v, slim %v", token, a, b)
		}
		if !reflect.DeepEqual(whole.ObjectMeta.Annotations, slim.Annotations) || !reflect.DeepEqual(whole.Labels, slim.Labels) ||
			!reflect.DeepEqual(whole.Status, slim.Status) {
			t.Error("the slim RayCluster lost its metadata or status")
		}
		if !reflect.DeepEqual(whole.Spec.HeadGroupSpec.HeadService, slim.Spec.HeadGroupSpec.HeadService) ||
			!reflect.DeepEqual(whole.Spec.EnableInTreeAutoscaling, slim.Spec.EnableInTreeAutoscaling) ||
			!reflect.DeepEqual(whole.Spec.Suspend, slim.Spec.Suspend) ||
			!reflect.DeepEqual(whole.Spec.GcsFaultToleranceOptions, slim.Spec.GcsFaultToleranceOptions) {
			t.Error("the slim RayCluster lost what its observation reads")
		}
		for i, w := range whole.Spec.WorkerGroupSpecs {
			s := slim.Spec.WorkerGroupSpecs[i]
			if w.GroupName != s.GroupName || !reflect.DeepEqual(w.Replicas, s.Replicas) || !reflect.DeepEqual(w.MinReplicas, s.MinReplicas) ||
				!reflect.DeepEqual(w.MaxReplicas, s.MaxReplicas) || !reflect.DeepEqual(w.ScaleStrategy, s.ScaleStrategy) {
				t.Errorf("worker group %s: whole %+v, slim %+v", w.GroupName, w, s)
			}
			if len(s.Template.Spec.Containers) != 0 || !reflect.DeepEqual(w.Template.Labels, s.Template.Labels) {
				t.Errorf("worker group %s's template: %+v", w.GroupName, s.Template)
			}
		}
		if h := slim.Spec.HeadGroupSpec.Template.Spec; len(h.Containers) != 1 || len(h.Containers[0].Env) > 2 ||
			h.Containers[0].Image != whole.Spec.HeadGroupSpec.Template.Spec.Containers[0].Image || h.Containers[0].Command != nil ||
			h.Volumes != nil || slim.ManagedFields != nil {
			t.Errorf("the slim head template keeps what nothing reads: %+v", h)
		}

		// An apply over the cached object carries over, and names to
		// delete, as over the whole one.
		pods := []corev1.Pod{}
		for _, n := range []string{"a", "b", "c", "d"} {
			pods = append(pods, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: whole.Name + "-cpu-worker-" + n,
				Labels: map[string]string{"ray.io/node-type": "worker", "ray.io/group": "cpu"}}})
		}
		c.Replicas = map[string]int{"cpu": 1} // a lower ceiling
		applied := func(cur *rayv1.RayCluster) *rayv1.RayCluster {
			rc, err := kube.RenderRayCluster(c, kube.RenderOptions{})
			if err != nil {
				t.Fatal(err)
			}
			kube.CarryOver(rc, cur)
			kube.NameSurplus(rc, pods)
			return rc
		}
		if a, b := applied(whole), applied(slim); !reflect.DeepEqual(a, b) {
			t.Errorf("token %v: an apply over the whole and over the slim RayCluster differ:\n%+v\n%+v", token, a.Spec.WorkerGroupSpecs, b.Spec.WorkerGroupSpecs)
		}
	}
}
