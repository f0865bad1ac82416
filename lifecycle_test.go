package dlc_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/dlctest"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/event"
	"github.com/aidlc/dlc/job"
)

// runsOf returns a job config's runs, oldest first.
func runsOf(t *testing.T, c *dlc.Client, jobID string) []*job.Run {
	t.Helper()
	runs, err := c.Runs().List(context.Background(), dlc.RunListOptions{JobID: jobID})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(runs, func(a, b *job.Run) int {
		if c := a.SubmittedAt.Compare(b.SubmittedAt); c != 0 {
			return c
		}
		return a.Tick.Compare(b.Tick)
	})
	return runs
}

// lasting returns memory options whose runs last d and succeed, or fail
// when fail says so.
func lasting(d time.Duration, fail func(*job.Run) bool) dlctest.MemoryOptions {
	return dlctest.MemoryOptions{Ray: memory.RayHooks{RunOutcome: func(r *job.Run) memory.Outcome {
		return memory.Outcome{Duration: d, Fail: fail != nil && fail(r), Message: "exit code 1"}
	}}}
}

// L1: a schedule of every minute over ten simulated minutes makes exactly
// ten runs, with two clients on one store and one of them restarted half
// way; an edit affects the next tick only (J15).
func TestScheduleEveryMinute(t *testing.T) {
	f := newFixture(t, lasting(10*time.Second, nil))
	other := f.m.NewClient()
	cl := f.runningCluster("c1")
	rec := f.job(dlc.NewJob("nightly").OnCluster(cl.ID).Schedule("* * * * *"))
	start := f.m.Clock.Now()
	for minute := 1; minute <= 10; minute++ {
		f.m.Step(time.Minute)
		if minute == 5 { // a replica restarts: closed, and a new process starts
			f.m.CloseClient(f.c)
			f.c = f.m.NewClient()
		}
		if minute == 3 {
			cur, err := other.Jobs().Get(f.ctx, rec.ID)
			f.must(err)
			cur.Config.Entrypoint = "python main.py --v2"
			_, err = other.Jobs().Update(f.ctx, cur)
			f.must(err)
		}
	}
	f.m.Step(15 * time.Second) // the last tick's run ends; no tick comes
	runs := runsOf(t, other, rec.ID)
	if len(runs) != 10 {
		t.Fatalf("%d runs in 10 minutes of an every-minute schedule, want 10", len(runs))
	}
	for i, r := range runs {
		want := start.Truncate(time.Minute).Add(time.Duration(i+1) * time.Minute)
		if !r.Tick.Equal(want) || r.State != job.Succeeded {
			t.Errorf("run %d: tick %s %s, want tick %s succeeded", i, r.Tick, r.State, want)
		}
		if wantRev := 1 + btoi(i >= 3); r.Revision != wantRev {
			t.Errorf("run %d (tick %s) runs revision %d, want %d", i, r.Tick, r.Revision, wantRev)
		}
	}
	got, err := other.Jobs().Get(f.ctx, rec.ID)
	f.must(err)
	st := got.ScheduleStatus
	if st.Missed != 0 || st.LastRun != runs[9].ID || !st.NextTick.Equal(runs[9].Tick.Add(time.Minute)) {
		t.Fatalf("schedule status %+v, want none missed, last run %s", st, runs[9].ID)
	}
}

