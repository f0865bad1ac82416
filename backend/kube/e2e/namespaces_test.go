package e2e_test

import (
	"fmt"
	"maps"
	"testing"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/backend/kube/api/v1alpha1"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
)

// A resource group mapped to a namespace of its own (kube.Options.
// GroupNamespaces) has its Ray side there: a cluster's RayCluster and
// pods, an on-demand run's RayJob, its RayCluster and pods; none in the
// backend's namespace or the other group's, where the SDK's own objects
// stay. The backend runs as its ServiceAccount with config/rbac's Role in
// its namespace and config/rbac/group's in each group's. Runs on both
// succeed, through the Jobs API and through KubeRay;
// the cluster's delete removes its RayCluster there (no owner reference
// crosses namespaces) and releases its hold once its pods are gone.
// RayClusters another group's editors make with the cluster's id in their
// namespace are not taken for the cluster's.
func TestGroupNamespaces(t *testing.T) {
	w := getWorld(t)
	nsA, nsB := w.cp.NewNamespace(t), w.cp.NewNamespace(t)
	s := newScene(t, kube.Options{GroupNamespaces: map[string]string{"rg": nsA, "rg-b": nsB}})
	// Room for the forged RayClusters' pods below (24 cores): each group's
	// namespace has a ResourceQuota of its capacity.
	if _, err := s.c.ResourceGroups().Register(s.ctx, quota.Group{ID: "rg-b", Package: "pkg-1",
		Capacity: quota.Resources{MilliCPU: 48000, Memory: 192 * quota.GiB}}); err != nil {
		t.Fatal(err)
	}
	admin := w.cp.Client()
	s.asServiceAccount(nsA, nsB)
	count := func(list client.ObjectList, ns string, labels client.MatchingLabels) int {
		t.Helper()
		if err := admin.List(s.ctx, list, client.InNamespace(ns), labels); err != nil {
			t.Fatal(err)
		}
		switch l := list.(type) {
		case *rayv1.RayClusterList:
			return len(l.Items)
		case *rayv1.RayJobList:
			return len(l.Items)
		case *corev1.PodList:
			return len(l.Items)
		}
		t.Fatalf("%T", list)
		return 0
	}

	cl := s.cluster("in_its_namespace", true)
	byCluster := client.MatchingLabels{kube.KeyClusterID: cl.ID}
	for ns, want := range map[string]int{nsA: 1, s.ns: 0, nsB: 0} {
		if n := count(&rayv1.RayClusterList{}, ns, byCluster); n != want {
			t.Errorf("%d RayClusters of the cluster in namespace %s, want %d", n, ns, want)
		}
	}
	if n := count(&corev1.PodList{}, nsA, byCluster); n != 3 {
		t.Errorf("%d pods of the cluster in its group's namespace, want 3", n)
	}
	var rc rayv1.RayCluster
	if err := admin.Get(s.ctx, client.ObjectKey{Namespace: nsA, Name: kube.RayClusterName(cl.ID)}, &rc); err != nil {
		t.Fatal(err)
	}
	if len(rc.OwnerReferences) != 0 {
		t.Errorf("owner references across namespaces %v: the garbage collector would delete the RayCluster", rc.OwnerReferences)
	}

	// Another group's editors make RayClusters with this cluster's id in
	// their namespace, one labelled with its group, one with their own;
	// KubeRay runs their pods. Neither is taken for the cluster's: its
	// pods, its head and its hold stay its own.
	before, err := s.c.Clusters().Details(s.ctx, cl.ID)
	if err != nil {
		t.Fatal(err)
	}
	for i, rg := range []string{"rg", "rg-b"} {
		forged := rc.DeepCopy()
		forged.ObjectMeta = metav1.ObjectMeta{Name: rc.Name, Namespace: nsB, Labels: maps.Clone(rc.Labels), Annotations: maps.Clone(rc.Annotations)}
		if i == 1 {
			forged.Name = rc.Name + "-b"
		}
		forged.Labels[kube.KeyResourceGroup] = rg
		forged.Spec.Suspend = nil
		if err := admin.Create(s.ctx, forged); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = admin.Delete(s.ctx, forged) }()
	}
	waitFor(t, "the forged RayClusters' pods in rg-b's namespace", func() (bool, string) {
		n := count(&corev1.PodList{}, nsB, byCluster)
		return n == 6, fmt.Sprint(n, " pods")
	})
	after, err := s.c.Clusters().Details(s.ctx, cl.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Pods) != 3 || after.Dashboard != before.Dashboard || after.Resources != before.Resources {
		t.Fatalf("with forged RayClusters in another group's namespace: %d pods, dashboard %q (was %q), resources %s (was %s)",
			len(after.Pods), after.Dashboard, before.Dashboard, after.Resources, before.Resources)
	}
	if got := s.reserved(); got.MilliCPU != 12000 {
		t.Fatalf("the group reserves %s with forged pods in another namespace, want the cluster's 12 cores", got)
	}

	onCluster := s.run(dlc.NewJob("on-the-cluster").OnCluster(cl.ID).COSPackage("cos://jobs-1250000000/slow.zip").Entrypoint("python main.py"))
	onDemand := s.run(dlc.NewJob("on-demand-in-b").OnDemand("pkg-1", "rg-b").Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1).COSPackage("cos://jobs-1250000000/slow.zip").Entrypoint("python main.py"))
	waitFor(t, "the on-demand run's RayJob in rg-b's namespace", func() (bool, string) {
		n := count(&rayv1.RayJobList{}, nsB, client.MatchingLabels{kube.KeyRunID: onDemand.ID})
		return n == 1, fmt.Sprint(n, " RayJobs")
	})
	for _, ns := range []string{s.ns, nsA} {
		if n := count(&rayv1.RayJobList{}, ns, client.MatchingLabels{kube.KeyRunID: onDemand.ID}); n != 0 {
			t.Errorf("%d RayJobs of the rg-b run in namespace %s", n, ns)
		}
	}
	for _, id := range []string{onCluster.ID, onDemand.ID} {
		if r := s.ended(s.c, id); r.State != job.Succeeded {
			t.Errorf("run %s: %s %q", id, r.State, r.Message)
		}
	}

	if err := s.c.Clusters().Delete(s.ctx, cl.ID, dlc.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the cluster gone, its RayCluster and pods too, its hold released", func() (bool, string) {
		_, err := s.c.Clusters().Get(s.ctx, cl.ID)
		rcs, pods := count(&rayv1.RayClusterList{}, nsA, byCluster), count(&corev1.PodList{}, nsA, byCluster)
		r := s.reserved()
		return errs.IsNotFound(err) && rcs == 0 && pods == 0 && r.IsZero(), fmt.Sprint(err, rcs, " RayClusters ", pods, " pods, reserved ", r)
	})
}

