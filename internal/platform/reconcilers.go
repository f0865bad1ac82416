package platform

import (
	"errors"
	"strings"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/internal/runner"
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

// apply keeps the cache by ch and queues the keys it concerns; a
// membership document goes to the work sharing.
func (c *Engine) apply(ch backend.Change) {
	if ch.Doc.Kind == kindReplica {
		c.share.observeReplica(ch.Doc, ch.Deleted)
		return
	}
	if isMetered(ch.Doc) {
		return // read from the store by a report, never cached
	}
	var before backend.Doc
	had := false
	if c.views.Watching() || ch.Doc.Kind == kindResourceGroup {
		before, had = c.cache.Get(ch.Doc.Kind, ch.Doc.ID)
	}
	var account *quota.Account // as it comes, vetted before the cache has it (vetAccount)
	if ch.Doc.Kind == kindResourceGroup {
		if !ch.Deleted {
			account = c.ledger.decodeAccount(ch.Doc)
		}
		c.ledger.vetAccount(c.ledger.accountOf(before, had), account, ch.Doc, ch.Deleted)
	}
	d, obj := c.observed(ch.Doc, ch.Deleted)
	if account != nil {
		c.cache.Seed(d.Kind, d.ID, d.Version, account) // decoded once
	}
	c.views.Publish(d, before, ch.Deleted, had)
	if c.run.Handles(d.Kind) {
		c.enqueue(d.Kind + "/" + d.ID)
		if ch.Deleted {
			c.share.rep.forget(d.Kind + "/" + d.ID) // what the adoption keeps of it
		}
	}
	if d.Kind == kindCluster {
		c.enqueue(kindMeter + "/" + d.ID) // its attribution, or its end
		// What the change means for the runs that depend on the cluster is
		// derived here, on every client, not by the cluster's reconciler:
		// with the work shared, those runs may be another client's.
		if ch.Deleted {
			c.notes.forget(d.ID) // also on a client that no longer owns it
			c.ledger.forgetHolder(d.ID)
			c.load.forget(d.ID)
		} else if cl, ok := obj.(*cluster.Cluster); ok {
			c.enqueueDependents(cl) // reads it only
		}
		if !ch.Deleted && d.Labels[labelGrowth] == "1" {
			// A growth waits in its resource group's queue: the group's
			// step admits it in the queue's order, as a queued run.
			c.enqueue(kindResourceGroup + "/" + d.Labels[labelResourceGroup])
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

// enqueue queues key, if this client owns it.
func (c *Engine) enqueue(key string) { c.run.Enqueue(key) }

// enqueueRuns queues the runs the cache finds under sel.
func (c *Engine) enqueueRuns(sel map[string]string) {
	for _, d := range c.cache.SelectDocs(kindRun, sel) {
		c.enqueue(kindRun + "/" + d.ID)
	}
}

// walk is the resync: it queues the resource groups, the clusters and the
// pending, active and cleaning-up runs this client owns, and the finished
// runs the retention looks at; see, when not nil, is told of each key of
// the first kinds, with its version and whether it is owned.
func (c *Engine) walk(see func(key, version string, owned bool)) {
	visit := func(kind string, docs []backend.Doc) {
		for _, d := range docs {
			key := kind + "/" + d.ID
			owned := c.share.owns(key)
			if owned {
				c.run.Add(key)
			}
			if see != nil {
				see(key, d.Version, owned)
			}
		}
	}
	for _, kind := range []string{kindResourceGroup, kindCluster} {
		visit(kind, c.cache.SelectDocs(kind, nil))
	}
	for _, phase := range []string{phasePending, phaseActive, phaseCleanup} {
		visit(kindRun, c.cache.SelectDocs(kindRun, map[string]string{labelPhase: phase}))
	}
	visit(kindJob, c.cache.SelectDocs(kindJob, map[string]string{labelScheduled: "1"}))
	if key := kindCompaction + "/all"; c.o.compactAfter > 0 && c.share.owns(key) {
		c.run.Add(key)
	}
	for _, key := range c.meterKeys() {
		if c.share.owns(key) {
			c.run.Add(key)
		}
	}
	c.enqueueRetained()
}

// Reconcile runs every queued reconcile step in the caller's goroutine,
// including the steps they queue, and returns how many it ran. It is for
// clients made WithWorkers(0), such as dlctest.NewMemory's on a fake
// clock; with workers it only competes with them.
func (c *Engine) Reconcile() int { return c.run.RunQueued() }

// transient reports whether a step's error is no failure of its object:
// a conflict means the object moved on (it is read again at once, with a
// short backoff); a call not made because its target was busy with
// another (a Ray head takes one call at a time) counts by that call's own
// outcome; a run's step that could not reach Ray about its job keeps its
// own bound (rayUnanswered).
func transient(err error) bool {
	return errors.Is(err, errs.ErrConflict) || isBusy(err) || isUnanswered(err)
}

// isBusy reports whether err says a call was not made because its target
// was busy with another call: an error in its chain has a method Busy()
// bool that returns true.
func isBusy(err error) bool {
	var b interface{ Busy() bool }
	return errors.As(err, &b) && b.Busy()
}

// newReconcilers returns the reconciler of each kind of stored object that
// has one.
func (c *Engine) newReconcilers() map[string]runner.Reconciler {
	return map[string]runner.Reconciler{
		kindCluster:       clusterReconciler{c},
		kindRun:           runReconciler{c},
		kindResourceGroup: resourceGroupReconciler{c},
		kindJob:           jobReconciler{c},
		keySettle:         settleReconciler{ledger: c.ledger, at: c.o.settleAt},
		kindMeter:         meterReconciler{c},
		kindCompaction:    compactionReconciler{c},
	}
}
