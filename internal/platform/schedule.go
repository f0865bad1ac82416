package platform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/event"
	"github.com/aidlc/dlc/internal/runner"
	"github.com/aidlc/dlc/job"
)

// A job config's schedule (L1) is level-triggered like everything else:
// the config's key ("job/<id>") is owned by one client, whose reconciler
// reads the stored config, starts a run for each tick due since the last
// one it recorded (ScheduleStatus.LastTick), records the new last tick by
// compare-and-swap, and looks again at the next tick (a timer on the
// client's clock; the periodic resync covers a client that went away).
// A tick's run has an id derived from the config and the tick, so a step
// repeated (a crash before the record, two clients at once while the key
// changes owner) finds the run it made and starts no second one.

// labelScheduled marks a job config that has a schedule: the resync
// queues only those.
const labelScheduled = "scheduled"

// maxTickStartsPerStep bounds the runs one step of a schedule starts;
// the rest wait for the next step, at once.
const maxTickStartsPerStep = 10

func jobLabels(rec *job.Record) map[string]string {
	if rec.Config.Schedule == nil {
		return nil
	}
	return map[string]string{labelScheduled: "1"}
}

// jobReconciler fires job configs' schedules.
type jobReconciler struct{ *Engine }

func (r jobReconciler) Reconcile(ctx context.Context, id string) (runner.Result, error) {
	after, err := r.reconcileSchedule(ctx, id)
	return runner.Result{After: after}, err
}

// giveUp records on the config that its schedule's steps kept failing
// (said again at most once per longest backoff: renote); the steps go
// on, their backoff growing.
func (r jobReconciler) GiveUp(ctx context.Context, id, why string) error {
	_, err := r.recordOnJob(ctx, id, func(rec *job.Record) bool {
		var said bool
		rec.Events, said = renote(rec.Events, r.event(ctx, "system", "schedule-failing", why), r.o.maxDelay)
		return said
	})
	if err != nil {
		return err
	}
	return runner.ErrRetry
}

func (jobReconciler) LogKey() string { return "job" }

// tickRequest is the request id a tick's run is created under: its id
// derives from the config and the tick.
func tickRequest(t time.Time) string { return "tick/" + t.UTC().Format(time.RFC3339Nano) }

