// Package runner is the engine's controller runtime: it runs each kind's
// reconciler on the keys queued for it ("cluster/<id>", "run/<id>", …),
// as controller-runtime's controller runs a Reconciler.
//
// A key is queued whenever its object or its Ray side changed, and its
// reconciler reads the current stored object and the current Ray state
// and takes the next step, level-triggered. The queue (client-go's typed
// work queue) holds a key once, and never hands one key to two workers
// at a time. Each step has a deadline (Options.StepTimeout): a step that
// runs past it, a call that hangs, is a failed step, and its worker goes
// on to other keys. A failed step is queued again after the rate
// limiter's backoff, on the runner's clock; after Options.Retries
// failures in a row the reconciler gives up on the object (GiveUp: a
// cluster turns abnormal, a run fails) and the key is queued again, so
// that nothing stays in a transitional state for ever. A step may ask to
// be run again after a while (Result.After): a key has at most one such
// timer.
//
// Lanes. Keys for which Options.Admission is true (a resource group's
// admission and settling) have a queue of their own, with workers of
// their own (AdmitWorkers): a group's step admits every queued run that
// fits in one compare-and-swap of its account, while the steps of the
// runs it admits each write several objects; in one queue the group's
// next step would wait behind every run step queued before it, and
// admission would run at the pace of provisioning. A key is in one lane
// only, so the queue's promise (one key, one worker at a time) holds
// across the lanes.
//
// Sharing. With several clients on one store, each key has one owner
// (Options.Sharing): a runner queues only the keys it owns (Enqueue), and
// takes a key it does not own one step only when the sharing adopted it
// (a member that does not do its share).
package runner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/util/workqueue"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/job"
)

// Result is what a step asks of the runner.
type Result struct {
	// After is when to take the key a step again; 0: when something
	// changes (the key is queued again then).
	After time.Duration
}

// Reconciler takes the objects of one kind a step at a time.
type Reconciler interface {
	// Reconcile takes object id one step, level-triggered: it reads the
	// stored object and Ray's side afresh.
	Reconcile(ctx context.Context, id string) (Result, error)
	// GiveUp records on the object that its steps kept failing, with why:
	// a cluster turns abnormal, a run fails. It returns ErrRetry when the
	// kind has no state to fall back to, and its steps go on retrying.
	GiveUp(ctx context.Context, id, why string) error
	// LogKey is the log key that names an object of the kind.
	LogKey() string
}

// ErrRetry is a reconciler's GiveUp saying that the steps go on.
var ErrRetry = errors.New("no state to fall back to: retrying")

// Sharing is the work sharing among the clients on one store.
type Sharing interface {
	// Owner returns the member that reconciles key, and whether it is
	// this client.
	Owner(key string) (owner string, owned bool)
	// Adopt is asked when a key owned by another member comes to a
	// worker: whether the key was adopted, to be taken one step; if so it
	// returns the step's context, derived from ctx, and a function to
	// call when the step has ended.
	Adopt(ctx context.Context, key, owner string) (context.Context, func(), bool)
}

// Metrics counts the steps queued again.
type Metrics interface {
	// Retried counts a step of kind queued again after a failure or a
	// conflict.
	Retried(kind string)
	// Failed counts a step of kind that failed.
	Failed(kind string)
}

// Options configures a Runner.
type Options struct {
	// Clock is the clock of the backoff and of Result.After.
	Clock backend.Clock
	// Workers is how many workers take keys of the main lane; the
	// admission lane has AdmitWorkers(Workers). 0: none (RunQueued).
	Workers int
	// Retries is how many failed steps in a row a key takes before its
	// reconciler gives up on it.
	Retries int
	// StepTimeout bounds each step.
	StepTimeout time.Duration
	// BaseDelay and MaxDelay bound the backoff of a failed key.
	BaseDelay, MaxDelay time.Duration
	// Log is where failed steps are told.
	Log logr.Logger
	// Admission reports whether key goes in the admission lane.
	Admission func(key string) bool
	// Transient reports whether an error is not a failure of the object
	// (a conflict: it moved on): the key is taken again after a backoff,
	// and the failure is not counted.
	Transient func(err error) bool
	// Metrics counts the retries; nil: not counted.
	Metrics Metrics
	// Sharing decides which keys are this client's; nil: every key.
	Sharing Sharing
}