// L1: a schedule's step writes the config only when a tick is due. Every
// write of a config comes back to its schedule's step; a step that
// recorded how far it had looked (now) with no tick due wrote again each
// time, a loop of writes as fast as the store took them (on the memory
// store with a real clock, 28,000 a second). Here each write of the
// config (an edit) between two ticks is the config's last write once the
// steps have run, until the tick.
func TestScheduleStepWritesOnlyTicks(t *testing.T) {
	f := newFixture(t, lasting(10*time.Second, nil))
	cl := f.runningCluster("c1")
	rec := f.job(dlc.NewJob("hourly").OnCluster(cl.ID).Schedule("0 * * * *"))
	f.m.Reconcile()
	for i := range 5 {
		f.m.Step(time.Second) // within the hour: no tick due
		cur, err := f.c.Jobs().Get(f.ctx, rec.ID)
		f.must(err)
		cur.Config.Entrypoint = fmt.Sprintf("python main.py --edit %d", i)
		edited, err := f.c.Jobs().Update(f.ctx, cur)
		f.must(err)
		f.m.Reconcile()
		got, err := f.c.Jobs().Get(f.ctx, rec.ID)
		f.must(err)
		if got.Version != edited.Version {
			t.Fatalf("edit %d: the config is at version %s after its step, the edit wrote %s (schedule status %+v)",
				i, got.Version, edited.Version, got.ScheduleStatus)
		}
	}
	f.m.Step(time.Hour) // the tick comes, and is recorded
	got, err := f.c.Jobs().Get(f.ctx, rec.ID)
	f.must(err)
	if got.ScheduleStatus.LastRun == "" || got.ScheduleStatus.NextTick.IsZero() {
		t.Fatalf("after an hour: schedule status %+v, want the tick's run and the next tick", got.ScheduleStatus)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// L1: the concurrency policies. Runs last 90 s and the schedule fires
// every minute.
func TestScheduleConcurrency(t *testing.T) {
	for _, tc := range []struct {
		policy      job.ConcurrencyPolicy
		runs        int
		missed      int
		wantStopped int
	}{
		// Forbid: the tick at 2m finds the first run still running.
		{job.ForbidConcurrent, 2, 2, 0},
		// Replace: each tick stops the run before it.
		{job.ReplaceConcurrent, 4, 0, 3},
		{job.AllowConcurrent, 4, 0, 0},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			f := newFixture(t, lasting(90*time.Second, nil))
			cl := f.runningCluster("c1")
			rec := f.job(dlc.NewJob("j").OnCluster(cl.ID).Schedule("* * * * *", job.Concurrency(tc.policy)))
			f.m.Step(4 * time.Minute)
			runs := runsOf(t, f.c, rec.ID)
			stopped := 0
			for _, r := range runs {
				if r.State == job.Stopped {
					stopped++
					if !strings.Contains(r.Message, "replaced by the run of the schedule's tick") {
						t.Errorf("stopped run says %q", r.Message)
					}
				}
			}
			got, err := f.c.Jobs().Get(f.ctx, rec.ID)
			f.must(err)
			if len(runs) != tc.runs || got.ScheduleStatus.Missed != tc.missed || stopped != tc.wantStopped {
				t.Fatalf("%d runs, %d missed, %d stopped; want %d, %d, %d", len(runs), got.ScheduleStatus.Missed, stopped, tc.runs, tc.missed, tc.wantStopped)
			}
			if tc.missed > 0 {
				events, err := f.c.Jobs().Events(f.ctx, rec.ID)
				f.must(err)
				if n := entries(events, "tick-skipped", "concurrency policy Forbid"); n != tc.missed {
					t.Fatalf("%d skipped ticks recorded, want %d: %+v", n, tc.missed, events)
				}
				// Skipped for one run and then for the next, nothing
				// between: one entry, counting both.
				if es := entriesOf(events, "tick-skipped"); len(es) != 1 || es[0].Count != tc.missed {
					t.Fatalf("the skipped ticks are %d entries, want one counting %d: %+v", len(es), tc.missed, events)
				}
			}
		})
	}
}

