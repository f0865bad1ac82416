package platform

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/event"
	"github.com/aidlc/dlc/internal/runner"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
	"github.com/aidlc/dlc/scheduler"
)

// runReconciler places, admits, submits, follows and cleans up a run.
type runReconciler struct{ *Engine }

func (r runReconciler) Reconcile(ctx context.Context, id string) (runner.Result, error) {
	after, err := r.reconcileRun(ctx, id)
	return runner.Result{After: after}, err
}

func (r runReconciler) GiveUp(ctx context.Context, id, why string) error {
	return r.runs.failRun(ctx, id, why)
}

func (runReconciler) LogKey() string { return "run" }

// reconcileRun takes a run one step on: place it, follow it on Ray, or
// release what an ended run still holds.
func (c runReconciler) reconcileRun(ctx context.Context, id string) (time.Duration, error) {
	r, err := c.runs.getRun(ctx, id)
	if errs.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	switch {
	case r.RayDone && !r.State.Live() && r.Retries() && r.NextAttempt == "":
		return c.retryRun(ctx, r)
	case r.RayDone && !r.State.Live():
		return c.retain(ctx, r) // deleted once its retention is up (retention.go)
	case !r.State.Live():
		return 0, c.cleanupRun(ctx, r)
	}
	// A live run with a deadline (L2) ends at it, whatever it waits for.
	var untilDeadline time.Duration
	if dl, ok := r.Deadline(); ok {
		now := c.clock.Now()
		if !now.Before(dl) {
			return 0, c.atDeadline(ctx, r, dl)
		}
		untilDeadline = dl.Sub(now)
	}
	if r.State == job.Queued || r.State == job.Waiting {
		return untilDeadline, c.placeRun(ctx, r)
	}
	untilStart, err := c.followRun(ctx, r)
	return sooner(untilDeadline, untilStart), err
}

// atDeadline ends live run r, whose deadline dl has come (L2). A run
// that Ray may have (placed on a cluster) is read on Ray first, for Ray's
// word decides: a job that ended before dl is recorded as Ray says (a
// success stays one); a job still going, or ended at or after dl, fails
// for the deadline, not retried (its cleanup stops it on Ray and releases
// its cluster). A run whose job Ray cannot tell of now keeps its state
// until Ray answers or stays unreachable past WithRayUnreachableTimeout
// (rayUnanswered).
func (c runReconciler) atDeadline(ctx context.Context, r *job.Run, dl time.Time) error {
	why := fmt.Sprintf("%s: not ended %ds after its submission", deadlineExceeded, r.Config.ActiveDeadlineSeconds)
	if r.ClusterID == "" || r.State == job.Queued || r.State == job.Waiting {
		return c.failAtDeadline(ctx, r, why)
	}
	obs, err := c.runStatus(ctx, r.ID)
	switch {
	case errs.IsNotFound(err):
		return c.failAtDeadline(ctx, r, why)
	case err != nil:
		_, err = c.rayUnanswered(ctx, r, err, why, true)
		return err
	}
	if obs.State.Terminal() && !obs.EndedAt.IsZero() && obs.EndedAt.Before(dl) {
		_, err := c.recordRay(ctx, r, obs)
		return err
	}
	return c.failAtDeadline(ctx, r, why)
}

// failAtDeadline fails r for its deadline (failFinally), and counts it
// when this call failed it.
func (c runReconciler) failAtDeadline(ctx context.Context, r *job.Run, why string) error {
	moved, err := c.failFinal(ctx, r, why)
	if moved {
		c.metrics.deadlineFailed()
	}
	return err
}

// runStatus asks Ray what it says of run id's job, within half the step's
// time, so that a call that hangs leaves the step time to record it
// (rayUnanswered); what it says is bounded, whatever the backend.
func (c runReconciler) runStatus(ctx context.Context, id string) (job.Observation, error) {
	cctx, cancel := context.WithTimeout(ctx, c.o.reconcileTime/2)
	defer cancel()
	obs, err := c.ray.RunStatus(cctx, id)
	return obs.Bounded(), err
}

