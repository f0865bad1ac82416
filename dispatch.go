package dlc

import (
	"context"
	"fmt"
	"sort"

	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/scheduler"
	"github.com/aidlc/dlc/storage"
)

// dispatchLocked places what can be placed: cluster- and group-mode runs
// onto running clusters, and on-demand runs that quota admits.
func (c *Client) dispatchLocked(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	ids := make([]string, 0, len(c.waiting))
	for id := range c.waiting {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return c.waiting[ids[i]] < c.waiting[ids[j]] })
	// Placing runs changes no cluster a group run could pick (only on-demand
	// ones, which are in no group), so one listing serves the whole pass.
	var clusters []*cluster.Cluster
	var listErr error
	listed := false
	listClusters := func() ([]*cluster.Cluster, error) {
		if !listed {
			clusters, _, listErr = loadAll[cluster.Cluster](ctx, c.be, kindCluster)
			listed = true
		}
		return clusters, listErr
	}
	for _, id := range ids {
		r, v, err := c.loadRun(ctx, id)
		if err != nil {
			delete(c.waiting, id)
			continue
		}
		c.placeLocked(ctx, r, v, listClusters)
	}
	rgs := make([]string, 0, len(c.queues))
	for rg := range c.queues {
		rgs = append(rgs, rg)
	}
	sort.Strings(rgs)
	for _, rg := range rgs {
		q := c.queues[rg]
		if q.Len() == 0 {
			continue
		}
		free, err := c.ledger.Allocatable(rg)
		if err != nil {
			continue
		}
		for _, it := range q.Admit(c.clock.Now(), free) {
			c.admitLocked(ctx, it)
		}
	}
}

// placeLocked puts a cluster- or group-mode run on a running cluster, or
// records why it waits (J18), or fails it when its target is gone (J19).
// listClusters returns every cluster, as listed once for the dispatch pass.
func (c *Client) placeLocked(ctx context.Context, r *job.Run, v int64, listClusters func() ([]*cluster.Cluster, error)) {
	switch r.Config.Mode() {
	case job.ClusterMode:
		cl, _, err := c.loadCluster(ctx, r.Config.Cluster)
		switch {
		case errs.IsNotFound(err):
			_ = c.endRunLocked(ctx, r, v, job.Failed, fmt.Sprintf("cluster %s does not exist", r.Config.Cluster))
		case err != nil:
		case cl.State == cluster.Deleting:
			_ = c.endRunLocked(ctx, r, v, job.Failed, fmt.Sprintf("cluster %s was deleted", cl.ID))
		case cl.State == cluster.Running:
			c.submitLocked(ctx, r, v, cl)
		default:
			c.setWaiting(ctx, r, v, job.ClusterNotRunning, fmt.Sprintf("cluster %s is %s", cl.ID, cl.State))
		}
	case job.GroupMode:
		gid := r.Config.Group
		if _, _, err := load[groupRecord](ctx, c.be, kindGroup, gid); errs.IsNotFound(err) {
			_ = c.endRunLocked(ctx, r, v, job.Failed, fmt.Sprintf("cluster group %s does not exist", gid))
			return
		}
		all, err := listClusters()
		if err != nil {
			return
		}
		var cands []scheduler.Candidate
		byID := map[string]*cluster.Cluster{}
		clashing := 0
		for _, cl := range all {
			if cl.Temporary || !contains(cl.Spec.Groups, gid) {
				continue
			}
			cand := scheduler.Candidate{ClusterID: cl.ID, Running: cl.State == cluster.Running, Abnormal: cl.State == cluster.Abnormal}
			// A member whose mounts take a path the job mounts on cannot
			// host it: the job inherits the cluster's mounts (C16).
			if len(storage.MountClashes("mounts", cl.Spec.Mounts, r.Config.Mounts)) > 0 {
				if cand.Running {
					clashing++
				}
				cand.Running = false
			}
			cands = append(cands, cand)
			byID[cl.ID] = cl
		}
		if id, ok := c.policy.Pick(cands); ok {
			c.submitLocked(ctx, r, v, byID[id])
			return
		}
		if clashing > 0 {
			_ = c.endRunLocked(ctx, r, v, job.Failed, fmt.Sprintf(
				"every running member of group %s already mounts storage on a path this job mounts on; change the job's mount paths", gid))
			return
		}
		c.setWaiting(ctx, r, v, job.WaitReason(scheduler.WhyNone(cands)), fmt.Sprintf("%d members in group %s", len(cands), gid))
	}
}

