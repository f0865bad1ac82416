package platform

import (
	"context"
	"sync"
	"time"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/group"
	"github.com/aidlc/dlc/internal/check"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
	"github.com/aidlc/dlc/scheduler"
	"github.com/aidlc/dlc/storage"
)

// runLoad is what the runs placed on each cluster say of it, as the
// store's watch reports the runs: how many are active on it (provisioning
// or running: the run's phase label), for the least-loaded policy and the
// idle timeout, and when the last one ended, for the idle timeout (L4).
// Each is read in O(1), never by a list of the runs. Like the queues it is
// derived, in memory, never the truth; a restart rebuilds it from the
// store's snapshot.
type runLoad struct {
	mu      sync.RWMutex
	on      map[string]string    // active run → the cluster it is placed on
	n       map[string]int       // cluster → its active runs
	lastEnd map[string]time.Time // cluster → the latest FinishedAt of a run placed on it
}

func newRunLoad() *runLoad {
	return &runLoad{on: map[string]string{}, n: map[string]int{}, lastEnd: map[string]time.Time{}}
}

// observe follows a stored run (d's labels derived, nil when deleted, and
// r its decoded form, nil then too); it only touches memory, so it can run
// inside the store's watch. It reports whether the run's end is news for
// its cluster (a later end than any seen).
func (l *runLoad) observe(d backend.Doc, r *job.Run) (ended bool) {
	if d.Kind != kindRun {
		return false
	}
	now := ""
	if d.Labels[labelPhase] == phaseActive {
		now = d.Labels[labelOn]
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if r != nil && r.ClusterID != "" && !r.State.Live() && r.FinishedAt.After(l.lastEnd[r.ClusterID]) {
		l.lastEnd[r.ClusterID], ended = r.FinishedAt, true
	}
	was, counted := l.on[d.ID]
	if counted && was == now {
		return ended
	}
	if counted {
		if l.n[was]--; l.n[was] <= 0 {
			delete(l.n, was)
		}
		delete(l.on, d.ID)
	}
	if now != "" {
		l.on[d.ID] = now
		l.n[now]++
	}
	return ended
}

// active returns how many runs are active on a cluster.
func (l *runLoad) active(clusterID string) int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.n[clusterID]
}

// ended returns when the last run placed on a cluster ended (zero: none
// the store still has).
func (l *runLoad) ended(clusterID string) time.Time {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.lastEnd[clusterID]
}

// keepOnly drops the ends kept of the clusters for which live is false.
func (l *runLoad) keepOnly(live func(clusterID string) bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id := range l.lastEnd {
		if !live(id) {
			delete(l.lastEnd, id)
		}
	}
}

// forget drops what is kept of a deleted cluster.
func (l *runLoad) forget(clusterID string) {
	l.mu.Lock()
	delete(l.lastEnd, clusterID)
	l.mu.Unlock()
}

// policyOf returns what picks the member for a group's policy: the
// client's own (WithPolicy, seeded random by default) for Random, and for
// a policy this client does not know (a group written by a newer client,
// or edited from outside), which the choice's reason then names.
func (c *Engine) policyOf(p group.Policy) (scheduler.Policy, bool) {
	switch p {
	case group.Random, "":
		return c.policy, true
	case group.LeastLoaded:
		return scheduler.LeastLoaded{}, true
	case group.OrderedFailover:
		return scheduler.OrderedFailover{}, true
	case group.MostFreeQuota:
		return scheduler.MostFreeQuota{}, true
	}
	return c.policy, false
}

// memberChoice is where a group's policy sends a run.
type memberChoice struct {
	cluster *cluster.Cluster // nil: none can take it
	reason  string           // why (the run's Placement), when cluster is not nil
	// cands are the members as the policy saw them, and clashing how many
	// running members could not take the run for its mounts.
	cands    []scheduler.Candidate
	clashing int
}