// reconcileSchedule starts the runs of the ticks due and records them.
func (c jobReconciler) reconcileSchedule(ctx context.Context, id string) (time.Duration, error) {
	// Every write of any config comes here: one without a schedule (its
	// label, derived from the decoded config) is passed over unread.
	if d, ok := c.cache.Get(kindJob, id); ok && d.Labels[labelScheduled] == "" {
		return 0, nil
	}
	rec, err := c.jobs.getJob(ctx, id)
	if errs.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var ticks job.Ticks
	now := c.clock.Now()
	for fromStore := false; ; fromStore = true {
		s := rec.Config.Schedule
		switch {
		case s == nil || rec.ScheduleStatus.Suspended:
			return 0, nil
		case c.markHolds(rec.Deleting.At, rec.Deleting.Replica):
			return time.Minute, nil // being deleted: look again once the mark no longer holds
		}
		last := countFrom(rec)
		if last.After(now) && !inAdoptedStep(ctx) {
			// Counted from a time ahead of this owner's clock, which fires
			// the ticks (a save or a resume on a client whose clock is
			// ahead): the ticks until then would be skipped unseen. They
			// count from now instead, recorded once, so that every owner
			// after counts from it too; a tick already run has its run,
			// whose id the tick derives. (Not by a client adopting the
			// step: the owner's clock decides.)
			_, err := c.recordOnJob(ctx, id, func(r *job.Record) bool {
				if !countFrom(r).After(now) {
					return false
				}
				r.ScheduleStatus.LastTick = now
				r.Events = event.Append(r.Events, c.event(ctx, "system", "schedule-clock",
					fmt.Sprintf("the schedule counted from %s, ahead of the clock that fires its ticks (%s): it counts from then",
						last.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))))
				return true
			})
			return 0, notFoundAs(err, "job", id) // the write brings the config back here
		}
		if ticks, err = s.Due(last, now, maxTickStartsPerStep); err != nil {
			// Stored by someone else, unchecked: said once on the config.
			return 0, c.noteOnJob(ctx, rec, "schedule-invalid", "the schedule does not parse, no run is started: "+err.Error())
		}
		if len(ticks.Start) == 0 && ticks.Missed == 0 && !ticks.Through.Before(now) {
			// No tick due: nothing to record. Recording how far it looked
			// (now) would be a write, and every write of the config comes
			// back here, a little later: a loop of writes as fast as the store
			// takes them.
			return untilNext(ticks.Next, now), nil
		}
		if fromStore {
			break
		}
		// A tick is due: the store decides whether it starts. The cache
		// may not show a suspend, an edit or a delete's mark that another
		// client wrote (a lagging owner started a tick after the suspend
		// returned).
		fr, err := c.jobs.freshJob(ctx, id)
		if errs.IsNotFound(err) {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		if fr.Version == rec.Version {
			break
		}
		rec = fr
	}
	s := rec.Config.Schedule
	// Looked at only when a tick is due: a write of the config costs no
	// walk of its next ticks.
	if msg := c.tooOften(s); msg != "" {
		return 0, c.noteOnJob(ctx, rec, "schedule-invalid", "no run is started: the schedule "+msg)
	}
	next := rec.DeepCopy()
	ns := &next.ScheduleStatus
	started, skippedN := 0, 0
	for _, t := range ticks.Start {
		runID, skipped, err := c.tickRun(ctx, rec, t)
		if err != nil {
			return 0, err // recorded nothing: the next step finds what this one made
		}
		if skipped != "" {
			// The tick's time is not in the message (the entry's Time is
			// when it was skipped, the status's LastTick the last tick
			// handled): ticks skipped one after another for the same
			// reason are one entry, counted (event.Append folds them).
			skippedN++
			ns.Missed++
			next.Events = event.Append(next.Events, c.event(ctx, "system", "tick-skipped", skipped))
			continue
		}
		// Not logged on the config: an every-minute schedule would push
		// every other entry out of its log; the run's own log says it.
		ns.LastRun = runID
		started++
	}
	if ticks.Missed > 0 {
		// A tick a step before this one started, whose record that step
		// could not write, is counted missed now that a later tick is due:
		// it has its run, and is not missed.
		ran, err := c.ticksRun(ctx, rec, ticks)
		if err != nil {
			return 0, err
		}
		ticks.Missed -= ran
		started += ran // started by that step, recorded by this one
	}
	if ticks.Missed > 0 {
		ns.Missed += ticks.Missed
		why := "a later tick was due"
		if d, ok := s.StartingDeadline(); ok {
			why = "missed by more than the starting deadline of " + d.String()
		}
		// One entry for the ticks, counted (Count): neither how many nor
		// the latest's time is in the message, so that misses for the same
		// reason, step after step, fold into one entry whose Count is the
		// ticks missed in all.
		e := c.event(ctx, "system", "tick-missed", why)
		e.Count = ticks.Missed
		next.Events = event.Append(next.Events, e)
	}
	ns.LastTick, ns.NextTick = ticks.Through.UTC(), ticks.Next.UTC()
	if _, err := c.acc.update(ctx, kindJob, id, rec.Version, jobLabels(next), next); err != nil {
		return 0, notFoundAs(err, "job", id)
	}
	// Counted once recorded: a step whose write failed counted nothing,
	// and the next records the same ticks.
	c.metrics.ticksRecorded(started, skippedN, max(ticks.Missed, 0))
	if ticks.Through.Before(now) {
		return time.Nanosecond, nil // cut short: go on at once
	}
	return untilNext(ticks.Next, now), nil
}

// countFrom is the time rec's schedule counts its ticks from: its last
// recorded tick, or, for a config written before schedules were kept,
// its last update.
func countFrom(rec *job.Record) time.Time {
	if t := rec.ScheduleStatus.LastTick; !t.IsZero() {
		return t
	}
	return rec.UpdatedAt
}

// tooOften says how a schedule fires more often than the floor
// (WithScheduleFloor) allows, or "" when it does not (or has no floor).
func (c *Engine) tooOften(s *job.Schedule) string {
	if s == nil || c.o.scheduleFloor <= 0 {
		return ""
	}
	if gap, ok := s.MinInterval(c.clock.Now()); ok && gap < c.o.scheduleFloor {
		return fmt.Sprintf("fires %s after a tick at times, more often than the platform allows: at most once every %s (WithScheduleFloor)",
			gap, c.o.scheduleFloor)
	}
	return ""
}

