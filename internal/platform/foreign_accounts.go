package platform

import (
	"github.com/aidlc/dlc/backend"
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
// clusters in the store). What it lets pass as the platform's: a copy of
// a release of a cluster the cache shows not holding quota (stopped, or
// deleting: a deleting cluster's pods are capped by the namespace's
// ResourceQuota on Kubernetes), and a hold lowered no further than what
// its cluster runs.
func (lg *ledger) foreignAccountChange(before, after *quota.Account) bool {
	if before == nil || after == nil {
		return true
	}
	if after.Seq < before.Seq || (after.Seq == before.Seq && after.Sum != before.Sum) {
		return true
	}
	for holder, p := range before.Pending {
		if q, ok := after.Pending[holder]; ok {
			if q.Seq < p.Seq || q.Seq == p.Seq && !q.Same(p) {
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
	for holder, q := range after.Pending {
		if q.Seq <= before.Seq {
			continue
		}
		prev := before.Held(holder)
		moved[0] += q.Resources.MilliCPU - prev.MilliCPU
		moved[1] += q.Resources.Memory - prev.Memory
		moved[2] += q.Resources.GPU - prev.GPU
		if !prev.Fits(q.Resources) && lg.holders.clusterNeedsMore(holder, after) {
			return true
		}
	}
	return after.Sum.MilliCPU-before.Sum.MilliCPU != moved[0] || after.Sum.Memory-before.Sum.Memory != moved[1] ||
		after.Sum.GPU-before.Sum.GPU != moved[2]
}

// accountOf returns the account a cached document holds (decoded once
// per version, shared), or nil.
func (lg *ledger) accountOf(d backend.Doc, ok bool) *quota.Account {
	if !ok {
		return nil
	}
	a, _, err := sharedObject[quota.Account](lg.acc, d)
	if err != nil {
		return nil
	}
	return a
}

// decodeAccount decodes an account document as the cache will keep it
// (its settled holds bound to the cache), or nil.
func (lg *ledger) decodeAccount(d backend.Doc) *quota.Account {
	a, err := decodeBound[quota.Account](lg.acc, d)
	if err != nil {
		return nil
	}
	return a
}

// suspicion marks a resource group whose account changed as the platform
// never changes it: n counts the marks, version is the account's version
// that was marked.
type suspicion struct {
	n       uint64
	version string
}

// vetAccount marks resource group d's account suspect when its change
// from before (the cache's copy as it was, nil for none) to next (d,
// decoded) is one the platform never makes (foreignAccountChange): the
// next change of the account in its line looks at the live clusters
// first. It is called before the cache takes d, so that no change is
// decided on d unvetted.
func (lg *ledger) vetAccount(before, next *quota.Account, d backend.Doc, deleted bool) {
	if deleted {
		lg.mu.Lock()
		delete(lg.suspect, d.ID)
		lg.mu.Unlock()
		return
	}
	if !lg.foreignAccountChange(before, next) {
		return
	}
	lg.markSuspect(d.ID, d.Version)
}

// markSuspect marks resource group rg's account at version suspect.
func (lg *ledger) markSuspect(rg, version string) {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	lg.suspect[rg] = suspicion{n: lg.suspect[rg].n + 1, version: version}
}

// suspectMark returns resource group rg's suspect mark: n is 0 when its
// account changed only as the platform changes it since its line last
// looked.
func (lg *ledger) suspectMark(rg string) suspicion {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	return lg.suspect[rg]
}

// clearSuspect clears rg's mark if it is still mark and the account
// looked at, at version v, is the marked version or newer.
func (lg *ledger) clearSuspect(rg string, mark suspicion, v string) {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	if cur := lg.suspect[rg]; cur.n == mark.n && (v == mark.version || newerVersion(v, mark.version)) {
		delete(lg.suspect, rg)
	}
}