// L1, issue 43: a schedule whose ticks keep being skipped for the same
// reason keeps one entry in its config's log, counting them, however many
// (past the log's bound): the log, and the config's stored bytes, stay
// flat. Before, each skipped tick was an entry of its own, the tick's
// time in its message, until the log held event.MaxEntries of them.
func TestScheduleSkippedTicksFold(t *testing.T) {
	f := newFixture(t, lasting(24*time.Hour, nil)) // the first run does not end
	cl := f.runningCluster("c1")
	rec := f.job(dlc.NewJob("j").OnCluster(cl.ID).Schedule("* * * * *", job.Concurrency(job.ForbidConcurrent)))
	f.m.Step(time.Minute) // the first tick: its run starts
	runs := runsOf(t, f.c, rec.ID)
	if len(runs) != 1 {
		t.Fatalf("%d runs after the first tick", len(runs))
	}
	first := runs[0].Tick.Add(time.Minute) // the first tick skipped
	var size10 int
	for n := 1; n <= 2*event.MaxEntries+50; n++ {
		f.m.Step(time.Minute)
		if n != 1 && n != 10 && n%50 != 0 {
			continue
		}
		got, err := f.c.Jobs().Get(f.ctx, rec.ID)
		f.must(err)
		st := got.ScheduleStatus
		want := first.Add(time.Duration(n-1) * time.Minute) // the latest tick skipped
		if st.Missed != n || !st.LastTick.Equal(want) {
			t.Fatalf("after %d ticks skipped: status %+v, want %d missed, the last tick %s", n, st, n, want)
		}
		if len(got.Events) != 2 || got.Events[0].Action != "create" {
			t.Fatalf("after %d ticks skipped: %d entries, want the create and one for the ticks: %+v", n, len(got.Events), got.Events)
		}
		e := got.Events[1]
		wantFirst := first
		if n == 1 {
			wantFirst = time.Time{} // happened once
		}
		if e.Action != "tick-skipped" || e.Source != "system" || e.Message != "a run of the job has not ended (concurrency policy Forbid)" ||
			e.Times() != n || !e.Time.Equal(want) || !e.First.Equal(wantFirst) {
			t.Fatalf("after %d ticks skipped the entry is %+v, want %d times, from %s to %s", n, e, n, first, want)
		}
		b, err := json.Marshal(got)
		f.must(err)
		switch {
		case n == 10:
			size10 = len(b)
		case n > 10 && len(b) > size10+2: // the count's digits
			t.Fatalf("after %d ticks skipped the config is %d bytes, after 10 %d", n, len(b), size10)
		}
	}
	if runs := runsOf(t, f.c, rec.ID); len(runs) != 1 {
		t.Fatalf("%d runs of a Forbid schedule whose first run has not ended", len(runs))
	}
}

// L1: ticks missed while no client ran: with a starting deadline, those
// missed by longer are skipped and recorded and the rest start; without,
// only the latest starts.
func TestScheduleMissedTicks(t *testing.T) {
	for _, tc := range []struct {
		name     string
		deadline time.Duration // 0: none
		runs     int
		missed   int
		why      string
	}{
		{"starting deadline 150s", 150 * time.Second, 2, 3, "missed by more than the starting deadline of 2m30s"},
		{"no starting deadline", 0, 1, 4, "a later tick was due"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, lasting(time.Second, nil))
			cl := f.runningCluster("c1")
			var opts []func(*job.Schedule)
			if tc.deadline > 0 {
				opts = append(opts, job.StartingDeadline(tc.deadline))
			}
			rec := f.job(dlc.NewJob("j").OnCluster(cl.ID).Schedule("* * * * *", opts...))
			f.m.CloseClient(f.c) // the only client stops for five minutes
			f.m.Clock.Advance(5*time.Minute + 30*time.Second)
			f.c = f.m.NewClient()
			f.m.Step(10 * time.Second) // no tick comes
			runs := runsOf(t, f.c, rec.ID)
			got, err := f.c.Jobs().Get(f.ctx, rec.ID)
			f.must(err)
			if len(runs) != tc.runs || got.ScheduleStatus.Missed != tc.missed {
				t.Fatalf("%d runs and %d missed, want %d and %d", len(runs), got.ScheduleStatus.Missed, tc.runs, tc.missed)
			}
			if last := runs[len(runs)-1]; !last.Tick.Equal(dlctest.Epoch.Add(5 * time.Minute)) {
				t.Fatalf("the last run's tick is %s", last.Tick)
			}
			events, err := f.c.Jobs().Events(f.ctx, rec.ID)
			f.must(err)
			// One entry for the ticks missed in one step, counting them.
			if es := entriesOf(events, "tick-missed"); len(es) != 1 || es[0].Message != tc.why || es[0].Count != tc.missed {
				t.Fatalf("tick-missed entries %+v, want one saying %q and counting %d", es, tc.why, tc.missed)
			}
		})
	}
}

