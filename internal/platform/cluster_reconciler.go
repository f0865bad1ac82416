package platform

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/event"
	"github.com/aidlc/dlc/internal/runner"
	"github.com/aidlc/dlc/quota"
)

// clusterReconciler takes a cluster from its stored state to what Ray
// runs, and its reservation with it.
type clusterReconciler struct{ *Engine }

func (r clusterReconciler) Reconcile(ctx context.Context, id string) (runner.Result, error) {
	after, err := r.reconcileCluster(ctx, id)
	return runner.Result{After: after}, err
}

func (r clusterReconciler) GiveUp(ctx context.Context, id, why string) error {
	changed, err := r.stepFailed(ctx, id, why)
	if err == nil && !changed {
		// Nothing to fall back to (abnormal already, created, hibernated,
		// or gone): the steps go on, their backoff growing. Told nil, the
		// caller would start it again from its first delay.
		return runner.ErrRetry
	}
	return err
}

func (clusterReconciler) LogKey() string { return "cluster" }

// reconcileCluster takes a cluster one step towards its stored state:
// Ray follows the desired state at the cluster's generation, an
// observation of that generation moves the state on, quota is released
// once Ray has let the compute go, and the runs that depend on the
// cluster are queued to look again.
func (c clusterReconciler) reconcileCluster(ctx context.Context, id string) (again time.Duration, err error) {
	cl, err := c.clusters.getCluster(ctx, id)
	if errs.IsNotFound(err) {
		return 0, c.reconcileUnstored(ctx, id)
	}
	if err != nil {
		return 0, err
	}
	if claim, err := c.tidyCluster(ctx, cl); err != nil {
		return 0, err
	} else if claim > 0 {
		defer func() { again = sooner(again, claim) }()
	}
	if done, after, err := c.temporaryEnded(ctx, cl); done || err != nil {
		return after, err
	}
	switch cl.State {
	case cluster.Created, cluster.Hibernated:
		return 0, c.releaseHold(ctx, cl)
	case cluster.Abnormal:
		return 0, c.reconcileAbnormal(ctx, cl)
	case cluster.Deleting:
		return c.reconcileDelete(ctx, cl)
	}
	obs, err := c.ray.ClusterStatus(ctx, id)
	if err != nil && !errs.IsNotFound(err) {
		return 0, err
	}
	if err == nil && obs.Generation > cl.Generation {
		// Ray follows a newer generation than the cluster as read: this
		// read is behind the store (a cache, a step begun before another
		// replica's write), or someone else wrote Ray. Applying it would
		// take Ray back (a hibernated cluster started again, holding
		// nothing); the newer version, once seen, queues the cluster
		// again. But should Ray run more than is held, the hold covers it
		// (or the cluster says it cannot be).
		if cl.State == cluster.Running && cl.Live != nil {
			inRay := podRequests(obs.Pods)
			if a, _, aerr := cached[quota.Account](ctx, c.acc, kindResourceGroup, cl.Live.ResourceGroup); aerr == nil && !inRay.Fits(a.Held(cl.ID)) {
				return 0, c.trueUpHold(ctx, cl, &obs)
			}
		}
		return 0, c.fenceForeignGeneration(ctx, cl.ID, obs.Generation)
	}
	if errs.IsNotFound(err) || obs.Generation != cl.Generation {
		if cl.State == cluster.Starting {
			// Ray runs nothing of it (a start from created or hibernated).
			rayIdle := errs.IsNotFound(err) || obs.Phase == cluster.PhaseSuspended
			if held, err := c.startHeld(ctx, cl, rayIdle); err != nil || !held {
				return 0, err
			}
		}
		if err := c.ray.ApplyCluster(ctx, cl); err != nil {
			return 0, err
		}
		if obs, err = c.ray.ClusterStatus(ctx, id); err != nil && !errs.IsNotFound(err) {
			return 0, err
		}
	}
	t := obs.Trigger(cl.Generation)
	if _, ok, _ := cluster.Transition(id, cl.State, t); !ok {
		if cl.State == cluster.Running {
			return c.followRunning(ctx, cl, obs)
		}
		if err := c.noteRefused(ctx, cl, obs); err != nil {
			return 0, err
		}
		// Transitional: Ray will say when it is done; meanwhile the step has
		// a deadline on its progress, so that no cluster stays transitional
		// for ever.
		left, waits := c.stepLeft(cl, obs, !errs.IsNotFound(err))
		if left <= 0 {
			return 0, c.clusterStepFailed(ctx, id, "timed out: "+waits)
		}
		return left, nil
	}
	return 0, c.observedCluster(ctx, cl, t, obs)
}

