package platform

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/event"
	"github.com/aidlc/dlc/internal/queue"
	"github.com/aidlc/dlc/internal/runner"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
)

// odPrefix starts the id of an on-demand run's cluster, which is also the
// holder of its reservation: "od-" + the run id.
const odPrefix = "od-"

func odClusterID(runID string) string { return odPrefix + runID }

// resourceGroupReconciler admits queued runs into a resource group's
// quota and repairs its reservations.
type resourceGroupReconciler struct{ *Engine }

func (r resourceGroupReconciler) Reconcile(ctx context.Context, id string) (runner.Result, error) {
	after, err := r.reconcileResourceGroup(ctx, id)
	return runner.Result{After: after}, err
}

// giveUp: a resource group has no state to fall back to; its steps go on.
func (resourceGroupReconciler) GiveUp(context.Context, string, string) error { return runner.ErrRetry }

func (resourceGroupReconciler) LogKey() string { return "resourceGroup" }

// reconcileResourceGroup admits the runs waiting in a resource group's queue that
// its allocatable quota fits, in priority order (BestEffortFIFO, with the
// starvation bound of WithMaxWait), and releases reservations that
// nothing justifies any more once they are older than the repair grace.
// It is also the true-up against edits from outside the platform: a hold
// the platform never makes (negative, above the capacity) is dropped, and
// a live cluster whose hold is missing or short gets it back before any
// run is admitted, or, when the group can no longer hold it, says so on
// the cluster. All of it is one compare-and-swap of the resource group:
// two clients that decide at once cannot both win.
func (c resourceGroupReconciler) reconcileResourceGroup(ctx context.Context, id string) (time.Duration, error) {
	a, v, err := cached[quota.Account](ctx, c.acc, kindResourceGroup, id)
	if errs.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	p := &groupPass{id: id, a: a, v: v}
	// Settle, first half: the pending holds whose documents carry their
	// change (this cache has them) leave the account with the rest of this
	// step's changes. The documents are written by a step of their own,
	// queued at the end of this one: admitting never waits for them.
	if p.changed, err = c.ledger.settle(ctx, a, false); err != nil {
		return 0, err
	}
	// The settled holds read once for the whole pass, whose phases walk
	// them (the sightings, the corrupt check, the true-up, the restore's
	// lookups, the repair). Read after the settling above, so that a hold
	// it took out of the pending ones is here as its document has it. A
	// document newer than what a counts (for a holder pending in a, or
	// settled in a at an older change) is a later change of the account,
	// which the pass's compare-and-swap conflicts with.
	a.Bind(c.ledger.settledNow(id))
	p.now = c.clock.Now()
	c.ledger.seeHolds(id, a, p.now)
	due, wait := c.ledger.repairDue(id, p.now)
	p.recheck = wait
	c.dropForeignHolds(p)
	short, err := c.restoreLacking(ctx, p)
	if err != nil {
		return 0, err
	}
	if due {
		if err := c.repairLeaks(ctx, p); err != nil {
			return 0, err
		}
	}
	admitted, queued, full, growthErr, err := c.admitQueued(ctx, p)
	if err != nil {
		return 0, err
	}
	if err := c.reportShort(ctx, p, short); err != nil {
		return 0, err
	}
	if err := c.tellWaiting(ctx, p, admitted, queued, full); err != nil {
		return 0, err
	}
	if growthErr != nil {
		// A growth whose grant failed waits in its place again; the rest
		// of the pass is done, and the step is retried with backoff.
		return 0, growthErr
	}
	// Settle, second half: past settleAt pending holds, their documents
	// are written by a step of their own (settleReconciler). Below
	// settleAt the account keeps them: nothing is settled that need not be.
	if len(a.Pending) >= c.o.settleAt {
		c.enqueue(keySettle + "/" + id)
	}
	return p.recheck, nil
}

// groupPass is one step of a resource group's reconciler: the account
// as read (a, at version v), changed by its phases in memory and written
// once (admitQueued), and when to look again.
type groupPass struct {
	id      string
	a       *quota.Account
	v       string
	now     time.Time
	changed bool          // a needs writing
	recheck time.Duration // when to look again (0: when something changes)
}