// submitLocked hands a run to Ray on a running cluster.
func (c *Client) submitLocked(ctx context.Context, r *job.Run, v int64, cl *cluster.Cluster) {
	r.State, r.WaitReason, r.Message, r.ClusterID = job.Provisioning, "", "", cl.ID
	if err := c.putRun(ctx, r, v); err != nil {
		return
	}
	delete(c.waiting, r.ID)
	c.event(ctx, kindRun+"/"+r.ID, "system", "provisioning", "submitted to cluster "+cl.ID)
	if err := c.be.SubmitRun(ctx, r, cl); err != nil {
		_ = c.endRunLocked(ctx, r, r.Version, job.Failed, "submitting to Ray failed: "+err.Error())
	}
}

// admitLocked creates an admitted on-demand run's temporary cluster: its
// quota is reserved now, and the run is submitted once it is running.
func (c *Client) admitLocked(ctx context.Context, it scheduler.Item) {
	r, v, err := c.loadRun(ctx, it.RunID)
	if err != nil || r.State.Terminal() {
		return
	}
	od := r.Config.OnDemand
	now := c.clock.Now()
	cl := &cluster.Cluster{ID: newID("cls"), State: cluster.Creating, Creator: r.Creator, CreatedAt: now, UpdatedAt: now,
		Temporary: true, OwnerRun: r.ID,
		Spec: cluster.Spec{Name: "ondemand_" + r.ID, Priority: od.Priority, ResourcePackage: od.ResourcePackage,
			ResourceGroup: od.ResourceGroup, Environment: *od.Environment.DeepCopy(), Mounts: r.Config.Mounts, Tags: r.Config.Tags}}
	if cl.Version, err = save(ctx, c.be, kindCluster, cl.ID, 0, cl); err != nil {
		_ = c.queue(od.ResourceGroup).Push(it)
		return
	}
	if err := c.startLocked(ctx, cl, cl.Version); err != nil {
		// Quota moved since Admit looked: back in line.
		_ = c.be.Delete(ctx, kindCluster, cl.ID, 0)
		_ = c.queue(od.ResourceGroup).Push(it)
		return
	}
	c.event(ctx, kindCluster+"/"+cl.ID, "system", "create", "on-demand cluster for run "+r.ID)
	r.State, r.WaitReason, r.Message, r.ClusterID = job.Provisioning, "", "starting on-demand cluster "+cl.ID, cl.ID
	if err := c.putRun(ctx, r, v); err == nil {
		c.event(ctx, kindRun+"/"+r.ID, "system", "provisioning", r.Message)
	}
}

// observer is how the backend reports to the client.
type observer struct{ c *Client }

// ClusterObserved hands a cluster observation to the client.
func (o observer) ClusterObserved(id string, obs cluster.Observation) { o.c.clusterObserved(id, obs) }

// RunObserved hands a run observation to the client.
func (o observer) RunObserved(id string, obs job.Observation) { o.c.runObserved(id, obs) }

func (c *Client) clusterObserved(id string, obs cluster.Observation) {
	ctx := context.Background()
	c.mu.Lock()
	defer c.mu.Unlock()
	cl, v, err := c.loadCluster(ctx, id)
	if err != nil {
		return
	}
	key := kindCluster + "/" + id
	switch {
	case obs.State == cluster.Created && cl.State == cluster.Creating:
		cl.State = cluster.Created
		if c.putCluster(ctx, cl, v) == nil {
			c.event(ctx, key, "system", "created", "")
		}
	case obs.State == cluster.Running && cl.State == cluster.Starting:
		cl.State = cluster.Running
		if c.putCluster(ctx, cl, v) != nil {
			return
		}
		c.event(ctx, key, "system", "running", fmt.Sprintf("%d pods", len(obs.Pods)))
		if cl.Temporary {
			if r, rv, err := c.loadRun(ctx, cl.OwnerRun); err == nil && r.State == job.Provisioning {
				c.submitLocked(ctx, r, rv, cl)
			}
		}
	case obs.State == cluster.Abnormal && (cl.State == cluster.Starting || cl.State == cluster.Running):
		cl.State, cl.Reason = cluster.Abnormal, obs.Reason
		if c.putCluster(ctx, cl, v) != nil {
			return
		}
		c.event(ctx, key, "system", "abnormal", obs.Reason)
		c.failRunsOnLocked(ctx, cl, "cluster "+cl.ID+" is abnormal: "+obs.Reason)
	case obs.State == cluster.Hibernated && cl.State == cluster.Hibernating:
		if cl.Live != nil {
			c.ledger.Release(cl.Live.ResourceGroup, cl.ID)
		}
		cl.State, cl.Live, cl.Replicas = cluster.Hibernated, nil, nil
		if c.putCluster(ctx, cl, v) == nil {
			c.event(ctx, key, "system", "hibernated", "compute released")
		}
	case obs.State == "" && cl.State == cluster.Deleting:
		if cl.Live != nil {
			c.ledger.Release(cl.Live.ResourceGroup, cl.ID)
		}
		if c.be.Delete(ctx, kindCluster, cl.ID, v) == nil {
			c.event(ctx, key, "system", "deleted", "")
		}
	default:
		return
	}
	c.dispatchLocked(ctx)
}