// Runner runs reconcilers on queued keys. Its methods are safe for
// concurrent use.
type Runner struct {
	ctx         context.Context
	o           Options
	reconcilers map[string]Reconciler
	queue       workqueue.TypedInterface[string] // every key but the admission lane's
	admit       workqueue.TypedInterface[string] // the admission lane
	limiter     workqueue.TypedRateLimiter[string]
	wg          sync.WaitGroup
	live        atomic.Int32 // workers taking keys (Workers)

	mu       sync.Mutex
	failures map[string]int   // consecutive failures of a key's step
	timers   map[string]timer // a key's pending requeue, to stop
	timerSeq uint64
}

// timer is a key's pending requeue.
type timer struct {
	stop func() bool
	seq  uint64
}

// New returns a runner of reconcilers, one per kind (a key's kind is what
// comes before its first "/"), whose steps run in ctx: once it is done,
// nothing more is queued or run. Start starts its workers.
func New(ctx context.Context, o Options, reconcilers map[string]Reconciler) *Runner {
	if o.Admission == nil {
		o.Admission = func(string) bool { return false }
	}
	if o.Transient == nil {
		o.Transient = func(error) bool { return false }
	}
	return &Runner{ctx: ctx, o: o, reconcilers: reconcilers,
		queue:    workqueue.NewTyped[string](),
		admit:    workqueue.NewTyped[string](),
		limiter:  workqueue.NewTypedItemExponentialFailureRateLimiter[string](o.BaseDelay, o.MaxDelay),
		failures: map[string]int{}, timers: map[string]timer{}}
}

// AdmitWorkers is how many workers the admission lane has beside n
// workers of the other: a quarter as many, at least two, none with none.
// Two at least: a settling step never holds the lane alone.
func AdmitWorkers(n int) int {
	if n <= 0 {
		return 0
	}
	return max(2, n/4)
}

// Start starts the workers of both lanes.
func (r *Runner) Start() {
	for range r.o.Workers {
		r.wg.Add(1)
		r.live.Add(1)
		go r.worker(r.queue)
	}
	for range AdmitWorkers(r.o.Workers) {
		r.wg.Add(1)
		r.live.Add(1)
		go r.worker(r.admit)
	}
}

// Workers returns how many workers take keys now, and how many Start
// starts (Options.Workers and the admission lane's): a readiness probe
// wants them equal once started.
func (r *Runner) Workers() (live, want int) {
	return int(r.live.Load()), r.o.Workers + AdmitWorkers(r.o.Workers)
}

// Stop stops the timers and the queues, and waits for the steps in
// progress. The runner's context should be done first.
func (r *Runner) Stop() {
	r.mu.Lock()
	for _, t := range r.timers {
		t.stop()
	}
	r.mu.Unlock()
	r.queue.ShutDown()
	r.admit.ShutDown()
	r.wg.Wait()
}

func (r *Runner) lane(key string) workqueue.TypedInterface[string] {
	if r.o.Admission(key) {
		return r.admit
	}
	return r.queue
}

// Handles reports whether the runner has a reconciler of kind.
func (r *Runner) Handles(kind string) bool {
	_, ok := r.reconcilers[kind]
	return ok
}

// Enqueue queues key, if this client owns it and a reconciler handles
// its kind (a runner with none queues nothing).
func (r *Runner) Enqueue(key string) {
	if r.ctx.Err() == nil && r.handlesKey(key) && r.owns(key) {
		r.lane(key).Add(key)
	}
}

// Add queues key whoever owns it, if a reconciler handles its kind: a key
// this client does not own is then taken one step only if the sharing
// adopted it.
func (r *Runner) Add(key string) {
	if r.ctx.Err() == nil && r.handlesKey(key) {
		r.lane(key).Add(key)
	}
}

// handlesKey reports whether a reconciler handles key's kind (its part
// before the first "/").
func (r *Runner) handlesKey(key string) bool {
	kind, _, _ := strings.Cut(key, "/")
	return r.Handles(kind)
}

func (r *Runner) owns(key string) bool {
	if r.o.Sharing == nil {
		return true
	}
	_, ok := r.o.Sharing.Owner(key)
	return ok
}

// Waiting reports whether key has a timer to be taken again (Later).
func (r *Runner) Waiting(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.timers[key]
	return ok
}

// ForgetFailures drops the failure counts, and the backoff, of the keys
// for which keep is false.
func (r *Runner) ForgetFailures(keep func(key string) bool) {
	r.mu.Lock()
	keys := make([]string, 0, len(r.failures))
	for key := range r.failures {
		keys = append(keys, key)
	}
	r.mu.Unlock()
	for _, key := range keys {
		if keep(key) {
			continue
		}
		r.mu.Lock()
		delete(r.failures, key)
		r.mu.Unlock()
		r.limiter.Forget(key)
	}
}

