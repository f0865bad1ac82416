package platform

import (
	"container/heap"
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/job"
)

// Retention of finished runs (bounded history). A run that has ended and
// whose Ray part is done (RayDone: its job stopped, its on-demand cluster
// on its way out, its quota released) is deleted once it finished longer
// ago than the retention's age, or sooner when its job config has more
// finished runs than the retention's count and it is among the oldest of
// them. The run reconciler (of the replica that owns the run, when the
// work is shared) decides it on every look at such a run, from the stored
// run alone (its FinishedAt, on the client's clock), and asks to look
// again when the age is up; the delete is a compare-and-swap on the
// version read. So it is level-triggered: a replica that loses the race
// finds the run gone (or changed, and looked at again) and does nothing;
// a client that starts looks at every finished run it owns once, and one
// that takes a share over looks at the finished runs in it, so every
// pending deletion is picked up.

// The defaults of WithRunRetention.
const (
	// DefaultRunRetention is how long a finished run is kept.
	DefaultRunRetention = 7 * 24 * time.Hour
	// DefaultRunsPerJob is how many finished runs of one job config are
	// kept at most.
	DefaultRunsPerJob = 1000
	// DefaultMaxFinishedRuns is how many finished runs are kept at most
	// across every job config.
	DefaultMaxFinishedRuns = 100000
)

// retention is WithRunRetention's: zero in a field is no bound of that
// kind; both zero keep every finished run.
type retention struct {
	maxAge time.Duration
	perJob int
	total  int // WithMaxFinishedRuns
}

func (r retention) on() bool { return r.maxAge > 0 || r.perJob > 0 || r.total > 0 }

// WithRunRetention: see dlc.WithRunRetention.
func WithRunRetention(maxAge time.Duration, perJob int) Option {
	return func(o *options) { o.retention.maxAge, o.retention.perJob = maxAge, perJob }
}

// WithMaxFinishedRuns: see dlc.WithMaxFinishedRuns.
func WithMaxFinishedRuns(n int) Option { return func(o *options) { o.retention.total = n } }

// validate refuses negative bounds.
func (r retention) validate() error {
	var l errs.List
	p := errs.NewPath("WithRunRetention")
	if r.maxAge < 0 {
		l = append(l, errs.Invalid(p.Child("maxAge"), "", r.maxAge, "must not be negative (0 keeps finished runs whatever their age)"))
	}
	if r.perJob < 0 {
		l = append(l, errs.Invalid(p.Child("perJob"), "", r.perJob, "must not be negative (0 keeps every finished run of a job config)"))
	}
	if r.total < 0 {
		l = append(l, errs.Invalid(errs.NewPath("WithMaxFinishedRuns"), "", r.total, "must not be negative (0: no bound across job configs)"))
	}
	return l.ToError()
}

// retain is the run reconciler's step for a finished run whose Ray part is
// done: it keeps its job config within the count (deleting the oldest
// finished runs beyond it, this one perhaps), then deletes the run if its
// age is up, or returns when it will be.
func (c runReconciler) retain(ctx context.Context, r *job.Run) (time.Duration, error) {
	ret := c.o.retention
	if ret.perJob > 0 {
		if gone, err := c.trimJob(ctx, r.JobID, r.ID); err != nil || gone {
			return 0, err
		}
	}
	if ret.total > 0 {
		gone, more, err := c.trimAll(ctx, r.ID)
		if err != nil || gone {
			return 0, err
		}
		if more {
			return time.Millisecond, nil // the rest in another step
		}
	}
	if ret.maxAge == 0 {
		return 0, nil
	}
	if left := r.FinishedAt.Add(ret.maxAge).Sub(c.clock.Now()); left > 0 {
		return left, nil
	}
	if deleted, err := c.deleteRun(ctx, finishedOf(r), "age"); err != nil || deleted {
		return 0, err
	}
	return unrecordedLook, nil // looked at again: it goes once what made it has recorded it
}

// unrecordedLook is when retention looks again at a run it kept because
// what made it has not recorded it yet (madeRecorded).
const unrecordedLook = time.Minute

// trimJob deletes the oldest finished runs of job config jobID beyond the
// retention's count, oldest by FinishedAt (then submission order, then
// id: every replica picks the same), each at the version the watch last
// reported. It reads the index of that job's finished runs only: its
// size while the job is within the count, one pass over its runs when it
// is not; never another job's. gone says whether run self was among those
// deleted.
func (c runReconciler) trimJob(ctx context.Context, jobID, self string) (gone bool, err error) {
	keep := c.o.retention.perJob
	n := c.finished.count(jobID)
	if n <= keep {
		return false, nil
	}
	for _, r := range c.finished.oldest(jobID, n-keep) {
		deleted, err := c.deleteRun(ctx, r, "count")
		if err != nil {
			return false, err
		}
		gone = gone || (deleted && r.id == self)
	}
	return gone, nil
}

