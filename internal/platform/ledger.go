package platform

import (
	"context"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/quota"
)

// The ledger is the quota accounts' I/O: each resource group's account
// changed in batches by compare-and-swap (accounts.go), its holds settled
// into documents of their own and read back once the cache has them
// (holds.go), changes made outside the platform caught and repaired
// (foreign_accounts.go), and how long each hold has been seen as it is
// (the repair's clock). What the quota rules are is package quota's; what
// justifies a hold (a live cluster, an admitted on-demand run) is the
// entities': the ledger asks them through holders. Its state is its own,
// behind its own locks.
type ledger struct {
	acc       *access
	clock     backend.Clock
	log       logr.Logger
	grace     time.Duration // the repair grace (WithRepairGrace)
	holdsWait time.Duration // bounds awaitHolds
	holders   holders

	mu       sync.Mutex
	repaired map[string]time.Time           // when each resource group's holders were last audited
	tombs    map[string]map[string]seenHold // per resource group, released holds' documents as first seen (tombstones)
	seen     map[string]map[string]seenHold // resource group → holder → the hold as first seen, and when
	suspect  map[string]suspicion           // resource group → a mark while its account changed as the platform never changes it (foreign_accounts.go)

	holdVersions versions // the newest hold document the cache has seen (awaitHolds); its own lock

	linesMu sync.Mutex
	lines   map[string]*accountLine // resource group → the changes of its account waiting for the write in flight (accounts.go)
	// drains are the goroutines writing accounts' batches (drainLine),
	// which close waits for; linesClosed refuses new changes once it has
	// begun to.
	drains      sync.WaitGroup
	linesClosed bool
}

// holders is what the ledger asks of the entities that hold quota (the
// live clusters, the admitted on-demand runs): the Engine implements it.
type holders interface {
	// holderExists reports whether holder (a cluster, or an on-demand
	// run's cluster) is in the cache, or may be.
	holderExists(ctx context.Context, holder string) bool
	// clusterNeedsMore reports whether the cache has holder as a cluster
	// that a holds less for than it runs.
	clusterNeedsMore(holder string, a *quota.Account) bool
	// restoreHolds puts back in a the holds its live clusters lack,
	// returning those put back and those that no longer fit.
	restoreHolds(ctx context.Context, a *quota.Account, now time.Time) (restored, short []holdReport, err error)
	// noteRestored says each restored hold on its cluster.
	noteRestored(ctx context.Context, rg string, restored []holdReport)
}

func newLedger(acc *access, clock backend.Clock, log logr.Logger, grace, holdsWait time.Duration, h holders) *ledger {
	return &ledger{acc: acc, clock: clock, log: log, grace: grace, holdsWait: holdsWait, holders: h,
		repaired: map[string]time.Time{}, tombs: map[string]map[string]seenHold{}, seen: map[string]map[string]seenHold{},
		suspect: map[string]suspicion{}, lines: map[string]*accountLine{}}
}

// close refuses changes from now on and waits for the batches being
// written.
func (lg *ledger) close() {
	lg.linesMu.Lock()
	lg.linesClosed = true
	lg.linesMu.Unlock()
	lg.drains.Wait()
}

// forgetHolder forgets the sightings of a deleted cluster's holds in
// every resource group (holdAge): a client that does not own the group
// never trims them otherwise.
func (lg *ledger) forgetHolder(id string) {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	for rg, byHolder := range lg.seen {
		if delete(byHolder, id); len(byHolder) == 0 {
			delete(lg.seen, rg)
		}
	}
}

// awaitBound waits, for an account, until the cache has its settled
// holds (awaitHolds).
func (lg *ledger) awaitBound(ctx context.Context, v any) error {
	if a, ok := v.(*quota.Account); ok {
		return lg.awaitHolds(ctx, a)
	}
	return nil
}

// repairDue reports whether the pass repairs leaked holds. The repair is
// a fallback for what a crash between two writes left: it looks at every
// holder, so it runs at most once a quarter of the grace per resource
// group (and again when a young leak comes of age: repairLeaks).
//
// When it is not due, wait is how long until it is: a hold that stopped
// being justified since the last repair is looked at then, not at the
// resync.
func (lg *ledger) repairDue(rg string, now time.Time) (due bool, wait time.Duration) {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	last := lg.repaired[rg]
	if last.IsZero() || now.Sub(last) >= lg.grace/4 {
		lg.repaired[rg] = now
		return true, 0
	}
	return false, lg.grace/4 - now.Sub(last)
}

// repairAgain makes resource group rg's repair due at its next pass
// (a young leak it waits for comes of age).
func (lg *ledger) repairAgain(rg string) {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	delete(lg.repaired, rg)
}

// holdAge returns how long this client has seen holder's hold in
// resource group rg as h is now, on this client's clock. A hold's date
// (Since) was written by whichever replica set it, on that replica's
// clock: measured against another's, a clock that runs 45 s ahead takes a
// fresh hold for one past the grace, and a clock behind never sees a
// hold dated ahead of it age. So no decision reads the date: a hold is as
// old as this client has seen it unchanged (amount, generation and date:
// a renewal or a change makes it new). A client that has just started, or
// whose cache lagged, counts from when it first looks: it waits for a
// leak a grace longer at most, and never takes a hold younger than the
// grace for one, whatever the clocks say.
func (lg *ledger) holdAge(rg, holder string, h quota.Hold, now time.Time) time.Duration {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	return max(lg.seeHoldLocked(rg, holder, h, now), 0) // a clock stepped back counts no age
}

// seeHolds records when this client first saw each of a's holds as it is
// now, and forgets the holds a has no more.
func (lg *ledger) seeHolds(rg string, a *quota.Account, now time.Time) {
	lg.forgetHolds(rg, a)
	lg.mu.Lock()
	defer lg.mu.Unlock()
	for holder, h := range a.Holds() {
		lg.seeHoldLocked(rg, holder, h, now)
	}
}

// forgetHolds forgets the sightings of the holds a has no more.
func (lg *ledger) forgetHolds(rg string, a *quota.Account) {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	for holder := range lg.seen[rg] {
		if _, ok := a.Hold(holder); !ok {
			delete(lg.seen[rg], holder)
		}
	}
	if len(lg.seen[rg]) == 0 {
		delete(lg.seen, rg)
	}
}

// seeHoldLocked records h as seen now unless it was seen before as it
// is, and returns for how long it has been seen. lg.mu is held.
func (lg *ledger) seeHoldLocked(rg, holder string, h quota.Hold, now time.Time) time.Duration {
	byHolder := lg.seen[rg]
	if byHolder == nil {
		byHolder = map[string]seenHold{}
		lg.seen[rg] = byHolder
	}
	s, ok := byHolder[holder]
	if !ok || s.hold.Resources != h.Resources || s.hold.Generation != h.Generation || !s.hold.Since.Equal(h.Since) {
		byHolder[holder] = seenHold{hold: h, at: now}
		return 0
	}
	return now.Sub(s.at)
}