// rayUnanswered handles a live run r whose job Ray could not be asked
// about now (cause: the read or the submit failed, which is no word of
// Ray's on the job). The run keeps its state: the first time, it records
// since when (RayUnreachableSince, on this client's clock) and says so in
// its message. Once that is more than WithRayUnreachableTimeout ago the
// run fails with why (final: not retried), Ray's silence said. Until
// then rayUnanswered returns an error that process retries with backoff
// and does not count as a failed step.
func (c runReconciler) rayUnanswered(ctx context.Context, r *job.Run, cause error, why string, final bool) (time.Duration, error) {
	if isBusy(cause) {
		return 0, cause // not made: the head was busy with another call (process retries it)
	}
	now := c.clock.Now()
	since := r.RayUnreachableSince
	if since.IsZero() {
		next := r.DeepCopy()
		next.RayUnreachableSince = now
		next.Message = fmt.Sprintf("Ray unreachable since %s: %s", now.UTC().Format(time.RFC3339), clipCause(cause))
		next.Events = event.Append(next.Events, c.event(ctx, "system", "ray-unreachable", next.Message))
		if err := c.runs.putRun(ctx, next, r.Version); err != nil {
			return 0, err
		}
		c.metrics.rayUnreachable("noted")
		return 0, unanswered{cause}
	}
	if now.Sub(since) < c.o.rayUnreachable {
		return 0, unanswered{cause}
	}
	msg := job.ClipMessage(fmt.Sprintf("%s: Ray unreachable since %s (more than %s): %s",
		why, since.UTC().Format(time.RFC3339), c.o.rayUnreachable, clipCause(cause)))
	var moved bool
	var err error
	if final {
		moved, err = c.failFinal(ctx, r, msg)
	} else {
		_, moved, err = c.runs.moveRun(ctx, r, job.Fail, msg, nil)
	}
	if moved {
		c.metrics.rayUnreachable("failed")
	}
	return 0, err
}

// clipCause is err's text, its end kept when it is long: what a head or
// a server answered may be quoted there, and the message keeps room for
// what the run says of it.
func clipCause(err error) string {
	const keep = 1 << 10
	s := err.Error()
	if len(s) <= keep {
		return s
	}
	start := len(s) - keep
	for start < len(s) && !utf8.RuneStart(s[start]) {
		start++
	}
	return "…" + s[start:]
}

// unanswered is a step that could not reach Ray about a run, which is no
// failure of the step's own: process retries it with backoff and does not
// count it (see rayUnanswered for the bound).
type unanswered struct{ err error }

func (u unanswered) Error() string { return "Ray unreachable: " + u.err.Error() }
func (u unanswered) Unwrap() error { return u.err }

// isUnanswered reports whether err says a step could not reach Ray.
func isUnanswered(err error) bool {
	var u unanswered
	return errors.As(err, &u)
}

// retryRun submits the next attempt of failed run r (L3) once its
// backoff is over: a new run of the same revision, whose id derives from
// r's, so that the retry is made once however many steps try; r then
// names it (NextAttempt). A config deleted meanwhile is not run again: r
// is marked Final, saying so.
func (c runReconciler) retryRun(ctx context.Context, r *job.Run) (time.Duration, error) {
	if now, at := c.clock.Now(), r.FinishedAt.Add(job.Backoff(r.AttemptNumber(), c.o.runRetryBase, c.o.runRetryMax)); now.Before(at) {
		return at.Sub(now), nil
	}
	// The store decides: a replica whose cache lags may hold an attempt
	// that has since named its retry, or been deleted with it by the
	// retention; made again from that copy, the retry would run twice.
	cur, err := c.runs.freshRun(ctx, r.ID)
	if errs.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if r = cur; r.NextAttempt != "" || !r.RayDone || r.State.Live() || !r.Retries() {
		return 0, nil // its watch brings it back as it is now
	}
	n := r.AttemptNumber() + 1
	total := r.Config.BackoffLimit + 1
	id := idFor("run", r.ID, "retry")
	retry, err := c.runs.createRun(ctx, r.JobID, id, true, &newRun{source: "system",
		why: fmt.Sprintf("attempt %d of %d, retrying run %s", n, total, r.ID),
		shape: func(nr *job.Run) {
			nr.Revision, nr.Config = r.Revision, *r.Config.DeepCopy()
			nr.Attempt, nr.PreviousAttempt, nr.Tick, nr.Creator = n, r.ID, r.Tick, r.Creator
		}})
	next := r.DeepCopy()
	switch {
	case errs.IsNotFound(err) || errors.Is(err, errs.ErrState):
		next.Final = true
		next.Events = event.Append(next.Events, c.event(ctx, "system", "not-retried", "its job config is deleted: "+err.Error()))
	case err != nil:
		return 0, err
	default:
		next.NextAttempt = retry.ID
		next.Events = event.Append(next.Events, c.event(ctx, "system", "retried",
			fmt.Sprintf("attempt %d of %d is run %s", n, total, retry.ID)))
	}
	if err := c.runs.putRun(ctx, next, r.Version); err != nil {
		return 0, err
	}
	if next.NextAttempt != "" {
		c.metrics.runRetried()
	}
	return 0, nil
}

