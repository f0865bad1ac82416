package platform

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
	"github.com/aidlc/dlc/scheduler"
	"github.com/aidlc/dlc/storage"
)

type (
	clusterRecord = cluster.Cluster
	runRecord     = job.Run
)

// RunService is the runs (task instances) of an Engine's job configs
// (J14, J18, J19).
type RunService struct{ c *Engine }

// Runs returns the client's runs.
func (c *Engine) Runs() *RunService { return &RunService{c} }

// Labels of stored runs: what the queues and waiting sets are derived from.
const (
	labelPhase    = "phase"
	phasePending  = "pending" // queued or waiting
	phaseActive   = "active"  // provisioning or running
	phaseCleanup  = "cleanup" // ended; Ray or its on-demand cluster still to release
	phaseDone     = "done"
	labelTarget   = "target"
	targetCluster = "cluster."
	targetGroup   = "group."
	targetRG      = "rg."
	labelOn       = "on" // the cluster it was placed on
	labelJob      = "job"
	labelPriority = "priority" // an on-demand run's
)

func runLabels(r *job.Run) map[string]string {
	l := map[string]string{labelJob: r.JobID, labelState: string(r.State)}
	if r.Config.OnDemand != nil {
		l[labelPriority] = strconv.Itoa(r.Priority)
	}
	switch {
	case r.State == job.Queued || r.State == job.Waiting:
		l[labelPhase] = phasePending
	case r.State.Live():
		l[labelPhase] = phaseActive
	case r.RayDone:
		l[labelPhase] = phaseDone
	default:
		l[labelPhase] = phaseCleanup
	}
	switch r.Config.Mode() {
	case job.ClusterMode:
		l[labelTarget] = targetCluster + r.Config.Cluster
	case job.GroupMode:
		l[labelTarget] = targetGroup + r.Config.Group
	case job.OnDemandMode:
		l[labelTarget] = targetRG + r.Config.OnDemand.ResourceGroup
	}
	if r.ClusterID != "" {
		l[labelOn] = r.ClusterID
	}
	return l
}

// Create starts a new run of a job config's current revision (J14). The
// run is queued, then waits with a reason while it cannot be placed
// (J18), is provisioning while its cluster comes up or its job is
// submitted, runs, and ends succeeded, failed or stopped. A run of a
// config whose cluster or cluster group is gone fails at once, saying so
// (J19).
func (s *RunService) Create(ctx context.Context, jobID string, opts job.RunOptions) (*job.Run, error) {
	c := s.c
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	id := newID("run")
	if opts.RequestID != "" {
		id = idFor("run", jobID, opts.RequestID)
		if r, err := c.getRun(ctx, id); err == nil {
			return r, nil
		}
	}
	rec, err := c.getJob(ctx, jobID)
	if err != nil {
		return nil, err
	}
	now := c.clock.Now()
	r := &job.Run{ID: id, JobID: jobID, Revision: rec.Revision, Config: *rec.Config.DeepCopy(),
		State: job.Queued, Creator: UserFrom(ctx), SubmittedAt: now, Priority: rec.Config.Priority(), Seq: c.nextSeq(now)}
	r.Logs = c.o.logPrefix + "/" + r.ID
	if od := r.Config.OnDemand; od != nil {
		if r.Demand, err = od.Environment.MinResources(c.cat.Nodes); err != nil {
			return nil, err
		}
	}
	r.Events = cluster.AppendEvent(nil, c.event(ctx, "user", "submit", fmt.Sprintf("revision %d", r.Revision)))
	why, err := c.missingTarget(ctx, &r.Config)
	if err != nil {
		return nil, err
	}
	if why != "" {
		r.State, r.Message, r.FinishedAt, r.RayDone = job.Failed, why, now, true
		r.Events = cluster.AppendEvent(r.Events, c.event(ctx, "system", string(job.Failed), why))
	}
	v, err := c.create(ctx, kindRun, r.ID, runLabels(r), r)
	if errors.Is(err, errs.ErrConflict) && opts.RequestID != "" {
		got, _, ferr := fresh[job.Run](ctx, c, kindRun, id)
		if ferr != nil {
			return nil, ferr
		}
		return got, nil
	}
	if err != nil {
		return nil, err
	}
	r.Version = v
	c.logRunChange("", r)
	return r, nil
}

