package platform

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/internal/runner"
	"github.com/aidlc/dlc/quota"
)

// Settled holds. A resource group's account keeps the sum of its holds
// and the holds changed since they were last settled (quota.Account);
// every other hold is kept in a document of its own, kind "hold", one per
// holder, so that the account stays small whatever the holders. A change
// of a hold is decided by the account's compare-and-swap alone (it adds
// the hold to the account's pending ones and to the sum); writing its
// document (materialising) and dropping it from the pending ones once the
// document carries it (settling) follow, by whichever client gets there
// first: the account's pending hold is the truth until then, and writing
// it again is harmless (a document never goes back to an older change:
// each carries the account's change count, Seq).
//
// A client reads a holder's settled hold from its cache. It may do so for
// a decision only once its cache has the hold documents up to the newest
// one the account settled (Account.Settled): the settling write of the
// account comes after the document's, so a cache that has it has every
// settled hold as it is. Waiting for that is awaitHolds.

const kindHold = "hold"

// holdDoc is a settled hold as stored.
type holdDoc struct {
	ResourceGroup string `json:"resourceGroup"`
	Holder        string `json:"holder"`
	quota.Hold
}

func holdID(rg, holder string) string { return rg + "." + holder }

// holdLabels returns the labels of a hold document: its resource group,
// when the document is one the platform could have written.
func holdLabels(d *holdDoc, id string) map[string]string {
	if d.ResourceGroup == "" || d.Holder == "" || id != holdID(d.ResourceGroup, d.Holder) || d.Seq <= 0 {
		return nil
	}
	return map[string]string{labelResourceGroup: d.ResourceGroup}
}

// holdSource is a resource group's settled holds in this client's cache.
type holdSource struct {
	acc *access
	rg  string
}

func (s holdSource) Get(holder string) (quota.Hold, bool) {
	d, ok := s.acc.cache.Get(kindHold, holdID(s.rg, holder))
	if !ok {
		return quota.Hold{}, false
	}
	h, _, err := sharedObject[holdDoc](s.acc, d)
	if err != nil || holdLabels(h, d.ID) == nil {
		return quota.Hold{}, false // not one of ours: the audit and the true-up see it
	}
	return h.Hold, true
}

func (s holdSource) All() map[string]quota.Hold {
	docs := s.acc.cache.Selected(kindHold, map[string]string{labelResourceGroup: s.rg})
	out := make(map[string]quota.Hold, len(docs))
	for _, d := range docs {
		if h, _, err := sharedObject[holdDoc](s.acc, d); err == nil && h.ResourceGroup == s.rg {
			out[h.Holder] = h.Hold
		}
	}
	return out
}

// settledNow returns resource group rg's settled holds as this client's
// cache has them now, read once: for a pass over an account that walks
// them more than once.
func (lg *ledger) settledNow(rg string) quota.HoldMap {
	return holdSource{acc: lg.acc, rg: rg}.All()
}

// bind tells a decoded account where its settled holds are: this
// client's cache.
func (lg *ledger) bind(v any) {
	if a, ok := v.(*quota.Account); ok {
		a.Bind(holdSource{acc: lg.acc, rg: a.ID})
	}
}

// newerVersion reports whether store version a is newer than b. Both
// stores' versions are decimal counters (a Kubernetes resourceVersion is
// etcd's revision, comparable since 1.35); one that is not counts as
// older, so that nothing waits for it.
func newerVersion(a, b string) bool {
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	return err1 == nil && (err2 != nil || x > y)
}

// versions tracks the newest version of the hold documents this client's
// cache has seen, for awaitHolds.
type versions struct {
	mu     sync.Mutex
	newest string
	tick   chan struct{}
}

func (v *versions) saw(version string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.newest == "" || newerVersion(version, v.newest) {
		v.newest = version
		if v.tick != nil {
			close(v.tick)
			v.tick = nil
		}
	}
}

// reached reports whether the cache has seen version, and if not a
// channel closed when it sees a newer one than it has.
func (v *versions) reached(version string) (bool, <-chan struct{}) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if version == "" || v.newest == version || !newerVersion(version, v.newest) {
		return true, nil
	}
	if v.tick == nil {
		v.tick = make(chan struct{})
	}
	return false, v.tick
}