// reconcileUnstored is the step of a cluster that is not stored: Ray said
// something of it (deleted while a late apply was on its way), and Ray
// must not keep it. What this client kept of it goes with the watch's
// delete (onChange).
func (c clusterReconciler) reconcileUnstored(ctx context.Context, id string) error {
	if _, err := c.ray.ClusterStatus(ctx, id); err == nil {
		c.o.log.Info("deleting a Ray cluster that is no longer stored", "cluster", id)
		return c.ray.DeleteCluster(ctx, id)
	} else if !errs.IsNotFound(err) {
		return err
	}
	return nil
}

// tidyCluster keeps what goes with a stored cluster whatever its state:
// its name claim (claim: when to look at it again, 0 for never), its
// groups, and its step's deadline, forgotten once its state has none.
func (c clusterReconciler) tidyCluster(ctx context.Context, cl *cluster.Cluster) (claim time.Duration, err error) {
	if claim, err = c.checkNameClaim(ctx, cl); err != nil {
		return 0, err
	}
	if err := c.groups.checkGroups(ctx, cl); err != nil {
		return 0, err
	}
	if !timedStep(cl.State) {
		c.notes.mu.Lock()
		delete(c.notes.steps, cl.ID)
		c.notes.mu.Unlock()
	}
	return claim, nil
}

// temporaryEnded takes care of an on-demand cluster whose run has ended,
// and reports whether the step is done (with when to look again). An
// on-demand cluster lives only as long as its run. The run's own cleanup
// deletes it as the run ends; this is for a cleanup that did not happen
// (its run is gone, or ended more than the repair grace ago), so that the
// two do not both write.
func (c clusterReconciler) temporaryEnded(ctx context.Context, cl *cluster.Cluster) (done bool, again time.Duration, err error) {
	if !cl.Temporary || cl.State == cluster.Deleting {
		return false, 0, nil
	}
	r, err := c.runs.getRun(ctx, cl.OwnerRun)
	if errs.IsNotFound(err) || (err == nil && !r.State.Live() && (r.RayDone || c.clock.Now().Sub(r.FinishedAt) >= c.o.grace)) {
		return true, 0, c.deleteTemporary(ctx, cl, "its run "+cl.OwnerRun+" has ended")
	}
	if err == nil && !r.State.Live() {
		return true, c.o.grace, nil // look again then, should the run's cleanup not have happened
	}
	return false, 0, nil
}

// startHeld reports whether starting cluster cl holds its reservation:
// reserve first, act second, never start what holds less quota than it
// runs. One whose reservation is gone and cannot be made again is deleted
// (on-demand) or fails its step (rayIdle: Ray runs nothing of it, so it
// needs no hold while it waits to be started again).
func (c clusterReconciler) startHeld(ctx context.Context, cl *cluster.Cluster, rayIdle bool) (bool, error) {
	held, err := c.holds(ctx, cl)
	if err != nil || held {
		return held, err
	}
	if cl.Temporary {
		return false, c.deleteTemporary(ctx, cl, "its reservation is gone and its resource group cannot make it again")
	}
	return false, c.clusterStepFailed(ctx, cl.ID, "its reservation in resource group "+cl.QuotaGroup+" is gone and the group cannot make it again; start it again",
		func(next *cluster.Cluster) {
			if rayIdle && next.Generation == cl.Generation {
				next.Live, next.Replicas, next.Draining = nil, nil, nil // it needs no hold while it waits to be started again
			}
		})
}