// dropForeignHolds drops the holds the platform never makes (negative,
// or more than the whole capacity): someone else wrote them, and the
// restore puts back what a live cluster justifies, at what it runs. (A
// hold dated in the future ages as any other: ages are measured from when
// this client first saw the hold, not from its date.) Then the sum is the
// holds' again: after an edit from outside the platform (of the sum, or
// of a hold's document), or a release of a corrupt hold, it is made
// theirs, before what live clusters lack is put back.
func (c resourceGroupReconciler) dropForeignHolds(p *groupPass) {
	a := p.a
	for h, hold := range a.Holds() {
		if a.Corrupt(h) {
			c.o.log.Error(errs.ErrInvalid, "dropping a corrupt reservation (edited outside the platform)",
				"resourceGroup", p.id, "holder", h, "held", hold.Resources.String(), "capacity", a.Capacity.String())
			a.Release(h)
			p.changed = true
		}
	}
	if sum := a.Sum; a.TrueUp() {
		c.o.log.Error(errs.ErrInvalid, "a resource group's reserved sum was not that of its reservations (edited outside the platform?): made theirs",
			"resourceGroup", p.id, "was", sum.String(), "now", a.Sum.String())
		p.changed = true
	}
}

// restoreLacking puts back the holds live clusters lack (restoreHolds),
// and says so on each cluster before the account is written: a note that
// fails stops the pass, and the next finds the hold missing again and
// says it then; written after, a failed note was never said (the next
// pass finds nothing to restore). A note said already is not repeated. It
// returns the clusters whose holds the group cannot make up.
func (c resourceGroupReconciler) restoreLacking(ctx context.Context, p *groupPass) ([]holdReport, error) {
	restored, short, err := c.restoreHolds(ctx, p.a, p.now)
	if err != nil {
		return nil, err
	}
	for _, r := range restored {
		if err := c.noteRestore(ctx, p.id, r); err != nil {
			return nil, err
		}
	}
	p.changed = p.changed || len(restored) > 0
	return short, nil
}

// repairLeaks releases the holds nothing justifies once they are older
// than the repair grace (the store asked first: the cache may lag the
// holder's write), and the documents of released holds once their holder
// has gone (tombstones). A hold too young to judge makes the pass look
// again when it comes of age, with the repair due then.
func (c resourceGroupReconciler) repairLeaks(ctx context.Context, p *groupPass) error {
	lookAgain := false
	for h, hold := range p.a.Holds() {
		if ok, err := c.justified(ctx, h, p.id, false); err != nil {
			return err
		} else if ok {
			continue
		}
		if age := c.ledger.holdAge(p.id, h, hold, p.now); age >= c.o.grace {
			if ok, err := c.releasable(ctx, h, p.id, hold); err != nil {
				return err
			} else if !ok {
				p.recheck = sooner(p.recheck, c.o.grace/4)
				lookAgain = true
				continue
			}
			p.a.Release(h)
			p.changed = true
		} else {
			p.recheck = sooner(p.recheck, c.o.grace-age)
			lookAgain = true
		}
	}
	if err := c.ledger.tombstones(ctx, p.a, p.now); err != nil {
		return err
	}
	if lookAgain {
		c.ledger.repairAgain(p.id) // the repair is due when the young one is old enough
	}
	return nil
}