// A RayCluster in a group's namespace has no owner the garbage collector
// follows. One whose ComputeCluster was removed while no client ran (by
// hand, where dlc-store is not installed) is found when a client starts,
// and deleted; before, nothing looked at it until an event on it came.
func TestGroupNamespaceLeftoverRemovedAtStart(t *testing.T) {
	w := getWorld(t)
	nsA := w.cp.NewNamespace(t)
	s := newScene(t, kube.Options{GroupNamespaces: map[string]string{"rg": nsA}})
	cl := s.cluster("left_over", true)
	admin := w.cp.Client()
	rcKey := client.ObjectKey{Namespace: nsA, Name: kube.RayClusterName(cl.ID)}
	if err := admin.Get(s.ctx, rcKey, &rayv1.RayCluster{}); err != nil {
		t.Fatal(err)
	}
	_ = s.c.Close() // no client runs
	var cc v1alpha1.ComputeClusterList
	if err := admin.List(s.ctx, &cc, client.InNamespace(s.ns)); err != nil || len(cc.Items) != 1 {
		t.Fatalf("ComputeClusters: %d, %v", len(cc.Items), err)
	}
	if err := admin.Delete(s.ctx, &cc.Items[0]); err != nil {
		t.Fatal(err)
	}
	o := s.o
	o.Namespace = s.ns
	newClient(t, w.backend(t, o))
	waitFor(t, "the leftover RayCluster deleted", func() (bool, string) {
		err := admin.Get(s.ctx, rcKey, &rayv1.RayCluster{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}
