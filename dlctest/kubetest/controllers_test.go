package kubetest_test

import (
	"strings"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidlc/dlc/dlctest/kubetest"
)

// TestControllers runs the real ResourceQuota controller and garbage
// collector in the Ray loop. The API server refuses, by its quota
// admission, a pod of a namespace past its ResourceQuota, whoever writes it
// (here the administrator, then KubeRay, whose worker past the quota is
// never made); and once a RayCluster is deleted, its pods, which KubeRay
// made with it as their owner, are deleted by the garbage collector and
// finished by the kubelet stand-in, as on a real cluster (before, they
// stayed until the control plane stopped).
func TestControllers(t *testing.T) {
	cp := kubetest.StartControlPlane(t)
	ns := cp.NewNamespace(t)
	loop := cp.StartRayLoop(t, kubetest.LoopOptions{Namespaces: []string{ns}})
	if loop.Controllers == nil || cp.StartControllers(t) != loop.Controllers {
		t.Fatal("the loop's controllers are not the control plane's one process")
	}
	c := cp.Client()

	// Room for the head and one worker (headGroup and workerGroup request
	// what their containers do; see below), not for a second worker.
	rc := &rayv1.RayCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "quota", Namespace: ns},
		Spec: rayv1.RayClusterSpec{
			HeadGroupSpec:    headGroup(),
			WorkerGroupSpecs: []rayv1.WorkerGroupSpec{workerGroup("small", ptr.To[int32](2), ptr.To[int32](2))},
		},
	}
	head := rc.Spec.HeadGroupSpec.Template.Spec.Containers[0].Resources.Requests.Cpu().DeepCopy()
	worker := rc.Spec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Resources.Requests.Cpu().DeepCopy()
	if head.IsZero() || worker.IsZero() {
		t.Fatalf("the fixtures request no CPU (head %s, worker %s): the quota would count nothing", &head, &worker)
	}
	hard := head.DeepCopy()
	hard.Add(worker)
	rq := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "rg", Namespace: ns},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceRequestsCPU: hard}}}
	if err := c.Create(ctx(t), rq); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the quota's status", func() (bool, string) {
		err := c.Get(ctx(t), client.ObjectKeyFromObject(rq), rq)
		return err == nil && rq.Status.Hard != nil, "no status"
	})

	// A pod past the quota, from any writer, is refused by the API server.
	big := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000")}}}}}}
	if err := c.Create(ctx(t), big, client.DryRunAll); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "exceeded quota") {
		t.Fatalf("a pod past the quota: %v, want exceeded quota", err)
	}

	// KubeRay makes the head and one worker; the second worker is refused.
	if err := c.Create(ctx(t), rc); err != nil {
		t.Fatal(err)
	}
	pods := func() []corev1.Pod {
		var l corev1.PodList
		if err := c.List(ctx(t), &l, client.InNamespace(ns), client.MatchingLabels{"ray.io/cluster": rc.Name}); err != nil {
			t.Fatal(err)
		}
		return l.Items
	}
	waitFor(t, 30*time.Second, "the head and a worker, and the quota used up", func() (bool, string) {
		if err := c.Get(ctx(t), client.ObjectKeyFromObject(rq), rq); err != nil {
			return false, err.Error()
		}
		used := rq.Status.Used[corev1.ResourceRequestsCPU]
		return len(pods()) == 2 && used.Cmp(hard) == 0, "used " + used.String()
	})
	var events corev1.EventList
	waitFor(t, 30*time.Second, "KubeRay's event of the refused worker", func() (bool, string) {
		if err := c.List(ctx(t), &events, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == rc.Name && strings.Contains(e.Message, "exceeded quota") {
				return true, ""
			}
		}
		return false, "none yet"
	})
	if n := len(pods()); n != 2 {
		t.Fatalf("%d pods past a quota with room for 2", n)
	}

	// Deleted, the RayCluster's pods go with it: the garbage collector.
	if err := c.Delete(ctx(t), rc); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the pods of the deleted RayCluster gone", func() (bool, string) {
		n := len(pods())
		return n == 0, strings.Repeat("pod ", n)
	})
	waitFor(t, 30*time.Second, "the quota released", func() (bool, string) {
		if err := c.Get(ctx(t), client.ObjectKeyFromObject(rq), rq); err != nil {
			return false, err.Error()
		}
		used := rq.Status.Used[corev1.ResourceRequestsCPU]
		return used.IsZero(), "used " + used.String()
	})
}
