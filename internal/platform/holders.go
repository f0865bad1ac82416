package platform

import (
	"context"
	"fmt"
	"time"

	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/quota"
)

// The entities as the ledger's holders (ledger.go): what a live cluster
// needs held, and what is said on it when its hold is put back.

var _ holders = (*Engine)(nil)

// holderExists reports whether a holder (a cluster, or an on-demand run's
// cluster) is in the cache, or may be.
func (c *Engine) holderExists(ctx context.Context, holder string) bool {
	if _, ok := c.cache.Get(kindCluster, holder); ok {
		return true
	}
	_, err := c.acc.latest(ctx, kindCluster, holder)
	return !errs.IsNotFound(err)
}

// clusterNeedsMore reports whether the cache has holder as a cluster that
// a holds less for than it runs (lacksHold, which makes no allowance for
// a hold made for a newer generation: the platform never lowers a hold
// below what the cluster runs at its stored generation).
func (c *Engine) clusterNeedsMore(holder string, a *quota.Account) bool {
	d, ok := c.cache.Get(kindCluster, holder)
	if !ok {
		return false
	}
	cl, _, err := sharedObject[cluster.Cluster](c.acc, d)
	if err != nil {
		return false
	}
	_, lacks := c.lacksHold(cl, a)
	return lacks
}

// lacksHold returns what cluster cl may run (its head and held workers,
// cluster.Cluster.HeldReplicas), and whether resource group a holds less
// for it than that: no hold, or one below it, whatever
// generation it was made for (the platform never lowers a live cluster's
// hold below what it runs at its stored generation: an operation on its
// way reserves the larger of the two, writeWithHold; so a hold below it
// made for a newer generation is someone else's, and no shield). Only a
// cluster whose compute Ray runs or is about to counts: starting,
// running, abnormal or hibernating in a; a deleting one releases its hold
// before its object goes.
func (c *Engine) lacksHold(cl *cluster.Cluster, a *quota.Account) (quota.Resources, bool) {
	if !cl.State.HoldsQuota() || cl.State == cluster.Deleting || cl.Live == nil || cl.Live.ResourceGroup != a.ID {
		return quota.Resources{}, false
	}
	need, err := cl.Live.ResourcesAt(c.cat.Nodes, cl.HeldReplicas())
	if err != nil {
		return quota.Resources{}, false
	}
	h, ok := a.Hold(cl.ID)
	if ok && need.Fits(h.Resources) {
		return need, false
	}
	return need, true
}

// restoreHolds puts back in a the reservations its live clusters need
// and it lacks: a hold removed or shrunk by someone else's edit of the
// stored resource group. The cache names the candidates; each is read
// again from the store (the cache may be behind a hibernate that released
// its hold). A hold that no longer fits (the quota went to someone else
// before the restore) is returned in short, to be reported.
func (c *Engine) restoreHolds(ctx context.Context, a *quota.Account, now time.Time) (restored, short []holdReport, err error) {
	for _, d := range c.cache.SelectDocs(kindCluster, map[string]string{labelResourceGroup: a.ID}) {
		// Looked at without a copy: every admission pass walks every
		// cluster of the group, and only the one that lacks is read again.
		cl, _, err := sharedObject[cluster.Cluster](c.acc, d)
		if err != nil {
			continue
		}
		if _, lacks := c.lacksHold(cl, a); !lacks {
			continue
		}
		if cl, err = c.clusters.getFresh(ctx, d.ID); errs.IsNotFound(err) {
			continue
		} else if err != nil {
			return nil, nil, err
		}
		need, lacks := c.lacksHold(cl, a)
		if !lacks {
			continue
		}
		if _, err := a.SetFor(cl.ID, need, cl.Generation, now); err != nil {
			short = append(short, holdReport{cluster: cl.ID, need: need, err: err})
			continue
		}
		restored = append(restored, holdReport{cluster: cl.ID, need: need})
	}
	return restored, short, nil
}

// noteRestore says on the cluster, and in the log, that its hold in
// resource group rg was restored.
func (c *Engine) noteRestore(ctx context.Context, rg string, r holdReport) error {
	c.o.log.Info("restored a reservation that a live cluster needs and its resource group lacked", "cluster", r.cluster, "resourceGroup", rg, "reserved", r.need.String())
	return c.noteQuota(ctx, r.cluster, rg, "quota-restored", fmt.Sprintf(
		"its reservation in resource group %s was missing or short (changed outside the platform): %s reserved again", rg, r.need))
}

// noteRestored says each of restored, written already, on its cluster: a
// note that fails is logged (the hold is back; the log line says so). It
// is said before the batch's callers are woken, which a restore after
// someone else's edit delays by a write per cluster.
func (c *Engine) noteRestored(ctx context.Context, rg string, restored []holdReport) {
	for _, r := range restored {
		if err := c.noteRestore(ctx, rg, r); err != nil {
			c.o.log.Error(err, "a restored reservation is not said on its cluster", "cluster", r.cluster, "resourceGroup", rg)
		}
	}
}
