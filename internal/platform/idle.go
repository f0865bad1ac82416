package platform

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/job"
)

// A standing cluster with an idle timeout (L4) hibernates once no run has
// been active on it for that long. Idle since is derived, not stored:
// the later of when the cluster last became running (RunningSince, written
// with that transition) and when the last run placed on it ended (runLoad,
// which the store's watch keeps, rebuilt from the stored runs at a
// restart). A run that is active on it (provisioning or
// running there) keeps it busy. The hibernate is the user's operation,
// made by the cluster's reconciler, so it is refused when a run has
// become active meanwhile, and a run placed while it is written is
// displaced and waits (J18), as with any hibernate.

// observeRunEnd follows a stored run into the index of each cluster's
// runs (runLoad) and, when a run's end is news for a running cluster with
// an idle timeout, queues that cluster, whose idle time starts then. It
// only touches memory.
func (c *Engine) observeRunEnd(d backend.Doc, obj any) {
	r, _ := obj.(*job.Run)
	if !c.load.observe(d, r) {
		return
	}
	cd, ok := c.cache.Get(kindCluster, r.ClusterID)
	if !ok && c.loaded.Load() {
		// An ended run written again after its cluster's delete (its
		// retry recorded, its cleanup): nothing would forget the end kept
		// for a cluster that is gone.
		c.load.forget(r.ClusterID)
		return
	}
	if ok && cd.Labels[labelState] == string(cluster.Running) {
		if cl, _, err := sharedObject[cluster.Cluster](c.acc, cd); err == nil && cl.Spec.IdleTimeoutSeconds > 0 {
			c.enqueue(kindCluster + "/" + r.ClusterID)
		}
	}
}

// idleSince returns since when running cluster cl has had no active run,
// and false while one is active on it.
func (c clusterReconciler) idleSince(cl *cluster.Cluster) (time.Time, bool) {
	if c.load.active(cl.ID) > 0 { // the index least-loaded reads (placement.go)
		return time.Time{}, false
	}
	since := c.load.ended(cl.ID)
	if cl.RunningSince.After(since) {
		since = cl.RunningSince
	}
	if since.IsZero() {
		since = cl.UpdatedAt // running since before RunningSince was kept
	}
	return since, true
}

// idleRefusedLook is how long an idle hibernate that was refused (a run
// active on the cluster, which this client's cache did not show) waits
// before it tries again.
const idleRefusedLook = time.Minute

// hibernateIfIdle hibernates running standing cluster cl when it has been
// idle past its timeout (L4). It returns when to look again (0: when
// something changes), and done when it hibernated the cluster.
func (c clusterReconciler) hibernateIfIdle(ctx context.Context, cl *cluster.Cluster) (after time.Duration, done bool, err error) {
	timeout, ok := cl.Spec.IdleTimeout()
	if !ok || cl.Temporary || cl.State != cluster.Running {
		return 0, false, nil
	}
	since, idle := c.idleSince(cl)
	if !idle {
		return 0, false, nil // a run's end queues the cluster again
	}
	now := c.clock.Now()
	if left := since.Add(timeout).Sub(now); left > 0 {
		return left, false, nil
	}
	c.notes.mu.Lock()
	until := c.notes.idleRefused[cl.ID]
	c.notes.mu.Unlock()
	if now.Before(until) {
		return until.Sub(now), false, nil
	}
	msg := fmt.Sprintf("idle since %s, longer than its idle timeout of %s: its quota is released", since.UTC().Format(time.RFC3339), timeout)
	_, err = c.clusters.hibernateAs(ctx, cl, cluster.DeleteOptions{}, "system", msg)
	if errs.IsNotFound(err) {
		return 0, false, nil
	}
	if err != nil {
		if errors.Is(err, errs.ErrState) {
			// A run is active on it, as the store has it (this client's
			// cache may not show it yet): it keeps the cluster. Looked at
			// again in a while, not at once: the refusal's own write of
			// the cluster (its mark taken off) comes back here.
			c.notes.mu.Lock()
			c.notes.idleRefused[cl.ID] = now.Add(idleRefusedLook)
			c.notes.mu.Unlock()
			return idleRefusedLook, false, nil
		}
		return 0, false, err
	}
	c.metrics.idleHibernated()
	return 0, true, nil
}