// admitQueued admits what the group's queue fits and writes the account
// with every change of the pass (one compare-and-swap); a failed write
// puts the admitted back in the queue. It returns the runs admitted, the
// runs newly queued since the last pass, and whether the account's room
// for pending holds is used up.
func (c resourceGroupReconciler) admitQueued(ctx context.Context, p *groupPass) (admitted []queue.Item, queued []string, full bool, growthErr, err error) {
	id, a := p.id, p.a
	item := c.queueItem
	q, queued := c.queues.take(id, item)
	// A run that holds a reservation here is admitted: out of the queue,
	// and on its way to its cluster. One whose reservation went (released
	// by a repair, here or on another client) while it still waits is
	// back in the queue.
	held := map[string]bool{}
	for h := range a.Holds() {
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
	// An admission adds a pending hold, and an account keeps at most
	// quota.MaxPending: past that, what fits waits, still queued and not
	// told to wait for quota, until the settling step (queued below) has
	// written the documents of the pending ones and a later pass drops them.
	// Admitting more than that room would fail the whole pass, and with it
	// the drops of the holds settled meanwhile: no pass would ever succeed.
	room := quota.MaxPending - len(a.Pending)
	admitted = c.queues.admit(q, func(q *queue.Queue) []queue.Item { return q.AdmitUpTo(p.now, a.Allocatable(), room) })
	full = len(admitted) >= room
	var growths []admittedGrowth // admitted growths of clusters: granted once the account is written
	for _, it := range admitted {
		if isGrowthEntry(it.RunID) {
			g := c.reserveGrowth(a, it, p.now)
			p.changed = p.changed || g.reserved
			growths = append(growths, g)
			continue
		}
		if _, err := a.Set(odClusterID(it.RunID), it.Demand, p.now); err != nil {
			for _, it := range admitted {
				c.queues.push(id, it) // not admitted after all
			}
			return nil, nil, false, nil, err
		}
		p.changed = true
	}
	if p.changed {
		if _, err := c.acc.update(ctx, kindResourceGroup, id, p.v, nil, a); err != nil {
			for _, it := range admitted {
				c.queues.push(id, it) // not admitted after all
			}
			c.requeued(id, queued)
			return nil, nil, false, nil, err
		}
	}
	runs := admitted[:0:0]
	for _, it := range admitted {
		if isGrowthEntry(it.RunID) {
			continue
		}
		runs = append(runs, it)
		c.enqueue(kindRun + "/" + it.RunID)
		c.metrics.admitted(id, p.now.Sub(it.Enqueued))
		c.o.log.V(1).Info("run admitted", "run", it.RunID, "resourceGroup", id, "priority", it.Priority, "reserved", it.Demand.String())
	}
	growthErr = c.admitGrowths(ctx, id, growths)
	c.headroomFollowsQueue(id)
	return runs, queued, full, growthErr, nil
}

// admittedGrowth is a cluster's growth its resource group's queue
// admitted, and what the pass reserved for it.
type admittedGrowth struct {
	it      queue.Item
	cluster string
	// reserved: the pass raised the cluster's hold from before to after,
	// for the cluster's next generation, in its account write.
	reserved      bool
	before, after quota.Hold
}

// reserveGrowth reserves, on account a as the pass will write it, what
// the growth it admitted adds: the cluster's hold raised by the growth's
// demand and made for the cluster's next generation, as a resize's is
// before its cluster write (writeWithHold). From the pass's write to the
// grant nothing else can take that quota; the grant finds it
// (reservedAhead), and a grant that does not come is covered as a
// resize's is (trueUpHold fences the cluster off past the grace and
// trues the hold up). Nothing is reserved for a cluster the account holds
// nothing for, or that the account cannot hold more for now: the grant
// then reserves as any resize.
func (c resourceGroupReconciler) reserveGrowth(a *quota.Account, it queue.Item, now time.Time) admittedGrowth {
	g := admittedGrowth{it: it, cluster: strings.TrimPrefix(it.RunID, growthPrefix)}
	cl, _, err := fromCache[cluster.Cluster](c.acc, kindCluster, g.cluster)
	h, had := a.Hold(g.cluster)
	if err != nil || !had {
		return g
	}
	gen := max(h.Generation, cl.Generation+1)
	if _, err := a.SetFor(g.cluster, h.Resources.Add(it.Demand), gen, now); err != nil {
		return g
	}
	g.after, _ = a.Hold(g.cluster)
	g.reserved, g.before = true, h
	return g
}

// admitGrowths grants the growths of clusters the queue admitted, in its
// order, after the pass's account write (the runs admitted beside them
// hold their reservations then, and the growths theirs: reserveGrowth):
// each through the cluster's resize (ClusterService.admitGrowth), which
// takes the reservation before it raises the ceiling. A growth quota no
// longer fits (changed since the pass read the account), or whose grant
// failed, goes back in the queue, in its place: it keeps its Since; and
// what the pass reserved for one not granted is given back while nothing
// has touched it since.
func (c resourceGroupReconciler) admitGrowths(ctx context.Context, rg string, growths []admittedGrowth) error {
	var failed []error
	for _, g := range growths {
		it, id := g.it, g.cluster
		waits, granted, err := c.clusters.admitGrowth(ctx, id)
		if err != nil || waits {
			if again, ok := c.queueItem(it.RunID); ok {
				c.queues.push(rg, again)
			}
		}
		if g.reserved && !granted {
			if uerr := c.unreserveGrowth(ctx, rg, g); uerr != nil {
				failed = append(failed, fmt.Errorf("giving back what growth of cluster %s reserved: %w", id, uerr))
			}
		}
		if err != nil {
			failed = append(failed, fmt.Errorf("growth of cluster %s: %w", id, err))
			continue // the others are granted all the same
		}
		c.o.log.V(1).Info("growth admitted", "cluster", id, "resourceGroup", rg, "priority", it.Priority, "reserved", it.Demand.String(), "waitsStill", waits)
	}
	return errors.Join(failed...)
}

// unreserveGrowth gives back what the pass reserved for growth g, which
// was not granted, when the cluster's hold is as the pass left it (what a
// resize or repair changed since is theirs to settle).
func (c resourceGroupReconciler) unreserveGrowth(ctx context.Context, rg string, g admittedGrowth) error {
	_, err := c.ledger.changeAccount(ctx, rg, func(a *quota.Account) (bool, error) {
		h, ok := a.Hold(g.cluster)
		if !ok || h.Resources != g.after.Resources || h.Generation != g.after.Generation || !h.Since.Equal(g.after.Since) {
			return false, nil
		}
		return a.SetFor(g.cluster, g.before.Resources, g.before.Generation, c.clock.Now())
	})
	return err
}

// headroomFollowsQueue queues the running clusters of resource group rg
// whose autoscaling headroom is to follow its queue (followAutoscaler):
// those that lend headroom while something waits in it (they give it
// back), those that gave it back once nothing waits (they get it again).
func (c resourceGroupReconciler) headroomFollowsQueue(rg string) {
	if c.o.headroom == 0 {
		return
	}
	// Only when what waits changes, as far as headroom goes (the highest
	// priority that waits, a starving entry counting above every one):
	// the clusters' own steps decide by their priority (queueWaits).
	// Queued on every pass while anything waited, each lent cluster
	// cost a step per admission, with nothing to give back.
	level := c.waitLevel(rg)
	c.headroomMu.Lock()
	last, seen := c.headroomLevel[rg]
	c.headroomLevel[rg] = level
	c.headroomMu.Unlock()
	if seen && last == level {
		return
	}
	for _, mark := range []string{headroomLent, headroomYielded} {
		if (mark == headroomLent && level <= last && seen) || (mark == headroomYielded && level >= last && seen) {
			continue // lent clusters look again when more waits, yielded ones when less
		}
		for _, d := range c.cache.SelectDocs(kindCluster, map[string]string{labelResourceGroup: rg, labelHeadroom: mark}) {
			c.enqueue(kindCluster + "/" + d.ID)
		}
	}
}

// reportShort says on each live cluster whose hold the group cannot make
// up, and in the log, that it holds less than it runs. Found short on the
// cache, which may lag (a release, a restore another replica made), it is
// reported only when the store's account is the one read; else the watch
// brings the newer one here again.
func (c resourceGroupReconciler) reportShort(ctx context.Context, p *groupPass, short []holdReport) error {
	if len(short) > 0 && !p.changed {
		if _, fv, err := fresh[quota.Account](ctx, c.acc, kindResourceGroup, p.id); err != nil {
			return err
		} else if fv != p.v {
			return nil
		}
	}
	for _, r := range short {
		c.o.log.Error(r.err, "a live cluster holds less than it runs and its resource group cannot make up for it", "cluster", r.cluster, "resourceGroup", p.id, "needs", r.need.String())
		if err := c.noteQuota(ctx, r.cluster, p.id, "quota-restore-failed", shortMessage(p.id, r)); err != nil {
			return err
		}
	}
	return nil
}

// tellWaiting tells the runs newly queued and not admitted that they wait
// for quota (J18); with no room left for pending holds (full), they are
// looked at again next pass. Each is a write of its run: a few at once,
// and a bounded number a pass (the rest are told by the passes that
// follow, at once), so that a pass, and a change of the group that comes
// meanwhile (room made), never waits behind a long backlog of them.
func (c resourceGroupReconciler) tellWaiting(ctx context.Context, p *groupPass, admitted []queue.Item, queued []string, full bool) error {
	id := p.id
	in := map[string]bool{}
	for _, it := range admitted {
		in[it.RunID] = true
	}
	var tell []string
	for _, runID := range queued {
		if !in[runID] {
			tell = append(tell, runID)
		}
	}
	if full {
		c.requeued(id, tell)
		return nil
	}
	more := len(tell) > maxToldPerPass
	if more {
		c.requeued(id, tell[maxToldPerPass:])
		tell = tell[:maxToldPerPass]
	}
	failed := make([]error, len(tell))
	parallel(len(tell), waitWriters, func(i int) {
		r, err := c.runs.getRun(ctx, tell[i])
		if err != nil || r.State != job.Queued {
			return
		}
		if _, held := p.a.Hold(odClusterID(r.ID)); held {
			return
		}
		failed[i] = c.runs.wait(ctx, r, job.InsufficientQuota, "waiting for quota in resource group "+id)
	})
	for i, err := range failed {
		if err != nil {
			c.requeued(id, tell[i:i+1])
		}
	}
	if err := errors.Join(failed...); err != nil {
		// The rest are told by the retry, after its backoff: queued now,
		// the group would be stepped again at once, and a store that
		// keeps refusing the writes would be asked in a loop.
		return err
	}
	if more {
		c.enqueue(kindResourceGroup + "/" + id)
	}
	return nil
}

// A resource group's pass tells at most maxToldPerPass of the runs newly
// queued that they wait for quota, waitWriters at a time.
const (
	maxToldPerPass = 64
	waitWriters    = 8
)

// holdReport is a live cluster whose reservation the quota reconciler
// restored, or could not (err).
type holdReport struct {
	cluster string
	need    quota.Resources
	err     error
}

func shortMessage(rg string, r holdReport) string {
	return fmt.Sprintf("it runs %s but its reservation in resource group %s is missing or short (changed outside the platform), "+
		"and the group cannot reserve it again: %v; the group is over-allocated until something there is released", r.need, rg, r.err)
}

// seenHold is a hold as this client first saw it, and when, on its own
// clock.
type seenHold struct {
	hold quota.Hold
	at   time.Time
}

// noteQuota records a quota discrepancy of cluster id in resource group
// rg on the cluster (noteCluster) and, when it is new, in the metrics
// (dlc_quota_discrepancies_total): never only a log line.
func (c *Engine) noteQuota(ctx context.Context, id, rg, action, msg string) error {
	wrote, err := c.noteCluster(ctx, id, action, msg)
	if wrote {
		c.metrics.quotaReported(rg, action)
	}
	return err
}

// logged reports whether events has an entry of action saying msg.
func logged(events []event.Event, action, msg string) bool {
	return slices.ContainsFunc(events, func(e event.Event) bool { return e.Action == action && e.Message == msg })
}

// noteCluster adds a system entry to a cluster's event log, unless the
// log already has the same one (a report repeated by every pass is
// written once); wrote says whether it added it.
func (c *Engine) noteCluster(ctx context.Context, id, action, msg string) (wrote bool, err error) {
	for attempt := 0; ; attempt++ {
		cl, err := c.clusters.getFresh(ctx, id)
		if errs.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if logged(cl.Events, action, msg) {
			return false, nil
		}
		next := cl.DeepCopy()
		next.Events = event.Append(next.Events, c.event(ctx, "system", action, msg))
		err = c.clusters.putCluster(ctx, next, cl.Version)
		if err == nil || !errors.Is(err, errs.ErrConflict) || attempt >= conflictRetries {
			return err == nil, err
		}
	}
}

// confirmLacks reads a cluster, its resource group and the cluster again
// from the store, and reports whether the group holds less than the
// cluster runs while the cluster did not change: a reservation is made
// before the cluster's write that needs it and released after the write
// that frees it, so only an edit from outside leaves a cluster short.
func (c *Engine) confirmLacks(ctx context.Context, id, rg string, now time.Time) (need, held quota.Resources, lacks bool, err error) {
	for range 3 {
		cl, err := c.clusters.getFresh(ctx, id)
		if errs.IsNotFound(err) {
			return need, held, false, nil
		}
		if err != nil {
			return need, held, false, err
		}
		a, _, err := fresh[quota.Account](ctx, c.acc, kindResourceGroup, rg)
		if errs.IsNotFound(err) {
			return need, held, false, nil
		}
		if err != nil {
			return need, held, false, err
		}
		again, err := c.clusters.getFresh(ctx, id)
		if errs.IsNotFound(err) {
			return need, held, false, nil
		}
		if err != nil {
			return need, held, false, err
		}
		if again.Version == cl.Version {
			need, lacks = c.lacksHold(cl, a)
			return need, a.Held(id), lacks, nil
		}
	}
	return need, held, false, nil // it keeps changing: a write is on its way
}

// releasable reports whether the repair may release holder's aged hold
// in resource group rg: nothing in the store justifies it, and, when it
// was made for a newer generation of its cluster than the stored one (a
// start or resize whose cluster write has not come), that write is
// fenced off first (fenceOff: the cluster written by compare-and-swap,
// its generation moved up to the hold's), so that the late write
// conflicts instead of landing on a released hold, and its operation,
// tried again, reserves for a newer generation: that changes the account,
// and this pass's release, written over the account as read, conflicts
// rather than take the new hold. A cluster that changed meanwhile is
// looked at again on a later pass.
func (c resourceGroupReconciler) releasable(ctx context.Context, holder, rg string, hold quota.Hold) (bool, error) {
	cl, err := c.clusters.getFresh(ctx, holder)
	switch {
	case errs.IsNotFound(err):
		ok, err := c.justified(ctx, holder, rg, true) // an admitted on-demand run's
		return !ok && err == nil, err
	case err != nil:
		return false, err
	case cl.State.HoldsQuota() && cl.QuotaGroup == rg:
		return false, nil // justified
	case hold.Generation <= cl.Generation:
		return true, nil // no write of it can be on its way
	}
	return c.clusters.fenceOff(ctx, cl, hold.Generation, "quota-repair", fmt.Sprintf(
		"releasing the reservation of %s in resource group %s made for generation %d at %s: its write did not come within the repair grace (%s)",
		hold.Resources, rg, hold.Generation, hold.Since.UTC().Format(time.RFC3339Nano), c.o.grace))
}

// justified reports whether holder may keep a reservation in resource
// group rg: a cluster that holds quota there, or an admitted on-demand
// run whose cluster is not made yet.
// The cache is read (a cluster that justifies a hold is in it the moment
// its write is seen), or, fromStore, the store itself, where the cache
// may lag its holder's write.
func (c *Engine) justified(ctx context.Context, holder, rg string, fromStore bool) (bool, error) {
	cl, err := justifier[cluster.Cluster](ctx, c.acc, kindCluster, holder, fromStore)
	if err == nil {
		return cl.State.HoldsQuota() && cl.QuotaGroup == rg, nil
	}
	runID, isRun := strings.CutPrefix(holder, odPrefix)
	if !errs.IsNotFound(err) || !isRun {
		return false, ignoreNotFound(err)
	}
	r, err := justifier[job.Run](ctx, c.acc, kindRun, runID, fromStore)
	if err != nil {
		return false, ignoreNotFound(err)
	}
	return r.State.Live() && r.Config.OnDemand != nil && r.Config.OnDemand.ResourceGroup == rg, nil
}

// justifier reads what may justify a hold: from the cache (the object it
// decoded already; one that does not decode justifies nothing, and the
// store is asked before anything is released), or from the store itself.
func justifier[T any](ctx context.Context, c *access, kind, id string, fromStore bool) (*T, error) {
	if !fromStore {
		v, _, err := fromCache[T](c, kind, id)
		if err != nil && !errs.IsNotFound(err) {
			return nil, errs.NotFound(kind, id) // corrupt: not a justification
		}
		return v, err
	}
	d, err := c.store.Get(ctx, kind, id)
	if err != nil {
		return nil, err
	}
	return decode[T](d)
}

// requeued puts runs that a failed pass did not tell to wait back in the
// set of runs stored queued, for the next pass.
func (c resourceGroupReconciler) requeued(rg string, runs []string) {
	c.queues.mu.Lock()
	defer c.queues.mu.Unlock()
	for _, id := range runs {
		if c.queues.rgOf[id] == rg {
			set(c.queues.queued, rg)[id] = true
		}
	}
}