// nextSeq returns now in nanoseconds, or one more than the last value it
// returned: submission order within a client, time order across clients.
func (c *Engine) nextSeq(now time.Time) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq = max(c.seq+1, uint64(max(now.UnixNano(), 0)))
	return c.seq
}

// missingTarget says why a config's run cannot start at all: its cluster
// or cluster group is gone (J19).
func (c *Engine) missingTarget(ctx context.Context, cfg *job.Config) (string, error) {
	kind, id, what := "", "", ""
	switch cfg.Mode() {
	case job.ClusterMode:
		kind, id, what = kindCluster, cfg.Cluster, "cluster"
	case job.GroupMode:
		kind, id, what = kindGroup, cfg.Group, "cluster group"
	case job.OnDemandMode:
		kind, id, what = kindRG, cfg.OnDemand.ResourceGroup, "resource group"
	default:
		return "", nil
	}
	ok, err := c.exists(ctx, kind, id)
	if err != nil || ok {
		return "", err
	}
	return fmt.Sprintf("%s %s does not exist", what, id), nil
}

// Get returns a run.
func (s *RunService) Get(ctx context.Context, id string) (*job.Run, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return s.c.getRun(ctx, id)
}

func (c *Engine) getRun(ctx context.Context, id string) (*job.Run, error) {
	r, v, err := cached[job.Run](ctx, c, kindRun, id)
	if err != nil {
		return nil, notFoundAs(err, "run", id)
	}
	r.Version = v
	c.rederive(r)
	return r, nil
}

// demand is what admitting an on-demand run reserves: its environment's
// head and workers' minimum, computed from the run's config with the
// catalog. It is never the stored Demand, a field that anyone who can
// edit the stored run can set to nothing.
func (c *Engine) demand(r *job.Run) (quota.Resources, error) {
	if r.Config.OnDemand == nil {
		return quota.Resources{}, nil
	}
	return r.Config.OnDemand.Environment.MinResources(c.cat.Nodes)
}

// rederive replaces the Demand a read run says it has with what its
// config needs (decode has rederived its Priority), so that a caller, and
// the next write of the run, see the truth rather than what was stored.
func (c *Engine) rederive(r *job.Run) {
	if d, err := c.demand(r); err == nil {
		r.Demand = d
	}
}

// List returns runs in submission order.
func (s *RunService) List(ctx context.Context, opts job.RunListOptions) ([]*job.Run, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var sel map[string]string
	if opts.JobID != "" {
		sel = map[string]string{labelJob: opts.JobID}
	}
	out, err := s.c.listRuns(sel)
	if err != nil {
		return nil, err
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].SubmittedAt.Before(out[j].SubmittedAt) })
	return out, nil
}

func (c *Engine) listRuns(sel map[string]string) ([]*job.Run, error) {
	docs := c.cache.selectDocs(kindRun, sel)
	out := make([]*job.Run, 0, len(docs))
	for _, d := range docs {
		r, err := decode[job.Run](d)
		if err != nil {
			return nil, err
		}
		r.Version = d.Version
		c.rederive(r)
		out = append(out, r)
	}
	return out, nil
}