// L1: suspend and resume, the next ticks, and refusals.
func TestScheduleSuspendResume(t *testing.T) {
	f := newFixture(t, lasting(time.Second, nil))
	cl := f.runningCluster("c1")
	rec := f.job(dlc.NewJob("j").OnCluster(cl.ID).Schedule("*/5 * * * *", job.InZone("Asia/Shanghai")))
	next, err := f.c.Jobs().NextTicks(f.ctx, rec.ID, 3)
	f.must(err)
	now := f.m.Clock.Now()
	if len(next) != 3 || !next[0].After(now) || next[1].Sub(next[0]) != 5*time.Minute || next[0].Location().String() != "Asia/Shanghai" {
		t.Fatalf("next ticks %v", next)
	}
	_, err = f.c.Jobs().SuspendSchedule(f.ctx, rec.ID)
	f.must(err)
	f.m.Step(20 * time.Minute)
	if runs := runsOf(t, f.c, rec.ID); len(runs) != 0 {
		t.Fatalf("%d runs while suspended", len(runs))
	}
	if next, err := f.c.Jobs().NextTicks(f.ctx, rec.ID, 3); err != nil || len(next) != 0 {
		t.Fatalf("next ticks while suspended: %v %v", next, err)
	}
	_, err = f.c.Jobs().ResumeSchedule(f.ctx, rec.ID)
	f.must(err)
	f.m.Step(10 * time.Minute)
	if runs := runsOf(t, f.c, rec.ID); len(runs) != 2 {
		t.Fatalf("%d runs in 10 minutes after the resume, want 2 (the ticks while suspended start nothing)", len(runs))
	}
	plain := f.job(dlc.NewJob("plain").OnCluster(cl.ID))
	if _, err := f.c.Jobs().SuspendSchedule(f.ctx, plain.ID); !errors.Is(err, errs.ErrState) {
		t.Fatalf("suspending a config without a schedule: %v", err)
	}
}

// L2: a run with a deadline is stopped and failed at it, and Ray's job
// is stopped; a waiting run fails at its deadline too.
func TestRunDeadline(t *testing.T) {
	f := newFixture(t, lasting(time.Hour, nil))
	cl := f.runningCluster("c1")
	rec := f.job(dlc.NewJob("j").OnCluster(cl.ID).ActiveDeadline(time.Minute).Retries(2))
	r := f.start(rec.ID)
	f.m.Step(59 * time.Second)
	if r = f.run(r.ID); r.State != job.Running {
		t.Fatalf("before its deadline the run is %s %s", r.State, r.Message)
	}
	f.m.Step(2 * time.Second)
	f.settle()
	r = f.run(r.ID)
	if r.State != job.Failed || !r.Final || !strings.Contains(r.Message, "deadline exceeded") || !r.RayDone {
		t.Fatalf("after its deadline the run is %s final=%v rayDone=%v %q", r.State, r.Final, r.RayDone, r.Message)
	}
	if r.NextAttempt != "" || len(runsOf(t, f.c, rec.ID)) != 1 {
		t.Fatalf("a run failed by its deadline was retried")
	}
	_, err := f.c.Clusters().Hibernate(f.ctx, cl.ID, dlc.HibernateOptions{})
	f.must(err)
	f.settle()
	w := f.start(rec.ID)
	if w.State != job.Waiting {
		t.Fatalf("run on a hibernated cluster is %s", w.State)
	}
	f.m.Step(61 * time.Second)
	if w = f.run(w.ID); w.State != job.Failed || !strings.Contains(w.Message, "deadline exceeded") {
		t.Fatalf("a waiting run past its deadline is %s %q", w.State, w.Message)
	}
}

