package kube

import (
	"errors"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
)

// A provisioned RayCluster whose head is not ready is failed, unless it
// has GCS fault tolerance and the head went unready less than HeadTakeover
// ago: KubeRay is replacing the head, and the state waits in Redis.
func TestHeadTakeoverObservation(t *testing.T) {
	now := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	rcAt := func(ha bool, unready time.Duration) *rayv1.RayCluster {
		rc := &rayv1.RayCluster{Spec: rayv1.RayClusterSpec{Suspend: new(false)}}
		if ha {
			rc.Spec.GcsFaultToleranceOptions = &rayv1.GcsFaultToleranceOptions{RedisAddress: "redis:6379"}
		}
		rc.Status.Conditions = []metav1.Condition{
			{Type: string(rayv1.RayClusterProvisioned), Status: metav1.ConditionTrue},
			{Type: string(rayv1.HeadPodReady), Status: metav1.ConditionFalse, Reason: "HeadPodNotFound",
				LastTransitionTime: metav1.NewTime(now.Add(-unready))},
		}
		return rc
	}
	for _, tc := range []struct {
		name    string
		ha      bool
		unready time.Duration
		want    cluster.Phase
	}{
		{"no fault tolerance: failed at once", false, time.Second, cluster.PhaseFailed},
		{"fault tolerance, just replaced: pending", true, time.Second, cluster.PhasePending},
		{"fault tolerance, within the takeover: pending", true, HeadTakeover - time.Second, cluster.PhasePending},
		{"fault tolerance, past the takeover: failed", true, HeadTakeover, cluster.PhaseFailed},
		{"fault tolerance, dated a little ahead (clocks apart): pending", true, -headClockSkew, cluster.PhasePending},
		// A date nobody's clock writes would make the takeover endless.
		{"fault tolerance, dated a year ahead: failed", true, -365 * 24 * time.Hour, cluster.PhaseFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := rcAt(tc.ha, tc.unready)
			o := clusterObservation(rc, now)
			if o.Phase != tc.want {
				t.Errorf("phase %s (%s), want %s", o.Phase, o.Reason, tc.want)
			}
			until, ok := takeover(rc, now)
			if ok != (tc.want == cluster.PhasePending) || (ok && !until.Equal(now.Add(-tc.unready).Add(HeadTakeover))) {
				t.Errorf("takeover: until %v, %v", until, ok)
			}
		})
	}
	ready := rcAt(true, time.Second)
	ready.Status.Conditions[1].Status = metav1.ConditionTrue
	if o := clusterObservation(ready, now); o.Phase != cluster.PhaseReady {
		t.Errorf("a ready HA head: %s", o.Phase)
	}
	if _, ok := takeover(ready, now); ok {
		t.Error("a ready head is in a takeover")
	}
}

// A call not made because of a takeover is retried by the client's
// reconcilers without counting as a failed step: unavailable and busy.
func TestTakeoverErrorIsBusy(t *testing.T) {
	var err error = &takeoverError{cluster: "c-1"}
	var busy interface{ Busy() bool }
	if !errors.Is(err, errs.ErrUnavailable) || !errors.As(err, &busy) || !busy.Busy() {
		t.Errorf("%v: not a busy ErrUnavailable", err)
	}
}

// A RayCluster whose spec KubeRay has not reconciled yet (its
// status.observedGeneration behind metadata.generation: the operator's
// backlog) reads Queued, at no generation of ours; one it has reconciled
// reads the generation we wrote, not queued.
func TestObservationQueuedInBacklog(t *testing.T) {
	rc := &rayv1.RayCluster{Spec: rayv1.RayClusterSpec{Suspend: new(false)}}
	rc.Generation, rc.Annotations = 3, map[string]string{KeyGeneration: "7"}
	for _, tc := range []struct {
		observed int64
		queued   bool
		gen      int64
	}{
		{0, true, 0}, // never reconciled: a new RayCluster in the backlog
		{2, true, 0}, // an older spec reconciled, the newest not yet
		{3, false, 7},
	} {
		rc.Status.ObservedGeneration = tc.observed
		if o := clusterObservation(rc, time.Now()); o.Queued != tc.queued || o.Generation != tc.gen {
			t.Errorf("observedGeneration %d of 3: queued %v generation %d, want %v %d", tc.observed, o.Queued, o.Generation, tc.queued, tc.gen)
		}
	}
}

