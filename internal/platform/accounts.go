package platform

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/quota"
)

// A resource group's account is the one object every reservation in the
// group changes, by compare-and-swap. When a client's callers change one
// account at once (32 starts in one group), each compare-and-swap but one
// conflicts, is read again and tried again: conflicts grow with the
// callers, and each caller waits for the others' retries. So a client
// writes the changes of one account in batches (group commit): the
// changes that arrive while a write of the account is in flight wait for
// it, then are applied in turn, in the order they came, to one account
// and written in one compare-and-swap. A batch is what the changes would
// be one after the other: each sees the account as the ones before it
// in the batch left it. Across clients nothing changes: the
// compare-and-swap decides.

// maxConflictPause bounds the random pause of a batch whose write
// conflicted (writeAccount).
const maxConflictPause = 100 * time.Millisecond

// accountOp is one change of a resource group's account (changeAccount)
// waiting for its batch.
type accountOp struct {
	ctx  context.Context
	f    func(*quota.Account) (bool, error)
	done chan struct{} // closed when the result is in

	a       *quota.Account
	changed bool
	err     error
}

// accountLine is the changes of one account waiting for the write in
// flight; busy while its drain (drainLine) writes them.
type accountLine struct {
	busy bool
	ops  []*accountOp
}

// changeAccount applies f to resource group rg by compare-and-swap: f
// changes the account it is given (its Version is the one the change is
// written over) and reports whether it did; on a conflict the account is
// read again from the store and f applied anew. f may run with other
// changes of the same account made on this client at the same time, in
// one write; it sees the account as those before it left it.
//
// The account returned is as f left it. Its Version is the stored version
// the change was written in, while no later change of the same batch was
// written with it; after one was, "" (no stored version is the account as
// this change alone left it). Unchanged, it is the version f was given.
//
// The caller leaves when ctx ends while its change still waits for a
// batch: the change is then not applied, and changeAccount returns ctx's
// error. A change already in the batch being written is applied or not
// as that write goes, and changeAccount returns that outcome when the
// write ends. The batch's store calls end when every caller in it has
// gone: a write cut so may have been applied by the store or not (an API
// server may apply a request whose client gave up), and its callers are
// told the store's error, as for any write whose reply is lost; the
// compare-and-swap versions keep that safe for the next change. Once
// Close has begun, a change is refused (ErrUnavailable).
func (lg *ledger) changeAccount(ctx context.Context, rg string, f func(*quota.Account) (bool, error)) (*quota.Account, error) {
	op := &accountOp{ctx: ctx, f: f, done: make(chan struct{})}
	lg.linesMu.Lock()
	if lg.linesClosed {
		lg.linesMu.Unlock()
		return nil, errs.Unavailable("change resource group "+rg, errClosed)
	}
	l := lg.lines[rg]
	if l == nil {
		l = &accountLine{}
		lg.lines[rg] = l
	}
	l.ops = append(l.ops, op)
	if !l.busy {
		l.busy = true
		lg.drains.Add(1)
		go func() {
			defer lg.drains.Done()
			lg.drainLine(rg, l)
		}()
	}
	lg.linesMu.Unlock()
	select {
	case <-op.done:
		return op.a, op.err
	case <-ctx.Done():
	}
	lg.linesMu.Lock()
	if i := slices.Index(l.ops, op); i >= 0 {
		l.ops = slices.Delete(l.ops, i, i+1)
		lg.linesMu.Unlock()
		return nil, ctx.Err() // it never left the line: not applied
	}
	lg.linesMu.Unlock()
	<-op.done // in the batch being written: its outcome is that write's
	return op.a, op.err
}

// drainLine writes the changes waiting on line l of resource group rg,
// batch after batch, until none wait; each change's caller is woken with
// its result. One drain runs per busy line, apart from the callers, so
// that a caller waits only as long as its own context lets it.
func (lg *ledger) drainLine(rg string, l *accountLine) {
	for {
		lg.linesMu.Lock()
		batch := l.ops
		l.ops = nil
		if len(batch) == 0 {
			l.busy = false
			delete(lg.lines, rg)
			lg.linesMu.Unlock()
			return
		}
		lg.linesMu.Unlock()
		for _, o := range lg.writeAccount(rg, l, batch) {
			close(o.done)
		}
	}
}