// L3: a failing run with 2 retries makes 3 attempts, linked, each after
// its backoff, then fails; a stopped run is not retried; a retry that
// succeeds ends the attempts.
func TestRunRetries(t *testing.T) {
	t.Run("always failing", func(t *testing.T) {
		f := newFixture(t, lasting(time.Second, func(*job.Run) bool { return true }))
		cl := f.runningCluster("c1")
		rec := f.job(dlc.NewJob("j").OnCluster(cl.ID).Retries(2))
		f.start(rec.ID)
		f.m.Step(10 * time.Minute)
		runs := runsOf(t, f.c, rec.ID)
		if len(runs) != 3 {
			t.Fatalf("%d attempts, want 3", len(runs))
		}
		for i, r := range runs {
			if r.State != job.Failed || r.AttemptNumber() != i+1 {
				t.Errorf("attempt %d: %s, number %d", i+1, r.State, r.AttemptNumber())
			}
			if i > 0 {
				prev := runs[i-1]
				if r.PreviousAttempt != prev.ID || prev.NextAttempt != r.ID {
					t.Errorf("attempts %d and %d are not linked: %q→%q, %q←%q", i, i+1, prev.ID, prev.NextAttempt, r.ID, r.PreviousAttempt)
				}
				if wait := r.SubmittedAt.Sub(prev.FinishedAt); wait < job.RetryBackoff(i) {
					t.Errorf("attempt %d came %s after attempt %d ended, want at least %s", i+1, wait, i, job.RetryBackoff(i))
				}
			}
		}
		if last := runs[2]; last.NextAttempt != "" || last.Retries() {
			t.Fatalf("the last attempt is to be retried: %+v", last)
		}
	})
	t.Run("its client restarted before the retry", func(t *testing.T) {
		// Without a retention, finished runs are not looked at by a new
		// client: one awaiting its retry is not finished.
		o := lasting(time.Second, func(r *job.Run) bool { return r.AttemptNumber() == 1 })
		o.Options = []dlc.Option{dlc.WithRunRetention(0, 0)}
		f := newFixture(t, o)
		cl := f.runningCluster("c1")
		rec := f.job(dlc.NewJob("j").OnCluster(cl.ID).Retries(1))
		r := f.start(rec.ID)
		f.m.Step(3 * time.Second)
		if r = f.run(r.ID); r.State != job.Failed || r.NextAttempt != "" {
			t.Fatalf("the first attempt: %s, retried as %q", r.State, r.NextAttempt)
		}
		f.m.CloseClient(f.c)
		f.c = f.m.NewClient()
		f.m.Step(time.Minute)
		runs := runsOf(t, f.c, rec.ID)
		if len(runs) != 2 || runs[1].State != job.Succeeded || runs[0].NextAttempt != runs[1].ID {
			t.Fatalf("%d attempts after the restart, want the failed one and its retry", len(runs))
		}
	})
	t.Run("stopped", func(t *testing.T) {
		f := newFixture(t, lasting(time.Hour, nil))
		cl := f.runningCluster("c1")
		rec := f.job(dlc.NewJob("j").OnCluster(cl.ID).Retries(2))
		r := f.start(rec.ID)
		f.m.Step(time.Second)
		_, err := f.c.Runs().Stop(f.ctx, r.ID)
		f.must(err)
		f.m.Step(10 * time.Minute)
		if runs := runsOf(t, f.c, rec.ID); len(runs) != 1 || runs[0].State != job.Stopped {
			t.Fatalf("a stopped run was retried: %d runs", len(runs))
		}
	})
	t.Run("second attempt succeeds", func(t *testing.T) {
		f := newFixture(t, lasting(time.Second, func(r *job.Run) bool { return r.AttemptNumber() == 1 }))
		cl := f.runningCluster("c1")
		rec := f.job(dlc.NewJob("j").OnCluster(cl.ID).Retries(3))
		f.start(rec.ID)
		f.m.Step(10 * time.Minute)
		runs := runsOf(t, f.c, rec.ID)
		if len(runs) != 2 || runs[0].State != job.Failed || runs[1].State != job.Succeeded || runs[1].Attempt != 2 {
			t.Fatalf("attempts: %d, want a failed one and a succeeded retry", len(runs))
		}
	})
}