// followRunning is the step of a running cluster that Ray keeps at its
// generation: hibernated if idle, its ceilings following Ray's
// autoscaler, a quota refusal noted, and its hold made what it runs.
// A write brings the cluster back here.
func (c clusterReconciler) followRunning(ctx context.Context, cl *cluster.Cluster, obs cluster.Observation) (time.Duration, error) {
	idle, hibernated, err := c.hibernateIfIdle(ctx, cl)
	if err != nil || hibernated {
		return 0, err
	}
	again, wrote, err := c.clusters.followAutoscaler(ctx, cl, obs.Autoscaled)
	if err != nil || wrote {
		return again, err
	}
	if err := c.noteRefused(ctx, cl, obs); err != nil {
		return 0, err
	}
	return sooner(again, idle), c.trueUpHold(ctx, cl, &obs)
}

// observedCluster moves cl on t, Ray's observation obs at its generation,
// and releases the hold of a cluster Ray runs nothing of any more.
func (c clusterReconciler) observedCluster(ctx context.Context, cl *cluster.Cluster, t cluster.Trigger, obs cluster.Observation) error {
	next := cl.DeepCopy()
	to, _, _ := advanceCluster(next, t)
	msg := ""
	switch to {
	case cluster.Running:
		msg = fmt.Sprintf("%d pods", len(obs.Pods))
		next.RunningSince = c.clock.Now()
	case cluster.Abnormal:
		next.Reason, msg = obs.Reason, obs.Reason
	case cluster.Hibernated:
		next.Live, next.Replicas, next.Draining, msg = nil, nil, nil, "compute released"
	case cluster.Created:
		next.Live, next.Replicas, next.Draining = nil, nil, nil
	}
	if cl.State == cluster.Abnormal && to != cluster.Abnormal {
		msg = strings.TrimPrefix(msg+"; ", "; ") + "Ray's cluster at generation " + fmt.Sprint(cl.Generation) + " is " + string(obs.Phase) + " after all (it was abnormal: " + cl.Reason + ")"
		next.Reason = ""
	}
	next.Events = event.Append(next.Events, c.event(ctx, "system", string(to), msg))
	if err := c.clusters.putCluster(ctx, next, cl.Version); err != nil {
		return err
	}
	if to == cluster.Hibernated || to == cluster.Created {
		return c.releaseHold(ctx, next)
	}
	return nil
}

// reconcileAbnormal follows an abnormal cluster's Ray side. Abnormal is
// not a sink: a step that timed out may still come (an operator's backlog
// outlasting the step timeout, a clock that jumped), a lost head may be
// replaced; Ray's observation at the cluster's generation then takes the
// cluster to what Ray runs. Until then its hold covers whatever Ray may
// still run of it.
func (c clusterReconciler) reconcileAbnormal(ctx context.Context, cl *cluster.Cluster) error {
	obs, err := c.ray.ClusterStatus(ctx, cl.ID)
	if err != nil && !errs.IsNotFound(err) {
		return err
	}
	if err == nil {
		t := obs.Trigger(cl.Generation)
		if t == cluster.ObservedSuspended && cl.QuotaGroup == "" && cl.Live == nil {
			t = cluster.ObservedUnstarted // it never started: it is created
		}
		// A cluster whose start never reached Ray (Live dropped) holds
		// nothing: Ray running it at its generation is a foreign write, for
		// the hold's true-up to refuse, not a start to accept.
		if _, ok, _ := cluster.Transition(cl.ID, cl.State, t); ok && (t != cluster.ObservedReady || cl.Live != nil) {
			return c.observedCluster(ctx, cl, t, obs)
		}
	}
	return c.trueUpHold(ctx, cl, nil)
}

// backlogFactor is how many step timeouts a step may wait while Ray has
// not yet taken its change up at all: an operator's backlog is no failure
// of the cluster (KubeRay took 25 minutes to bring 10,000 clusters up in
// its own scale test), but nothing may wait for ever.
const backlogFactor = 6

// timedStep reports whether a cluster in state s is on a step with a
// deadline (a delete has none: it has nowhere to fall back to, and
// retries, saying why).
func timedStep(s cluster.State) bool {
	return s == cluster.Creating || s == cluster.Starting || s == cluster.Hibernating
}

// stepSeen is a transitional cluster's step as this client last saw it: a
// digest of what Ray showed of it, and since when (on this client's
// clock) that has not changed.
type stepSeen struct {
	progress uint64
	since    time.Time
}

