package platform

import (
	"context"
	"fmt"
	"maps"
	"strings"

	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/internal/queue"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
)

// Pending says why a waiting run waits and where (J18): an on-demand
// run's position in its resource group's queue, how many runs are ahead,
// and what quota it lacks; a run on a cluster or a group, the clusters it
// waits for and in what state. The queue is derived from the stored runs,
// so every client over the store answers the same. A run that no longer
// waits is a *StateError.
func (s *RunService) Pending(ctx context.Context, id string) (*job.Pending, error) {
	c := s.c
	r, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if r.State != job.Queued && r.State != job.Waiting {
		return nil, &errs.StateError{Kind: "run", ID: id, Op: "say why it waits", State: string(r.State),
			Allowed: []string{string(job.Queued), string(job.Waiting)}}
	}
	p := &job.Pending{RunID: r.ID, State: r.State, Reason: r.WaitReason, Message: r.Message}
	switch r.Config.Mode() {
	case job.ClusterMode:
		if cl, err := c.clusters.getCluster(ctx, r.Config.Cluster); err == nil {
			p.Clusters = []job.ClusterWait{{ID: cl.ID, Name: cl.Spec.Name, State: string(cl.State)}}
		}
	case job.GroupMode:
		members, err := c.clusters.listClusters(map[string]string{labelMemberOf + r.Config.Group: "1"})
		if err != nil {
			return nil, err
		}
		for _, cl := range members {
			p.Clusters = append(p.Clusters, job.ClusterWait{ID: cl.ID, Name: cl.Spec.Name, State: string(cl.State)})
		}
	case job.OnDemandMode:
		// Its place from the queue's order statistics: O(log n), not a
		// list of the whole queue.
		rg := r.Config.OnDemand.ResourceGroup
		a, _, err := get[quota.Account](ctx, c.acc, kindResourceGroup, "resource group", rg)
		if err != nil {
			return nil, err
		}
		if _, held := a.Hold(odClusterID(id)); !held {
			if pos, ok := c.queues.position(rg, id, c.queueItem); ok {
				if it, ok := c.queueItem(id); ok {
					e := pendingEntry(r, rg, pos, it.Demand, a)
					return &e, nil
				}
			}
		}
		// Admitted: its reservation is made and its cluster on the way.
		p.ResourceGroup = r.Config.OnDemand.ResourceGroup
		p.Needs = r.Demand
		p.Message = "admitted: its on-demand cluster is starting"
	}
	return p, nil
}

// Pending lists the runs waiting in a resource group's queue in admission
// order (priority, then submission), each with its position, as Kueue's
// visibility API does. Admitted runs are not listed; clusters' growths
// waiting in the queue are not listed either, but count in the positions
// of the runs behind them, as Runs().Pending counts them.
func (s *ResourceGroupService) Pending(ctx context.Context, rg string) ([]job.Pending, error) {
	c := s.c
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	a, _, err := get[quota.Account](ctx, c.acc, kindResourceGroup, "resource group", rg)
	if err != nil {
		return nil, err
	}
	items := c.queues.order(rg, c.queueItem)
	out := make([]job.Pending, 0, len(items))
	ahead := 0
	for _, it := range items {
		if isGrowthEntry(it.RunID) {
			ahead++ // a cluster's growth: ahead of the runs behind it, not listed
			continue
		}
		if _, held := a.Hold(odClusterID(it.RunID)); held {
			continue
		}
		r, err := c.runs.getRun(ctx, it.RunID)
		if err != nil {
			continue
		}
		out = append(out, pendingEntry(r, rg, ahead, it.Demand, a))
		ahead++
	}
	return out, nil
}

// pendingEntry is waiting run r's entry in resource group rg's queue, with
// ahead runs before it, needing demand where a's quota can be allocated.
// A run that fits while a keeps as many pending reservation changes as it
// may (quota.MaxPending) is told that admission waits for them to be
// settled into their documents (resourcegroup_reconciler.go): derived
// here, not written on the run.
func pendingEntry(r *job.Run, rg string, ahead int, demand quota.Resources, a *quota.Account) job.Pending {
	free := a.Allocatable()
	p := job.Pending{RunID: r.ID, State: r.State, Reason: r.WaitReason, Message: r.Message, ResourceGroup: rg,
		Position: ahead + 1, Ahead: ahead, Needs: demand, Allocatable: free}
	switch {
	case demand.Fits(free) && len(a.Pending) >= quota.MaxPending:
		p.Lacks = fmt.Sprintf("fits: %s; admitted once some of the resource group's %d pending reservation changes are settled into their documents", lacks(demand, free), len(a.Pending))
	case demand.Fits(free):
		p.Lacks = "fits: " + lacks(demand, free)
	default:
		p.Lacks = lacks(demand, free)
	}
	return p
}

// lacks says in words what a reservation of need finds free.
func lacks(need, free quota.Resources) string {
	return fmt.Sprintf("needs %s; allocatable %s", need, free)
}