// failFinally fails run r for a reason a retry would meet again (its
// target or config gone): it is not retried.
func (c runReconciler) failFinally(ctx context.Context, r *job.Run, why string) error {
	_, err := c.failFinal(ctx, r, why)
	return err
}

// failFinal is failFinally, saying whether this call failed the run (a
// run that ended meanwhile, through another replica or as Ray said, is
// not moved).
func (c runReconciler) failFinal(ctx context.Context, r *job.Run, why string) (moved bool, err error) {
	_, moved, err = c.runs.moveRun(ctx, r, job.Fail, why, func(n *job.Run) { n.Final = true })
	return moved, err
}

// placeRun puts a waiting run on a cluster, or records why it waits
// (J18), or fails it when its target is gone (J19).
func (c runReconciler) placeRun(ctx context.Context, r *job.Run) error {
	// A waiting run whose job config is gone was stored by a create that
	// did not live to check the config (fenceRun) while it was deleted:
	// it ends as that check would have ended it (J17).
	if ok, err := c.acc.exists(ctx, kindJob, r.JobID); err != nil {
		return err
	} else if !ok {
		return c.failFinally(ctx, r, "its job config was deleted while the run was being created")
	}
	cfg := &r.Config
	switch cfg.Mode() {
	case job.ClusterMode:
		cl, err := c.clusters.getCluster(ctx, cfg.Cluster)
		switch {
		case errs.IsNotFound(err):
			return c.failFinally(ctx, r, fmt.Sprintf("cluster %s does not exist", cfg.Cluster))
		case err != nil:
			return err
		case cl.State == cluster.Deleting:
			return c.failFinally(ctx, r, fmt.Sprintf("cluster %s was deleted", cl.ID))
		case cl.State == cluster.Running:
			return c.place(ctx, r, cl, "")
		}
		return c.runs.wait(ctx, r, job.ClusterNotRunning, fmt.Sprintf("waiting for cluster %s to run", cl.ID))
	case job.GroupMode:
		gid := cfg.Group
		ch, err := c.chooseMember(ctx, r, gid)
		if errs.IsNotFound(err) {
			return c.failFinally(ctx, r, fmt.Sprintf("cluster group %s does not exist", gid))
		}
		if err != nil {
			return err
		}
		if ch.cluster != nil {
			return c.place(ctx, r, ch.cluster, ch.reason)
		}
		if ch.clashing > 0 {
			err := c.failFinally(ctx, r, fmt.Sprintf(
				"every running member of group %s already mounts storage on a path this job mounts on; change the job's mount paths", gid))
			return err
		}
		return c.runs.wait(ctx, r, job.WaitReason(scheduler.WhyNone(ch.cands)), fmt.Sprintf("waiting for a running member of group %s", gid))
	}
	return c.placeOnDemand(ctx, r)
}

// place records the cluster a run goes to, and for a group's member why
// (placement: the policy's reason), then submits it: the choice is stored
// before Ray hears of it, so a retry never submits to another.
func (c runReconciler) place(ctx context.Context, r *job.Run, cl *cluster.Cluster, placement string) error {
	msg := "submitted to cluster " + cl.ID
	if placement != "" {
		msg += ", " + placement
	}
	next, ok, err := c.runs.moveRun(ctx, r, job.Place, msg, func(n *job.Run) {
		n.ClusterID, n.WaitReason, n.Placement = cl.ID, "", placement
	})
	if err != nil || !ok {
		return err
	}
	_, err = c.followRun(ctx, next) // what it writes queues the run again
	return err
}