// L4: a cluster idle past its timeout hibernates and releases its quota;
// one with an active run does not, and its idle time counts from the
// run's end.
func TestIdleHibernate(t *testing.T) {
	f := newFixture(t, lasting(time.Hour, nil))
	idle := f.runningClusterWith(f.spec("idle", 1, 3), 10*time.Minute)
	busy := f.runningClusterWith(f.spec("busy", 1, 1), 10*time.Minute)
	rec := f.job(dlc.NewJob("j").OnCluster(busy.ID))
	r := f.start(rec.ID)
	f.m.Step(9 * time.Minute)
	if got := f.clusterState(idle.ID); got != cluster.Running {
		t.Fatalf("idle for 9 of its 10 minutes, the cluster is %s", got)
	}
	f.m.Step(2 * time.Minute)
	got, err := f.c.Clusters().Get(f.ctx, idle.ID)
	f.must(err)
	if got.State != cluster.Hibernated {
		t.Fatalf("idle past its timeout, the cluster is %s", got.State)
	}
	if !slices.ContainsFunc(got.Events, func(e event.Event) bool {
		return e.Action == "hibernate" && e.Source == "system" && strings.Contains(e.Message, "idle timeout of 10m0s")
	}) {
		t.Fatalf("no idle hibernate recorded: %+v", got.Events)
	}
	u, err := f.c.ResourceGroups().Get(f.ctx, "rg-1")
	f.must(err)
	if _, held := u.Holders[idle.ID]; held {
		t.Fatalf("the hibernated idle cluster still holds %v", u.Holders[idle.ID])
	}
	if f.clusterState(busy.ID) != cluster.Running {
		t.Fatal("a cluster with an active run hibernated")
	}
	f.m.Step(50 * time.Minute) // the run ends at about 1h
	if r = f.run(r.ID); r.State != job.Succeeded {
		t.Fatalf("run %s", r.State)
	}
	if after := f.m.Clock.Now().Sub(r.FinishedAt); after > time.Minute {
		t.Fatalf("the run ended %s ago", after)
	}
	f.m.Step(r.FinishedAt.Add(9 * time.Minute).Sub(f.m.Clock.Now()))
	if f.clusterState(busy.ID) != cluster.Running {
		t.Fatal("hibernated before 10 minutes from its last run's end")
	}
	f.m.Step(2 * time.Minute)
	if s := f.clusterState(busy.ID); s != cluster.Hibernated {
		t.Fatalf("10 minutes after its last run, the cluster is %s", s)
	}
	if err := f.c.CheckQuota(f.ctx); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) runningClusterWith(s *cluster.Spec, idle time.Duration) *cluster.Cluster {
	f.t.Helper()
	s.IdleTimeoutSeconds = int(idle / time.Second)
	cl, err := f.c.Clusters().Create(f.ctx, s)
	f.must(err)
	f.m.Step(time.Second)
	_, err = f.c.Clusters().Start(f.ctx, cl.ID)
	f.must(err)
	f.m.Step(time.Second)
	if s := f.clusterState(cl.ID); s != cluster.Running {
		f.t.Fatalf("cluster %s is %s", cl.ID, s)
	}
	return cl
}

func (f *fixture) clusterState(id string) cluster.State {
	f.t.Helper()
	cl, err := f.c.Clusters().Get(f.ctx, id)
	f.must(err)
	return cl.State
}

// L1: a schedule edited in the store by someone else into one that does
// not parse starts nothing and says so once on the config; nothing
// panics or loops.
func TestScheduleForeignEdit(t *testing.T) {
	f := newFixture(t, lasting(time.Second, nil))
	cl := f.runningCluster("c1")
	rec := f.job(dlc.NewJob("j").OnCluster(cl.ID).Schedule("* * * * *"))
	if err := dlctest.EditStored(f.ctx, f.m.Backend, "job", rec.ID, func(data map[string]any, _ map[string]string) {
		dlctest.Object(dlctest.Object(data, "config"), "schedule")["cron"] = "not a cron"
	}); err != nil {
		t.Fatal(err)
	}
	f.m.Step(3 * time.Minute)
	if runs := runsOf(t, f.c, rec.ID); len(runs) != 0 {
		t.Fatalf("%d runs of a schedule that does not parse", len(runs))
	}
	events, err := f.c.Jobs().Events(f.ctx, rec.ID)
	f.must(err)
	if n := entries(events, "schedule-invalid", ""); n != 1 {
		t.Fatalf("%d schedule-invalid entries, want 1: %+v", n, events)
	}
}

