package dlc

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
	"github.com/aidlc/dlc/scheduler"
)

// ResourceGroupService is the resource groups of a Client: capacity that
// clusters and on-demand runs reserve from (C4, C14, J3, J12). A resource
// group is a stored object and its reservations live on it, so every
// client over the store sees and changes the same ones.
type ResourceGroupService struct{ c *Client }

// ResourceGroups returns the client's resource groups.
func (c *Client) ResourceGroups() *ResourceGroupService { return &ResourceGroupService{c} }

// Register adds a resource group with its allocatable capacity inside a
// resource package, or changes its capacity (never below what is
// reserved). Runs waiting for quota are reconsidered.
func (s *ResourceGroupService) Register(ctx context.Context, g quota.Group) (quota.Usage, error) {
	c := s.c
	if err := ctx.Err(); err != nil {
		return quota.Usage{}, err
	}
	if err := g.Validate(); err != nil {
		return quota.Usage{}, err
	}
	a := &quota.Account{Group: g}
	v, err := c.create(ctx, kindRG, g.ID, nil, a)
	if err == nil {
		a.Version = v
		return a.Usage(), nil
	}
	if !errors.Is(err, errs.ErrConflict) {
		return quota.Usage{}, err
	}
	a, err = c.changeAccount(ctx, g.ID, func(a *quota.Account) (bool, error) {
		if a.Package != g.Package {
			return false, errs.Conflict("resource group", g.ID, fmt.Sprintf("belongs to package %q, not %q", a.Package, g.Package))
		}
		if a.Capacity == g.Capacity {
			return false, nil
		}
		return true, a.SetCapacity(g.Capacity)
	})
	if err != nil {
		return quota.Usage{}, err
	}
	return a.Usage(), nil
}

// Get returns a resource group's capacity, reservations and what it can
// still allocate.
func (s *ResourceGroupService) Get(ctx context.Context, id string) (quota.Usage, error) {
	if err := ctx.Err(); err != nil {
		return quota.Usage{}, err
	}
	a, _, err := cached[quota.Account](ctx, s.c, kindRG, id)
	if err != nil {
		return quota.Usage{}, notFoundAs(err, "resource group", id)
	}
	return a.Usage(), nil
}

// List returns every resource group's usage, by id.
func (s *ResourceGroupService) List(ctx context.Context) ([]quota.Usage, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []quota.Usage
	for _, d := range s.c.cache.selectDocs(kindRG, nil) {
		a, err := decode[quota.Account](d)
		if err != nil {
			return nil, err
		}
		out = append(out, a.Usage())
	}
	return out, nil
}

// changeAccount applies f to resource group rg by compare-and-swap: f
// changes the account it is given and reports whether it did; on a
// conflict the account is read again from the store and f applied anew.
func (c *Client) changeAccount(ctx context.Context, rg string, f func(*quota.Account) (bool, error)) (*quota.Account, error) {
	a, v, err := cached[quota.Account](ctx, c, kindRG, rg)
	if errs.IsNotFound(err) {
		a, v, err = fresh[quota.Account](ctx, c, kindRG, rg) // the cache may not have it yet
	}
	if err != nil {
		return nil, notFoundAs(err, "resource group", rg)
	}
	for attempt := 0; ; attempt++ {
		changed, err := f(a)
		if err != nil || !changed {
			a.Version = v
			return a, err
		}
		nv, err := c.update(ctx, kindRG, rg, v, nil, a)
		if err == nil {
			a.Version = nv
			return a, nil
		}
		if !errors.Is(err, errs.ErrConflict) || attempt >= conflictRetries {
			return nil, notFoundAs(err, "resource group", rg)
		}
		if a, v, err = fresh[quota.Account](ctx, c, kindRG, rg); err != nil {
			return nil, notFoundAs(err, "resource group", rg)
		}
	}
}

// odPrefix starts the id of an on-demand run's cluster, which is also the
// holder of its reservation: "od-" + the run id.
const odPrefix = "od-"

func odClusterID(runID string) string { return odPrefix + runID }

