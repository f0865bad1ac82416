package e2e_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/quota"
)

// A deleted cluster's hold goes once its pods are gone, not once its
// RayCluster is: Kubernetes' garbage collector (the real one, in the loop)
// deletes the pods after it, and each takes its termination grace — here a
// finalizer holds them, as a node that has not yet confirmed them stopped.
// Before, the hold was released as soon as the RayCluster was gone, while
// its pods still ran: quota another start could take.
func TestDeleteWaitsForItsPods(t *testing.T) {
	s := newScene(t, kube.Options{})
	cl := s.cluster("lingering", true)
	held := s.reserved()
	if held.IsZero() {
		t.Fatal("a running cluster holds nothing")
	}
	admin := s.w.cp.Client()
	pods := func() []corev1.Pod {
		var l corev1.PodList
		if err := admin.List(s.ctx, &l, client.InNamespace(s.ns), client.MatchingLabels{kube.KeyClusterID: cl.ID}); err != nil {
			t.Fatal(err)
		}
		return l.Items
	}
	const linger = "dlctest.aidlc.io/linger"
	release := func() {
		for _, p := range pods() {
			if i := slices.Index(p.Finalizers, linger); i >= 0 {
				orig := p.DeepCopy()
				p.Finalizers = slices.Delete(p.Finalizers, i, i+1)
				if err := admin.Patch(s.ctx, &p, client.MergeFrom(orig)); err != nil {
					t.Error(err)
				}
			}
		}
	}
	defer release()
	running := pods()
	if len(running) != 3 {
		t.Fatalf("%d pods, want the head and two workers", len(running))
	}
	for _, p := range running {
		orig := p.DeepCopy()
		p.Finalizers = append(p.Finalizers, linger)
		if err := admin.Patch(s.ctx, &p, client.MergeFrom(orig)); err != nil {
			t.Fatal(err)
		}
	}

	// The deleting client alone, with a short step time: its delete says
	// soon that it still waits.
	_ = s.c.Close()
	d := newClient(t, s.w.backend(t, kube.Options{Namespace: s.ns}), dlc.WithStepTimeout(time.Second))
	reserved := func() quota.Resources {
		u, err := d.ResourceGroups().Get(s.ctx, "rg")
		if err != nil {
			t.Fatal(err)
		}
		return u.Reserved
	}
	if err := d.Clusters().Delete(s.ctx, cl.ID, dlc.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the RayCluster gone, its pods deleted but still there", func() (bool, string) {
		left := pods()
		deleted := 0
		for _, p := range left {
			if p.DeletionTimestamp != nil {
				deleted++
			}
		}
		n := len(s.rayClusters(cl.ID))
		return n == 0 && len(left) == 3 && deleted == 3, strings.Repeat("RayCluster ", n) + strings.Repeat("pod ", len(left)-deleted)
	})
	waitFor(t, "the delete saying that it waits", func() (bool, string) {
		got, err := d.Clusters().Get(s.ctx, cl.ID)
		if err != nil {
			return false, err.Error()
		}
		return got.State == cluster.Deleting && strings.Contains(got.Reason, "still waiting"), string(got.State) + " " + got.Reason
	})
	if got := reserved(); got != held {
		t.Fatalf("the group reserves %s while the deleted cluster's pods are still being deleted, want its hold %s kept", got, held)
	}

	release()
	waitFor(t, "the cluster gone and its hold released", func() (bool, string) {
		_, err := d.Clusters().Get(s.ctx, cl.ID)
		r := reserved()
		return errs.IsNotFound(err) && r.IsZero(), "reserved " + r.String()
	})
}