// stepLeft returns how long cl's step may still go on without progress,
// and what it has waited for, in words. obs is Ray's observation, found
// false when Ray has no such cluster (yet). Progress is any change of
// what Ray shows: the generation it follows, its phase, its pods. It is
// timed on this client's clock from when it first saw the step as it is,
// never from a stored date, so a jump of the wall clock or another
// replica's skew cannot fail a step, and a restart only lengthens it.
func (c clusterReconciler) stepLeft(cl *cluster.Cluster, obs cluster.Observation, found bool) (time.Duration, string) {
	queued := !found || obs.Queued
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%d/%v/%d/%s/%v/%s|", cl.State, cl.Generation, found, obs.Generation, obs.Phase, obs.Queued, obs.Reason)
	pods := make([]string, 0, len(obs.Pods))
	for _, p := range obs.Pods {
		pods = append(pods, p.Name+"="+p.Status)
	}
	slices.Sort(pods)
	for _, p := range pods {
		fmt.Fprintf(h, "%s|", p)
	}
	progress, now := h.Sum64(), c.clock.Now()
	c.notes.mu.Lock()
	s, ok := c.notes.steps[cl.ID]
	if !ok || s.progress != progress {
		s = stepSeen{progress, now}
		c.notes.steps[cl.ID] = s
	}
	c.notes.mu.Unlock()
	bound := c.o.stepTime
	waits := fmt.Sprintf("%s with no progress from Ray for more than %s", cl.State, bound)
	switch {
	case obs.Refused != "":
		bound *= backlogFactor
		waits = fmt.Sprintf("%s, and for %s: %s", cl.State, bound, obs.Refused)
	case queued:
		bound *= backlogFactor
		waits = fmt.Sprintf("%s, and Ray has not taken up generation %d in %s: is the operator (KubeRay) running?", cl.State, cl.Generation, bound)
	}
	return bound - now.Sub(s.since), waits
}

// noteRefused records on cl, once, that the platform under Ray refuses
// its nodes (obs.Refused: a Kubernetes ResourceQuota), as a quota
// discrepancy of its resource group (noteQuota, "quota-refused"): the
// cluster is not abnormal for it, it waits for room.
func (c clusterReconciler) noteRefused(ctx context.Context, cl *cluster.Cluster, obs cluster.Observation) error {
	if obs.Refused == "" || logged(cl.Events, "quota-refused", obs.Refused) {
		return nil
	}
	rg := cl.QuotaGroup
	if cl.Live != nil && cl.Live.ResourceGroup != "" {
		rg = cl.Live.ResourceGroup
	}
	return c.noteQuota(ctx, cl.ID, rg, "quota-refused", obs.Refused)
}

// reconcileDelete has Ray delete the cluster and, once it is gone,
// releases the quota, the name and the stored object, in that order.
func (c clusterReconciler) reconcileDelete(ctx context.Context, cl *cluster.Cluster) (time.Duration, error) {
	if err := c.ray.DeleteCluster(ctx, cl.ID); err != nil {
		return 0, err
	}
	_, err := c.ray.ClusterStatus(ctx, cl.ID)
	switch {
	case err == nil:
		// Ray says when it is gone; looked at again at the latest after a
		// step's time. Past that, the cluster says that Ray still has it:
		// the delete goes on (there is nothing to fall back to), but not
		// without a reason.
		if took := c.clock.Now().Sub(deletingSince(cl)); took >= c.o.stepTime {
			if err := c.noteDeleting(ctx, cl, fmt.Sprintf("Ray has not removed it %s after its delete; still waiting for Ray", c.o.stepTime)); err != nil {
				return 0, err
			}
		}
		return c.o.stepTime, nil
	case !errs.IsNotFound(err):
		return 0, err
	}
	if err := c.releaseHold(ctx, cl); err != nil {
		return 0, err
	}
	if !cl.Temporary {
		c.names.releaseName(ctx, kindCluster, cl.Spec.Name, cl.ID)
	}
	if err := c.store.Delete(ctx, kindCluster, cl.ID, cl.Version); err != nil && !errs.IsNotFound(err) {
		return 0, err
	} else if err == nil {
		noteWrite(ctx, kindCluster, cl.ID, "")
	}
	c.o.log.Info("cluster deleted", "cluster", cl.ID, "state", "gone", "from", string(cl.State))
	return 0, nil
}