// placeOnDemand: a run whose resource group has admitted it (its
// reservation is on the group) gets its cluster; one not admitted yet
// asks the resource group's reconciler to look.
func (c runReconciler) placeOnDemand(ctx context.Context, r *job.Run) error {
	od := r.Config.OnDemand
	a, _, err := cached[quota.Account](ctx, c.acc, kindResourceGroup, od.ResourceGroup)
	if errs.IsNotFound(err) {
		return c.failFinally(ctx, r, fmt.Sprintf("resource group %s does not exist", od.ResourceGroup))
	}
	if err != nil {
		return err
	}
	if a.Package != od.ResourcePackage {
		// Deleted and registered again in another package since the
		// config was saved (J12 held then): not drawn on.
		return c.failFinally(ctx, r, fmt.Sprintf("resource group %s belongs to package %s, not %s", od.ResourceGroup, a.Package, od.ResourcePackage))
	}
	if _, err := c.runs.demand(r); err != nil {
		return c.failFinally(ctx, r, "its on-demand environment cannot be sized: "+err.Error())
	}
	cid := odClusterID(r.ID)
	if _, held := a.Hold(cid); !held {
		if r.State == job.Queued {
			c.enqueue(kindResourceGroup + "/" + od.ResourceGroup)
		}
		return nil
	}
	// A cluster not in the cache is created; one that exists after all
	// (the cache lags) is a conflict, which is fine.
	if _, ok := c.cache.Get(kindCluster, cid); !ok {
		cl, err := c.onDemandCluster(r)
		if err != nil {
			return err
		}
		cl.Events = event.Append(nil, c.event(ctx, "system", "create", "on-demand cluster for run "+r.ID))
		if _, err := c.acc.create(ctx, kindCluster, cid, clusterLabels(cl), cl); err != nil && !errors.Is(err, errs.ErrConflict) {
			return err
		}
	} else if err != nil {
		return err
	}
	_, _, err = c.runs.moveRun(ctx, r, job.Place, "starting on-demand cluster "+cid, func(n *job.Run) { n.ClusterID = cid })
	return err
}

// onDemandCluster is the temporary cluster admitted on-demand run r gets
// (its id odClusterID(r.ID)), as it is first stored: at its workers'
// minimum, its reservation made in the run's resource group.
func (c *Engine) onDemandCluster(r *job.Run) (*cluster.Cluster, error) {
	od := r.Config.OnDemand
	now := c.clock.Now()
	runEnv := r.Config.RunEnvironment() // the runtime env's container, if any, is its image
	env := &runEnv
	cl := &cluster.Cluster{ID: odClusterID(r.ID), Generation: 1, Creator: r.Creator, CreatedAt: now, UpdatedAt: now,
		Temporary: true, OwnerRun: r.ID, Replicas: env.MinReplicas(), QuotaGroup: od.ResourceGroup,
		Live: &cluster.Live{ResourceGroup: od.ResourceGroup, Environment: *env.DeepCopy()},
		Spec: cluster.Spec{Name: "ondemand_" + r.ID, Priority: new(od.EffectivePriority()), ResourcePackage: od.ResourcePackage,
			ResourceGroup: od.ResourceGroup, Environment: *env, Mounts: r.Config.Mounts, Tags: r.Config.Tags}}
	if _, _, err := advanceCluster(cl, cluster.CreateOnDemand); err != nil {
		return nil, err
	}
	return cl, nil
}