// writeAccount applies a batch of changes to resource group rg, in order,
// and writes them in one compare-and-swap, each change's result in its
// op. A change whose caller has gone is not applied. A change that fails
// is left out of the write; a write that fails fails every change. After
// a conflict (another client wrote the account) it waits a random time
// up to twice the refused write's, so that clients that conflicted do not
// meet again at once, and the changes that came on line l meanwhile join
// the batch: it returns the batch as written, for their callers to be
// woken.
func (lg *ledger) writeAccount(rg string, l *accountLine, batch []*accountOp) []*accountOp {
	ops := alive(nil, batch)
	if len(ops) == 0 {
		return batch
	}
	ctx, cancel := batchContext(ops)
	defer func() { cancel() }()
	ctx = withoutStepWrites(ctx) // each op's step is told of the write apart
	fail := func(err error) {
		for _, op := range ops {
			op.err = notFoundAs(err, "resource group", rg)
		}
	}
	a, v, err := cached[quota.Account](ctx, lg.acc, kindResourceGroup, rg)
	fromStore := false
	if errs.IsNotFound(err) {
		a, v, err = fresh[quota.Account](ctx, lg.acc, kindResourceGroup, rg) // the cache may not have it yet
		fromStore = true
	}
	if err != nil {
		fail(err)
		return batch
	}
	for attempt := 0; ; attempt++ {
		// The holds the batch decides on are the account's: its pending
		// ones, and the settled ones once this client's cache has them as
		// the account settled them.
		if err := lg.awaitHolds(ctx, a); err != nil {
			fail(err)
			return batch
		}
		// Every write of the account settles what it can: the pending
		// holds whose documents the cache has. Past half the bound it
		// writes the missing documents first (a client whose resource
		// group reconciler is behind, or none runs).
		work := a.DeepCopy()
		force := len(work.Pending) >= quota.MaxPending/2
		settled, err := lg.settle(ctx, work, force)
		if err != nil {
			lg.log.Error(err, "writing reservations out of their resource group's account failed; its reconciler will", "resourceGroup", rg)
		}
		w, err := lg.restoreIfForeign(ctx, rg, a, v, work)
		if err != nil {
			fail(err)
			return batch
		}
		last, refused := applyOps(ops, work, v, w.repaired)
		if last != nil {
			work = last.a
		}
		if refused && !fromStore {
			// Refused on the cache, which may lag a release another
			// replica made: the store's account decides.
			fa, fv, err := fresh[quota.Account](ctx, lg.acc, kindResourceGroup, rg)
			if err != nil {
				fail(err)
				return batch
			}
			fromStore = true
			if fv != v {
				a, v = fa, fv
				continue
			}
		}
		if last == nil && !(settled && force) && !w.repaired {
			if w.walked {
				lg.clearSuspect(rg, w.mark, v) // the live clusters have what they run
			}
			return batch // nothing to write: each op has the account as it was given
		}
		sent := time.Now()
		nv, err := lg.acc.update(ctx, kindResourceGroup, rg, v, nil, work)
		if err == nil {
			accountWritten(ops, last, rg, nv)
			if w.walked {
				lg.clearSuspect(rg, w.mark, v)
				lg.holders.noteRestored(ctx, rg, w.restored)
			}
			return batch
		}
		if !errors.Is(err, errs.ErrConflict) || attempt >= conflictRetries {
			fail(err)
			return batch
		}
		if took := time.Since(sent); took > 0 {
			if err := sleepCtx(ctx, rand.N(min(2*took, maxConflictPause))); err != nil {
				fail(err)
				return batch
			}
		}
		// The changes that came on the line meanwhile join the batch, and
		// keep its calls going as the first ones do: its context ends when
		// every caller's has.
		lg.linesMu.Lock()
		more := l.ops
		l.ops = nil
		lg.linesMu.Unlock()
		ops = alive(ops, more)
		batch = append(batch, more...)
		cancel()
		ctx, cancel = batchContext(ops)
		ctx = withoutStepWrites(ctx)
		if a, v, err = fresh[quota.Account](ctx, lg.acc, kindResourceGroup, rg); err != nil {
			fail(err)
			return batch
		}
		fromStore = true
	}
}