// untilNext is how long until tick next; 0 (look again only when the
// config changes) when no tick comes.
func untilNext(next, now time.Time) time.Duration {
	if next.IsZero() {
		return 0
	}
	return max(next.Sub(now), time.Nanosecond)
}

// tickRun starts the run of tick t of rec's schedule, by its policy; it
// returns the run's id, or why the tick is skipped.
func (c jobReconciler) tickRun(ctx context.Context, rec *job.Record, t time.Time) (runID, skipped string, err error) {
	id := idFor("run", rec.ID, tickRequest(t))
	if _, ok := c.cache.Get(kindRun, id); ok {
		return id, "", nil // made by an earlier step
	}
	if p := rec.Config.Schedule.Policy(); p != job.AllowConcurrent {
		live, err := c.liveRunIDs(ctx, rec)
		if err != nil {
			return "", "", err
		}
		if slices.Contains(live, id) {
			// The tick's own run, made by an earlier step that the cache
			// does not show: started, not skipped (nor replaced).
			return id, "", nil
		}
		if len(live) > 0 && p == job.ForbidConcurrent {
			// Which run is not in the message: ticks skipped for one run
			// after another are still one entry (the job's runs say which
			// have not ended).
			return "", "a run of the job has not ended (concurrency policy Forbid)", nil
		}
		for _, rid := range live { // Replace
			r, err := c.runs.getRun(ctx, rid)
			if errs.IsNotFound(err) {
				continue
			}
			if err != nil {
				return "", "", err
			}
			if _, err := c.runs.endRun(ctx, r, job.Stop, "replaced by the run of the schedule's tick "+t.Format(time.RFC3339)); err != nil && !errors.Is(err, errs.ErrState) {
				return "", "", err
			}
		}
	}
	if n := c.o.maxUnfinished; n > 0 && c.jobs.liveRuns(rec.ID) >= n {
		// The cache says where to look, the store decides: a run that
		// ended and is not cached so yet never skips a tick.
		live, err := c.jobs.freshLiveRuns(ctx, rec.ID)
		if err != nil {
			return "", "", err
		}
		if live >= n {
			return "", fmt.Sprintf("the job's runs that have not ended have reached the bound of %d (WithMaxUnfinishedRuns)", n), nil
		}
	}
	r, err := c.runs.createRun(ctx, rec.ID, id, true, &newRun{source: "system", why: "tick " + t.Format(time.RFC3339),
		shape: func(r *job.Run) { r.Tick, r.Creator = t.UTC(), rec.Creator }})
	if err != nil {
		return "", "", err
	}
	return r.ID, "", nil
}

// ticksRun counts the runs of rec's schedule, as the store has them, of
// ticks after its LastTick and through ticks.Through that ticks does not
// start: ticks an earlier step started without recording them. Retention
// keeps such runs until their tick is recorded (madeRecorded).
func (c jobReconciler) ticksRun(ctx context.Context, rec *job.Record, ticks job.Ticks) (int, error) {
	docs, err := c.acc.listLatest(ctx, kindRun, map[string]string{labelJob: rec.ID})
	if err != nil {
		return 0, err
	}
	last := countFrom(rec)
	n := 0
	for _, d := range docs {
		var r struct {
			Tick    time.Time `json:"tick"`
			Attempt int       `json:"attempt"`
		}
		if json.Unmarshal(d.Data, &r) != nil || r.Tick.IsZero() || r.Attempt > 1 {
			continue
		}
		if r.Tick.After(last) && !r.Tick.After(ticks.Through) && !slices.ContainsFunc(ticks.Start, r.Tick.Equal) {
			n++
		}
	}
	return min(n, ticks.Missed), nil
}