// chooseMember asks the policy of group gid where run r goes, from this
// client's view of the store (the cache and the indexes the watch keeps):
// the members, their states, their active runs, their resource groups'
// accounts. It writes nothing, so two clients that see the same store
// choose the same member for a run (but with the random policy). A group
// that is gone is ErrNotFound.
func (c *Engine) chooseMember(ctx context.Context, r *job.Run, gid string) (memberChoice, error) {
	s, err := c.groupScheduling(ctx, gid)
	if err != nil {
		return memberChoice{}, err
	}
	members, err := c.clusters.listClusters(map[string]string{labelMemberOf + gid: "1"})
	if err != nil {
		return memberChoice{}, err
	}
	// The order counts the members it names, from 1: a listed cluster
	// that is not a member is passed over, as if it were not listed.
	isMember := make(map[string]bool, len(members))
	for _, cl := range members {
		isMember[cl.ID] = true
	}
	order := make(map[string]int, len(s.Order))
	for _, id := range s.Order {
		if _, dup := order[id]; !dup && isMember[id] {
			order[id] = len(order) + 1
		}
	}
	var ch memberChoice
	ch.cands = make([]scheduler.Candidate, 0, len(members))
	byID := make(map[string]*cluster.Cluster, len(members))
	free := map[string]quota.Resources{} // resource group → what it can allocate, read once
	for _, cl := range members {
		cand := scheduler.Candidate{ClusterID: cl.ID, Running: cl.State == cluster.Running, Abnormal: cl.State == cluster.Abnormal,
			ActiveRuns: c.load.active(cl.ID), Order: order[cl.ID]}
		// A member whose mounts take a path the job mounts on cannot
		// host it: the job inherits the cluster's mounts (C16).
		if len(storage.MountClashes("mounts", cl.Spec.Mounts, r.Config.Mounts)) > 0 {
			if cand.Running {
				ch.clashing++
			}
			cand.Running = false
		}
		if s.Policy == group.MostFreeQuota && cand.Running && !cand.Abnormal {
			cand.ResourceGroup = cl.QuotaGroup
			if cand.ResourceGroup == "" {
				cand.ResourceGroup = cl.Spec.ResourceGroup
			}
			a, seen := free[cand.ResourceGroup]
			if !seen {
				if a, err = c.allocatable(ctx, cand.ResourceGroup); err != nil {
					return memberChoice{}, err
				}
				free[cand.ResourceGroup] = a
			}
			cand.Allocatable = a
		}
		ch.cands = append(ch.cands, cand)
		byID[cl.ID] = cl
	}
	p, known := c.policyOf(s.Policy)
	picked, ok := scheduler.Place(p, r.ID, ch.cands)
	if !ok {
		return ch, nil
	}
	ch.cluster, ch.reason = byID[picked.ClusterID], picked.Reason
	if !known {
		ch.reason = "policy " + check.Prefix(string(s.Policy), 40) + " is unknown to this client; " + ch.reason
	}
	if ch.cluster == nil { // a Policy plugged in picked no member of the group
		return memberChoice{cands: ch.cands, clashing: ch.clashing}, nil
	}
	ch.reason = check.Prefix(ch.reason, job.MaxPlacementLen)
	return ch, nil
}

// groupScheduling returns group gid's scheduling policy, read from the
// cache without a copy of the rest of the group (its log), or from the
// store on a miss.
func (c *Engine) groupScheduling(ctx context.Context, gid string) (group.Scheduling, error) {
	if d, ok := c.cache.Get(kindGroup, gid); ok {
		if g, _, err := sharedObject[group.Group](c.acc, d); err == nil {
			return g.Scheduling(), nil // a copy: Normalized clones the order
		}
	}
	g, err := c.groups.getGroup(ctx, gid)
	if err != nil {
		return group.Scheduling{}, err
	}
	return g.Scheduling(), nil
}

// allocatable returns what resource group rg can still allocate, for the
// most-free-quota policy, read from the cache without a copy of its
// holders. A resource group that is gone, or whose account does not
// decode, can allocate nothing: its members come last. A failed read of
// the store is returned (the step is retried).
func (c *Engine) allocatable(ctx context.Context, rg string) (quota.Resources, error) {
	if d, ok := c.cache.Get(kindResourceGroup, rg); ok {
		a, _, err := sharedObject[quota.Account](c.acc, d)
		if err != nil {
			c.o.log.V(1).Info("a resource group's account does not decode: its members rank last", "resourceGroup", rg, "error", err.Error())
			return quota.Resources{}, nil
		}
		return a.Allocatable(), nil
	}
	a, _, err := cached[quota.Account](ctx, c.acc, kindResourceGroup, rg)
	switch {
	case errs.IsNotFound(err):
		return quota.Resources{}, nil
	case err != nil:
		return quota.Resources{}, err
	}
	return a.Allocatable(), nil
}
