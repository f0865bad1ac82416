package platform

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/event"
	"github.com/aidlc/dlc/internal/runner"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
)

// RunService is the runs (task instances) of an Engine's job configs
// (J14, J18, J19).
type RunService struct{ c *Engine }

// Runs returns the client's runs.
func (c *Engine) Runs() *RunService { return c.runs }

// Labels of stored runs: what the queues and waiting sets are derived from.
const (
	labelPhase          = "phase"
	phasePending        = "pending" // queued or waiting
	phaseActive         = "active"  // provisioning or running
	phaseCleanup        = "cleanup" // ended; Ray or its on-demand cluster still to release, or its retry (L3) to make
	phaseDone           = "done"
	labelTarget         = "target"
	targetCluster       = "cluster."
	targetGroup         = "group."
	targetResourceGroup = "rg."
	labelOn             = "on" // the cluster it was placed on
	labelJob            = "job"
	labelPriority       = "priority" // an on-demand run's
)

func runLabels(r *job.Run) map[string]string {
	l := map[string]string{labelJob: r.JobID, labelState: string(r.State)}
	if r.Config.OnDemand != nil {
		l[labelPriority] = strconv.Itoa(r.Priority)
	}
	switch {
	case r.State == job.Queued || r.State == job.Waiting:
		l[labelPhase] = phasePending
	case r.State.Live():
		l[labelPhase] = phaseActive
	case r.RayDone && !(r.Retries() && r.NextAttempt == ""):
		l[labelPhase] = phaseDone
	default:
		l[labelPhase] = phaseCleanup
	}
	switch r.Config.Mode() {
	case job.ClusterMode:
		l[labelTarget] = targetCluster + r.Config.Cluster
	case job.GroupMode:
		l[labelTarget] = targetGroup + r.Config.Group
	case job.OnDemandMode:
		l[labelTarget] = targetResourceGroup + r.Config.OnDemand.ResourceGroup
	}
	if r.ClusterID != "" {
		l[labelOn] = r.ClusterID
	}
	return l
}

// Create starts a new run of a job config's current revision (J14). The
// run is queued, then waits with a reason while it cannot be placed
// (J18), is provisioning while its cluster comes up or its job is
// submitted, runs, and ends succeeded, failed or stopped. A run of a
// config whose cluster or cluster group is gone fails at once, saying so
// (J19).
//
// A config whose delete is in progress (job.Deletion) runs nothing: the
// create is refused with a *errs.StateError. A delete that begins while
// the run is being created either sees the run (and is refused, J17) or
// deletes the config; in the second case the run, once stored, finds the
// config marked or gone and fails at once (its message says so), and
// Create returns the *errs.StateError, or ErrNotFound for the config.
// The failed run stays in the run list; a retry with the same request id
// returns it.
func (s *RunService) Create(ctx context.Context, jobID string, opts job.RunOptions) (*job.Run, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	id := newID("run")
	if opts.RequestID != "" {
		id = idFor("run", jobID, opts.RequestID)
	}
	return s.createRun(ctx, jobID, id, opts.RequestID != "", nil)
}

// newRun is how a run comes to be: by hand (Runs().Create), at a
// schedule's tick, or as the retry of a failed one.
type newRun struct {
	// source and why are the submit event's: "user" and "revision 3",
	// "system" and the tick, or the attempt retried.
	source, why string
	// shape changes the run before it is stored: its config (a retry
	// runs the failed attempt's), attempt, tick, creator.
	shape func(*job.Run)
}

