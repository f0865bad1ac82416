package platform

import (
	"context"
	"fmt"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/group"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/plan"
	"github.com/aidlc/dlc/quota"
)

// plannedID is the id a plan gives what it would create: a real create
// makes a new one.
const plannedID = "planned"

// PlanCreate plans Create(spec): every problem Create would report (as
// Validate does, and what the spec refers to), the cluster as it would
// be stored and what the backend would write for it (a suspended
// RayCluster on Kubernetes), and what its start will reserve. It writes
// nothing.
func (s *ClusterService) PlanCreate(ctx context.Context, spec *cluster.Spec) (*plan.Plan, error) {
	c := s.c
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if spec == nil {
		return nil, nilInput("spec", "a cluster spec")
	}
	cl, err := c.clusters.newCluster(ctx, spec.DeepCopy(), "cls-"+plannedID)
	if err != nil {
		return nil, err
	}
	if err := c.names.nameTaken(ctx, kindCluster, cl.Spec.Name, cl.ID); err != nil {
		return nil, err // Create would fail so (ErrConflict)
	}
	need, err := cl.Spec.Environment.MinResources(c.cat.Nodes)
	if err != nil {
		return nil, err
	}
	p := &plan.Plan{Operation: "create cluster", Cluster: cl}
	if p.Quota, err = c.quotaPlan(ctx, cl.Spec.ResourceGroup, "", need, nil); err != nil {
		return nil, err
	}
	p.Notes = c.maxNote(&cl.Spec.Environment, p.Quota)
	return p, s.planCluster(p, cl)
}

// PlanStart plans Start(id): the state check Start makes, the cluster as
// the start would write it and what the backend would then apply (the
// RayCluster unsuspended), and the reservation with the group before and
// after; when it does not fit, Start would be ErrQuota. It writes
// nothing.
func (s *ClusterService) PlanStart(ctx context.Context, id string) (*plan.Plan, error) {
	c := s.c
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cl, err := c.clusters.getCluster(ctx, id)
	if err != nil {
		return nil, err
	}
	next, _, err := c.clusters.started(cl)
	if err != nil {
		return nil, err
	}
	need, err := s.heldAfter(cl, next) // as the start's write holds it (writeWithHold)
	if err != nil {
		return nil, err
	}
	p := &plan.Plan{Operation: "start cluster", Cluster: next}
	if p.Quota, err = c.quotaPlan(ctx, next.Live.ResourceGroup, id, need, s.holdOf(cl, next, need)); err != nil {
		return nil, err
	}
	p.Notes = c.maxNote(&next.Live.Environment, p.Quota)
	return p, s.planCluster(p, next)
}

// PlanUpdate plans Update(in): every check Update makes (the version,
// the state, every problem of the spec), the cluster as the edit would
// write it, the settings that apply now and those that wait for the next
// start, and, for a cluster that runs, what the backend would apply and
// the reservation before and after (a wider worker range reserves at
// once); for one that does not, what its next start will reserve. It
// writes nothing.
func (s *ClusterService) PlanUpdate(ctx context.Context, in *cluster.Cluster) (*plan.Plan, error) {
	c := s.c
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if in == nil {
		return nil, nilInput("cluster", "the cluster to update, as read")
	}
	e, err := c.clusters.edited(ctx, in)
	if err != nil {
		return nil, err
	}
	if e.next.Spec.Name != e.cur.Spec.Name {
		if err := c.names.nameTaken(ctx, kindCluster, e.next.Spec.Name, e.cur.ID); err != nil {
			return nil, err // the rename's claim would fail so (ErrConflict)
		}
	}
	p := &plan.Plan{Operation: "update cluster", Cluster: e.next}
	for _, l := range e.live {
		p.Notes = append(p.Notes, "applies now: "+l)
	}
	for _, l := range e.restart {
		p.Notes = append(p.Notes, "applies at the next start: "+l)
	}
	if e.cur.Live == nil {
		need, err := e.next.Spec.Environment.MinResources(c.cat.Nodes)
		if err != nil {
			return nil, err
		}
		if p.Quota, err = c.quotaPlan(ctx, e.next.Spec.ResourceGroup, "", need, nil); err != nil {
			return nil, err
		}
		p.Notes = append(p.Notes, c.maxNote(&e.next.Spec.Environment, p.Quota)...)
		return p, nil // Ray runs nothing of it: nothing is applied
	}
	if p.Quota, err = c.quotaPlan(ctx, e.next.Live.ResourceGroup, e.cur.ID, e.need, s.holdOf(e.cur, e.next, e.need)); err != nil {
		return nil, err
	}
	if e.next.Generation == e.cur.Generation {
		return p, nil // nothing Ray runs changes
	}
	return p, s.planCluster(p, e.next)
}