// L2: a run that Ray fails at its deadline's very instant is failed past
// its deadline: Final, and said so. (On Kubernetes KubeRay's own deadline
// on a RayJob may be seen first, through the run's status or its
// cluster's; advanceRun marks any failure past the deadline so:
// TestLifecycle's on-demand deadline.)
func TestRunFailedAtItsDeadline(t *testing.T) {
	d := memory.DefaultDelays
	f := newFixture(t, dlctest.MemoryOptions{Delays: &d, Ray: memory.RayHooks{RunOutcome: func(*job.Run) memory.Outcome {
		return memory.Outcome{Fail: true, Message: "DeadlineExceeded", Duration: time.Minute - d.Submit}
	}}})
	cl := f.runningCluster("c1")
	rec := f.job(dlc.NewJob("j").OnCluster(cl.ID).ActiveDeadline(time.Minute).Retries(2))
	r := f.start(rec.ID)
	f.m.Step(2 * time.Minute)
	r = f.run(r.ID)
	if r.State != job.Failed || !r.Final || !strings.HasPrefix(r.Message, "deadline exceeded") || r.NextAttempt != "" {
		t.Fatalf("%s final=%v next=%q %q", r.State, r.Final, r.NextAttempt, r.Message)
	}
	if r.FinishedAt.Sub(r.SubmittedAt) != time.Minute {
		t.Fatalf("ended %s after its submission, want exactly its deadline", r.FinishedAt.Sub(r.SubmittedAt))
	}
}

// L1–L3 are editable (J15's list is for the product's fields): a
// schedule's expression changed by Update takes effect from the next
// tick, and the deadline and retries change with it.
func TestScheduleEdited(t *testing.T) {
	f := newFixture(t, lasting(time.Second, nil))
	cl := f.runningCluster("c1")
	rec := f.job(dlc.NewJob("j").OnCluster(cl.ID).Schedule("* * * * *"))
	f.m.Step(2 * time.Minute) // ticks at 1 and 2 minutes
	cur, err := f.c.Jobs().Get(f.ctx, rec.ID)
	f.must(err)
	cur.Config.Schedule.Cron = "*/5 * * * *"
	cur.Config.ActiveDeadlineSeconds, cur.Config.BackoffLimit = 600, 1
	got, err := f.c.Jobs().Update(f.ctx, cur)
	f.must(err)
	if got.Revision != 2 || got.ScheduleStatus.NextTick.Minute()%5 != 0 {
		t.Fatalf("after the edit: revision %d, next tick %s", got.Revision, got.ScheduleStatus.NextTick)
	}
	f.m.Step(8 * time.Minute) // to 10 minutes: ticks at 5 and 10
	runs := runsOf(t, f.c, rec.ID)
	if len(runs) != 4 || runs[2].Revision != 2 || runs[2].Config.BackoffLimit != 1 || runs[2].Tick.Minute()%5 != 0 {
		t.Fatalf("%d runs (want 2 before the edit and 2 after, on the 5-minute ticks)", len(runs))
	}
}

// A job config that someone else edited in the store into a container
// image on an existing cluster (which Ray refuses beside the package,
// J10) fails its run at once, saying why, on the memory backend as on
// Kubernetes: refused before the submit, never retried as a step.
func TestRunRefusedBeforeSubmit(t *testing.T) {
	f := newFixture(t, lasting(time.Second, nil))
	cl := f.runningCluster("c1")
	rec := f.job(dlc.NewJob("j").OnCluster(cl.ID))
	if err := dlctest.EditStored(f.ctx, f.m.Backend, "job", rec.ID, func(data map[string]any, _ map[string]string) {
		dlctest.Object(dlctest.Object(data, "config"), "runtimeEnv")["container"] = "ccr.ccs.tencentyun.com/me/job:1"
	}); err != nil {
		t.Fatal(err)
	}
	r := f.start(rec.ID)
	f.settle()
	r = f.run(r.ID)
	if r.State != job.Failed || !strings.Contains(r.Message, "J10") || !strings.Contains(r.Message, "cannot be submitted") {
		t.Fatalf("%s: %q", r.State, r.Message)
	}
}