// createRun stores run id of job jobID, queued, and fences it against the
// config's delete (fenceRun). When derived (the id derives from a request,
// a tick or a failed attempt), a run already stored under the id is
// returned instead: a second create of it is a no-op.
func (s *RunService) createRun(ctx context.Context, jobID, id string, derived bool, how *newRun) (*job.Run, error) {
	c := s.c
	switch {
	case derived && how == nil:
		if r, err := c.runs.getRun(ctx, id); err == nil {
			return c.runs.fenceRun(ctx, r) // the first attempt may have stopped short of it
		}
	case derived:
		// A tick's or a retry's run: made by a step before this one, which
		// the cache shows, or its create below is the conflict.
		if _, ok := c.cache.Get(kindRun, id); ok {
			if r, err := c.runs.getRun(ctx, id); err == nil {
				return c.runs.fenceRun(ctx, r)
			}
		}
	}
	now := c.clock.Now()
	r, err := c.runs.queuedRun(ctx, jobID, id, now, c.runs.nextSeq(now), how)
	if err != nil {
		return nil, err
	}
	why, err := c.runs.missingTarget(ctx, &r.Config)
	if err != nil {
		return nil, err
	}
	if why != "" {
		if _, _, err := c.runs.advanceRun(r, job.Fail, why); err != nil {
			return nil, err
		}
		r.Final = true   // a retry would find its target gone too
		r.RayDone = true // it never reached Ray, nor was it admitted
		r.Events = event.Append(r.Events, c.event(ctx, "system", string(job.Failed), why))
	}
	// The fence's read of the config (fenceRun) needs only the run stored:
	// it is made while the store's cache catches up with the run.
	var fenceWhy string
	var fenceErr error
	v, err := c.acc.createThen(ctx, kindRun, r.ID, runLabels(r), r, func() {
		if !r.State.Terminal() {
			fenceWhy, fenceErr = c.jobs.jobLive(context.WithoutCancel(ctx), r.JobID)
		}
	})
	if errors.Is(err, errs.ErrConflict) && derived {
		got, gv, ferr := fresh[job.Run](ctx, c.acc, kindRun, id)
		if ferr != nil {
			return nil, ferr
		}
		got.Version = gv
		return c.runs.fenceRun(ctx, got)
	}
	if err != nil {
		return nil, err
	}
	r.Version = v
	c.logRunChange("", r)
	return c.runs.fenced(ctx, r, fenceWhy, fenceErr)
}

// queuedRun is run id of job jobID's current revision as a create stores
// it, queued at now with seq, shaped by how: what Runs().Create, a tick, a
// retry and a plan share. A config whose delete is in progress runs
// nothing (*errs.StateError).
func (s *RunService) queuedRun(ctx context.Context, jobID, id string, now time.Time, seq uint64, how *newRun) (*job.Run, error) {
	c := s.c
	rec, err := c.jobs.getJob(ctx, jobID)
	if err != nil {
		return nil, err
	}
	if c.markHolds(rec.Deleting.At, rec.Deleting.Replica) {
		return nil, jobDeleting(rec, "run")
	}
	r := &job.Run{ID: id, JobID: jobID, Revision: rec.Revision, Config: *rec.Config.DeepCopy(),
		Creator: UserFrom(ctx), SubmittedAt: now, Seq: seq}
	source, why := "user", ""
	if how != nil {
		source, why = how.source, how.why
		if how.shape != nil {
			how.shape(r)
		}
	}
	r.Priority = r.Config.Priority()
	if why == "" {
		why = fmt.Sprintf("revision %d", r.Revision)
	}
	if _, _, err := c.runs.advanceRun(r, job.Queue, ""); err != nil {
		return nil, err
	}
	r.Logs = c.o.logPrefix + "/" + r.ID
	if od := r.Config.OnDemand; od != nil {
		if r.Demand, err = od.Environment.MinResources(c.cat.Nodes); err != nil {
			return nil, err
		}
	}
	r.Events = event.Append(nil, c.event(ctx, source, "submit", why))
	return r, nil
}

// fenceRun is the run side of a job config's fenced delete (fences.go):
// once run r is stored, it reads the config from the store itself and,
// when the config is gone or its delete is in progress, ends the run at
// once (failed, through the path of every ended run, so that Ray and the
// quota are released as for any other) and returns the error its create
// returns. A run that has ended is returned as it is.
//
// Linearisable with JobService.Delete (mark, list the runs in the store,
// delete on the marked version): if r was stored before the delete's
// list, the list sees it and the delete is refused; if after, it was
// stored after the mark, and this read, later still, finds the mark or
// finds the config gone. So the run reconciler need not check the config
// before it places a run: a run that passes here was stored before any
// delete's list, and one that fails here ends through the usual path even
// if another replica placed it meanwhile. (A process that dies between
// storing a run and this read leaves the run unchecked; a retry with the
// same request id checks it.) A read that fails ends the run too: the
// caller gets an error, so no run of theirs is left running unchecked.
func (s *RunService) fenceRun(ctx context.Context, r *job.Run) (*job.Run, error) {
	if r.State.Terminal() {
		return r, nil
	}
	why, err := s.c.jobs.jobLive(context.WithoutCancel(ctx), r.JobID)
	return s.fenced(ctx, r, why, err)
}

// fenced is the end of fenceRun, given what its read of run r's config
// found (jobLive's why and err, read after r was stored): r when the
// config is live or r has ended, else the error, r ended failed.
func (s *RunService) fenced(ctx context.Context, r *job.Run, why string, err error) (*job.Run, error) {
	if err == nil || r.State.Terminal() {
		return r, nil
	}
	ctx = context.WithoutCancel(ctx) // stored: see it through
	if _, eerr := s.c.runs.endRun(ctx, r, job.Fail, why); eerr != nil && !errors.Is(eerr, errs.ErrState) {
		return nil, fmt.Errorf("%w (and run %s could not be ended: %w)", err, r.ID, eerr)
	}
	return nil, err
}