// PlanRun plans Runs().Create(jobID): the run the job's current revision
// would make, where it would go and what the backend would write for it.
// An on-demand run: its cluster's RayJob, the reservation its admission
// makes, and, when that does not fit now, its would-be place in the
// resource group's queue. A run on a cluster or a group: the Ray Jobs API
// request, on the cluster it would go to now (the group's policy may pick
// another when it runs), or a note that it would wait. It writes nothing.
func (s *JobService) PlanRun(ctx context.Context, jobID string) (*plan.Plan, error) {
	c := s.c
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// No Seq: it would move the client's sequence, and two clients would
	// plan apart.
	r, err := c.runs.queuedRun(ctx, jobID, "run-"+plannedID, c.clock.Now(), 0, nil)
	if err != nil {
		return nil, err
	}
	p := &plan.Plan{Operation: "run job", Run: r}
	why, err := c.runs.missingTarget(ctx, &r.Config)
	if err != nil {
		return nil, err
	}
	if why != "" {
		return nil, &errs.StateError{Kind: "job", ID: jobID, Op: "run", State: "target missing", Reason: why + " (J19)"}
	}
	switch r.Config.Mode() {
	case job.OnDemandMode:
		od := r.Config.OnDemand
		cl, err := c.onDemandCluster(r)
		if err != nil {
			return nil, err
		}
		p.Cluster = cl
		if p.Quota, err = c.quotaPlan(ctx, od.ResourceGroup, "", r.Demand, func(*quota.Account) quota.Resources { return r.Demand }); err != nil {
			return nil, err
		}
		// It is admitted now only if it fits and no run waits before it.
		ahead := c.queuedAhead(od.ResourceGroup, r.Priority)
		if !p.Quota.Fits || ahead > 0 {
			p.Position, p.Ahead = ahead+1, ahead
			if p.Quota.Fits {
				p.Notes = append(p.Notes, fmt.Sprintf("it fits, but %d queued run(s) of a priority as high or higher come first", ahead))
			}
		}
		p.Notes = append(p.Notes, c.maxNote(&od.Environment, p.Quota)...)
		return p, c.planRun(p, r, cl)
	case job.ClusterMode:
		cl, err := c.clusters.getCluster(ctx, r.Config.Cluster)
		if err != nil {
			return nil, err
		}
		return p, c.planOnCluster(p, r, cl)
	case job.GroupMode:
		gs, err := c.groupScheduling(ctx, r.Config.Group)
		if err != nil {
			return nil, err
		}
		if gs.Policy == group.Random || gs.Policy == "" {
			// A random pick is not planned (it would draw from the client's
			// source): the first running member stands for any of them.
			members, err := c.clusters.listClusters(map[string]string{labelMemberOf + r.Config.Group: "1"})
			if err != nil {
				return nil, err
			}
			for _, cl := range members {
				if cl.State == cluster.Running {
					p.Notes = append(p.Notes, fmt.Sprintf("group %s's policy is random: the run would go to one of its running members, %s among them", r.Config.Group, cl.ID))
					return p, c.planOnCluster(p, r, cl)
				}
			}
		} else {
			ch, err := c.chooseMember(ctx, r, r.Config.Group)
			if err != nil {
				return nil, err
			}
			if ch.cluster != nil {
				p.Notes = append(p.Notes, "placement: "+ch.reason)
				return p, c.planOnCluster(p, r, ch.cluster)
			}
		}
		p.Notes = append(p.Notes, fmt.Sprintf("no member of group %s can take the run now: it would wait (J18)", r.Config.Group))
		return p, nil
	}
	return p, nil
}