// KubeRay's work on a RayCluster is in its backlog also after it observed
// the spec: a suspension half made (Suspending, the second reconcile that
// says Suspended still queued), an unsuspended cluster's pods not made yet
// (no head pod), and pods all ready that its status does not say yet. All
// read Queued, so that a step waiting on them has the backlog's bound;
// pods on their way (pending, not ready), or a status that caught up, do
// not.
func TestObservationQueuedOnHalfDoneWork(t *testing.T) {
	cond := func(typ string, ok bool) metav1.Condition {
		c := metav1.Condition{Type: typ, Status: metav1.ConditionFalse}
		if ok {
			c.Status = metav1.ConditionTrue
		}
		return c
	}
	pod := func(name, role string, phase corev1.PodPhase, ready bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{rayLabelNodeType: role}},
			Status: corev1.PodStatus{Phase: phase}}
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}
		return p
	}
	head, worker := pod("h", "head", corev1.PodRunning, true), pod("w", "worker", corev1.PodRunning, true)
	for _, tc := range []struct {
		name    string
		suspend bool
		conds   []metav1.Condition
		pods    []corev1.Pod
		queued  bool
		phase   cluster.Phase
	}{
		{"suspending", true, []metav1.Condition{cond(string(rayv1.RayClusterSuspending), true)}, nil, true, cluster.PhasePending},
		{"suspended", true, []metav1.Condition{cond(string(rayv1.RayClusterSuspended), true)}, nil, false, cluster.PhaseSuspended},
		{"suspend, no condition yet", true, nil, nil, false, cluster.PhasePending},
		{"pods ready, status behind", false, nil, []corev1.Pod{head, worker}, true, cluster.PhasePending},
		{"pods ready, provisioned but head not said ready", false,
			[]metav1.Condition{cond(string(rayv1.RayClusterProvisioned), true), cond(string(rayv1.HeadPodReady), false)},
			[]corev1.Pod{head, worker}, true, cluster.PhaseFailed},
		{"a worker not ready", false, nil, []corev1.Pod{head, pod("w", "worker", corev1.PodRunning, false)}, false, cluster.PhasePending},
		{"a worker pending", false, nil, []corev1.Pod{head, pod("w", "worker", corev1.PodPending, false)}, false, cluster.PhasePending},
		{"workers only: no head made yet", false, nil, []corev1.Pod{worker}, true, cluster.PhasePending},
		{"no pods made yet", false, nil, nil, true, cluster.PhasePending},
		{"the head pending", false, nil, []corev1.Pod{pod("h", "head", corev1.PodPending, false)}, false, cluster.PhasePending},
		{"a head going, no other", false, nil, []corev1.Pod{func() corev1.Pod {
			p := head
			p.DeletionTimestamp = &metav1.Time{}
			return p
		}()}, true, cluster.PhasePending},
		{"ready", false, []metav1.Condition{cond(string(rayv1.RayClusterProvisioned), true), cond(string(rayv1.HeadPodReady), true)},
			[]corev1.Pod{head, worker}, false, cluster.PhaseReady},
	} {
		rc := &rayv1.RayCluster{Spec: rayv1.RayClusterSpec{Suspend: new(tc.suspend)}}
		rc.Generation, rc.Status.ObservedGeneration = 2, 2
		rc.Status.Conditions = tc.conds
		o := clusterObservation(rc, time.Now())
		queued := o.Queued || kubeRayOwes(rc, tc.pods)
		if queued != tc.queued || o.Phase != tc.phase {
			t.Errorf("%s: queued %v, phase %s; want %v, %s", tc.name, queued, o.Phase, tc.queued, tc.phase)
		}
	}
}