// nextSeq returns now in nanoseconds, or one more than the last value it
// returned: submission order within a client, time order across clients.
func (s *RunService) nextSeq(now time.Time) uint64 {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq = max(c.seq+1, uint64(max(now.UnixNano(), 0)))
	return c.seq
}

// missingTarget says why a config's run cannot start at all: its cluster
// or cluster group is gone (J19).
func (s *RunService) missingTarget(ctx context.Context, cfg *job.Config) (string, error) {
	c := s.c
	kind, id, what := "", "", ""
	switch cfg.Mode() {
	case job.ClusterMode:
		kind, id, what = kindCluster, cfg.Cluster, "cluster"
	case job.GroupMode:
		kind, id, what = kindGroup, cfg.Group, "cluster group"
	case job.OnDemandMode:
		kind, id, what = kindResourceGroup, cfg.OnDemand.ResourceGroup, "resource group"
	default:
		return "", nil
	}
	ok, err := c.acc.exists(ctx, kind, id)
	if err != nil || ok {
		return "", err
	}
	return fmt.Sprintf("%s %s does not exist", what, id), nil
}

// Get returns a run.
func (s *RunService) Get(ctx context.Context, id string) (*job.Run, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return s.getRun(ctx, id)
}

func (s *RunService) getRun(ctx context.Context, id string) (*job.Run, error) {
	c := s.c
	r, v, err := get[job.Run](ctx, c.acc, kindRun, "run", id)
	if err != nil {
		return nil, err
	}
	r.Version = v
	c.runs.rederive(r)
	return r, nil
}

// demand is what admitting an on-demand run reserves: its environment's
// head and workers' minimum, computed from the run's config with the
// catalog. It is never the stored Demand, a field that anyone who can
// edit the stored run can set to nothing.
func (s *RunService) demand(r *job.Run) (quota.Resources, error) {
	c := s.c
	if r.Config.OnDemand == nil {
		return quota.Resources{}, nil
	}
	return r.Config.OnDemand.Environment.MinResources(c.cat.Nodes)
}

// rederive replaces the Demand a read run says it has with what its
// config needs (decode has rederived its Priority), so that a caller, and
// the next write of the run, see the truth rather than what was stored.
func (s *RunService) rederive(r *job.Run) {
	c := s.c
	if d, err := c.runs.demand(r); err == nil {
		r.Demand = d
	}
}

// List returns runs in submission order.
func (s *RunService) List(ctx context.Context, opts job.RunListOptions) ([]*job.Run, error) {
	opts.Limit, opts.Continue = 0, ""
	p, err := s.ListPage(ctx, opts, nil)
	if err != nil {
		return nil, err
	}
	return p.Items, nil
}

func (s *RunService) listRuns(sel map[string]string) ([]*job.Run, error) {
	c := s.c
	return list(c.acc, kindRun, sel, func(r *job.Run, v string) {
		r.Version = v
		c.runs.rederive(r)
	})
}