// followRun moves a placed run with its cluster and its Ray job: it
// submits the job once the cluster runs (Ray keys it by the run id, so a
// retry never starts it twice), and records what Ray reports. A job Ray
// accepted and keeps pending fails the run after the start timeout
// (WithRunStartTimeout); until then followRun returns how long is left,
// for the run to be looked at again then.
func (c runReconciler) followRun(ctx context.Context, r *job.Run) (time.Duration, error) {
	cl, err := c.clusters.getCluster(ctx, r.ClusterID)
	switch {
	case errs.IsNotFound(err) || (err == nil && cl.State == cluster.Deleting):
		_, err = c.runs.endRun(ctx, r, job.Fail, fmt.Sprintf("cluster %s was deleted", r.ClusterID))
		return 0, err
	case err != nil:
		return 0, err
	case cl.State == cluster.Abnormal:
		_, err = c.runs.endRun(ctx, r, job.Fail, fmt.Sprintf("cluster %s is abnormal: %s", cl.ID, cl.Reason))
		return 0, err
	case cl.Temporary && cl.State == cluster.Starting:
		return 0, nil // its on-demand cluster is still starting
	case cl.Temporary && cl.State != cluster.Running:
		// No operation takes an on-demand cluster anywhere else: what Ray
		// said of it (abnormal, then suspended: hibernated) is no way back.
		_, err = c.runs.endRun(ctx, r, job.Fail, fmt.Sprintf("its on-demand cluster %s is %s: it will not run the job", cl.ID, cl.State))
		return 0, err
	case cl.State != cluster.Running && !r.RaySubmitted && r.State == job.Provisioning:
		return 0, c.displace(ctx, r, cl)
	}
	// A run Ray has accepted follows what Ray says of it, whatever its
	// cluster does now (a hibernate ends it on Ray's side).
	obs, err := c.runStatus(ctx, r.ID)
	if errs.IsNotFound(err) {
		if r.RaySubmitted || r.State == job.Running {
			// Submitted at most once: a job Ray accepted and forgot (a head
			// that restarted) is not submitted again.
			_, err = c.runs.endRun(ctx, r, job.Fail, "Ray has no record of the job any more")
			return 0, err
		}
		// Fenced against a hibernate or delete that refuses while runs
		// are active (stopActiveRuns): the cluster as the store has it
		// now. Marked, the run waits for the operation to end (refused, or
		// done: then it is displaced); moved on, it is displaced now. A
		// mark that no longer holds (its operation died) is taken off by
		// compare-and-swap before the submit: an operation that was only
		// slow then conflicts, and looks for the runs again.
		if !cl.Temporary {
			fc, err := c.clusters.getFresh(ctx, cl.ID)
			switch {
			case errs.IsNotFound(err):
				return 0, nil // its delete is seen on the next look
			case err != nil:
				return 0, err
			case fc.State != cluster.Running:
				return 0, c.displace(ctx, r, fc)
			case c.stopMarkHeld(fc):
				return stoppingLook, nil
			case !fc.Stopping.IsZero():
				if err := c.clusters.unmarkStopping(ctx, fc); err != nil {
					return 0, err // a conflict: looked at again
				}
			}
		}
		// Fenced on the cluster's generation: Ray refuses the submit
		// (a conflict, retried once the cache has the newer cluster) when
		// it follows a newer generation than the cluster read here, so a
		// placement decided on a cluster that another replica has since
		// hibernated is displaced, not submitted.
		if err := c.ray.SubmitRun(ctx, r, cl); errors.Is(err, errs.ErrInvalid) {
			// Refused before or by Ray for what the job is (a package Ray
			// cannot fetch, a request it refuses): no retry of the step
			// changes that.
			_, err = c.runs.endRun(ctx, r, job.Fail, job.ClipMessage("the job cannot be submitted: "+err.Error()))
			return 0, err
		} else if errors.Is(err, errs.ErrConflict) {
			return 0, err
		} else if err != nil {
			return c.rayUnanswered(ctx, r, err, "the job could not be submitted", false)
		}
		// A stop stored while the submit was on its way has already tried
		// to stop a job Ray did not have yet: stop it now.
		if now, err := c.runs.getRun(ctx, r.ID); err == nil && !now.State.Live() {
			return 0, c.ray.StopRun(ctx, r.ID)
		}
		obs, err = c.runStatus(ctx, r.ID)
	}
	if errs.IsNotFound(err) {
		return 0, err // just accepted, not shown yet: looked at again
	}
	if err != nil {
		return c.rayUnanswered(ctx, r, err, "the job's status could not be read", false)
	}
	return c.recordRay(ctx, r, obs)
}