// releaseHold drops the cluster's reservation, if it still has one.
func (c clusterReconciler) releaseHold(ctx context.Context, cl *cluster.Cluster) error {
	if cl.QuotaGroup == "" {
		return nil
	}
	_, err := c.ledger.changeAccount(ctx, cl.QuotaGroup, func(a *quota.Account) (bool, error) {
		return a.ReleaseUpTo(cl.ID, cl.Generation), nil // a newer start keeps its hold
	})
	if errs.IsNotFound(err) {
		return nil
	}
	return err
}

// trueUpHold makes a started cluster's reservation cover what it is to
// run and what Ray runs of it (a resize whose write failed may have left
// it otherwise): what it may run (cluster.Cluster.MayRun) with the pods of
// obs, Ray's observation, or nil when that is not known (an abnormal
// cluster): the hold is then never lowered, for Ray may still run the old
// size. So a scale-down's quota is given back only once Ray's pods have
// shrunk: when Ray follows the cluster's generation, the workers a lowered
// ceiling drains go down to what it runs first (drained), and the hold
// with them. A hold made for a newer generation than the cluster as read
// is a write on its way, and is left alone until it is older than the
// repair grace.
func (c clusterReconciler) trueUpHold(ctx context.Context, cl *cluster.Cluster, obs *cluster.Observation) error {
	if cl.Live == nil {
		return c.releaseHold(ctx, cl) // a start that never reached Ray
	}
	var pods []cluster.Pod
	if obs != nil {
		pods = obs.Pods
		var err error
		if cl, err = c.drained(ctx, cl, workersAt(*obs, cl.Generation)); err != nil || cl == nil {
			return err
		}
	}
	need, err := cl.MayRun(c.cat.Nodes, pods)
	if err != nil {
		return err
	}
	now := c.clock.Now()
	// target is what the hold is to be, given the one a holds.
	target := func(a *quota.Account) quota.Resources {
		if h, ok := a.Hold(cl.ID); ok && obs == nil {
			return need.Max(h.Resources)
		}
		return need
	}
	settled := func(a *quota.Account) bool {
		h, ok := a.Hold(cl.ID)
		return (ok && h.Resources == target(a)) || (ok && h.Generation > cl.Generation && c.ledger.holdAge(a.ID, cl.ID, h, now) < c.o.grace)
	}
	a, _, err := get[quota.Account](ctx, c.acc, kindResourceGroup, "resource group", cl.Live.ResourceGroup)
	if err != nil {
		return err
	}
	if settled(a) {
		return nil
	}
	if h, ok := a.Hold(cl.ID); ok && h.Generation > cl.Generation {
		// Made for a newer generation than the cluster as read, and older
		// than the grace: a resize or start whose cluster write has not
		// come. Fence that write off before the hold is changed, as the
		// repair does, or it could land later on a hold lowered under it;
		// the fenced cluster comes back here at the hold's generation.
		cur, err := c.clusters.getFresh(ctx, cl.ID)
		if err != nil || cur.Generation >= h.Generation {
			return ignoreNotFound(err) // it came, or the cluster went: its watch brings it back
		}
		_, err = c.clusters.fenceOff(ctx, cur, h.Generation, "quota-repair", fmt.Sprintf(
			"its reservation of %s in resource group %s was made for generation %d, whose write did not come within the repair grace (%s): that write is fenced off, and the reservation made what the cluster needs",
			h.Resources, cl.Live.ResourceGroup, h.Generation, c.o.grace))
		return err
	}
	changed := false
	_, err = c.ledger.changeAccount(ctx, cl.Live.ResourceGroup, func(a *quota.Account) (bool, error) {
		if h, ok := a.Hold(cl.ID); settled(a) || (ok && h.Generation > cl.Generation) {
			return false, nil // a newer generation's hold is changed only once fenced, above
		}
		ok, err := a.SetFor(cl.ID, target(a), cl.Generation, now)
		changed = ok
		return ok, err
	})
	if err == nil && changed {
		// The cluster was read before the reservation was written: a delete
		// or hibernate may have released its hold in between, and this
		// write put it back. Look at the cluster again, in the store, and
		// take back what was written for a cluster that no longer holds.
		cur, _, ferr := fresh[cluster.Cluster](ctx, c.acc, kindCluster, cl.ID)
		switch {
		case errs.IsNotFound(ferr) || (ferr == nil && !cur.State.HoldsQuota()):
			_, err = c.ledger.changeAccount(ctx, cl.Live.ResourceGroup, func(a *quota.Account) (bool, error) {
				if h, ok := a.Hold(cl.ID); ok && h.Generation == cl.Generation && h.Since.Equal(now) {
					return a.Release(cl.ID), nil
				}
				return false, nil
			})
		case ferr != nil:
			err = ferr
		}
	}
	if errors.Is(err, errs.ErrQuota) {
		// It runs more than its group can hold now: say so on the cluster
		// (CheckQuota lists it too), it cannot be fixed here.
		c.o.log.Error(err, "a running cluster's reservation is below what it runs", "cluster", cl.ID, "resourceGroup", cl.Live.ResourceGroup)
		return c.noteQuota(ctx, cl.ID, cl.Live.ResourceGroup, "quota-restore-failed", shortMessage(cl.Live.ResourceGroup, holdReport{cluster: cl.ID, need: need, err: err}))
	}
	return err
}