// trimAll deletes the oldest finished runs of every job config beyond
// WithMaxFinishedRuns's bound, and a hundredth of the bound more (one
// pass over the index is paid for by that many finishes), in the order
// trimJob deletes a job's: at most maxTrimPerStep in one step (more says
// that more are due), and in one step at a time on this client (a step
// that finds another trimming leaves it to that one). gone says whether
// run self was among those deleted.
func (c runReconciler) trimAll(ctx context.Context, self string) (gone, more bool, err error) {
	bound := c.o.retention.total
	n := c.finished.total()
	if n <= bound || !c.trimming.CompareAndSwap(false, true) {
		return false, false, nil
	}
	defer c.trimming.Store(false)
	due := n - bound + bound/100
	deletedSome := false
	for _, r := range c.finished.oldest("", min(due, maxTrimPerStep)) {
		deleted, err := c.deleteRun(ctx, r, "total")
		if err != nil {
			return false, false, err
		}
		deletedSome = deletedSome || deleted
		gone = gone || (deleted && r.id == self)
	}
	// More at once only while a step deletes some: runs kept until what
	// made them records them wait for the next finish.
	return gone, due > maxTrimPerStep && !gone && deletedSome, nil
}

// maxTrimPerStep bounds the runs one retention step deletes for the
// bound across job configs, so that a backlog (a bound lowered, a
// restart) is worked off in steps that each end well within a step's
// time.
const maxTrimPerStep = 500

// finishedRuns indexes the finished runs (phase done: ended, Ray done) by
// job config, with what the count orders them by and the version to
// delete them at. It is derived from the stored runs as the store's watch
// reports them, as the queues are: an index in memory that a restart
// rebuilds, never the truth (a delete is a compare-and-swap on the store).
// It is compact, so that a job's runs are gone through without touching
// the cache's maps of every run.
type finishedRuns struct {
	mu sync.Mutex
	// byJob: job config → run → the run as the count orders it. By
	// pointer: a config's map with one run was a group of 8 slots of the
	// whole struct, 1.2 KiB (issue 43).
	byJob map[string]map[string]*finishedRun
	jobOf map[string]string // run → its job config, while the run is indexed
}

func newFinishedRuns() *finishedRuns {
	return &finishedRuns{byJob: map[string]map[string]*finishedRun{}, jobOf: map[string]string{}}
}

// observe follows a stored run: d with its derived labels and obj its
// decoded form (nil when deleted or when it does not decode). It only
// touches memory, so it can run inside the store's watch.
func (f *finishedRuns) observe(d backend.Doc, obj any) {
	if d.Kind != kindRun {
		return
	}
	r, _ := obj.(*job.Run)
	done := r != nil && d.Labels[labelPhase] == phaseDone // not a failed run whose retry is still to come (runLabels)
	f.mu.Lock()
	defer f.mu.Unlock()
	if was, ok := f.jobOf[d.ID]; ok && (!done || was != r.JobID) {
		delete(f.byJob[was], d.ID)
		if len(f.byJob[was]) == 0 {
			delete(f.byJob, was)
		}
		delete(f.jobOf, d.ID)
	}
	if !done {
		return
	}
	runs := f.byJob[r.JobID]
	if runs == nil {
		runs = map[string]*finishedRun{}
		f.byJob[r.JobID] = runs
	}
	fr := finishedOf(r)
	fr.version = d.Version
	runs[d.ID] = &fr
	f.jobOf[d.ID] = r.JobID
}

// total returns how many finished runs there are.
func (f *finishedRuns) total() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.jobOf)
}

// count returns how many finished runs job config jobID has.
func (f *finishedRuns) count(jobID string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.byJob[jobID])
}

// oldest returns the n oldest finished runs of job config jobID ("":
// of every job config), oldest first: one pass over them, the n kept in a
// heap.
func (f *finishedRuns) oldest(jobID string, n int) []finishedRun {
	if n <= 0 {
		return nil
	}
	f.mu.Lock()
	h := make(newestFirst, 0, min(n, len(f.jobOf))) // the oldest n so far, the newest of them on top
	add := func(runs map[string]*finishedRun) {
		for _, r := range runs {
			switch {
			case len(h) < n:
				heap.Push(&h, *r)
			case r.before(h[0]):
				h[0] = *r
				heap.Fix(&h, 0)
			}
		}
	}
	if jobID != "" {
		add(f.byJob[jobID])
	} else {
		for _, runs := range f.byJob {
			add(runs)
		}
	}
	f.mu.Unlock()
	sort.Slice(h, func(i, j int) bool { return h[i].before(h[j]) })
	return h
}