// Stop stops a run that has not ended; its Ray job is stopped and its
// on-demand cluster, if any, released.
func (s *RunService) Stop(ctx context.Context, id string) (*job.Run, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r, err := s.getRun(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.endRun(ctx, r, job.Stop, "stopped by "+UserFrom(ctx))
}

// Logs returns what a run has logged so far: from Ray while it has the
// run, else, once the run has ended and its cluster gone (an on-demand
// run's, or one hibernated or deleted since), the whole log written to
// COS when it ended (Run.LogsArchived, with the logs' location in COS and
// a COS client), or, without it or when it cannot be read, the tail kept
// when it ended (Run.LogTail); either after a line saying how many
// earlier lines were not kept, if any were not.
func (s *RunService) Logs(ctx context.Context, id string) ([]string, error) {
	r, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	lines, _, err := s.logs(ctx, r)
	return lines, err
}

// logs returns r's log lines and the number of the first of them in the
// whole log (not 0 for a kept tail).
func (s *RunService) logs(ctx context.Context, r *job.Run) ([]string, int, error) {
	c := s.c
	lines, err := c.ray.Logs(ctx, r.ID)
	if r.State.Live() || !r.LogsKept || (err == nil && len(lines) > 0) {
		return lines, 0, err
	}
	if !r.LogsArchived.IsZero() && c.archive != nil {
		whole, first, aerr := c.archive.get(ctx, r)
		if aerr == nil {
			return whole, first, nil
		}
		c.o.log.Error(aerr, "the whole log of an ended run could not be read from COS; reading its kept tail", "run", r.ID)
	}
	if r.LogsDropped == 0 {
		return slices.Clone(r.LogTail), 0, nil
	}
	return append([]string{fmt.Sprintf("[%d earlier lines not kept]", r.LogsDropped)}, r.LogTail...), r.LogsDropped - 1, nil
}

// followPoll is how often Follow reads a live run's logs.
const followPoll = 500 * time.Millisecond

// Follow sends a run's log lines on the channel it returns, as they come:
// what it has logged so far, then new lines while it runs (read every
// half second), then the last ones once it has ended; then it closes the
// channel. It also closes it when ctx is done or the client closes; a
// read that fails is retried at the next poll. Each line is sent once.
func (s *RunService) Follow(ctx context.Context, id string) (<-chan string, error) {
	c := s.c
	if err := c.views.Watchable(ctx); err != nil {
		return nil, err
	}
	if _, err := s.Get(ctx, id); err != nil {
		return nil, err
	}
	out := make(chan string)
	go func() {
		defer close(out)
		sent := 0 // lines of the whole log sent so far
		t := time.NewTicker(followPoll)
		defer t.Stop()
		for {
			r, err := c.runs.getRun(ctx, id)
			if err != nil && !errs.IsNotFound(err) {
				c.o.log.V(1).Info("following a run's logs: reading the run failed", "run", id, "err", err.Error())
			}
			if err == nil {
				lines, first, lerr := s.logs(ctx, r)
				if lerr == nil {
					for i, l := range lines {
						if first+i < sent {
							continue
						}
						select {
						case out <- l:
							sent = first + i + 1
						case <-ctx.Done():
							return
						case <-c.ctx.Done():
							return
						}
					}
				}
				if lerr == nil && !r.State.Live() {
					return
				}
			} else if errs.IsNotFound(err) {
				return // deleted
			}
			select {
			case <-t.C:
			case <-ctx.Done():
				return
			case <-c.ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// Events returns a run's event log, oldest first.
func (s *RunService) Events(ctx context.Context, id string) ([]event.Event, error) {
	r, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return r.Events, nil
}

// SaveJob saves a job config, as Jobs().Create with a request id; with
// RunJob it makes *Engine a job.Submitter.
func (c *Engine) SaveJob(ctx context.Context, cfg *job.Config, requestID string) (*job.Record, error) {
	return c.Jobs().Create(ctx, cfg, job.SaveOptions{RequestID: requestID})
}

// RunJob starts a run, as Runs().Create with a request id.
func (c *Engine) RunJob(ctx context.Context, jobID, requestID string) (*job.Run, error) {
	return c.Runs().Create(ctx, jobID, job.RunOptions{RequestID: requestID})
}

// putRun stores next over version and sets its new version.
func (s *RunService) putRun(ctx context.Context, next *job.Run, version string) error {
	c := s.c
	from := c.cachedState(kindRun, next.ID)
	v, err := c.acc.update(ctx, kindRun, next.ID, version, runLabels(next), next)
	if err != nil {
		return notFoundAs(err, "run", next.ID)
	}
	next.Version = v
	c.logRunChange(job.RunState(from), next)
	return nil
}

// deadlineExceeded begins the message of a run failed past its deadline.
const deadlineExceeded = "deadline exceeded"

// advanceRun moves r (a new run, or a copy about to be written) to the
// state that t takes it to by job.Transition, with what goes with the
// state (msg, the end time, whether Ray holds anything of it): the one
// place a run's state is assigned. ok is false when t does not apply to
// its state; a stop of an ended run is a *errs.StateError.
func (s *RunService) advanceRun(r *job.Run, t job.RunTrigger, msg string) (to job.RunState, ok bool, err error) {
	c := s.c
	prev := r.State
	to, ok, err = job.Transition(r.ID, prev, t)
	if err != nil || !ok {
		return prev, false, err
	}
	r.State = to
	if to != job.Waiting {
		r.WaitReason = ""
	}
	if to != prev {
		// An outage recorded in one state is no concern of the next: a
		// run displaced to wait, placed anew, or ended starts its count
		// again should Ray be unreachable there.
		r.RayUnreachableSince = time.Time{}
	}
	if to == job.Provisioning {
		r.Message = msg
	}
	if to.Terminal() {
		r.FinishedAt = c.clock.Now()
		r.Message, r.WaitReason = msg, ""
		if r.StartedAt.IsZero() && prev == job.Running {
			r.StartedAt = r.FinishedAt
		}
		// Nothing of a run that never reached Ray is left to release, but
		// an on-demand run's admitted cluster.
		r.RayDone = (prev == job.Queued || prev == job.Waiting) && r.Config.OnDemand == nil
	}
	return to, true, nil
}

// moveRun applies trigger t to run r and writes it, with change applied
// to the copy first; on a conflict it reads the run again and retries.
// ok is false when t does not apply to the run's state.
func (s *RunService) moveRun(ctx context.Context, r *job.Run, t job.RunTrigger, msg string, change func(*job.Run)) (*job.Run, bool, error) {
	c := s.c
	for attempt := 0; ; attempt++ {
		if _, ok, err := job.Transition(r.ID, r.State, t); err != nil || !ok {
			return r, false, err // checked before the copy: most observations change nothing
		}
		next := r.DeepCopy()
		to, _, _ := c.runs.advanceRun(next, t, msg) // applies: checked above
		if change != nil {
			change(next)
		}
		pastDeadline(next)
		source := "system"
		if t == job.Stop {
			source = "user"
		}
		next.Events = event.Append(next.Events, c.event(ctx, source, string(to), msg))
		err := c.runs.putRun(ctx, next, r.Version)
		if err == nil {
			return next, true, nil
		}
		if !errors.Is(err, errs.ErrConflict) || attempt >= conflictRetries {
			return nil, false, err
		}
		if r, err = c.runs.freshRun(ctx, r.ID); err != nil {
			return nil, false, err
		}
	}
}

func (s *RunService) freshRun(ctx context.Context, id string) (*job.Run, error) {
	c := s.c
	r, v, err := fresh[job.Run](ctx, c.acc, kindRun, id)
	if err != nil {
		return nil, notFoundAs(err, "run", id)
	}
	r.Version = v
	c.runs.rederive(r)
	return r, nil
}

// pastDeadline marks run r, failed at or after its deadline (L2) however
// the failure came (Ray's own deadline, a cluster that Ray's deadline
// broke), as final, not retried, its message saying so. FinishedAt
// decides, Ray's end time where Ray told it: a job Ray failed before its
// deadline, seen after, is retried as any failure.
func pastDeadline(r *job.Run) {
	dl, ok := r.Deadline()
	if !ok || r.State != job.Failed || r.FinishedAt.Before(dl) {
		return
	}
	r.Final = true
	if !strings.HasPrefix(r.Message, deadlineExceeded) {
		r.Message = deadlineExceeded + ": " + r.Message
	}
}

// endRun ends a run (Stop or Fail) with msg; the reconciler then releases
// what it holds.
func (s *RunService) endRun(ctx context.Context, r *job.Run, t job.RunTrigger, msg string) (*job.Run, error) {
	c := s.c
	next, _, err := c.runs.moveRun(ctx, r, t, msg, nil)
	return next, err
}

// failRun fails a run whose background step kept failing.
func (s *RunService) failRun(ctx context.Context, id, why string) error {
	c := s.c
	r, err := c.runs.freshRun(ctx, id)
	if errs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !r.State.Live() {
		// An ended run's cleanup (its job stopped on Ray, its cluster
		// released) has nothing to fall back to: it keeps retrying, and
		// the run's log says why, at most once per longest backoff.
		if err := c.runs.noteCleanupRetrying(ctx, r, why); err != nil {
			return err
		}
		return runner.ErrRetry
	}
	_, err = c.runs.endRun(ctx, r, job.Fail, why)
	return err
}

// noteCleanupRetrying records in ended run r's log that its cleanup keeps
// failing, and why (renote: once, and again only after the longest
// backoff or when the reason changes). A conflict leaves it to the next
// time the steps give up.
func (s *RunService) noteCleanupRetrying(ctx context.Context, r *job.Run, why string) error {
	c := s.c
	events, write := renote(r.Events, c.event(ctx, "system", "cleanup-retrying", why), c.o.maxDelay)
	if !write {
		return nil
	}
	next := r.DeepCopy()
	next.Events = events
	if err := c.runs.putRun(ctx, next, r.Version); err != nil && !errors.Is(err, errs.ErrConflict) {
		return err
	}
	return nil
}

// wait records why a run waits (J18), writing only when that changes.
func (s *RunService) wait(ctx context.Context, r *job.Run, why job.WaitReason, msg string) error {
	c := s.c
	if r.State == job.Waiting && r.WaitReason == why && r.Message == msg {
		return nil
	}
	_, _, err := c.runs.moveRun(ctx, r, job.Wait, string(why), func(n *job.Run) { n.WaitReason, n.Message = why, msg })
	return err
}
