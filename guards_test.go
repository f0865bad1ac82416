package dlc_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/dlctest"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/job"
)

// Guards that decide on the store, across replicas (issue 39). Each case
// has a replica whose watch lags (laggingReplica) or whose clock is off
// (NewSkewedClient), on the fake clock.

// Case 8: a lagging owner does not start a tick after SuspendSchedule
// returned through another replica: a step with a tick due reads the
// config from the store before it starts anything.
func TestScheduleSuspendSeenByALaggingOwner(t *testing.T) {
	f := newFixture(t, lasting(time.Second, nil))
	cl := f.runningCluster("c1")
	rec := f.job(dlc.NewJob("j").OnCluster(cl.ID).Schedule("* * * * *"))
	f.m.CloseClient(f.c) // the replica the user saved through goes away
	owner, l := laggingReplica(f)
	defer l.release()
	f.c = f.m.NewClient()
	f.m.Step(30 * time.Second) // both have the config; the first tick is at 1 minute
	l.lag("job")               // the owner's cache will not show the suspend
	_, err := f.c.Jobs().SuspendSchedule(f.ctx, rec.ID)
	f.must(err)
	f.m.Step(3 * time.Minute)
	if runs := runsOf(t, owner, rec.ID); len(runs) != 0 {
		t.Fatalf("%d runs started after the suspend returned (the first at tick %s)", len(runs), runs[0].Tick)
	}
}

// Case 7: Forbid sees a run made by hand through another replica, whose
// create its cache has not shown yet: the tick is skipped and recorded,
// and only one run of the config runs at once.
func TestForbidSeesARunMadeThroughAnotherReplica(t *testing.T) {
	f := newFixture(t, lasting(10*time.Minute, nil))
	cl := f.runningCluster("c1")
	rec := f.job(dlc.NewJob("j").OnCluster(cl.ID).Schedule("* * * * *", job.Concurrency(job.ForbidConcurrent)))
	f.m.CloseClient(f.c)
	owner, l := laggingReplica(f)
	defer l.release()
	f.c = f.m.NewClient()
	f.m.Step(30 * time.Second)
	l.lag("run") // the owner's cache will not show the run made by hand
	byHand, err := f.c.Runs().Create(f.ctx, rec.ID, dlc.RunOptions{})
	f.must(err)
	f.m.Step(31 * time.Second) // the tick at 1 minute
	runs := runsOf(t, f.c, rec.ID)
	if len(runs) != 1 || runs[0].ID != byHand.ID {
		t.Fatalf("%d runs of a Forbid schedule with a run by hand not ended, want only that one", len(runs))
	}
	got, err := owner.Jobs().Get(f.ctx, rec.ID)
	f.must(err)
	if got.ScheduleStatus.Missed != 1 {
		t.Fatalf("missed %d, want the tick skipped and counted", got.ScheduleStatus.Missed)
	}
	// The run by hand, the only one, is the run that had not ended.
	if n := entries(got.Events, "tick-skipped", "a run of the job has not ended (concurrency policy Forbid)"); n != 1 {
		t.Fatalf("%d ticks skipped for Forbid in the log, want 1: %+v", n, got.Events)
	}
}

// Case 9: a schedule saved through a replica whose clock is ahead does
// not lose the ticks between the owner's now and the saver's: a daily
// schedule saved 10 s before its time, on a clock 45 s ahead, still runs
// that day. The same for a resume.
func TestScheduleSavedOnAClockAhead(t *testing.T) {
	for _, how := range []string{"save", "resume"} {
		t.Run(how, func(t *testing.T) {
			f := newFixture(t, lasting(time.Second, nil))
			cl := f.runningCluster("c1")
			ahead := f.m.NewSkewedClient(45 * time.Second)
			now := f.m.Clock.Now()
			at := now.Truncate(time.Minute).Add(time.Minute)
			if at.Sub(now) < 10*time.Second {
				at = at.Add(time.Minute)
			}
			f.m.Step(at.Sub(now) - 10*time.Second) // 10 s before the tick
			b := dlc.NewJob("daily").OnCluster(cl.ID).COSPackage("cos://jobs-1250000000/job.zip").Entrypoint("python main.py").
				Schedule(fmt.Sprintf("%d %d * * *", at.Minute(), at.Hour()), job.InZone("UTC"))
			var rec *job.Record
			if how == "save" {
				cfg, err := b.Build()
				f.must(err)
				rec, err = ahead.Jobs().Create(f.ctx, cfg, dlc.SaveOptions{})
				f.must(err)
			} else {
				rec = f.job(b)
				_, err := f.c.Jobs().SuspendSchedule(f.ctx, rec.ID)
				f.must(err)
				_, err = ahead.Jobs().ResumeSchedule(f.ctx, rec.ID)
				f.must(err)
			}
			f.m.CloseClient(ahead)
			f.m.Step(time.Minute)
			runs := runsOf(t, f.c, rec.ID)
			if len(runs) != 1 || !runs[0].Tick.Equal(at) {
				t.Fatalf("%d runs after the daily tick at %s (saved 10 s before it on a clock 45 s ahead), want 1", len(runs), at)
			}
			f.m.Step(24 * time.Hour)
			if runs := runsOf(t, f.c, rec.ID); len(runs) != 2 {
				t.Fatalf("%d runs after two days, want 2", len(runs))
			}
		})
	}
}

