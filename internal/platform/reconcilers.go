package platform

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/client-go/util/workqueue"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
)

// The reconcilers are level-triggered, as in controller-runtime: a key
// ("cluster/<id>", "run/<id>", "resourcegroup/<id>") is queued whenever
// its object or its Ray side changed, and its reconciler reads the
// current stored object and the current Ray state and takes the next
// step. The queue (client-go's typed work queue) holds a key once, and
// never hands one key to two workers at a time. A failed step is queued
// again after the rate limiter's backoff, on the client's clock.

// onChange is the store's watch: it keeps the cache and queues the keys
// that the change concerns. It runs inside the store's write, so it only
// touches memory. A change told of before the store's snapshot is in the
// cache is newer than the snapshot's copy of its document: it is kept
// until the snapshot is in, and applied after it (applyEarly), or the
// snapshot would take the cache back to the older copy, for good if
// nothing changes the document again.
func (c *Engine) onChange(ch backend.Change) {
	if ch.Doc.Kind == kindReplica {
		c.observeReplica(ch.Doc, ch.Deleted)
		return
	}
	c.earlyMu.Lock()
	if c.early != nil {
		*c.early = append(*c.early, ch)
		c.earlyMu.Unlock()
		return
	}
	c.earlyMu.Unlock()
	c.apply(ch)
}

// applyEarly applies the changes onChange kept while the snapshot was
// applied, in the order they came, then lets onChange apply the later
// ones itself.
func (c *Engine) applyEarly() {
	for {
		c.earlyMu.Lock()
		batch := *c.early
		if len(batch) == 0 {
			c.early = nil
			c.earlyMu.Unlock()
			return
		}
		*c.early = nil
		c.earlyMu.Unlock()
		for _, ch := range batch {
			c.apply(ch)
		}
	}
}

// apply keeps the cache by ch and queues the keys it concerns.
func (c *Engine) apply(ch backend.Change) {
	var before backend.Doc
	had := false
	if c.watching() || ch.Doc.Kind == kindResourceGroup {
		before, had = c.cache.get(ch.Doc.Kind, ch.Doc.ID)
	}
	var account *quota.Account // as it comes, vetted before the cache has it (vetAccount)
	if ch.Doc.Kind == kindResourceGroup {
		if !ch.Deleted {
			account = c.decodeAccount(ch.Doc)
		}
		c.vetAccount(c.accountOf(before, had), account, ch.Doc, ch.Deleted)
	}
	d, obj := c.observed(ch.Doc, ch.Deleted)
	if account != nil {
		c.cache.seed(d.Kind, d.ID, d.Version, account) // decoded once
	}
	c.publish(d, before, ch.Deleted, had)
	if _, ok := c.reconcilers[d.Kind]; ok {
		c.enqueue(d.Kind + "/" + d.ID)
		if ch.Deleted {
			c.rep.forget(d.Kind + "/" + d.ID) // what the adoption keeps of it
		}
	}
	if d.Kind == kindCluster {
		// What the change means for the runs that depend on the cluster is
		// derived here, on every client, not by the cluster's reconciler:
		// with the work shared, those runs may be another client's.
		if ch.Deleted {
			c.mu.Lock()
			delete(c.dependents, d.ID)
			delete(c.idleRefused, d.ID)
			delete(c.steps, d.ID) // also on a client that no longer owns it
			for rg, byHolder := range c.seen {
				// Its hold's sightings (holdAge), kept also by a client
				// that does not own the group and so never trims them.
				if delete(byHolder, d.ID); len(byHolder) == 0 {
					delete(c.seen, rg)
				}
			}
			c.mu.Unlock()
			c.load.forget(d.ID)
		} else if cl, ok := obj.(*cluster.Cluster); ok {
			c.enqueueDependents(cl) // reads it only
		}
	}
	if d.Kind == kindHold {
		// A settled hold changed: its resource group looks again (a hold
		// removed or edited by someone else is made up for there; the
		// platform's own writes of holds cost a look, which finds nothing).
		if rg, _, ok := strings.Cut(d.ID, "."); ok {
			c.enqueue(kindResourceGroup + "/" + rg)
		}
	}
	if d.Kind == kindRun && !ch.Deleted && d.Labels[labelPhase] == phasePending && d.Labels[labelState] == string(job.Queued) {
		// A run queued for a resource group: the group's step admits it,
		// in the admission lane, without waiting for the run's own step.
		if rg, ok := strings.CutPrefix(d.Labels[labelTarget], targetResourceGroup); ok {
			c.enqueue(kindResourceGroup + "/" + rg)
		}
	}
	if d.Kind == kindJob && ch.Deleted {
		// A run still waiting for a deleted config (its create died before
		// its fence) fails, saying so (J17).
		c.enqueueRuns(map[string]string{labelJob: d.ID, labelPhase: phasePending})
	}
	if d.Kind == kindGroup && ch.Deleted {
		// J19: runs waiting for the group fail, saying it is gone.
		c.enqueueRuns(map[string]string{labelTarget: targetGroup + d.ID, labelPhase: phasePending})
	}
}