// awaitHolds waits until this client's cache has the settled holds of
// account a as they are (it has seen the hold document a settled last),
// for at most 5 s (options.holdsWait): a document deleted by someone else before this
// cache saw it is never seen, and the holds are then read as they are
// (and that version taken as seen, so that later reads do not wait).
func (lg *ledger) awaitHolds(ctx context.Context, a *quota.Account) error {
	var timer <-chan time.Time
	for {
		ok, tick := lg.holdVersions.reached(a.Settled)
		if ok {
			return nil
		}
		if timer == nil {
			t := time.NewTimer(lg.holdsWait)
			defer t.Stop()
			timer = t.C
		}
		select {
		case <-tick:
		case <-timer:
			lg.log.Error(errs.ErrUnavailable, "the cache has not seen the newest settled reservation of a resource group; reading them as they are",
				"resourceGroup", a.ID, "settled", a.Settled)
			lg.holdVersions.saw(a.Settled) // waited for once: the next read does not wait again
			return nil
		case <-ctx.Done():
			return errs.Unavailable("reading the reservations of resource group "+a.ID, context.Cause(ctx))
		}
	}
}

// tombstones deletes the hold documents of resource group a that hold
// nothing, are settled, and whose holder is gone, once this client has
// seen them so for the repair grace; never the one the account settled
// last (awaitHolds waits for it). A released hold is kept as a document
// until then so that a late write of an older change of it finds a newer
// one and is not made. A delete that fails stops no other: the failures
// are returned together once every document has been looked at.
func (lg *ledger) tombstones(ctx context.Context, a *quota.Account, now time.Time) error {
	lg.mu.Lock()
	was := lg.tombs[a.ID]
	lg.mu.Unlock()
	seen := map[string]seenHold{}
	var failed []error
	defer func() {
		lg.mu.Lock()
		if len(seen) == 0 {
			delete(lg.tombs, a.ID)
		} else {
			lg.tombs[a.ID] = seen
		}
		lg.mu.Unlock()
	}()
	for _, d := range lg.acc.cache.Selected(kindHold, map[string]string{labelResourceGroup: a.ID}) {
		h, _, err := sharedObject[holdDoc](lg.acc, d)
		if err != nil || !h.Resources.IsZero() || d.Version == a.Settled {
			continue
		}
		if _, pending := a.Pending[h.Holder]; pending {
			continue
		}
		s, ok := was[d.ID]
		if !ok || !s.hold.Same(h.Hold) {
			s = seenHold{hold: h.Hold, at: now}
		}
		seen[d.ID] = s
		if now.Sub(s.at) < lg.grace {
			continue
		}
		if lg.holders.holderExists(ctx, h.Holder) {
			continue
		}
		// A delete that fails holds up no other: the rest are deleted,
		// and each keeps its sighting for the next pass.
		if err := lg.acc.store.Delete(ctx, kindHold, d.ID, d.Version); err != nil && !errs.IsNotFound(err) && !errors.Is(err, errs.ErrConflict) {
			failed = append(failed, err)
		}
	}
	return errors.Join(failed...)
}

// settle drops from a's pending holds those whose document carries them.
// With write, it first writes the documents of those that no document
// carries yet (at most maxMaterialise of them, oldest first). It reports
// whether a changed; an error is a document it could not write (the
// others are settled all the same).
func (lg *ledger) settle(ctx context.Context, a *quota.Account, write bool) (bool, error) {
	changed := false
	var todo []string
	for holder, p := range a.Pending {
		d, ok := lg.acc.cache.Get(kindHold, holdID(a.ID, holder))
		if ok {
			if h, _, err := sharedObject[holdDoc](lg.acc, d); err == nil && holdLabels(h, d.ID) != nil && h.Hold.Same(p) {
				changed = a.Settle(holder, p.Seq, d.Version, newerVersion) || changed
				continue
			}
		}
		todo = append(todo, holder)
	}
	if !write || len(todo) == 0 {
		return changed, nil
	}
	// Oldest first: a bounded step still makes way for the newest.
	sortBySeq(todo, a.Pending)
	if len(todo) > maxMaterialise {
		todo = todo[:maxMaterialise]
	}
	type result struct {
		holder, version string
		seq             int64
		err             error
	}
	results := make([]result, len(todo))
	parallel(len(todo), 8, func(i int) {
		holder := todo[i]
		p := a.Pending[holder]
		v, err := lg.putHold(ctx, a.ID, holder, p)
		results[i] = result{holder: holder, version: v, seq: p.Seq, err: err}
	})
	var errList []error
	for _, r := range results {
		switch {
		case r.err != nil:
			errList = append(errList, r.err)
		case r.version != "":
			changed = a.Settle(r.holder, r.seq, r.version, newerVersion) || changed
		}
	}
	return changed, errors.Join(errList...)
}