// Case 1: the idle hibernate of a replica whose cache has not shown a
// run another replica placed does not stop that run: the hibernate looks
// for active runs in the store, and is refused. A user's non-forced
// Hibernate through that replica is refused the same way.
func TestIdleHibernateSeesARunPlacedThroughAnotherReplica(t *testing.T) {
	for _, who := range []string{"idle timeout", "user"} {
		t.Run(who, func(t *testing.T) {
			f := newFixture(t, lasting(time.Hour, nil))
			cl := f.runningClusterWith(f.spec("idle", 1, 3), 10*time.Minute)
			lagger, l := laggingReplica(f)
			defer l.release()
			f.m.Step(8 * time.Minute) // idle for 8 of its 10 minutes
			l.lag("run")              // the lagging replica will not see the run
			rec := f.job(dlc.NewJob("j").OnCluster(cl.ID))
			r := f.start(rec.ID)
			f.m.Step(15 * time.Second)
			if r = f.run(r.ID); r.State != job.Running {
				t.Fatalf("the run is %s", r.State)
			}
			if who == "user" {
				if _, err := lagger.Clusters().Hibernate(f.ctx, cl.ID, dlc.HibernateOptions{}); !errors.Is(err, errs.ErrState) {
					t.Fatalf("a Hibernate with a run active on the cluster: %v, want ErrState", err)
				}
			}
			f.m.Step(5 * time.Minute) // past the idle timeout, counted from the cluster's start
			if r = f.run(r.ID); r.State != job.Running {
				t.Fatalf("the run placed through another replica is %s: %q", r.State, r.Message)
			}
			if got := f.clusterState(cl.ID); got != cluster.Running {
				t.Fatalf("the cluster with an active run is %s", got)
			}
		})
	}
}

// writeLedger counts the creates of each run and refuses the updates of
// the documents refuse names (kind/id, or kind/ for every one of a kind)
// while it names them, as an API server refusing them would.
type writeLedger struct {
	mu      sync.Mutex
	creates map[string]int
	refuse  map[string]bool
}

func (w *writeLedger) hook(ctx context.Context, wr memory.Write, next func(context.Context) (string, error)) (string, error) {
	w.mu.Lock()
	refused := wr.Op == memory.OpUpdate && (w.refuse[wr.Doc.Kind+"/"+wr.Doc.ID] || w.refuse[wr.Doc.Kind+"/"])
	w.mu.Unlock()
	if refused {
		return "", errs.Unavailable("update "+wr.Doc.Kind+"/"+wr.Doc.ID, errors.New("refused by the test"))
	}
	v, err := next(ctx)
	if err == nil && wr.Op == memory.OpCreate && wr.Doc.Kind == "run" {
		w.mu.Lock()
		w.creates[wr.Doc.ID]++
		w.mu.Unlock()
	}
	return v, err
}

func (w *writeLedger) set(key string, on bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.refuse[key] = on
}

// twice returns the runs created more than once.
func (w *writeLedger) twice() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]int{}
	for id, n := range w.creates {
		if n > 1 {
			out[id] = n
		}
	}
	return out
}