// L1 bounds: a schedule that fires more often than the floor is refused
// when saved, and one stored so by someone else starts nothing, said
// once; a schedule whose runs wait (its cluster does not run) leaves at
// most WithMaxUnfinishedRuns of them, every tick beyond skipped and
// recorded. (Before these bounds "* * * * * *" on a cluster that is not
// running left 600 waiting runs in ten minutes.)
func TestScheduleStorm(t *testing.T) {
	o := dlctest.MemoryOptions{Options: []dlc.Option{dlc.WithMaxUnfinishedRuns(5)}}
	f := newFixture(t, o)
	cl, err := f.c.Clusters().Create(f.ctx, f.spec("stopped", 1, 1)) // created, never started: its runs wait
	f.must(err)
	f.settle()
	for _, cron := range []string{"* * * * * *", "*/30 * * * * *", "0,1 0 0 * * *"} {
		cfg, err := dlc.NewJob("storm").OnCluster(cl.ID).COSPackage("cos://jobs-1250000000/a.zip").Entrypoint("python main.py").
			Schedule(cron).Build()
		f.must(err)
		_, err = f.c.Jobs().Create(f.ctx, cfg, dlc.SaveOptions{})
		if fe := dlc.Fields(err); len(fe) != 1 || fe[0].Rule != "L1" || fe[0].Path != "schedule.cron" {
			t.Fatalf("%s saved: %v", cron, err)
		}
	}
	// Every minute, its runs waiting: at most 5 of them.
	rec := f.job(dlc.NewJob("waits").OnCluster(cl.ID).Schedule("* * * * *"))
	f.m.Step(12 * time.Minute)
	runs := runsOf(t, f.c, rec.ID)
	events, err := f.c.Jobs().Events(f.ctx, rec.ID)
	f.must(err)
	got, err := f.c.Jobs().Get(f.ctx, rec.ID)
	f.must(err)
	bound := entries(events, "tick-skipped", "have reached the bound of 5 (WithMaxUnfinishedRuns)")
	if len(runs) != 5 || bound < 6 || bound != got.ScheduleStatus.Missed || len(entriesOf(events, "tick-skipped")) != 1 {
		t.Fatalf("%d runs, %d ticks skipped for the bound (%d missed), want one entry: %+v", len(runs), bound, got.ScheduleStatus.Missed, events)
	}
	// Stored by someone else to fire every second: nothing starts, said once.
	f.must(dlctest.EditStored(f.ctx, f.m.Backend, "job", rec.ID, func(data map[string]any, _ map[string]string) {
		dlctest.Object(dlctest.Object(data, "config"), "schedule")["cron"] = "* * * * * *"
	}))
	for range 5 {
		f.m.Step(time.Minute)
	}
	events, err = f.c.Jobs().Events(f.ctx, rec.ID)
	f.must(err)
	if n := len(runsOf(t, f.c, rec.ID)); n != 5 || entries(events, "schedule-invalid", "more often than the platform allows") != 1 {
		t.Fatalf("%d runs, %d schedule-invalid entries: %+v", n, entries(events, "schedule-invalid", ""), events)
	}
}

// WithScheduleFloor and WithMaxUnfinishedRuns refuse negative values; 0
// is no bound.
func TestScheduleBoundsOptions(t *testing.T) {
	for _, opt := range []dlc.Option{dlc.WithScheduleFloor(-time.Second), dlc.WithMaxUnfinishedRuns(-1)} {
		if c, err := dlc.New(opt); !errors.Is(err, dlc.ErrInvalid) {
			if c != nil {
				c.Close()
			}
			t.Errorf("a negative bound: %v", err)
		}
	}
	f := newFixture(t, dlctest.MemoryOptions{Options: []dlc.Option{dlc.WithScheduleFloor(0)}})
	cl := f.runningCluster("c1")
	f.job(dlc.NewJob("every-second").OnCluster(cl.ID).Schedule("* * * * * *")) // no floor: saved
}