// parallel calls f(0) … f(n-1), at most limit at a time, and returns
// once every call has.
func parallel(n, limit int, f func(i int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, limit)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			f(i)
		})
	}
	wg.Wait()
}

// keySettle is the kind of the keys of settleReconciler's steps
// ("settle/<resource group>"), which no stored document has.
const keySettle = "settle"

// settleReconciler writes the documents of a resource group's pending
// holds, once settleAt of them are pending (the group's step queues it).
// It is a step of its own, not part of the group's: it writes up to
// maxMaterialise documents, which admitting must not wait for. Their
// writes queue the group again, whose next step drops them from the
// account with its other changes.
type settleReconciler struct {
	ledger *ledger
	at     int // settleAt
}

// Reconcile settles resource group id's pending holds.
func (r settleReconciler) Reconcile(ctx context.Context, id string) (runner.Result, error) {
	a, _, err := cached[quota.Account](ctx, r.ledger.acc, kindResourceGroup, id)
	if errs.IsNotFound(err) {
		return runner.Result{}, nil
	}
	if err != nil || len(a.Pending) < r.at {
		return runner.Result{}, err
	}
	_, err = r.ledger.settle(ctx, a, true)
	return runner.Result{}, err
}

func (settleReconciler) GiveUp(context.Context, string, string) error { return runner.ErrRetry }

func (settleReconciler) LogKey() string { return "resourceGroup" }

// maxMaterialise bounds the hold documents one settling step writes.
const maxMaterialise = 256

func sortBySeq(holders []string, pending map[string]quota.Hold) {
	slices.SortFunc(holders, func(a, b string) int { return cmp.Compare(pending[a].Seq, pending[b].Seq) })
}

// putHold writes holder's hold document in resource group rg as hold h
// (its change Seq), unless it carries that change or a later one. It
// returns the version that carries h, or "" when a later change is there.
//
// A later change is never written over, even one whose Seq no account
// reached (someone else's): the writer's account may be older than the
// change that wrote the document, and taking the newer one for a forgery
// would put an older hold back under a settled one. Such a document
// keeps its holder's later changes pending (where they are the truth),
// one holder's worth of the account's bound.
func (lg *ledger) putHold(ctx context.Context, rg, holder string, h quota.Hold) (string, error) {
	id := holdID(rg, holder)
	doc := holdDoc{ResourceGroup: rg, Holder: holder, Hold: h}
	labels := map[string]string{labelResourceGroup: rg}
	d, ok := lg.acc.cache.Get(kindHold, id)
	for attempt := 0; ; attempt++ {
		var err error
		var v string
		if !ok {
			v, err = lg.acc.create(ctx, kindHold, id, labels, doc)
		} else {
			cur, derr := decode[holdDoc](d)
			if derr == nil && cur.Seq > h.Seq && holdLabels(cur, id) != nil {
				return "", nil // a later change's: that one settles
			}
			if derr == nil && cur.Hold.Same(h) {
				return d.Version, nil
			}
			v, err = lg.acc.update(ctx, kindHold, id, d.Version, labels, doc)
		}
		if err == nil {
			return v, nil
		}
		if !errors.Is(err, errs.ErrConflict) && !errs.IsNotFound(err) || attempt >= conflictRetries {
			return "", err
		}
		d, err = lg.acc.latest(ctx, kindHold, id)
		ok = err == nil
		if err != nil && !errs.IsNotFound(err) {
			return "", err
		}
	}
}
