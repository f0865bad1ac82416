package kubetest_test

import (
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidlc/dlc/dlctest/kubetest"
)

// waitFor polls cond every 20 ms until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v, still waiting for %s: %s", d, what, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestKubeRayAndKubelet runs a RayCluster through KubeRay's reconciler and
// the kubelet stand-in: pods appear, run, and the cluster becomes ready; a
// failed pod is reported by the stand-in as a kubelet would.
func TestKubeRayAndKubelet(t *testing.T) {
	cp := kubetest.StartControlPlane(t)
	ns := cp.NewNamespace(t)
	began := time.Now()
	kr := cp.StartKubeRay(t, kubetest.KubeRayOptions{Namespaces: []string{ns}})
	kubelet := cp.StartKubelet(t, ns)
	t.Logf("KubeRay and kubelet up in %v", time.Since(began).Round(time.Millisecond))
	c := cp.Client()

	rc := &rayv1.RayCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "loop", Namespace: ns},
		Spec: rayv1.RayClusterSpec{
			HeadGroupSpec:    headGroup(),
			WorkerGroupSpecs: []rayv1.WorkerGroupSpec{workerGroup("small", ptr.To[int32](2), ptr.To[int32](2))},
		},
	}
	began = time.Now()
	if err := c.Create(ctx(t), rc); err != nil {
		t.Fatalf("Create: %v", err)
	}
	waitFor(t, 20*time.Second, "a ready cluster", func() (bool, string) {
		var got rayv1.RayCluster
		if err := c.Get(ctx(t), client.ObjectKeyFromObject(rc), &got); err != nil {
			return false, err.Error()
		}
		state := got.Status.State //lint:ignore SA1019 KubeRay still sets State; the test checks it agrees with the conditions
		return state == rayv1.Ready &&
				meta.IsStatusConditionTrue(got.Status.Conditions, string(rayv1.HeadPodReady)),
			string(state)
	})
	t.Logf("ready in %v", time.Since(began).Round(time.Millisecond))

	var pods corev1.PodList
	if err := c.List(ctx(t), &pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 3 {
		t.Fatalf("%d pods, want 3", len(pods.Items))
	}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
			t.Errorf("pod %s: phase %s, ip %q", p.Name, p.Status.Phase, p.Status.PodIP)
		}
	}
	// The operator's client reads one cluster's pods and Services from an
	// index; what it answers is what a label selector selects.
	for _, tc := range []struct {
		list   client.ObjectList
		labels client.MatchingLabels
		want   int
	}{
		{&corev1.PodList{}, client.MatchingLabels{"ray.io/cluster": "loop"}, 3},
		{&corev1.PodList{}, client.MatchingLabels{"ray.io/cluster": "loop", "ray.io/node-type": "head"}, 1},
		{&corev1.PodList{}, client.MatchingLabels{"ray.io/cluster": "other"}, 0},
		{&corev1.PodList{}, client.MatchingLabels{"ray.io/node-type": "worker"}, 2},
		{&corev1.ServiceList{}, client.MatchingLabels{"ray.io/cluster": "loop", "ray.io/node-type": "head"}, 1},
	} {
		if err := kr.Manager.GetClient().List(ctx(t), tc.list, client.InNamespace(ns), tc.labels); err != nil {
			t.Fatalf("operator's List %T %v: %v", tc.list, tc.labels, err)
		}
		if n := meta.LenList(tc.list); n != tc.want {
			t.Errorf("operator's List %T %v: %d items, want %d", tc.list, tc.labels, n, tc.want)
		}
	}
	if kubelet.Marked() < 3 {
		t.Errorf("Marked() = %d, want at least 3", kubelet.Marked())
	}
	if err := kubelet.Fail(ns, "no-such-pod", "Error"); err == nil {
		t.Errorf("Fail of a missing pod: no error")
	}
}