// drained lowers what cluster cl drains (cluster.Cluster.Draining) to
// what Ray runs of each worker group, workers, and writes it (a
// compare-and-swap of the cluster: nothing else changes), before its
// hold is lowered with it. workers is nil when Ray does not follow the
// cluster's generation: it may still apply an older, larger ceiling, and
// nothing drains. It returns the cluster as it is now, or nil when the
// write found it changed (its watch brings it back here).
func (c clusterReconciler) drained(ctx context.Context, cl *cluster.Cluster, workers map[string]int) (*cluster.Cluster, error) {
	if workers == nil || len(cl.Draining) == 0 {
		return cl, nil
	}
	left := drainLeft(cl, workers)
	if maps.Equal(left, cl.Draining) {
		return cl, nil
	}
	next := cl.DeepCopy()
	next.Draining = left
	switch err := c.clusters.putCluster(ctx, next, cl.Version); {
	case errors.Is(err, errs.ErrConflict) || errs.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return next, nil
}

// drainLeft is what cluster cl drains once Ray, following its
// generation, runs workers of each worker group: no more than those, and
// nothing of a group Ray runs no more of than its ceiling. Ray's report
// only lowers it (a report of more is pods someone else made, which the
// hold covers as they run, not as what the cluster may run).
func drainLeft(cl *cluster.Cluster, workers map[string]int) map[string]int {
	var left map[string]int
	for g, n := range cl.Draining {
		if runs := workers[g]; runs > cl.Replicas[g] {
			if left == nil {
				left = map[string]int{}
			}
			left[g] = min(n, runs)
		}
	}
	return left
}

// workersAt returns, per worker group, the workers Ray runs of a cluster
// whose observation is obs, when Ray follows generation gen and has taken
// it up; nil when it does not, or when its operator still has the change
// in its backlog (Observation.Queued: an on-demand cluster's generation
// is its RayJob's, which says nothing of whether KubeRay has reconciled
// the RayCluster's size): it may still apply an older ceiling.
func workersAt(obs cluster.Observation, gen int64) map[string]int {
	if obs.Generation != gen || obs.Queued {
		return nil
	}
	out := map[string]int{}
	for _, p := range obs.Pods {
		if p.Role == "worker" {
			out[p.Group]++
		}
	}
	return out
}

// clusterStepFailed turns a cluster whose background step kept failing
// abnormal, with why as the reason, and with the changes of also made
// to it. A deleting cluster has nowhere to fall back to: it records why
// (at most once per longest backoff: renote) and goes on retrying.
func (c clusterReconciler) clusterStepFailed(ctx context.Context, id, why string, also ...func(*cluster.Cluster)) error {
	_, err := c.stepFailed(ctx, id, why, also...)
	return err
}

// stepFailed is clusterStepFailed, reporting whether the cluster turned
// abnormal (false: it is gone, or a state that has nowhere to fall back
// to).
func (c clusterReconciler) stepFailed(ctx context.Context, id, why string, also ...func(*cluster.Cluster)) (bool, error) {
	for attempt := 0; ; attempt++ {
		cl, v, err := fresh[cluster.Cluster](ctx, c.acc, kindCluster, id)
		if errs.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		cl.Version = v
		next := cl.DeepCopy()
		if cl.State == cluster.Deleting {
			if err := c.noteDeleting(ctx, cl, why); err != nil {
				return false, err
			}
			return false, errors.New(why)
		}
		to, ok, _ := advanceCluster(next, cluster.StepFailed)
		if !ok {
			return false, nil
		}
		next.Reason = why
		for _, f := range also {
			f(next)
		}
		next.Events = event.Append(next.Events, c.event(ctx, "system", string(to), why))
		err = c.clusters.putCluster(ctx, next, v)
		if err == nil || !errors.Is(err, errs.ErrConflict) || attempt >= conflictRetries {
			return err == nil, err
		}
	}
}

// noteDeleting records on deleting cluster cl (as read, at cl.Version)
// why it is still there: its reason, and an entry of its log, said again
// at most once per longest backoff (renote). A conflict reads it again.
func (c clusterReconciler) noteDeleting(ctx context.Context, cl *cluster.Cluster, why string) error {
	for attempt := 0; ; attempt++ {
		events, write := renote(cl.Events, c.event(ctx, "system", "delete-retrying", why), c.o.maxDelay)
		if cl.State != cluster.Deleting || cl.Reason == why || !write {
			return nil
		}
		next := cl.DeepCopy()
		next.Reason, next.Events = why, events
		err := c.clusters.putCluster(ctx, next, cl.Version)
		if err == nil || !errors.Is(err, errs.ErrConflict) || attempt >= conflictRetries {
			return err
		}
		if cl, err = c.clusters.getFresh(ctx, cl.ID); errs.IsNotFound(err) {
			return nil
		} else if err != nil {
			return err
		}
	}
}

// deletingSince returns when a deleting cluster's delete was asked for:
// its log's last delete, or its last change when the log has none.
func deletingSince(cl *cluster.Cluster) time.Time {
	for i := len(cl.Events) - 1; i >= 0; i-- {
		if cl.Events[i].Action == "delete" {
			return cl.Events[i].Time
		}
	}
	return cl.UpdatedAt
}

// renote returns log with e said: appended, or, when the last event is one
// of e's action already, put in its place, but only once that one is
// older than every (the client's longest backoff) and says something
// else. A failure said again at every retry would write its object at
// every retry, and each write brings the object back to be stepped at
// once, past the backoff: with a cause whose words change each time (an
// ephemeral port, a request id), a loop; and the log would lose the rest
// of its history to it. It reports whether log changed.
func renote(log []event.Event, e event.Event, every time.Duration) ([]event.Event, bool) {
	if n := len(log); n > 0 && log[n-1].Action == e.Action {
		if last := log[n-1]; last.Message == e.Message || e.Time.Sub(last.Time) < every {
			return log, false
		}
		out := slices.Clone(log)
		out[n-1] = e
		return out, true
	}
	return event.Append(log, e), true
}

// clusterNotes is what this client remembers of each cluster between its
// steps, behind its own lock: the state its dependent runs were last
// queued for (enqueueDependents), until when its idle hibernate waits
// after a refusal (idle.go), and its transitional step as last seen
// (stepLeft). What it forgets is looked at anew; a deleted cluster's are
// forgotten on every client.
type clusterNotes struct {
	mu          sync.Mutex
	dependents  map[string]string
	idleRefused map[string]time.Time
	steps       map[string]stepSeen
}

func newClusterNotes() *clusterNotes {
	return &clusterNotes{dependents: map[string]string{}, idleRefused: map[string]time.Time{}, steps: map[string]stepSeen{}}
}

// forget forgets cluster id.
func (n *clusterNotes) forget(id string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.dependents, id)
	delete(n.idleRefused, id)
	delete(n.steps, id)
}