// Cases 2 and 3: a tick's run, or a retry, is made once even when
// retention could delete it before what made it records it (the config's
// write refused for 30 s; the failed attempt's write refused so): the
// retention keeps such a run until the record, and the repeated step
// finds it by its derived id.
func TestExactlyOnceSurvivesRetention(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fail   bool
		b      func(*job.Builder) *job.Builder
		refuse func(f *fixture, jobID string) string
	}{
		{"a tick's run", false, func(b *job.Builder) *job.Builder { return b.Schedule("* * * * *") },
			func(*fixture, string) string { return "job/" }},
		{"a retry", true, func(b *job.Builder) *job.Builder { return b.Retries(1) },
			func(f *fixture, jobID string) string {
				f.t.Helper()
				r := f.start(jobID)
				return "run/" + r.ID
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &writeLedger{creates: map[string]int{}, refuse: map[string]bool{}}
			f := newFixture(t, dlctest.MemoryOptions{Options: []dlc.Option{dlc.WithRunRetention(time.Second, 0),
				dlc.WithRunRetryBackoff(10*time.Second, time.Minute)},
				Store: memory.StoreHooks{Write: w.hook},
				Ray: memory.RayHooks{RunOutcome: func(*job.Run) memory.Outcome {
					return memory.Outcome{Duration: time.Second, Fail: tc.fail, Message: "exit code 1"}
				}}})
			cl := f.runningCluster("c1")
			rec := f.job(tc.b(dlc.NewJob("j").OnCluster(cl.ID)))
			f.m.Step(5 * time.Second)
			key := tc.refuse(f, rec.ID)
			f.m.Step(2 * time.Second) // a first attempt ends, and is kept for its retry
			w.set(key, true)
			f.m.Step(60 * time.Second) // the tick at 1 minute, or the retry after 10 s: made, ended, past its retention
			w.set(key, false)
			f.m.Step(20 * time.Second)
			if twice := w.twice(); len(twice) > 0 {
				t.Fatalf("runs made more than once: %v", twice)
			}
			if n := len(w.creates); n < 2 && tc.fail || n < 1 {
				t.Fatalf("%d runs made: the story did not happen", n)
			}
		})
	}
}

// A run placed through another replica while a hibernate looks for active
// runs is never submitted to the cluster the hibernate then stops: the
// hibernate marks the cluster before it looks, and a run reads its
// cluster in the store before its submit. Here the run is created, placed
// and submitted inside the hibernate's first write of the cluster: the
// hibernate then sees it active and is refused, and the run goes on.
// (Before the mark, that write was the hibernate's own: the run, which its
// look had not seen, failed with "the cluster was suspended".)
func TestHibernateFencedAgainstARunPlacedMeanwhile(t *testing.T) {
	f, h, rec := onCluster(t)
	b := f.m.NewClient()
	var r *job.Run
	fired := inside(h, memory.OpUpdate, "cluster", func() {
		var err error
		r, err = b.Runs().Create(f.ctx, rec.ID, dlc.RunOptions{})
		f.must(err)
		f.m.Reconcile() // placed and submitted, through the other replica
	})
	_, err := f.c.Clusters().Hibernate(context.WithValue(f.ctx, markKey{}, true), rec.Config.Cluster, dlc.HibernateOptions{})
	if !fired() {
		t.Fatal("the hook never ran")
	}
	f.m.Step(time.Minute)
	r = f.run(r.ID)
	switch {
	case errors.Is(err, errs.ErrState):
		if r.State != job.Running && r.State != job.Succeeded {
			t.Fatalf("the hibernate was refused; the run is %s: %q", r.State, r.Message)
		}
	case err == nil:
		if r.RaySubmitted || r.State.Terminal() {
			t.Fatalf("the hibernate went through; the run is %s (submitted %v): %q", r.State, r.RaySubmitted, r.Message)
		}
	default:
		t.Fatalf("hibernate: %v", err)
	}
	if cl, err := f.c.Clusters().Get(f.ctx, rec.Config.Cluster); err != nil || !cl.Stopping.IsZero() {
		t.Fatalf("the mark is still on the cluster: %v, %v", cl, err)
	}
}