// recordRay records on live run r what Ray says of its job (obs,
// bounded): its state, when it started and ended, its logs once it ended;
// an ended run is then cleaned up. A run whose job Ray keeps pending goes
// to pending. What Ray says ends an outage the run recorded.
func (c runReconciler) recordRay(ctx context.Context, r *job.Run, obs job.Observation) (time.Duration, error) {
	if !r.RayUnreachableSince.IsZero() {
		next := r.DeepCopy()
		next.RayUnreachableSince = time.Time{}
		next.Message = "submitted to cluster " + next.ClusterID // as placed
		if next.State == job.Running {
			next.Message = "on cluster " + next.ClusterID
		}
		next.Events = event.Append(next.Events, c.event(ctx, "system", "ray-reachable",
			fmt.Sprintf("Ray answers again (unreachable since %s)", r.RayUnreachableSince.UTC().Format(time.RFC3339))))
		return 0, c.runs.putRun(ctx, next, r.Version) // its watch brings the run back here
	}
	t := obs.Trigger()
	if t == "" {
		return c.pending(ctx, r)
	}
	var kept []string
	keptOK := false
	var archived job.LogArchive
	var notArchived error
	if obs.State.Terminal() && !r.LogsKept {
		kept, keptOK = c.logsToKeep(ctx, r.ID)
		if keptOK {
			archived, notArchived = c.archiveLogs(ctx, r, kept)
		}
	}
	next, ok, err := c.runs.moveRun(ctx, r, t, obs.Message, func(n *job.Run) {
		n.RaySubmitted = true
		if n.State.Terminal() && keptOK && !n.LogsKept {
			c.keepLogs(ctx, n, kept, archived, notArchived)
		}
		if n.State == job.Running {
			n.Message = "on cluster " + n.ClusterID
		}
		if n.StartedAt.IsZero() && (n.State == job.Running || !obs.StartedAt.IsZero()) {
			n.StartedAt = obs.StartedAt // Ray's time: a run may be seen only once it has ended
			if n.StartedAt.IsZero() {
				n.StartedAt = c.clock.Now()
			}
		}
		if n.State.Terminal() {
			n.RayDone = n.Config.OnDemand == nil
			if !obs.EndedAt.IsZero() {
				n.FinishedAt = obs.EndedAt
			}
		}
	})
	if err != nil || !ok {
		return 0, err
	}
	if !next.State.Live() {
		return 0, c.cleanupRun(ctx, next)
	}
	return 0, nil
}

// pending is followRun's step for a run whose job Ray has and keeps
// pending (submitted, its driver not started): the first look records
// that Ray accepted it, and when; a run still provisioning the start
// timeout after that fails, saying so (its cleanup stops the job on Ray).
// It returns how long is left until then.
func (c runReconciler) pending(ctx context.Context, r *job.Run) (time.Duration, error) {
	now := c.clock.Now()
	if !r.RaySubmitted || (r.RayAcceptedAt.IsZero() && r.State == job.Provisioning) {
		next := r.DeepCopy()
		next.RaySubmitted = true
		next.RayAcceptedAt = now
		// A conflict reads the run again: the next look records it.
		return c.o.runStartTime, c.runs.putRun(ctx, next, r.Version)
	}
	if r.State != job.Provisioning || c.o.runStartTime == 0 {
		return 0, nil
	}
	if left := r.RayAcceptedAt.Add(c.o.runStartTime).Sub(now); left > 0 {
		return left, nil
	}
	_, err := c.runs.endRun(ctx, r, job.Fail, fmt.Sprintf(
		"Ray accepted the job %s ago and has not started its driver (Ray reports it pending): given up after the run start timeout (%s)",
		now.Sub(r.RayAcceptedAt).Round(time.Second), c.o.runStartTime))
	return 0, err
}

// stoppingLook is when a run whose cluster is marked by a hibernate or a
// delete looking for active runs looks again (the operation's write of
// the cluster brings it back sooner).
const stoppingLook = time.Second