// Stop stops a run that has not ended; its Ray job is stopped and its
// on-demand cluster, if any, released.
func (s *RunService) Stop(ctx context.Context, id string) (*job.Run, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r, err := s.c.getRun(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.c.endRun(ctx, r, job.Stop, "stopped by "+UserFrom(ctx))
}

// Logs returns what a run has logged so far.
func (s *RunService) Logs(ctx context.Context, id string) ([]string, error) {
	if _, err := s.Get(ctx, id); err != nil {
		return nil, err
	}
	return s.c.ray.Logs(ctx, id)
}

// Events returns a run's event log, oldest first.
func (s *RunService) Events(ctx context.Context, id string) ([]cluster.Event, error) {
	r, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return r.Events, nil
}

// SaveJob saves a job config, as Jobs().Save with a request id; with
// RunJob it makes *Engine a job.Submitter.
func (c *Engine) SaveJob(ctx context.Context, cfg *job.Config, requestID string) (*job.Record, error) {
	return c.Jobs().Save(ctx, cfg, job.SaveOptions{RequestID: requestID})
}

// RunJob starts a run, as Runs().Create with a request id.
func (c *Engine) RunJob(ctx context.Context, jobID, requestID string) (*job.Run, error) {
	return c.Runs().Create(ctx, jobID, job.RunOptions{RequestID: requestID})
}

// putRun stores next over version and sets its new version.
func (c *Engine) putRun(ctx context.Context, next *job.Run, version string) error {
	from := c.cachedState(kindRun, next.ID)
	v, err := c.update(ctx, kindRun, next.ID, version, runLabels(next), next)
	if err != nil {
		return notFoundAs(err, "run", next.ID)
	}
	next.Version = v
	c.logRunChange(job.RunState(from), next)
	return nil
}

// moveRun applies trigger t to run r and writes it, with change applied
// to the copy first; on a conflict it reads the run again and retries.
// ok is false when t does not apply to the run's state.
func (c *Engine) moveRun(ctx context.Context, r *job.Run, t job.RunTrigger, msg string, change func(*job.Run)) (*job.Run, bool, error) {
	for attempt := 0; ; attempt++ {
		to, ok, err := job.Transition(r.ID, r.State, t)
		if err != nil || !ok {
			return r, false, err
		}
		next := r.DeepCopy()
		prev := r.State
		next.State = to
		if to != job.Waiting {
			next.WaitReason = ""
		}
		if to == job.Provisioning {
			next.Message = msg
		}
		if to.Terminal() {
			next.FinishedAt = c.clock.Now()
			next.Message, next.WaitReason = msg, ""
			if next.StartedAt.IsZero() && prev == job.Running {
				next.StartedAt = next.FinishedAt
			}
			// Nothing of a run that never reached Ray is left to release,
			// but an on-demand run's admitted cluster.
			next.RayDone = (prev == job.Queued || prev == job.Waiting) && next.Config.OnDemand == nil
		}
		if change != nil {
			change(next)
		}
		source := "system"
		if t == job.Stop {
			source = "user"
		}
		next.Events = cluster.AppendEvent(next.Events, c.event(ctx, source, string(to), msg))
		err = c.putRun(ctx, next, r.Version)
		if err == nil {
			return next, true, nil
		}
		if !errors.Is(err, errs.ErrConflict) || attempt >= conflictRetries {
			return nil, false, err
		}
		if r, err = c.freshRun(ctx, r.ID); err != nil {
			return nil, false, err
		}
	}
}

func (c *Engine) freshRun(ctx context.Context, id string) (*job.Run, error) {
	r, v, err := fresh[job.Run](ctx, c, kindRun, id)
	if err != nil {
		return nil, notFoundAs(err, "run", id)
	}
	r.Version = v
	c.rederive(r)
	return r, nil
}

// endRun ends a run (Stop or Fail) with msg; the reconciler then releases
// what it holds.
func (c *Engine) endRun(ctx context.Context, r *job.Run, t job.RunTrigger, msg string) (*job.Run, error) {
	next, _, err := c.moveRun(ctx, r, t, msg, nil)
	return next, err
}

// failRun fails a run whose background step kept failing.
func (c *Engine) failRun(ctx context.Context, id, why string) error {
	r, err := c.freshRun(ctx, id)
	if errs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !r.State.Live() {
		return errors.New(why) // an ended run's cleanup keeps retrying
	}
	_, err = c.endRun(ctx, r, job.Fail, why)
	return err
}

// wait records why a run waits (J18), writing only when that changes.
func (c *Engine) wait(ctx context.Context, r *job.Run, why job.WaitReason, msg string) error {
	if r.State == job.Waiting && r.WaitReason == why && r.Message == msg {
		return nil
	}
	_, _, err := c.moveRun(ctx, r, job.Wait, string(why), func(n *job.Run) { n.WaitReason, n.Message = why, msg })
	return err
}

// reconcileRun takes a run one step on: place it, follow it on Ray, or
// release what an ended run still holds.
func (c *Engine) reconcileRun(ctx context.Context, id string) (time.Duration, error) {
	r, err := c.getRun(ctx, id)
	if errs.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	switch {
	case !r.State.Live():
		return 0, c.cleanupRun(ctx, r)
	case r.State == job.Queued || r.State == job.Waiting:
		return 0, c.placeRun(ctx, r)
	}
	return 0, c.followRun(ctx, r)
}

// placeRun puts a waiting run on a cluster, or records why it waits
// (J18), or fails it when its target is gone (J19).
func (c *Engine) placeRun(ctx context.Context, r *job.Run) error {
	cfg := &r.Config
	switch cfg.Mode() {
	case job.ClusterMode:
		cl, err := c.getCluster(ctx, cfg.Cluster)
		switch {
		case errs.IsNotFound(err):
			_, err = c.endRun(ctx, r, job.Fail, fmt.Sprintf("cluster %s does not exist", cfg.Cluster))
			return err
		case err != nil:
			return err
		case cl.State == cluster.Deleting:
			_, err = c.endRun(ctx, r, job.Fail, fmt.Sprintf("cluster %s was deleted", cl.ID))
			return err
		case cl.State == cluster.Running:
			return c.place(ctx, r, cl)
		}
		return c.wait(ctx, r, job.ClusterNotRunning, fmt.Sprintf("waiting for cluster %s to run", cl.ID))
	case job.GroupMode:
		gid := cfg.Group
		if ok, err := c.exists(ctx, kindGroup, gid); err != nil {
			return err
		} else if !ok {
			_, err := c.endRun(ctx, r, job.Fail, fmt.Sprintf("cluster group %s does not exist", gid))
			return err
		}
		members, err := c.listClusters(map[string]string{groupLabel + gid: "1"})
		if err != nil {
			return err
		}
		cands := make([]scheduler.Candidate, 0, len(members))
		byID := map[string]*cluster.Cluster{}
		clashing := 0
		for _, cl := range members {
			cand := scheduler.Candidate{ClusterID: cl.ID, Running: cl.State == cluster.Running, Abnormal: cl.State == cluster.Abnormal}
			// A member whose mounts take a path the job mounts on cannot
			// host it: the job inherits the cluster's mounts (C16).
			if len(storage.MountClashes("mounts", cl.Spec.Mounts, cfg.Mounts)) > 0 {
				if cand.Running {
					clashing++
				}
				cand.Running = false
			}
			cands = append(cands, cand)
			byID[cl.ID] = cl
		}
		if id, ok := c.policy.Pick(cands); ok {
			return c.place(ctx, r, byID[id])
		}
		if clashing > 0 {
			_, err := c.endRun(ctx, r, job.Fail, fmt.Sprintf(
				"every running member of group %s already mounts storage on a path this job mounts on; change the job's mount paths", gid))
			return err
		}
		return c.wait(ctx, r, job.WaitReason(scheduler.WhyNone(cands)), fmt.Sprintf("waiting for a running member of group %s", gid))
	}
	return c.placeOnDemand(ctx, r)
}

// place records the cluster a run goes to, then submits it: the choice is
// stored before Ray hears of it, so a retry never submits to another.
func (c *Engine) place(ctx context.Context, r *job.Run, cl *cluster.Cluster) error {
	next, ok, err := c.moveRun(ctx, r, job.Place, "submitted to cluster "+cl.ID, func(n *job.Run) {
		n.ClusterID, n.WaitReason = cl.ID, ""
	})
	if err != nil || !ok {
		return err
	}
	return c.followRun(ctx, next)
}

// placeOnDemand: a run whose resource group has admitted it (its
// reservation is on the group) gets its cluster; one not admitted yet
// asks the resource group's reconciler to look.
func (c *Engine) placeOnDemand(ctx context.Context, r *job.Run) error {
	od := r.Config.OnDemand
	a, _, err := cached[quota.Account](ctx, c, kindRG, od.ResourceGroup)
	if errs.IsNotFound(err) {
		_, err = c.endRun(ctx, r, job.Fail, fmt.Sprintf("resource group %s does not exist", od.ResourceGroup))
		return err
	}
	if err != nil {
		return err
	}
	if _, err := c.demand(r); err != nil {
		_, err = c.endRun(ctx, r, job.Fail, "its on-demand environment cannot be sized: "+err.Error())
		return err
	}
	cid := odClusterID(r.ID)
	if _, held := a.Holders[cid]; !held {
		if r.State == job.Queued {
			c.enqueue(kindRG + "/" + od.ResourceGroup)
		}
		return nil
	}
	// A cluster not in the cache is created; one that exists after all
	// (the cache lags) is a conflict, which is fine.
	if _, ok := c.cache.get(kindCluster, cid); !ok {
		now := c.clock.Now()
		env := od.Environment.DeepCopy()
		replicas := map[string]int{}
		for _, w := range env.Workers {
			replicas[w.Name] = w.Instances.Min
		}
		cl := &cluster.Cluster{ID: cid, State: cluster.Starting, Generation: 1, Creator: r.Creator, CreatedAt: now, UpdatedAt: now,
			Temporary: true, OwnerRun: r.ID, Replicas: replicas, QuotaGroup: od.ResourceGroup,
			Live: &cluster.Live{ResourceGroup: od.ResourceGroup, Environment: *env.DeepCopy()},
			Spec: cluster.Spec{Name: "ondemand_" + r.ID, Priority: new(od.EffectivePriority()), ResourcePackage: od.ResourcePackage,
				ResourceGroup: od.ResourceGroup, Environment: *env, Mounts: r.Config.Mounts, Tags: r.Config.Tags}}
		cl.Events = cluster.AppendEvent(nil, c.event(ctx, "system", "create", "on-demand cluster for run "+r.ID))
		if _, err := c.create(ctx, kindCluster, cid, clusterLabels(cl), cl); err != nil && !errors.Is(err, errs.ErrConflict) {
			return err
		}
	} else if err != nil {
		return err
	}
	_, _, err = c.moveRun(ctx, r, job.Place, "starting on-demand cluster "+cid, func(n *job.Run) { n.ClusterID = cid })
	return err
}

// followRun moves a placed run with its cluster and its Ray job: it
// submits the job once the cluster runs (Ray keys it by the run id, so a
// retry never starts it twice), and records what Ray reports.
func (c *Engine) followRun(ctx context.Context, r *job.Run) error {
	cl, err := c.getCluster(ctx, r.ClusterID)
	switch {
	case errs.IsNotFound(err) || (err == nil && cl.State == cluster.Deleting):
		_, err = c.endRun(ctx, r, job.Fail, fmt.Sprintf("cluster %s was deleted", r.ClusterID))
		return err
	case err != nil:
		return err
	case cl.State == cluster.Abnormal:
		_, err = c.endRun(ctx, r, job.Fail, fmt.Sprintf("cluster %s is abnormal: %s", cl.ID, cl.Reason))
		return err
	case cl.State != cluster.Running:
		return nil // its on-demand cluster is still starting
	}
	obs, err := c.ray.RunStatus(ctx, r.ID)
	if errs.IsNotFound(err) {
		if r.State == job.Running {
			_, err = c.endRun(ctx, r, job.Fail, "Ray has no record of the job any more")
			return err
		}
		if err := c.ray.SubmitRun(ctx, r, cl); err != nil {
			return err
		}
		// A stop stored while the submit was on its way has already tried
		// to stop a job Ray did not have yet: stop it now.
		if now, err := c.getRun(ctx, r.ID); err == nil && !now.State.Live() {
			return c.ray.StopRun(ctx, r.ID)
		}
		obs, err = c.ray.RunStatus(ctx, r.ID)
	}
	if err != nil {
		return err
	}
	obs = obs.Bounded() // what a Ray head says is stored: bounded, whatever the backend
	var t job.RunTrigger
	switch obs.State {
	case job.Running:
		t = job.ObservedRunning
	case job.Succeeded:
		t = job.ObservedSucceeded
	case job.Failed:
		t = job.ObservedFailed
	case job.Stopped:
		t = job.Fail
	default:
		return nil
	}
	next, ok, err := c.moveRun(ctx, r, t, obs.Message, func(n *job.Run) {
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
		return err
	}
	if !next.State.Live() {
		return c.cleanupRun(ctx, next)
	}
	return nil
}

// cleanupRun releases what an ended run still holds: its Ray job, and an
// on-demand run's cluster (which in turn releases its quota).
func (c *Engine) cleanupRun(ctx context.Context, r *job.Run) error {
	if r.RayDone {
		return nil
	}
	if r.ClusterID != "" {
		if err := c.ray.StopRun(ctx, r.ID); err != nil && !errs.IsNotFound(err) {
			return err
		}
	}
	if od := r.Config.OnDemand; od != nil {
		cid := odClusterID(r.ID)
		cl, err := c.getCluster(ctx, cid)
		switch {
		case errs.IsNotFound(err):
			if _, err := c.changeAccount(ctx, od.ResourceGroup, func(a *quota.Account) (bool, error) {
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
	return c.putRun(ctx, next, r.Version)
}
