package cluster_test

import (
	"errors"
	"testing"

	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
)

func TestTransition(t *testing.T) {
	for _, tc := range []struct {
		from    cluster.State
		t       cluster.Trigger
		to      cluster.State
		ok      bool
		refused bool
	}{
		{cluster.Gone, cluster.Create, cluster.Creating, true, false},
		{cluster.Gone, cluster.CreateOnDemand, cluster.Starting, true, false},
		{cluster.Gone, cluster.ObservedReady, cluster.Gone, false, false},
		// A stored cluster whose state was edited away can still be deleted.
		{cluster.Gone, cluster.ForceDelete, cluster.Deleting, true, false},
		{cluster.Created, cluster.Create, cluster.Created, false, false},
		{cluster.Creating, cluster.ObservedSuspended, cluster.Created, true, false},
		{cluster.Created, cluster.Trigger(cluster.OpStart), cluster.Starting, true, false},
		{cluster.Creating, cluster.Trigger(cluster.OpStart), cluster.Creating, false, true},
		{cluster.Starting, cluster.ObservedReady, cluster.Running, true, false},
		{cluster.Running, cluster.Trigger(cluster.OpHibernate), cluster.Hibernating, true, false},
		{cluster.Hibernating, cluster.ObservedSuspended, cluster.Hibernated, true, false},
		{cluster.Starting, cluster.StepFailed, cluster.Abnormal, true, false},
		{cluster.Starting, cluster.ForceDelete, cluster.Deleting, true, false},
		{cluster.Deleting, cluster.ObservedGone, cluster.Gone, true, false},
		// Abnormal is not a sink: Ray's observation at the stored
		// generation takes the cluster to what Ray runs.
		{cluster.Abnormal, cluster.ObservedReady, cluster.Running, true, false},
		{cluster.Abnormal, cluster.ObservedSuspended, cluster.Hibernated, true, false},
		{cluster.Abnormal, cluster.ObservedUnstarted, cluster.Created, true, false},
		{cluster.Abnormal, cluster.ObservedFailed, cluster.Abnormal, false, false},
		{cluster.Creating, cluster.ObservedUnstarted, cluster.Creating, false, false},
		{cluster.Hibernating, cluster.ObservedReady, cluster.Hibernating, false, false},
	} {
		to, ok, err := cluster.Transition("c", tc.from, tc.t)
		if to != tc.to || ok != tc.ok || (err != nil) != tc.refused || (err != nil && !errors.Is(err, errs.ErrState)) {
			t.Errorf("%q on %s = %q %v %v, want %q %v refused=%v", tc.from, tc.t, to, ok, err, tc.to, tc.ok, tc.refused)
		}
	}
}

// An observation moves a cluster only at the generation it is stored at:
// a stale "ready" never moves a starting cluster.
func TestObservationTrigger(t *testing.T) {
	for _, tc := range []struct {
		obs  cluster.Observation
		gen  int64
		want cluster.Trigger
	}{
		{cluster.Observation{Generation: 2, Phase: cluster.PhaseReady}, 2, cluster.ObservedReady},
		{cluster.Observation{Generation: 1, Phase: cluster.PhaseReady}, 2, ""},
		{cluster.Observation{Generation: 2, Phase: cluster.PhaseSuspended}, 2, cluster.ObservedSuspended},
		{cluster.Observation{Generation: 2, Phase: cluster.PhaseFailed}, 2, cluster.ObservedFailed},
		{cluster.Observation{Generation: 2, Phase: cluster.PhasePending}, 2, ""},
	} {
		if got := tc.obs.Trigger(tc.gen); got != tc.want {
			t.Errorf("%+v at generation %d: %q, want %q", tc.obs, tc.gen, got, tc.want)
		}
	}
}