// enqueueDependents queues the runs that a change of cl may move: those
// waiting for it or for one of its groups, and those on it. It does so
// once per state and generation of the cluster that this client sees.
func (c *Engine) enqueueDependents(cl *cluster.Cluster) {
	seen := fmt.Sprintf("%s/%d/%s", cl.State, cl.Generation, strings.Join(cl.Spec.Groups, ","))
	c.notes.mu.Lock()
	same := c.notes.dependents[cl.ID] == seen
	c.notes.dependents[cl.ID] = seen
	c.notes.mu.Unlock()
	if same {
		return
	}
	c.enqueueRuns(map[string]string{labelOn: cl.ID, labelPhase: phaseActive})
	if cl.Temporary {
		return
	}
	c.enqueueRuns(map[string]string{labelTarget: targetCluster + cl.ID, labelPhase: phasePending})
	for _, g := range cl.Spec.Groups {
		c.enqueueRuns(map[string]string{labelTarget: targetGroup + g, labelPhase: phasePending})
	}
}

// holds reports whether the cluster's reservation on its resource group
// covers what it is to run. When the cache says it does not (it may be
// behind, or someone else removed or shrank the hold), what is missing is
// reserved by compare-and-swap, if the group can still allocate it: Ray
// is never asked for more compute than is held.
func (c clusterReconciler) holds(ctx context.Context, cl *cluster.Cluster) (bool, error) {
	if cl.Live == nil {
		return false, nil
	}
	now := c.clock.Now()
	if a, _, err := cached[quota.Account](ctx, c.acc, kindResourceGroup, cl.QuotaGroup); err == nil {
		if _, lacks := c.lacksHold(cl, a); !lacks {
			return true, nil
		}
	}
	_, err := c.ledger.changeAccount(ctx, cl.QuotaGroup, func(a *quota.Account) (bool, error) {
		need, lacks := c.lacksHold(cl, a)
		if !lacks {
			return false, nil
		}
		return a.SetFor(cl.ID, need, cl.Generation, now)
	})
	switch {
	case errs.IsNotFound(err), errors.Is(err, errs.ErrQuota):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

// deleteTemporary deletes an on-demand cluster, saying why.
func (c *Engine) deleteTemporary(ctx context.Context, cl *cluster.Cluster, why string) error {
	next := cl.DeepCopy()
	if _, _, err := advanceCluster(next, cluster.ForceDelete); err != nil {
		return err
	}
	next.Generation++
	next.Events = event.Append(next.Events, c.event(ctx, "system", "delete", why))
	return c.clusters.putCluster(ctx, next, cl.Version)
}

// podRequests is what the pods Ray reports request in all.
func podRequests(pods []cluster.Pod) quota.Resources {
	var sum quota.Resources
	for _, p := range pods {
		sum = sum.Add(p.Requests.Max(quota.Resources{}))
	}
	return sum
}

// maxForeignGeneration bounds the generation Ray may claim to follow
// that fenceForeignGeneration moves a cluster up to.
const maxForeignGeneration = math.MaxInt64 / 2

// fenceForeignGeneration is the cluster reconciler's step when Ray follows
// generation rayGen, newer than the cluster as read. A read behind the
// store is followed by the newer version, which queues the cluster again.
// But if the store itself is behind (the RayCluster written from outside
// the platform, a store restored from a backup), no version ever comes,
// and Ray, fenced against older generations, would never take the
// cluster's again: its generation is moved past Ray's (fenceOff, saying
// why), and the next step applies it. A generation past any the platform
// could reach is refused, as a failed step: retried, then recorded.
func (c clusterReconciler) fenceForeignGeneration(ctx context.Context, id string, rayGen int64) error {
	cur, err := c.clusters.getFresh(ctx, id)
	if err != nil || cur.Generation >= rayGen {
		return ignoreNotFound(err)
	}
	if rayGen >= maxForeignGeneration {
		return fmt.Errorf("cluster %s: Ray says it follows generation %d, which the platform never wrote and cannot pass: replace what Ray has of it (its RayCluster was written from outside the platform)", id, rayGen)
	}
	_, err = c.clusters.fenceOff(ctx, cur, rayGen+1, "generation-fenced", fmt.Sprintf(
		"Ray follows generation %d of it, which the platform never wrote (written outside it): generation %d takes Ray back to the cluster as stored", rayGen, rayGen+1))
	return err
}

// sooner returns the sooner of two "look again after" durations, where 0
// means never.
func sooner(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return b
	case b <= 0:
		return a
	}
	return min(a, b)
}
