package dlc

import (
	"context"
	"fmt"
	"sort"

	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/scheduler"
)

// Run starts a new run of a job config's current revision (J14). The run
// is queued, then waits with a reason while it cannot be placed (J18),
// is provisioning while its cluster comes up or its job is submitted,
// runs, and ends succeeded, failed or stopped. Under WithRequestID a
// retried Run returns the first call's run. A run of a config whose
// cluster group was deleted fails at once, saying so (J19).
func (c *Client) Run(ctx context.Context, jobID string) (*job.Run, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if id, ok := c.recall(ctx, "run/"+jobID); ok {
		r, _, err := c.loadRun(ctx, id)
		return r, err
	}
	rec, _, err := load[job.Record](ctx, c.be, kindJob, jobID)
	if err != nil {
		return nil, notFoundAs(err, "job", jobID)
	}
	c.seq++
	r := &job.Run{ID: newID("run"), JobID: jobID, Revision: rec.Revision, Config: *rec.Config.DeepCopy(),
		State: job.Queued, Creator: UserFrom(ctx), SubmittedAt: c.clock.Now()}
	r.Logs = c.opts.logPrefix + "/" + r.ID
	var item scheduler.Item
	if od := r.Config.OnDemand; od != nil {
		need, err := od.Environment.MinResources(c.cat.Nodes)
		if err != nil {
			return nil, err
		}
		item = scheduler.Item{RunID: r.ID, Priority: r.Config.Priority(), Seq: c.seq, Enqueued: r.SubmittedAt, Demand: need}
	}
	if r.Version, err = save(ctx, c.be, kindRun, r.ID, 0, r); err != nil {
		return nil, err
	}
	c.remember(ctx, "run/"+jobID, r.ID)
	if r.Config.OnDemand != nil {
		if err := c.queue(r.Config.OnDemand.ResourceGroup).Push(item); err != nil {
			return nil, err
		}
	} else {
		c.waiting[r.ID] = c.seq
	}
	c.event(ctx, kindJob+"/"+jobID, "user", "run", r.ID)
	c.event(ctx, kindRun+"/"+r.ID, "user", "submit", fmt.Sprintf("revision %d", r.Revision))
	c.dispatchLocked(ctx)
	r, v, err := c.loadRun(ctx, r.ID)
	if err != nil {
		return nil, err
	}
	if r.State == job.Queued && r.Config.OnDemand != nil {
		// Admission found no room: it waits for quota (J18).
		c.setWaiting(ctx, r, v, job.InsufficientQuota, "")
	}
	return r, nil
}

func (c *Client) queue(rg string) *scheduler.Queue {
	q := c.queues[rg]
	if q == nil {
		q = scheduler.NewQueue(scheduler.QueueOptions{MaxWait: c.opts.maxWait})
		c.queues[rg] = q
	}
	return q
}

// GetRun returns a run.
func (c *Client) GetRun(ctx context.Context, id string) (*job.Run, error) {
	r, _, err := c.loadRun(ctx, id)
	return r, err
}

// ListRuns returns the runs of a job config (every run when jobID is ""),
// in submission order.
func (c *Client) ListRuns(ctx context.Context, jobID string) ([]*job.Run, error) {
	all, vs, err := loadAll[job.Run](ctx, c.be, kindRun)
	if err != nil {
		return nil, err
	}
	var out []*job.Run
	for i, r := range all {
		if jobID == "" || r.JobID == jobID {
			r.Version = vs[i]
			out = append(out, r)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].SubmittedAt.Before(out[j].SubmittedAt) })
	return out, nil
}

// StopRun stops a run that has not finished; its on-demand cluster, if
// any, is released.
func (c *Client) StopRun(ctx context.Context, id string) (*job.Run, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	r, v, err := c.loadRun(ctx, id)
	if err != nil {
		return nil, err
	}
	if r.State.Terminal() {
		return nil, &errs.StateError{Kind: "run", ID: id, Op: "stop", State: string(r.State),
			Allowed: []string{string(job.Queued), string(job.Waiting), string(job.Provisioning), string(job.Running)}}
	}
	if err := c.endRunLocked(ctx, r, v, job.Stopped, "stopped by "+UserFrom(ctx)); err != nil {
		return nil, err
	}
	c.dispatchLocked(ctx)
	return r, nil
}

// RunLogs returns what a run has logged so far.
func (c *Client) RunLogs(ctx context.Context, id string) ([]string, error) {
	if _, _, err := c.loadRun(ctx, id); err != nil {
		return nil, err
	}
	return c.be.Logs(ctx, id)
}

// Dispatch moves waiting runs forward once: places cluster and group runs
// whose cluster is running, and admits queued on-demand runs that quota
// allows. The client dispatches by itself on every change; tests call
// this to be explicit.
func (c *Client) Dispatch(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dispatchLocked(ctx)
}

func (c *Client) loadRun(ctx context.Context, id string) (*job.Run, int64, error) {
	r, v, err := load[job.Run](ctx, c.be, kindRun, id)
	if err != nil {
		return nil, 0, notFoundAs(err, "run", id)
	}
	r.Version = v
	return r, v, nil
}

// putRun stores r over version v; it is where every run state change lands.
func (c *Client) putRun(ctx context.Context, r *job.Run, v int64) error {
	nv, err := save(ctx, c.be, kindRun, r.ID, v, r)
	if err != nil {
		return err
	}
	r.Version = nv
	return nil
}

func (c *Client) setWaiting(ctx context.Context, r *job.Run, v int64, why job.WaitReason, msg string) {
	if r.State == job.Waiting && r.WaitReason == why && r.Message == msg {
		return
	}
	r.State, r.WaitReason, r.Message = job.Waiting, why, msg
	if c.putRun(ctx, r, v) == nil {
		c.event(ctx, kindRun+"/"+r.ID, "system", "waiting", string(why))
	}
}

// endRunLocked ends a run in a terminal state: out of every queue, its
// Ray job stopped, its on-demand cluster released.
func (c *Client) endRunLocked(ctx context.Context, r *job.Run, v int64, st job.RunState, msg string) error {
	prev := r.State
	r.State, r.Message, r.WaitReason = st, msg, ""
	r.FinishedAt = c.clock.Now()
	if r.StartedAt.IsZero() && prev == job.Running {
		r.StartedAt = r.FinishedAt
	}
	if err := c.putRun(ctx, r, v); err != nil {
		return err
	}
	delete(c.waiting, r.ID)
	if od := r.Config.OnDemand; od != nil {
		c.queue(od.ResourceGroup).Remove(r.ID)
	}
	if prev == job.Provisioning || prev == job.Running {
		if err := c.be.StopRun(ctx, r.ID); err != nil {
			c.event(ctx, kindRun+"/"+r.ID, "system", "stop-failed", err.Error())
		}
	}
	c.event(ctx, kindRun+"/"+r.ID, "system", string(st), msg)
	if r.Config.OnDemand != nil && r.ClusterID != "" {
		if cl, cv, err := c.loadCluster(ctx, r.ClusterID); err == nil && cl.Temporary && cl.State != "deleting" {
			_ = c.deleteClusterLocked(ctx, cl, cv)
		}
	}
	return nil
}