// Case 3, from a replica whose watch lags: it holds a failed attempt as
// it was before its retry was made, and its step of that copy makes the
// retry from the attempt as the store has it: named its retry, and then
// deleted with it by the retention. (Made from the copy, the retry's
// create met the retry made by the other replica, the step failed on the
// attempt's version and came again with backoff, and once the retention
// had deleted both, the retry was created a second time: the stress
// test's "run run-r… created 2 times".)
func TestRetryMadeOnceByALaggingReplica(t *testing.T) {
	w := &writeLedger{creates: map[string]int{}, refuse: map[string]bool{}}
	f := newFixture(t, dlctest.MemoryOptions{Options: []dlc.Option{dlc.WithRunRetention(time.Second, 0),
		dlc.WithRunRetryBackoff(10*time.Second, time.Minute)},
		Store: memory.StoreHooks{Write: w.hook},
		Ray: memory.RayHooks{RunOutcome: func(r *job.Run) memory.Outcome {
			return memory.Outcome{Duration: time.Second, Fail: r.AttemptNumber() == 1, Message: "exit code 1"}
		}}})
	cl := f.runningCluster("c1")
	rec := f.job(dlc.NewJob("j").OnCluster(cl.ID).Retries(1))
	lagger, l := laggingReplica(f)
	defer l.release()
	r := f.start(rec.ID)
	f.m.Step(3 * time.Second) // the attempt fails; its retry is 10 s away
	if got, err := lagger.Runs().Get(f.ctx, r.ID); err != nil || got.State != job.Failed || !got.RayDone || got.NextAttempt != "" {
		t.Fatalf("the attempt as the lagging replica has it: %v, %v; want failed, no retry yet", got, err)
	}
	l.lag("run") // its cache keeps the attempt as it is now
	f.m.Step(time.Minute)
	if _, err := f.c.Runs().Get(f.ctx, r.ID); !errs.IsNotFound(err) {
		t.Fatalf("the attempt is still stored (%v): the retention has not run", err)
	}
	f.m.Step(10 * time.Minute) // the lagging replica's step comes back with its backoff
	if twice := w.twice(); len(twice) > 0 {
		t.Fatalf("runs made more than once: %v", twice)
	}
	if len(w.creates) != 2 {
		t.Fatalf("%d runs made, want the attempt and its retry", len(w.creates))
	}
}

// sharedFixture is a fixture whose clients share the work (a membership
// TTL of ttl), with a running cluster, a job config on it whose runs take
// a minute, and one more replica x, whose membership id is xID; h is the
// store's write hook.
type sharedFixture struct {
	*fixture
	h   *func(ctx context.Context, w memory.Write, next func(context.Context) (string, error)) (string, error)
	rec *job.Record
	cl  *cluster.Cluster
	x   *dlc.Client
	xID string
}

func newSharedFixture(t *testing.T, ttl time.Duration) *sharedFixture {
	t.Helper()
	f, h := hookedWith(t, dlctest.MemoryOptions{Options: []dlc.Option{dlc.WithWorkSharing(ttl)},
		Ray: memory.RayHooks{RunOutcome: func(*job.Run) memory.Outcome { return memory.Outcome{Duration: time.Minute} }}})
	s := &sharedFixture{fixture: f, h: h}
	s.cl = f.runningCluster("c1")
	s.rec = f.job(dlc.NewJob("j").OnCluster(s.cl.ID))
	before := s.members()
	s.x = f.m.NewClient()
	for _, id := range s.members() {
		if !slices.Contains(before, id) {
			s.xID = id
		}
	}
	if s.xID == "" {
		t.Fatal("the new replica stored no membership document")
	}
	return s
}

// members returns the membership documents' ids.
func (s *sharedFixture) members() []string {
	docs, err := s.m.Backend.List(s.ctx, "replica", nil)
	s.must(err)
	var ids []string
	for _, doc := range docs {
		ids = append(ids, doc.ID)
	}
	return ids
}

// isMark reports whether w is a write of a cluster from a marked context.
func isMark(ctx context.Context, w memory.Write) bool {
	return marked(ctx) && w.Op == memory.OpUpdate && w.Doc.Kind == "cluster"
}

// killAfterMark makes x die once a write of kind from a marked context
// (the mark of its operation) is stored: from then on x's writes with the
// marked context and those of its membership document are refused, as
// for a process killed there (its renewals stop; its close deletes
// nothing).
func (s *sharedFixture) killAfterMark(kind string) {
	var dead atomic.Bool
	*s.h = func(ctx context.Context, w memory.Write, next func(context.Context) (string, error)) (string, error) {
		if dead.Load() && (marked(ctx) || w.Doc.Kind == "replica" && w.Doc.ID == s.xID) {
			return "", errs.Unavailable("store "+string(w.Op)+" "+w.Doc.Kind, errors.New("the replica was killed"))
		}
		v, err := next(ctx)
		if err == nil && marked(ctx) && w.Op == memory.OpUpdate && w.Doc.Kind == kind {
			dead.Store(true)
		}
		return v, err
	}
}