// failRunsOnLocked fails the unfinished runs on cl (its own run, for an
// on-demand cluster).
func (c *Client) failRunsOnLocked(ctx context.Context, cl *cluster.Cluster, msg string) {
	runs, vs, err := c.activeRunsOnLocked(ctx, cl.ID)
	if err != nil {
		return
	}
	for i, r := range runs {
		_ = c.endRunLocked(ctx, r, vs[i], job.Failed, msg)
	}
}

// activeRunsOnLocked returns the runs provisioning or running on the
// cluster, with their store versions.
func (c *Client) activeRunsOnLocked(ctx context.Context, clusterID string) ([]*job.Run, []int64, error) {
	runs, vs, err := loadAll[job.Run](ctx, c.be, kindRun)
	if err != nil {
		return nil, nil, err
	}
	var active []*job.Run
	var versions []int64
	for i, r := range runs {
		if r.ClusterID == clusterID && (r.State == job.Provisioning || r.State == job.Running) {
			active, versions = append(active, r), append(versions, vs[i])
		}
	}
	return active, versions, nil
}

// stopActiveRunsLocked refuses op while runs are active on cl, unless
// Force was given: then it stops them, saying why.
func (c *Client) stopActiveRunsLocked(ctx context.Context, cl *cluster.Cluster, op cluster.Op, opts []OpOption) error {
	var o opOptions
	for _, f := range opts {
		f(&o)
	}
	active, vs, err := c.activeRunsOnLocked(ctx, cl.ID)
	if err != nil {
		return err
	}
	if len(active) > 0 && !o.force {
		return &errs.StateError{Kind: "cluster", ID: cl.ID, Op: string(op), State: string(cl.State),
			Reason: fmt.Sprintf("%d runs are active on it; stop them, or pass dlc.Force() to stop them", len(active))}
	}
	for i, r := range active {
		if err := c.endRunLocked(ctx, r, vs[i], job.Stopped,
			fmt.Sprintf("stopped: cluster %s was %s by %s", cl.ID, pastTense(op), UserFrom(ctx))); err != nil {
			return err
		}
	}
	return nil
}

func pastTense(op cluster.Op) string {
	if op == cluster.OpDelete {
		return "deleted"
	}
	return string(op) + "d"
}

func (c *Client) runObserved(id string, obs job.Observation) {
	ctx := context.Background()
	c.mu.Lock()
	defer c.mu.Unlock()
	r, v, err := c.loadRun(ctx, id)
	if err != nil || r.State.Terminal() {
		return
	}
	switch obs.State {
	case job.Running:
		if r.State != job.Provisioning {
			return
		}
		r.State, r.StartedAt, r.Message = job.Running, c.clock.Now(), obs.Message
		if c.putRun(ctx, r, v) == nil {
			c.event(ctx, kindRun+"/"+id, "system", "running", "on cluster "+r.ClusterID)
		}
	case job.Succeeded, job.Failed:
		if r.State != job.Running && r.State != job.Provisioning {
			return
		}
		if err := c.endRunLocked(ctx, r, v, obs.State, obs.Message); err != nil {
			return
		}
		c.dispatchLocked(ctx)
	}
}