// finishedRun is what the count per job orders a finished run by, the
// version to delete it at, and what made it (madeRecorded).
type finishedRun struct {
	id, version string
	at          time.Time
	seq         uint64
	job, prev   string    // its job config, and the attempt it retries
	tick        time.Time // the schedule's tick that started it
}

// finishedOf is finished run r as the retention orders and checks it.
func finishedOf(r *job.Run) finishedRun {
	return finishedRun{id: r.ID, version: r.Version, at: r.FinishedAt, seq: r.Seq, job: r.JobID, prev: r.PreviousAttempt, tick: r.Tick}
}

// before says whether r finished before o: by FinishedAt, then submission
// order, then id.
func (r finishedRun) before(o finishedRun) bool {
	if !r.at.Equal(o.at) {
		return r.at.Before(o.at)
	}
	if r.seq != o.seq {
		return r.seq < o.seq
	}
	return r.id < o.id
}

// newestFirst is a heap of finished runs with the newest on top.
type newestFirst []finishedRun

func (h newestFirst) Len() int           { return len(h) }
func (h newestFirst) Less(i, j int) bool { return h[j].before(h[i]) }
func (h newestFirst) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *newestFirst) Push(x any)        { *h = append(*h, x.(finishedRun)) }
func (h *newestFirst) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// deleteRun deletes finished run r at its version: what Ray keeps of it
// first (backend.RunForgetter), the run itself last, by compare-and-swap,
// so that a step cut short between the two leaves the run to try again. A
// run gone already (another replica deleted it) or changed since (its
// newer version queues it again) is left as it is. So is a run that what
// made it has not recorded yet (madeRecorded): deleted reports whether
// the run was deleted.
func (c runReconciler) deleteRun(ctx context.Context, r finishedRun, why string) (deleted bool, err error) {
	if ok, err := c.madeRecorded(ctx, r); err != nil || !ok {
		return false, err
	}
	id, version := r.id, r.version
	if f, ok := c.o.backend.(backend.RunForgetter); ok {
		t := time.Now()
		err := f.ForgetRun(ctx, id)
		if in, ok := c.ray.(instrumented); ok {
			in.done("ray_forget_run", t, err)
		}
		if err != nil {
			return false, err
		}
	}
	err = c.store.Delete(ctx, kindRun, id, version)
	if errs.IsNotFound(err) || errors.Is(err, errs.ErrConflict) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	c.metrics.runDeleted(why)
	c.o.log.V(1).Info("run deleted", "run", id, "reason", "retention "+why)
	return true, nil
}

// madeRecorded reports whether what made run r has recorded it, as the
// store has it: the schedule whose tick started it has that tick behind
// its LastTick, the failed attempt it retries names it (NextAttempt). A
// tick's or a retry's run has an id derived from the tick or the attempt,
// and a step repeated before the record (a write refused, an owner
// replaced) finds the run it made by that id; deleted before the record,
// the run would be made again. So retention keeps it until then. A config
// gone or no longer scheduled, or an attempt gone, makes nothing again.
func (c *Engine) madeRecorded(ctx context.Context, r finishedRun) (bool, error) {
	if !r.tick.IsZero() {
		rec, err := c.jobs.freshJob(ctx, r.job)
		switch {
		case errs.IsNotFound(err):
		case err != nil:
			return false, err
		case rec.Config.Schedule != nil && !rec.ScheduleStatus.Suspended && !c.markHolds(rec.Deleting.At, rec.Deleting.Replica) &&
			rec.ScheduleStatus.LastTick.Before(r.tick):
			// Suspended or being deleted, the schedule starts no tick (a
			// resume counts from then): nothing would make the run again.
			return false, nil
		}
	}
	if r.prev != "" {
		p, err := c.runs.freshRun(ctx, r.prev)
		switch {
		case errs.IsNotFound(err):
		case err != nil:
			return false, err
		case p.NextAttempt != r.id:
			return false, nil
		}
	}
	return true, nil
}

// enqueueRetained queues the finished runs for the retention to look at
// (enqueue keeps those this client owns): at its start every one of them
// (when each is due is kept in the runs alone), later those with no look
// pending here (a share taken over from another replica, a notice lost).
// Runs kept by count only have none pending, and are looked at as their
// jobs' runs finish.
func (c *Engine) enqueueRetained() {
	ret := c.o.retention
	c.mu.Lock()
	first := !c.retainSeen
	c.retainSeen = true
	c.mu.Unlock()
	if !ret.on() || (!first && ret.maxAge == 0) {
		return
	}
	for _, d := range c.cache.SelectDocs(kindRun, map[string]string{labelPhase: phaseDone}) {
		key := kindRun + "/" + d.ID
		if first || !c.run.Waiting(key) {
			c.enqueue(key)
		}
	}
}