// displace sends a run placed on a cluster that no longer runs, and whose
// job Ray never had, back to waiting (J18), saying so: it is placed anew
// once a cluster runs, never submitted to one that moved on.
func (c runReconciler) displace(ctx context.Context, r *job.Run, cl *cluster.Cluster) error {
	msg := fmt.Sprintf("cluster %s is %s: it stopped running before the job was submitted", cl.ID, cl.State)
	_, _, err := c.runs.moveRun(ctx, r, job.Displace, msg, func(n *job.Run) {
		n.ClusterID, n.Placement, n.WaitReason, n.Message = "", "", job.ClusterNotRunning, msg
	})
	return err
}

// logsToKeep reads what a run logged, to keep when it ends; ok is false
// when Ray cannot tell (its head gone or not answering): the tail is then
// not kept, and a later look (the cleanup of an on-demand run, before its
// cluster goes) tries again.
func (c runReconciler) logsToKeep(ctx context.Context, runID string) ([]string, bool) {
	lines, err := c.ray.Logs(ctx, runID)
	if err != nil {
		c.o.log.V(1).Info("the logs of an ended run could not be read to keep", "run", runID, "err", err.Error())
		return nil, false
	}
	return lines, true
}

// archiveLogs writes lines, run r's whole log, to COS when the logs are
// kept there (logarchive.go), and returns what it wrote, or why it could
// not once the COS client's retries are spent.
func (c runReconciler) archiveLogs(ctx context.Context, r *job.Run, lines []string) (job.LogArchive, error) {
	// Bounded: the run's end (and its on-demand cluster's release) does
	// not wait on a COS that does not answer for longer than this, nor
	// for more than half of what the step has left, so that the step's
	// own writes still have time.
	bound := archiveTimeout
	if dl, ok := ctx.Deadline(); ok {
		bound = min(bound, time.Until(dl)/2)
	}
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	a, err := c.archive.put(ctx, r, lines)
	if err != nil {
		c.o.log.Error(err, "the whole log of an ended run could not be written to COS; its tail is kept", "run", r.ID, "logs", r.Logs)
	}
	return a, err
}

// keepLogs keeps lines, what run n logged, on it: the tail, what was
// written of them to COS (archived), or why nothing was (notArchived), in
// its event log.
func (c runReconciler) keepLogs(ctx context.Context, n *job.Run, lines []string, archived job.LogArchive, notArchived error) {
	n.KeepLogs(lines)
	n.LogsArchived = archived
	if notArchived != nil {
		n.Events = event.Append(n.Events, c.event(ctx, "system", "logs",
			"the whole log could not be written to "+n.Logs+" (its tail is kept): "+notArchived.Error()))
	}
}

// cleanupRun releases what an ended run still holds: its Ray job, and an
// on-demand run's cluster (which in turn releases its quota). An
// on-demand run's logs are kept first, if they were not when it ended:
// its cluster takes Ray's record of them along.
func (c runReconciler) cleanupRun(ctx context.Context, r *job.Run) error {
	if r.RayDone {
		return nil
	}
	if !r.LogsKept && r.ClusterID != "" {
		if lines, ok := c.logsToKeep(ctx, r.ID); ok {
			archived, notArchived := c.archiveLogs(ctx, r, lines)
			next := r.DeepCopy()
			c.keepLogs(ctx, next, lines, archived, notArchived)
			return c.runs.putRun(ctx, next, r.Version) // its watch brings the run back here
		}
	}
	if r.ClusterID != "" {
		if err := c.ray.StopRun(ctx, r.ID); err != nil && !errs.IsNotFound(err) {
			return err
		}
	}
	if od := r.Config.OnDemand; od != nil {
		cid := odClusterID(r.ID)
		cl, err := c.clusters.getCluster(ctx, cid)
		switch {
		case errs.IsNotFound(err):
			if _, err := c.ledger.changeAccount(ctx, od.ResourceGroup, func(a *quota.Account) (bool, error) {
				return a.Release(cid), nil
			}); err != nil && !errs.IsNotFound(err) {
				return err
			}
		case err != nil:
			return err
		case cl.State != cluster.Deleting:
			if err := c.deleteTemporary(ctx, cl, "run "+r.ID+" "+string(r.State)); err != nil {
				return err
			}
		}
	}
	next := r.DeepCopy()
	next.RayDone = true
	return c.runs.putRun(ctx, next, r.Version)
}