// A replica killed between a hibernate's mark and its last write leaves
// the mark on a running cluster. A run placed on it afterwards waits for
// the mark only until the replica that made it is seen gone (its
// membership lapses: the TTL), then takes the mark off and is submitted.
// Before: every such run waited for the mark's two-minute life (the
// soak's replica killed during an idle hibernate: 20 and 40 runs held
// back, then 19 ticks counted missed and 20 runs stopped by the next
// ticks of Forbid and Replace configs).
func TestDeadHibernateMarkHoldsRunsOnlyUntilItsReplicaIsGone(t *testing.T) {
	const ttl = 15 * time.Second
	s := newSharedFixture(t, ttl)
	s.killAfterMark("cluster")
	if _, err := s.x.Clusters().Hibernate(context.WithValue(s.ctx, markKey{}, true), s.cl.ID, dlc.HibernateOptions{}); !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("the dying replica's hibernate: %v, want it cut off", err)
	}
	s.m.CloseClient(s.x)
	killed := s.m.Clock.Now()
	if got, err := s.c.Clusters().Get(s.ctx, s.cl.ID); err != nil || got.Stopping.IsZero() || got.StoppingBy != s.xID || got.State != cluster.Running {
		t.Fatalf("the cluster after the kill: %v, %v; want running, marked by %s", got, err, s.xID)
	}
	r, err := s.c.Runs().Create(s.ctx, s.rec.ID, dlc.RunOptions{})
	s.must(err)
	for !s.run(r.ID).RaySubmitted {
		if waited := s.m.Clock.Now().Sub(killed); waited > 2*ttl {
			now := s.run(r.ID)
			t.Fatalf("the run is still not submitted %s after the replica died (%s: %q); its membership lapsed after %s", waited, now.State, now.Message, ttl)
		}
		s.m.Step(time.Second)
	}
	// (Should x own the run's key, the others take it over at the same
	// lapse: the bound above is what tells the mark's life.)
	if waited := s.m.Clock.Now().Sub(killed); waited < ttl {
		t.Fatalf("the run was submitted %s after the replica died, before its membership lapsed (%s)", waited, ttl)
	}
	got, err := s.c.Clusters().Get(s.ctx, s.cl.ID)
	s.must(err)
	if !got.Stopping.IsZero() || got.StoppingBy != "" || got.State != cluster.Running {
		t.Fatalf("the cluster after the run's submit: %s, mark %v by %q; want running, unmarked", got.State, got.Stopping, got.StoppingBy)
	}
	s.settle()
	if r := s.run(r.ID); r.State != job.Succeeded {
		t.Fatalf("the run ended %s: %q", r.State, r.Message)
	}
	s.must(s.c.CheckQuota(s.ctx))
}

// A hibernate that is only slow, whose replica is taken for gone while it
// looks for runs (its renewals lost), loses to a run that takes its mark
// off: its last write, over the marked version, conflicts, and the run
// submitted meanwhile is not stopped by it.
func TestSlowHibernateLosesToARunThatTookItsMarkOff(t *testing.T) {
	const ttl = 15 * time.Second
	s := newSharedFixture(t, ttl)
	b := s.m.NewClient()
	var (
		lapse  atomic.Bool
		writes int // x's marked cluster writes
		r      *job.Run
		rerr   error
	)
	*s.h = func(ctx context.Context, w memory.Write, next func(context.Context) (string, error)) (string, error) {
		if lapse.Load() && w.Doc.Kind == "replica" && w.Doc.ID == s.xID {
			return "", errs.Unavailable("store "+string(w.Op)+" replica", errors.New("the replica's renewals are lost"))
		}
		if isMark(ctx, w) {
			if writes++; writes == 2 {
				// x has marked the cluster and found no run; before its
				// last write, its membership lapses and a run comes.
				lapse.Store(true)
				s.m.Step(2 * ttl)
				if r, rerr = b.Runs().Create(s.ctx, s.rec.ID, dlc.RunOptions{}); rerr == nil {
					s.m.Step(5 * time.Second)
				}
			}
		}
		return next(ctx)
	}
	_, err := s.x.Clusters().Hibernate(context.WithValue(s.ctx, markKey{}, true), s.cl.ID, dlc.HibernateOptions{})
	s.must(rerr)
	if r == nil {
		t.Fatal("the hook never ran")
	}
	if err == nil {
		t.Fatalf("the slow hibernate went through; the run placed meanwhile is %s (submitted %v)", s.run(r.ID).State, s.run(r.ID).RaySubmitted)
	}
	if !errors.Is(err, errs.ErrConflict) && !errors.Is(err, errs.ErrState) {
		t.Fatalf("the slow hibernate: %v, want a conflict or a refusal for the active run", err)
	}
	if got := s.run(r.ID); !got.RaySubmitted {
		t.Fatalf("the run was not submitted while the hibernate's replica seemed gone: %s %q", got.State, got.Message)
	}
	lapse.Store(false)
	s.settle()
	if got := s.run(r.ID); got.State != job.Succeeded {
		t.Fatalf("the run ended %s: %q", got.State, got.Message)
	}
	if got, err := s.c.Clusters().Get(s.ctx, s.cl.ID); err != nil || got.State != cluster.Running || !got.Stopping.IsZero() {
		t.Fatalf("the cluster: %v, %v; want running, unmarked", got, err)
	}
	s.must(s.c.CheckQuota(s.ctx))
}