// reconcileQuota admits the runs waiting in a resource group's queue that
// its allocatable quota fits, in priority order (BestEffortFIFO, with the
// starvation bound of WithMaxWait), and releases reservations that
// nothing justifies any more once they are older than the repair grace.
// Both are one compare-and-swap of the resource group: two clients that
// decide at once cannot both win.
func (c *Client) reconcileQuota(ctx context.Context, id string) (time.Duration, error) {
	a, v, err := cached[quota.Account](ctx, c, kindRG, id)
	if errs.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	now := c.clock.Now()
	changed := false
	var recheck time.Duration
	// The repair is a fallback for what a crash between two writes left:
	// it looks at every holder, so it runs at most once a quarter of the
	// grace per resource group (and again when a young leak comes of age).
	c.mu.Lock()
	due := now.Sub(c.repaired[id]) >= c.o.grace/4 || c.repaired[id].IsZero()
	if due {
		c.repaired[id] = now
	}
	c.mu.Unlock()
	for h, hold := range a.Holders {
		if !due || c.justified(h, id) {
			continue
		}
		if age := now.Sub(hold.Since); age >= c.o.grace {
			a.Release(h)
			changed = true
		} else if left := c.o.grace - age; recheck == 0 || left < recheck {
			recheck = left
		}
	}
	if recheck > 0 {
		c.mu.Lock()
		delete(c.repaired, id) // look again when the young one is old enough
		c.mu.Unlock()
	}
	item := c.queueItem
	q, queued := c.queues.take(id, item)
	// A run that holds a reservation here is admitted: out of the queue,
	// and on its way to its cluster. One whose reservation went (released
	// by a repair, here or on another client) while it still waits is
	// back in the queue.
	held := map[string]bool{}
	for h := range a.Holders {
		if runID, ok := strings.CutPrefix(h, odPrefix); ok && c.queues.pending(id, runID) {
			held[runID] = true
			c.queues.remove(id, runID)
			c.enqueue(kindRun + "/" + runID)
		}
	}
	for runID := range c.queues.swapHeld(id, held) {
		if !held[runID] {
			if it, ok := item(runID); ok {
				c.queues.push(id, it)
			}
		}
	}
	admitted := c.queues.admit(q, func(q *scheduler.Queue) []scheduler.Item { return q.Admit(now, a.Allocatable()) })
	for _, it := range admitted {
		if _, err := a.Set(odClusterID(it.RunID), it.Demand, now); err != nil {
			for _, it := range admitted {
				c.queues.push(id, it) // not admitted after all
			}
			return 0, err
		}
		changed = true
	}
	if changed {
		if _, err := c.update(ctx, kindRG, id, v, nil, a); err != nil {
			for _, it := range admitted {
				c.queues.push(id, it) // not admitted after all
			}
			c.requeued(id, queued)
			return 0, err
		}
	}
	in := map[string]bool{}
	for _, it := range admitted {
		in[it.RunID] = true
		c.enqueue(kindRun + "/" + it.RunID)
		c.metrics.admitted(id, now.Sub(it.Enqueued))
		c.o.log.V(1).Info("run admitted", "run", it.RunID, "resourceGroup", id, "priority", it.Priority, "reserved", it.Demand.String())
	}
	// The rest of the newly queued wait for quota, and say so (J18).
	for i, runID := range queued {
		if in[runID] {
			continue
		}
		r, err := c.getRun(ctx, runID)
		if err != nil || r.State != job.Queued {
			continue
		}
		if _, held := a.Holders[odClusterID(r.ID)]; held {
			continue
		}
		if err := c.wait(ctx, r, job.InsufficientQuota, "waiting for quota in resource group "+id); err != nil {
			c.requeued(id, queued[i:])
			return 0, err
		}
	}
	return recheck, nil
}

// justified reports whether holder may keep a reservation in resource
// group rg: a cluster that holds quota there, or an admitted on-demand
// run whose cluster is not made yet.
func (c *Client) justified(holder, rg string) bool {
	if d, ok := c.cache.get(kindCluster, holder); ok {
		return cluster.State(d.Labels[labelState]).HoldsQuota() && d.Labels[labelQuota] == rg
	}
	if runID, ok := strings.CutPrefix(holder, odPrefix); ok {
		if r, _, err := fromCache[job.Run](c, kindRun, runID); err == nil {
			return r.State.Live() && r.Config.OnDemand != nil && r.Config.OnDemand.ResourceGroup == rg
		}
	}
	return false
}

// CheckQuota audits every resource group in the store itself: no
// reservation is negative, together they fit the capacity, and none has
// been held longer than the repair grace by a holder that no longer
// justifies it (a leak). It returns every problem found.
func (c *Client) CheckQuota(ctx context.Context) error {
	docs, err := c.store.List(ctx, kindRG, nil)
	if err != nil {
		return err
	}
	now := c.clock.Now()
	var bad []string
	for _, d := range docs {
		a, err := decode[quota.Account](d)
		if err != nil {
			return err
		}
		if err := a.Check(); err != nil {
			bad = append(bad, err.Error())
		}
		for h, hold := range a.Holders {
			if now.Sub(hold.Since) < c.o.grace {
				continue
			}
			ok, err := c.justifiedInStore(ctx, h, a.ID)
			if err != nil {
				return err
			}
			if !ok {
				bad = append(bad, fmt.Sprintf("resource group %s: %s holds %s since %s and nothing justifies it",
					a.ID, h, hold.Resources, hold.Since.Format(time.RFC3339)))
			}
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return fmt.Errorf("quota: %s", strings.Join(bad, "; "))
	}
	return nil
}

// justifiedInStore is justified, read from the store rather than the cache.
func (c *Client) justifiedInStore(ctx context.Context, holder, rg string) (bool, error) {
	d, err := c.store.Get(ctx, kindCluster, holder)
	if err == nil {
		cl, err := decode[clusterRecord](d)
		if err != nil {
			return false, err
		}
		return cl.State.HoldsQuota() && cl.QuotaGroup == rg, nil
	}
	if !errs.IsNotFound(err) {
		return false, err
	}
	runID, ok := strings.CutPrefix(holder, odPrefix)
	if !ok {
		return false, nil
	}
	d, err = c.store.Get(ctx, kindRun, runID)
	if errs.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	r, err := decode[runRecord](d)
	if err != nil {
		return false, err
	}
	return r.State.Live() && r.Config.OnDemand != nil && r.Config.OnDemand.ResourceGroup == rg, nil
}

// requeued puts runs that a failed pass did not tell to wait back in the
// set of runs stored queued, for the next pass.
func (c *Client) requeued(rg string, runs []string) {
	c.queues.mu.Lock()
	defer c.queues.mu.Unlock()
	for _, id := range runs {
		if c.queues.rgOf[id] == rg {
			set(c.queues.queued, rg)[id] = true
		}
	}
}