// queueItem is a pending on-demand run's entry in its resource group's
// queue, or a cluster's growth's (growthEntry), or false when it no
// longer waits.
func (c *Engine) queueItem(runID string) (queue.Item, bool) {
	if id, ok := strings.CutPrefix(runID, growthPrefix); ok {
		return c.growthItem(runID, id)
	}
	r, _, err := fromCache[job.Run](c.acc, kindRun, runID)
	if err != nil || (r.State != job.Queued && r.State != job.Waiting) {
		return queue.Item{}, false
	}
	demand, err := c.runs.demand(r) // from its config, never the stored Demand (decode rederived Priority)
	if err != nil {
		return queue.Item{}, false // placeOnDemand fails it, saying why
	}
	return queue.Item{RunID: r.ID, Priority: r.Priority, Seq: r.Seq, Enqueued: r.SubmittedAt, Demand: demand}, true
}

// growthItem is cluster id's growth's entry in its resource group's queue
// (entry is its name there): at the cluster's priority (C3), in the order
// it asked (its Since, as a run's submission), for what the workers it
// wants above those it has take; false when it no longer waits.
func (c *Engine) growthItem(entry, id string) (queue.Item, bool) {
	cl, _, err := fromCache[cluster.Cluster](c.acc, kindCluster, id)
	if err != nil || cl.Growth == nil || cl.State != cluster.Running || cl.Live == nil {
		return queue.Item{}, false
	}
	demand, ok := c.growthDemand(cl)
	if !ok {
		return queue.Item{}, false
	}
	since := cl.Growth.Since
	return queue.Item{RunID: entry, Priority: cl.Spec.EffectivePriority(), Seq: uint64(max(since.UnixNano(), 0)), Enqueued: since, Demand: demand}, true
}

// growthDemand is what cluster cl's growth would add to its reservation:
// its worker group at the workers it wants (within the group's range)
// less what its ceiling has now; false when that is nothing.
func (c *Engine) growthDemand(cl *cluster.Cluster) (quota.Resources, bool) {
	g := cl.Growth
	for _, w := range cl.Live.Workers {
		if w.Name != g.Group {
			continue
		}
		held := cl.HeldReplicas() // what the hold covers, draining workers included
		cur := held[w.Name]
		want := min(max(g.Want, w.Instances.Min), w.Instances.MaxOrMin())
		if want <= cur {
			return quota.Resources{}, false
		}
		more := maps.Clone(held)
		more[w.Name] = want
		now, err := cl.Live.ResourcesAt(c.cat.Nodes, held)
		if err != nil {
			return quota.Resources{}, false
		}
		then, err := cl.Live.ResourcesAt(c.cat.Nodes, more)
		if err != nil {
			return quota.Resources{}, false
		}
		return then.Sub(now).Max(quota.Resources{}), true
	}
	return quota.Resources{}, false
}

// queueWaits reports whether anything but entry waits in resource group
// rg's queue that the queue serves before an ask of priority prio: an
// entry of at least that priority, or one waiting past the starvation
// bound (WithMaxWait) — an on-demand run not admitted (it holds no
// reservation), or another cluster's growth. A lower-priority run that
// waits neither makes a cluster give its headroom back nor holds its
// growth back (it did, without bound: a priority-1 run froze a
// priority-9 autoscaler). It looks at no more of the queue than that
// (queue.Queue.Ahead), and at admitted runs not yet taken out.
//
// The queue is the index derived from the store's watch, as admission's
// (queues.go): a client behind the store may lend headroom a run queued
// meanwhile needs, or hold some back that it need not, for as long as its
// cache is behind; the next look puts it right.
func (c *Engine) queueWaits(rg, entry string, prio int) bool {
	waits := c.waiter(rg, entry)
	return c.queues.ahead(rg, c.clock.Now(), prio, c.queueItem, waits)
}

// waitLevel is what waits in resource group rg's queue as headroom sees
// it: the highest priority of an entry not admitted, a starving one (past
// WithMaxWait) counting as above every priority (10); 0 when nothing
// waits.
func (c *Engine) waitLevel(rg string) int {
	waits, now := c.waiter(rg, ""), c.clock.Now()
	if c.queues.ahead(rg, now, 10, c.queueItem, waits) {
		return 10 // a starving one
	}
	level := 0
	c.queues.ahead(rg, now, 1, c.queueItem, func(it queue.Item) bool {
		if waits(it) {
			level = max(it.Priority, 1)
			return true
		}
		return false
	})
	return level
}

// waiter returns whether a queue entry of resource group rg waits, other
// than entry: a run the group's account (as cached) holds no reservation
// for, or a growth.
func (c *Engine) waiter(rg, entry string) func(queue.Item) bool {
	a, _, err := fromCache[quota.Account](c.acc, kindResourceGroup, rg)
	return func(it queue.Item) bool {
		if it.RunID == entry {
			return false
		}
		if err == nil && !isGrowthEntry(it.RunID) {
			if _, held := a.Hold(odClusterID(it.RunID)); held {
				return false // admitted
			}
		}
		return true
	}
}