// A replica killed inside a job config's delete, after its mark, leaves
// the config marked: runs of it are refused while the mark holds, and
// only until the replica is seen gone (before: for two minutes, a
// schedule's ticks held back as long). The config is not deleted, and
// its runs go on.
func TestDeadJobDeleteMarkHoldsOnlyUntilItsReplicaIsGone(t *testing.T) {
	const ttl = 15 * time.Second
	s := newSharedFixture(t, ttl)
	s.killAfterMark("job")
	if err := s.x.Jobs().Delete(context.WithValue(s.ctx, markKey{}, true), s.rec.ID); err == nil {
		t.Fatal("the dying replica's delete went through")
	}
	s.m.CloseClient(s.x)
	if got, err := s.c.Jobs().Get(s.ctx, s.rec.ID); err != nil || got.Deleting.IsZero() || got.Deleting.Replica != s.xID {
		t.Fatalf("the config after the kill: %+v, %v; want marked by %s", got, err, s.xID)
	}
	if _, err := s.c.Runs().Create(s.ctx, s.rec.ID, dlc.RunOptions{}); !errors.Is(err, errs.ErrState) {
		t.Fatalf("a run while the dead delete's replica may still be live: %v, want refused", err)
	}
	s.m.Step(ttl + ttl/3 + time.Second) // its membership lapses: seen at the next renewal
	r, err := s.c.Runs().Create(s.ctx, s.rec.ID, dlc.RunOptions{})
	if err != nil {
		t.Fatalf("a run %s after the replica died: %v", ttl+ttl/3+time.Second, err)
	}
	s.settle()
	if got := s.run(r.ID); got.State != job.Succeeded {
		t.Fatalf("the run ended %s: %q", got.State, got.Message)
	}
	if got, err := s.c.Jobs().Get(s.ctx, s.rec.ID); err != nil || !got.Deleting.IsZero() {
		t.Fatalf("the config: %+v, %v; want it unmarked", got, err)
	}
}

// The same for a cluster group's delete: a replica killed after its mark
// leaves the group marked; clusters may join it again once the replica is
// seen gone (before: for two minutes).
func TestDeadGroupDeleteMarkHoldsOnlyUntilItsReplicaIsGone(t *testing.T) {
	const ttl = 15 * time.Second
	s := newSharedFixture(t, ttl)
	target, err := s.c.Groups().Create(s.ctx, "target")
	s.must(err)
	s.killAfterMark("group")
	if err := s.x.Groups().Delete(context.WithValue(s.ctx, markKey{}, true), s.grp, target.ID); err == nil {
		t.Fatal("the dying replica's delete went through")
	}
	s.m.CloseClient(s.x)
	if g, err := s.c.Groups().Get(s.ctx, s.grp); err != nil || g.Deleting.IsZero() || g.Deleting.Replica != s.xID {
		t.Fatalf("the group after the kill: %+v, %v; want marked by %s", g, err, s.xID)
	}
	if _, err := s.c.Clusters().Create(s.ctx, s.spec("joins_early", 1, 1)); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("a cluster joining while the dead delete's replica may still be live: %v, want refused", err)
	}
	s.m.Step(ttl + ttl/3 + time.Second)
	if _, err := s.c.Clusters().Create(s.ctx, s.spec("joins_late", 1, 1)); err != nil {
		t.Fatalf("a cluster joining %s after the replica died: %v", ttl+ttl/3+time.Second, err)
	}
	s.settle()
	if g, err := s.c.Groups().Get(s.ctx, s.grp); err != nil || !g.Deleting.IsZero() {
		t.Fatalf("the group: %+v, %v; want it unmarked", g, err)
	}
}