// TestKubeRayRunsRayJob runs a RayJob through KubeRay's RayJob reconciler:
// it creates the RayCluster, which becomes ready on the kubelet stand-in,
// and submits the entrypoint (HTTPMode) to the Ray head stand-in, which runs
// it; the RayJob completes with the job's status.
func TestKubeRayRunsRayJob(t *testing.T) {
	cp := kubetest.StartControlPlane(t)
	ns := cp.NewNamespace(t)
	head := kubetest.NewRayHead(t, kubetest.RayHeadOptions{})
	cp.StartKubeRay(t, kubetest.KubeRayOptions{
		Namespaces: []string{ns},
		Dashboard:  func(*rayv1.RayCluster) string { return head.URL },
	})
	cp.StartKubelet(t, ns)
	c := cp.Client()

	for _, tc := range []struct {
		name, entrypoint string
		want             rayv1.JobStatus
	}{
		{"succeeds", "echo hello from the stand-in", rayv1.JobStatusSucceeded},
		{"fails", "echo broken >&2; exit 3", rayv1.JobStatusFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			job := &rayv1.RayJob{
				ObjectMeta: metav1.ObjectMeta{Name: tc.name, Namespace: ns},
				Spec: rayv1.RayJobSpec{
					Entrypoint:     tc.entrypoint,
					SubmissionMode: rayv1.HTTPMode,
					RayClusterSpec: &rayv1.RayClusterSpec{
						HeadGroupSpec:    headGroup(),
						WorkerGroupSpecs: []rayv1.WorkerGroupSpec{workerGroup("small", ptr.To[int32](1), ptr.To[int32](1))},
					},
				},
			}
			began := time.Now()
			if err := c.Create(ctx(t), job); err != nil {
				t.Fatalf("Create: %v", err)
			}
			waitFor(t, 30*time.Second, "the job to end", func() (bool, string) {
				var got rayv1.RayJob
				if err := c.Get(ctx(t), client.ObjectKeyFromObject(job), &got); err != nil {
					return false, err.Error()
				}
				return rayv1.IsJobTerminal(got.Status.JobStatus) &&
						got.Status.JobDeploymentStatus == rayv1.JobDeploymentStatusComplete ||
						got.Status.JobDeploymentStatus == rayv1.JobDeploymentStatusFailed,
					string(got.Status.JobDeploymentStatus) + " " + string(got.Status.JobStatus) + " " + got.Status.Message
			})
			var got rayv1.RayJob
			if err := c.Get(ctx(t), client.ObjectKeyFromObject(job), &got); err != nil {
				t.Fatal(err)
			}
			if got.Status.JobStatus != tc.want {
				t.Errorf("job status %s (%s), want %s", got.Status.JobStatus, got.Status.Message, tc.want)
			}
			t.Logf("timing: RayJob created → %s/%s in %v", got.Status.JobDeploymentStatus, got.Status.JobStatus,
				time.Since(began).Round(time.Millisecond))
		})
	}
}

// A deleted pod of a namespace that lingers keeps running, bound to the
// stand-in's node, until its time is up or Linger is undone; elsewhere, and
// by default, it goes at once.
func TestKubeletLinger(t *testing.T) {
	cp := kubetest.StartControlPlane(t)
	ns := cp.NewNamespace(t)
	kubelet := cp.StartKubelet(t, ns)
	c := cp.Client()
	pod := func(name string) *corev1.Pod {
		t.Helper()
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		if err := c.Create(ctx(t), p); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 20*time.Second, name+" running", func() (bool, string) {
			if err := c.Get(ctx(t), client.ObjectKeyFromObject(p), p); err != nil {
				return false, err.Error()
			}
			return p.Status.Phase == corev1.PodRunning, string(p.Status.Phase)
		})
		return p
	}
	gone := func(p *corev1.Pod) (bool, string) {
		err := c.Get(ctx(t), client.ObjectKeyFromObject(p), &corev1.Pod{})
		if err == nil {
			return false, "still there"
		}
		return client.IgnoreNotFound(err) == nil, err.Error()
	}

	plain := pod("plain") // no linger: never bound, deleted at once
	if plain.Spec.NodeName != "" {
		t.Fatalf("a pod of a namespace that does not linger is bound to %q", plain.Spec.NodeName)
	}
	if err := c.Delete(ctx(t), plain); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "plain gone", func() (bool, string) { return gone(plain) })

	undo := kubelet.Linger(ns, time.Hour)
	slow := pod("slow")
	if slow.Spec.NodeName != kubetest.KubeletNode {
		t.Fatalf("a pod of a lingering namespace is bound to %q, want %q", slow.Spec.NodeName, kubetest.KubeletNode)
	}
	if err := c.Delete(ctx(t), slow); err != nil {
		t.Fatal(err)
	}
	// Deleted and still running: the stand-in has seen the delete (its
	// informer brings the deletionTimestamp) and left it.
	waitFor(t, 20*time.Second, "slow deleting", func() (bool, string) {
		var p corev1.Pod
		if err := c.Get(ctx(t), client.ObjectKeyFromObject(slow), &p); err != nil {
			return false, err.Error()
		}
		return p.DeletionTimestamp != nil && p.Status.Phase == corev1.PodRunning, string(p.Status.Phase)
	})
	if ok, _ := gone(slow); ok {
		t.Fatal("a lingering pod went before its time")
	}
	undo()
	waitFor(t, 20*time.Second, "slow gone once undone", func() (bool, string) { return gone(slow) })

	defer kubelet.Linger(ns, 300*time.Millisecond)()
	brief := pod("brief")
	if err := c.Delete(ctx(t), brief); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "brief gone after its linger", func() (bool, string) { return gone(brief) })
}
