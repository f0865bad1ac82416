package platform

import (
	"time"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/quota"
)

// A resource group's account is the platform's to write, but where the
// store lets others write it (no admission policy in front of it), an
// edit can remove a live cluster's hold and lower the reserved sum with
// it: a start decided on that account would take quota a cluster runs
// on. The resource group's step restores such holds before it admits
// (restoreHolds); a user's start or resize is decided in the account's
// line (writeAccount), which looks at the live clusters first when the
// account changed in a way the platform never changes it.

// foreignAccountChange reports whether after, an account that followed
// before in the store, changed in a way no write of the platform's makes,
// so that the holds it keeps may no longer cover the live clusters: every
// change of a hold is a pending entry with the next sequence number, and
// moves the reserved sum by what it changes (quota.Account.SetFor,
// Release); a pending entry leaves only once the hold's document carries
// it (Settle); and a hold is lowered or released only for a cluster that
// no longer runs it. Without before (the account's first sight) it reports
// true. It reads the cache only, which may lag: it may report a change of
// the platform's own as foreign (the caller then looks at the live
// clusters in the store), never a foreign change as the platform's,
// except one that copies a release of a cluster the cache shows not
// holding quota.
func (c *Engine) foreignAccountChange(before, after *quota.Account) bool {
	if before == nil || after == nil {
		return true
	}
	if after.Seq < before.Seq || (after.Seq == before.Seq && after.Sum != before.Sum) {
		return true
	}
	for holder, p := range before.Pending {
		if q, ok := after.Pending[holder]; ok {
			if q.Seq < p.Seq {
				return true
			}
			continue
		}
		// Settled since: its document carries this change or a later one
		// (a released hold's document may be gone with its holder).
		if h, ok := after.Hold(holder); ok && h.Seq < p.Seq || !ok && !p.Resources.IsZero() {
			return true
		}
	}
	var moved [3]int64 // what the changes since before move the sum by
	now := c.clock.Now()
	for holder, q := range after.Pending {
		if q.Seq <= before.Seq {
			continue
		}
		prev := before.Held(holder)
		moved[0] += q.Resources.MilliCPU - prev.MilliCPU
		moved[1] += q.Resources.Memory - prev.Memory
		moved[2] += q.Resources.GPU - prev.GPU
		if !prev.Fits(q.Resources) && c.clusterLacks(holder, after, now) {
			return true
		}
	}
	return after.Sum.MilliCPU-before.Sum.MilliCPU != moved[0] || after.Sum.Memory-before.Sum.Memory != moved[1] ||
		after.Sum.GPU-before.Sum.GPU != moved[2]
}

// clusterLacks reports whether the cache has holder as a live cluster
// that a holds less for than it runs (lacksHold).
func (c *Engine) clusterLacks(holder string, a *quota.Account, now time.Time) bool {
	d, ok := c.cache.get(kindCluster, holder)
	if !ok {
		return false
	}
	cl, _, err := sharedObject[cluster.Cluster](c, d)
	if err != nil {
		return false
	}
	_, lacks := c.lacksHold(cl, a, now)
	return lacks
}

// accountOf returns the account a cached document holds (decoded once
// per version, shared), or nil.
func (c *Engine) accountOf(d backend.Doc, ok bool) *quota.Account {
	if !ok {
		return nil
	}
	a, _, err := sharedObject[quota.Account](c, d)
	if err != nil {
		return nil
	}
	return a
}

// vetAccount marks resource group d's account suspect when its change
// from before (the cache's copy as it was, nil for none) is one the
// platform never makes (foreignAccountChange): the next change of the
// account in its line looks at the live clusters first. It is called as
// the cache takes the change, before anything decides on it there.
func (c *Engine) vetAccount(before *quota.Account, d backend.Doc, deleted bool) {
	if deleted {
		c.mu.Lock()
		delete(c.suspect, d.ID)
		c.mu.Unlock()
		return
	}
	if !c.foreignAccountChange(before, c.accountOf(d, true)) {
		return
	}
	c.mu.Lock()
	c.suspect[d.ID]++
	c.mu.Unlock()
}

// suspectMark returns resource group rg's suspect mark: 0 when its account
// changed only as the platform changes it since its line last looked.
func (c *Engine) suspectMark(rg string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.suspect[rg]
}

// clearSuspect clears rg's suspect mark if it is still mark.
func (c *Engine) clearSuspect(rg string, mark uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.suspect[rg] == mark {
		delete(c.suspect, rg)
	}
}