// alive appends to ops the changes of batch whose caller is still there;
// the others get their context's error.
func alive(ops, batch []*accountOp) []*accountOp {
	for _, op := range batch {
		if op.err = op.ctx.Err(); op.err == nil {
			ops = append(ops, op)
		}
	}
	return ops
}

// foreignWalk is what restoreIfForeign did to an account before the batch.
type foreignWalk struct {
	walked   bool         // the live clusters were looked at
	mark     suspicion    // the suspect mark the walk was made for
	restored []holdReport // holds put back
	repaired bool         // the sum or a hold changed: work needs writing
}

// restoreIfForeign looks at the live clusters before a batch decides on
// resource group rg's account a (at version v) when it changed as the
// platform never changes it (someone else removed a hold, lowered the
// sum: foreign_accounts.go): the sum is made its holds', and the holds
// the live clusters lack are put back in work first.
func (lg *ledger) restoreIfForeign(ctx context.Context, rg string, a *quota.Account, v string, work *quota.Account) (foreignWalk, error) {
	w := foreignWalk{mark: lg.suspectMark(rg)}
	if w.mark.n != 0 {
		w.walked = true
	} else if d, ok := lg.acc.cache.Get(kindResourceGroup, rg); !ok || newerVersion(v, d.Version) {
		// Read past the cache (after a conflict): not vetted there yet.
		// (A cache ahead of v makes this write conflict: not looked at.)
		w.walked = lg.foreignAccountChange(lg.accountOf(d, ok), a)
	}
	if !w.walked {
		return w, nil
	}
	w.repaired = work.TrueUp()
	restored, short, err := lg.holders.restoreHolds(ctx, work, lg.clock.Now())
	if err != nil {
		return w, err
	}
	w.restored = restored
	w.repaired = w.repaired || len(restored) > 0
	for _, r := range short {
		lg.log.Error(r.err, "a live cluster holds less than it runs and its resource group cannot make up for it", "cluster", r.cluster, "resourceGroup", rg, "needs", r.need.String())
	}
	return w, nil
}

// applyOps applies each change of ops, in order, to a copy of the
// account as the changes before it left it (work), and returns the last
// change that changed it (its account is what is to be written), and
// whether any was refused for quota. A change may fence on the version
// it is given (holdAsStored: "the account has not changed since my
// reservation"): after a change earlier in the batch, or a repair of the
// live clusters' holds, the version is none ("").
func applyOps(ops []*accountOp, work *quota.Account, v string, repaired bool) (last *accountOp, refused bool) {
	for _, op := range ops {
		next := work.DeepCopy()
		next.Version = v
		if last != nil || repaired {
			next.Version = ""
		}
		op.changed, op.err = op.f(next)
		op.a = next
		refused = refused || errors.Is(op.err, errs.ErrQuota)
		if op.err == nil && op.changed {
			work, last = next, op
		}
	}
	return last, refused
}

// accountWritten tells each change of a written batch what it got: the
// last one the account at version nv, those before it the account with a
// later change written with it (no version); and each change's step that
// it wrote.
func accountWritten(ops []*accountOp, last *accountOp, rg, nv string) {
	for _, op := range ops {
		if op.err == nil && op.changed {
			op.a.Version = "" // a later change of the batch was written with it
		}
	}
	if last != nil {
		last.a.Version = nv
	}
	for _, op := range ops {
		if op.err == nil && op.changed {
			noteWrite(op.ctx, kindResourceGroup, rg, nv)
		}
	}
}

// batchContext is the context of a batch's store calls: done once every
// change's caller's context is, so that one caller going away does not
// fail the others' changes.
func batchContext(ops []*accountOp) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ops[0].ctx))
	var left atomic.Int64
	left.Store(int64(len(ops)))
	stops := make([]func() bool, 0, len(ops))
	for _, op := range ops {
		stops = append(stops, context.AfterFunc(op.ctx, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		}))
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}