// planOnCluster plans run r on existing cluster cl.
func (c *Engine) planOnCluster(p *plan.Plan, r *job.Run, cl *cluster.Cluster) error {
	p.Cluster = cl
	if cl.State != cluster.Running {
		p.Notes = append(p.Notes, fmt.Sprintf("cluster %s is %s: the run would wait until it runs (J18)", cl.ID, cl.State))
		return nil
	}
	r.ClusterID = cl.ID
	return c.planRun(p, r, cl)
}

// quotaPlan is need's effect on resource group rg, where holder (when
// not "") may hold a reservation already. hold is what the operation
// reserves now for holder, given the account (Needs; ReservedAfter grows
// by it, less what holder held), and what must fit; nil when it reserves
// nothing now (need must fit, at the next start).
func (c *Engine) quotaPlan(ctx context.Context, rg, holder string, need quota.Resources, hold func(*quota.Account) quota.Resources) (*plan.Quota, error) {
	a, _, err := get[quota.Account](ctx, c.acc, kindResourceGroup, "resource group", rg)
	if err != nil {
		return nil, err
	}
	held := quota.Resources{}
	if holder != "" {
		held = a.Held(holder)
	}
	free := a.Allocatable().Add(held)
	takes := need
	if hold != nil {
		takes = hold(a)
	}
	q := &plan.Quota{ResourceGroup: rg, Capacity: a.Capacity, Needs: takes, ReservedBefore: a.Reserved(),
		ReservedAfter: a.Reserved(), Allocatable: free, Fits: takes.Fits(free)}
	if hold != nil {
		q.ReservedAfter = a.Reserved().Sub(held).Add(takes)
	}
	if !q.Fits {
		q.Lacks = lacks(takes, free)
	}
	return q, nil
}

// holdOf is what writing next over prev would reserve, next's head and
// held workers taking need, given the account (holdAfter): a plan's
// figures are the write's.
func (s *ClusterService) holdOf(prev, next *cluster.Cluster, need quota.Resources) func(*quota.Account) quota.Resources {
	return func(a *quota.Account) quota.Resources {
		h, _ := s.holdAfter(a, prev, next, need)
		return h
	}
}

// queuedAhead counts the runs waiting in resource group rg's queue that a
// new run of priority prio would wait behind: those of a priority as high
// or higher (they were submitted before it).
func (c *Engine) queuedAhead(rg string, prio int) int {
	a, _, err := fromCache[quota.Account](c.acc, kindResourceGroup, rg)
	n := 0
	for _, it := range c.queues.order(rg, c.queueItem) {
		if err == nil {
			if _, held := a.Hold(odClusterID(it.RunID)); held {
				continue // admitted
			}
		}
		if it.Priority >= prio {
			n++
		}
	}
	return n
}

// maxNote says when an environment's autoscaling maximum exceeds its
// resource group's whole quota: it could never be reached (C14).
func (c *Engine) maxNote(env *cluster.Environment, q *plan.Quota) []string {
	most, err := env.MaxResources(c.cat.Nodes)
	if err != nil || q == nil || most.Fits(q.Capacity) {
		return nil
	}
	return []string{fmt.Sprintf("at every worker group's maximum it would take %s, more than resource group %s's whole quota, %s: the autoscaler stops where quota does (C14)", most, q.ResourceGroup, q.Capacity)}
}

// planCluster fills p's manifests for standing cluster cl.
func (s *ClusterService) planCluster(p *plan.Plan, cl *cluster.Cluster) error {
	c := s.c
	if pl, ok := c.ray.(backend.Planner); ok {
		m, err := pl.PlanCluster(cl)
		p.Manifests = m
		return err
	}
	p.Manifests = []backend.Manifest{{Kind: "cluster", Name: cl.ID, Object: cl}}
	return nil
}

// planRun fills p's manifests for run r on cluster cl.
func (c *Engine) planRun(p *plan.Plan, r *job.Run, cl *cluster.Cluster) error {
	if pl, ok := c.ray.(backend.Planner); ok {
		m, err := pl.PlanRun(r, cl)
		p.Manifests = m
		return err
	}
	p.Manifests = []backend.Manifest{{Kind: "run", Name: r.ID, Object: r}}
	if r.Config.OnDemand != nil {
		p.Manifests = append(p.Manifests, backend.Manifest{Kind: "cluster", Name: cl.ID, Object: cl})
	}
	return nil
}