func (r *Runner) worker(q workqueue.TypedInterface[string]) {
	defer r.wg.Done()
	defer r.live.Add(-1) // counted by Start
	for {
		key, shutdown := q.Get()
		if shutdown {
			return
		}
		r.process(key)
	}
}

// RunQueued runs every queued step in the caller's goroutine, including
// the steps they queue, and returns how many it ran: for a runner with no
// workers, such as one on a fake clock; with workers it only competes
// with them.
func (r *Runner) RunQueued() int {
	n := 0
	for r.ctx.Err() == nil {
		q := r.admit // admission first, as its own workers would
		if q.Len() == 0 {
			q = r.queue
		}
		if q.Len() == 0 {
			break
		}
		key, shutdown := q.Get()
		if shutdown {
			break
		}
		r.process(key)
		n++
	}
	return n
}

// stepContext is the context of one step: the runner's, with the step's
// deadline.
func (r *Runner) stepContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.ctx, r.o.StepTimeout)
}

// process runs one step of key and schedules what follows.
func (r *Runner) process(key string) {
	defer r.lane(key).Done(key)
	ctx, cancel := r.stepContext()
	defer cancel()
	var adopted func()
	if r.o.Sharing != nil {
		if owner, owned := r.o.Sharing.Owner(key); !owned {
			actx, done, ok := r.o.Sharing.Adopt(ctx, key, owner)
			if !ok {
				// Queued before the members changed: another client's now.
				r.limiter.Forget(key)
				return
			}
			// One step, whose writes tell whether its owner left it
			// undone. What follows it (a later look, a retry) is its
			// owner's.
			ctx, adopted = actx, done
		}
	}
	kind, id, _ := strings.Cut(key, "/")
	rec, ok := r.reconcilers[kind]
	if !ok {
		r.o.Log.Error(errs.ErrInvalid, "no reconciler for the key's kind", "key", key)
		return
	}
	res, err := rec.Reconcile(ctx, id)
	if adopted != nil {
		adopted()
	}
	if r.ctx.Err() != nil {
		return
	}
	if err != nil && ctx.Err() != nil {
		err = errs.Unavailable("reconcile "+key, fmt.Errorf("the step did not end within %s: %w", r.o.StepTimeout, err))
	}
	if err == nil {
		r.limiter.Forget(key)
		r.mu.Lock()
		delete(r.failures, key)
		r.mu.Unlock()
		if adopted == nil {
			r.Later(key, res.After)
		}
		return
	}
	transient := r.o.Transient(err)
	if adopted != nil && transient {
		r.limiter.Forget(key)
		return // the owner, or another client, was at it
	}
	if r.o.Metrics != nil {
		r.o.Metrics.Retried(kind)
	}
	if !transient {
		if r.o.Metrics != nil {
			r.o.Metrics.Failed(kind)
		}
		r.mu.Lock()
		r.failures[key]++
		n := r.failures[key]
		r.mu.Unlock()
		r.o.Log.Error(err, "reconcile step failed", rec.LogKey(), id, "attempt", n, "retries", r.o.Retries)
		if n > r.o.Retries {
			gctx, gcancel := r.stepContext()
			// The cause may quote what a Ray head or a server answered: bounded.
			gerr := rec.GiveUp(gctx, id, job.ClipMessage("a background step kept failing: "+err.Error()))
			gcancel()
			if gerr == nil {
				r.mu.Lock()
				delete(r.failures, key)
				r.mu.Unlock()
				r.limiter.Forget(key)
				r.Enqueue(key)
				return
			}
		}
	}
	if adopted != nil {
		// Counted all the same: an adopted key whose steps fail at every
		// round, unchanged in between, is one whose owner does not give
		// up on it either (the sharing forgets the count otherwise).
		r.limiter.Forget(key)
		return
	}
	r.Later(key, r.limiter.When(key))
}

// Later queues key again after d on the runner's clock, replacing the
// key's earlier timer; d == 0 only stops that timer. A key has at most
// one timer, so a step that settles leaves nothing pending.
func (r *Runner) Later(key string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t, ok := r.timers[key]; ok {
		t.stop()
		delete(r.timers, key)
	}
	if d <= 0 {
		return
	}
	r.timerSeq++
	seq := r.timerSeq
	stop := r.o.Clock.AfterFunc(d, func() {
		r.mu.Lock()
		if t, ok := r.timers[key]; ok && t.seq == seq {
			delete(r.timers, key)
		}
		r.mu.Unlock()
		r.Enqueue(key)
	})
	r.timers[key] = timer{stop: stop, seq: seq}
}