func (c *Engine) enqueue(key string) {
	if c.ctx.Err() == nil && c.owns(key) {
		c.lane(key).Add(key)
	}
}

// enqueueRuns queues the runs the cache finds under sel.
func (c *Engine) enqueueRuns(sel map[string]string) {
	for _, d := range c.cache.selectDocs(kindRun, sel) {
		c.enqueue(kindRun + "/" + d.ID)
	}
}

// resync queues every object that may still need a step: what a closed
// or crashed client left is taken up here.
func (c *Engine) resync() { c.walk(nil) }

// walk is the resync: it queues the resource groups, the clusters and the
// pending, active and cleaning-up runs this client owns, and the finished
// runs the retention looks at; see, when not nil, is told of each key of
// the first kinds, with its version and whether it is owned.
func (c *Engine) walk(see func(key, version string, owned bool)) {
	visit := func(kind string, docs []backend.Doc) {
		for _, d := range docs {
			key := kind + "/" + d.ID
			owned := c.owns(key)
			if owned && c.ctx.Err() == nil {
				c.lane(key).Add(key)
			}
			if see != nil {
				see(key, d.Version, owned)
			}
		}
	}
	for _, kind := range []string{kindResourceGroup, kindCluster} {
		visit(kind, c.cache.selectDocs(kind, nil))
	}
	for _, phase := range []string{phasePending, phaseActive, phaseCleanup} {
		visit(kindRun, c.cache.selectDocs(kindRun, map[string]string{labelPhase: phase}))
	}
	visit(kindJob, c.cache.selectDocs(kindJob, map[string]string{labelScheduled: "1"}))
	c.enqueueRetained()
}

func (c *Engine) worker(q workqueue.TypedInterface[string]) {
	defer c.wg.Done()
	for {
		key, shutdown := q.Get()
		if shutdown {
			return
		}
		c.process(key)
	}
}

// Reconcile runs every queued reconcile step in the caller's goroutine,
// including the steps they queue, and returns how many it ran. It is for
// clients made WithWorkers(0), such as dlctest.NewMemory's on a fake
// clock; with workers it only competes with them.
func (c *Engine) Reconcile() int {
	n := 0
	for c.ctx.Err() == nil {
		q := c.admit // admission first, as its own workers would
		if q.Len() == 0 {
			q = c.queue
		}
		if q.Len() == 0 {
			break
		}
		key, shutdown := q.Get()
		if shutdown {
			break
		}
		c.process(key)
		n++
	}
	return n
}