// liveRunIDs lists the runs of rec that have not ended, as the store has
// them: the cache may not show a run another client made (by hand, or a
// tick of an owner before this one), and Forbid would run a second.
func (c jobReconciler) liveRunIDs(ctx context.Context, rec *job.Record) ([]string, error) {
	docs, err := c.acc.listLatest(ctx, kindRun, map[string]string{labelJob: rec.ID})
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, d := range docs {
		if p := d.Labels[labelPhase]; p == phasePending || p == phaseActive {
			ids = append(ids, d.ID)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// noteOnJob adds an event to a config's log unless its last event says
// the same.
func (c jobReconciler) noteOnJob(ctx context.Context, rec *job.Record, action, msg string) error {
	if n := len(rec.Events); n > 0 && rec.Events[n-1].Action == action && rec.Events[n-1].Message == msg {
		return nil
	}
	_, err := c.recordOnJob(ctx, rec.ID, func(r *job.Record) bool {
		r.Events = event.Append(r.Events, c.event(ctx, "system", action, msg))
		return true
	})
	return err
}

// recordOnJob changes a config by compare-and-swap, reading it again on
// a conflict; change reports whether there is anything to write.
func (c *Engine) recordOnJob(ctx context.Context, id string, change func(*job.Record) bool) (*job.Record, error) {
	for attempt := 0; ; attempt++ {
		rec, err := c.jobs.freshJob(ctx, id)
		if err != nil {
			return nil, err
		}
		next := rec.DeepCopy()
		if !change(next) {
			return rec, nil
		}
		next.Version, err = c.acc.update(ctx, kindJob, id, rec.Version, jobLabels(next), next)
		if err == nil {
			return next, nil
		}
		if !errors.Is(err, errs.ErrConflict) || attempt >= conflictRetries {
			return nil, notFoundAs(err, "job", id)
		}
	}
}

// SuspendSchedule stops a job config's schedule: no tick starts a run
// until ResumeSchedule. Runs already started go on. A config without a
// schedule is an ErrState.
func (s *JobService) SuspendSchedule(ctx context.Context, id string) (*job.Record, error) {
	return s.setSuspended(ctx, id, true)
}

// ResumeSchedule starts a suspended schedule again: its ticks count from
// now, so the ticks that passed while it was suspended start nothing.
func (s *JobService) ResumeSchedule(ctx context.Context, id string) (*job.Record, error) {
	return s.setSuspended(ctx, id, false)
}

func (s *JobService) setSuspended(ctx context.Context, id string, suspend bool) (*job.Record, error) {
	c := s.c
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	op := map[bool]string{true: "suspend-schedule", false: "resume-schedule"}[suspend]
	var stateErr error
	rec, err := c.recordOnJob(ctx, id, func(r *job.Record) bool {
		if r.Config.Schedule == nil {
			stateErr = &errs.StateError{Kind: "job", ID: id, Op: op, State: "unscheduled", Reason: "the config has no schedule"}
			return false
		}
		if r.ScheduleStatus.Suspended == suspend {
			return false
		}
		r.ScheduleStatus.Suspended = suspend
		if !suspend {
			r.ScheduleStatus.LastTick = c.clock.Now()
		}
		r.UpdatedAt = c.clock.Now()
		r.Events = event.Append(r.Events, c.event(ctx, "user", op, ""))
		return true
	})
	if err == nil && stateErr != nil {
		return nil, stateErr
	}
	return rec, err
}

// NextTicks returns the next n (at most job.MaxNextTimes) times a job
// config's schedule fires from now, none while it is suspended. A config
// without a schedule is an ErrState.
func (s *JobService) NextTicks(ctx context.Context, id string, n int) ([]time.Time, error) {
	rec, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if rec.Config.Schedule == nil {
		return nil, &errs.StateError{Kind: "job", ID: id, Op: "list the next ticks", State: "unscheduled", Reason: "the config has no schedule"}
	}
	if rec.ScheduleStatus.Suspended {
		return nil, nil
	}
	return rec.Config.Schedule.NextTimes(s.c.clock.Now(), n)
}

// scheduleSet prepares a config's schedule status for a write that sets
// its config (a create or an edit): a schedule that is new, or whose
// expression or zone changed, counts its ticks from now.
func scheduleSet(prev *job.Config, next *job.Record, now time.Time) {
	s := next.Config.Schedule
	if s == nil {
		next.ScheduleStatus = job.ScheduleStatus{Missed: next.ScheduleStatus.Missed}
		return
	}
	if prev == nil || prev.Schedule == nil || prev.Schedule.Cron != s.Cron || prev.Schedule.TimeZone != s.TimeZone ||
		next.ScheduleStatus.LastTick.IsZero() {
		next.ScheduleStatus.LastTick = now
	}
	if t, err := s.NextTimes(now, 1); err == nil && len(t) == 1 {
		next.ScheduleStatus.NextTick = t[0].UTC()
	}
}