// process runs one reconcile of key and schedules what follows. The step
// has a deadline (WithReconcileTimeout): a step that runs past it, a call
// that hangs, is a failed step, and its worker goes on to other keys.
func (c *Engine) process(key string) {
	defer c.lane(key).Done(key)
	ctx, cancel := c.stepContext()
	defer cancel()
	owner, owned := c.owner(key)
	var adopted *stepWrites
	if !owned {
		if !c.rep.takeAdopted(key) {
			// Queued before the members changed: another client's now.
			c.limiter.Forget(key)
			return
		}
		// Adopted at the periodic resync (adoption.go): one step, whose
		// writes to the key tell whether its owner left it undone. What
		// follows it (a later look, a retry) is its owner's.
		adopted = &stepWrites{key: key}
		ctx = context.WithValue(ctx, stepWritesKey{}, adopted)
	}
	kind, id, _ := strings.Cut(key, "/")
	r, ok := c.reconcilers[kind]
	if !ok {
		c.o.log.Error(errs.ErrInvalid, "no reconciler for the key's kind", "key", key)
		return
	}
	after, err := r.reconcile(ctx, id)
	if adopted != nil {
		c.adoptedStep(owner, adopted)
	}
	if c.ctx.Err() != nil {
		return
	}
	if err != nil && ctx.Err() != nil {
		err = errs.Unavailable("reconcile "+key, fmt.Errorf("the step did not end within %s: %w", c.o.reconcileTime, err))
	}
	if err == nil {
		c.limiter.Forget(key)
		c.mu.Lock()
		delete(c.failures, key)
		c.mu.Unlock()
		if adopted == nil {
			c.later(key, after)
		}
		return
	}
	// A conflict means the object moved on: read it again at once, with a
	// short backoff, and do not count it as a failure. Nor is a call not
	// made because its target was busy with another (a Ray head takes one
	// call at a time): that call's own outcome counts. Nor a run's step
	// that could not reach Ray about its job: it keeps its own bound
	// (rayUnanswered).
	conflict := errors.Is(err, errs.ErrConflict) || isBusy(err) || isUnanswered(err)
	if adopted != nil && conflict {
		c.limiter.Forget(key)
		return // the owner, or another client, was at it
	}
	c.metrics.retried(kind)
	if !conflict {
		c.metrics.failed(kind)
		c.mu.Lock()
		c.failures[key]++
		n := c.failures[key]
		c.mu.Unlock()
		c.o.log.Error(err, "reconcile step failed", r.logKey(), id, "attempt", n, "retries", c.o.retries)
		if n > c.o.retries {
			gctx, gcancel := c.stepContext()
			// The cause may quote what a Ray head or a server answered: bounded.
			gerr := r.giveUp(gctx, id, job.ClipMessage("a background step kept failing: "+err.Error()))
			gcancel()
			if gerr == nil {
				c.mu.Lock()
				delete(c.failures, key)
				c.mu.Unlock()
				c.limiter.Forget(key)
				c.enqueue(key)
				return
			}
		}
	}
	if adopted != nil {
		// Counted all the same: an adopted key whose steps fail at every
		// round, unchanged in between, is one whose owner does not give
		// up on it either (periodicResync forgets the count otherwise).
		c.limiter.Forget(key)
		return
	}
	c.later(key, c.limiter.When(key))
}

// stepContext is the context of one reconcile step: the client's, with
// the step's deadline.
func (c *Engine) stepContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.ctx, c.o.reconcileTime)
}

// isBusy reports whether err says a call was not made because its target
// was busy with another call: an error in its chain has a method Busy()
// bool that returns true.
func isBusy(err error) bool {
	var b interface{ Busy() bool }
	return errors.As(err, &b) && b.Busy()
}

// later queues key again after d on the client's clock, replacing the
// key's earlier timer; d == 0 only stops that timer. A key has at most
// one timer, so a step that settles leaves nothing pending.
func (c *Engine) later(key string, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.timers[key]; ok {
		t.stop()
		delete(c.timers, key)
	}
	if d <= 0 {
		return
	}
	c.timerSeq++
	seq := c.timerSeq
	stop := c.clock.AfterFunc(d, func() {
		c.mu.Lock()
		if t, ok := c.timers[key]; ok && t.seq == seq {
			delete(c.timers, key)
		}
		c.mu.Unlock()
		c.enqueue(key)
	})
	c.timers[key] = timer{stop: stop, seq: seq}
}

// timer is a key's pending requeue.
type timer struct {
	stop func() bool
	seq  uint64
}

// reconciler is one kind's reconciler (cluster_reconciler.go,
// run_reconciler.go, resourcegroup_reconciler.go), chosen by the kind of
// the key queued.
type reconciler interface {
	// reconcile takes object id one step, level-triggered: it reads the
	// stored object and Ray's side afresh. It returns when to look again
	// (0: when something changes).
	reconcile(ctx context.Context, id string) (after time.Duration, err error)
	// giveUp records on the object that its steps kept failing, with why:
	// a cluster turns abnormal, a run fails. It returns errRetry when the
	// kind has no state to fall back to, and its steps go on retrying.
	giveUp(ctx context.Context, id, why string) error
	// logKey is the log key that names an object of the kind.
	logKey() string
}

// errRetry is a reconciler's giveUp saying that the steps go on.
var errRetry = errors.New("no state to fall back to: retrying")

// newReconcilers returns the reconciler of each kind of stored object that
// has one.
func (c *Engine) newReconcilers() map[string]reconciler {
	return map[string]reconciler{
		kindCluster:       clusterReconciler{c},
		kindRun:           runReconciler{c},
		kindResourceGroup: resourceGroupReconciler{c},
		kindJob:           jobReconciler{c},
		keySettle:         settleReconciler{c},
	}
}
