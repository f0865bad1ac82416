package dlc_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/dlctest"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/job"
)

const day = 24 * time.Hour

// retentionStory is a platform with finished runs of two job configs and
// runs that do not finish: three runs of "a" on a running cluster, a
// minute apart, then a fourth that runs for years; two on-demand runs of
// "b"; one run of "w" that waits for a cluster that is never started.
type retentionStory struct {
	f         *fixture
	clusterID string
	a, b      []string // the finished runs of each job, oldest first
	live      map[string]job.RunState
}

func newRetentionStory(t *testing.T, opts ...dlc.Option) *retentionStory {
	t.Helper()
	long := false
	f := newFixture(t, dlctest.MemoryOptions{Options: opts, Ray: memory.RayHooks{
		RunOutcome: func(r *job.Run) memory.Outcome {
			if long {
				return memory.Outcome{Duration: 1000 * day}
			}
			return memory.Outcome{}
		}}})
	s := &retentionStory{f: f, live: map[string]job.RunState{}}
	cl := f.runningCluster("c")
	s.clusterID = cl.ID
	a := f.job(dlc.NewJob("a").OnCluster(cl.ID))
	for range 3 {
		r := f.start(a.ID)
		f.settle()
		if r = f.run(r.ID); r.State != job.Succeeded {
			t.Fatalf("run of a: %s %s", r.State, r.Message)
		}
		s.a = append(s.a, r.ID)
		f.m.Clock.Advance(time.Minute)
	}
	cfg, err := dlc.NewJob("b").OnDemand("pkg-1", "rg-1").Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c16g").WorkerGroup("w", "cu.4c8g", 1, 1).
		COSPackage("cos://jobs-1250000000/j.zip").Entrypoint("python main.py").Build()
	f.must(err)
	b, err := f.c.Jobs().Create(f.ctx, cfg, dlc.SaveOptions{})
	f.must(err)
	for range 2 {
		r := f.start(b.ID)
		f.settle()
		if r = f.run(r.ID); r.State != job.Succeeded || !r.RayDone {
			t.Fatalf("on-demand run of b: %s %s (Ray done: %v)", r.State, r.Message, r.RayDone)
		}
		s.b = append(s.b, r.ID)
		f.m.Clock.Advance(time.Minute)
	}
	long = true
	r := f.start(a.ID)
	f.settle()
	s.live[r.ID] = job.Running
	idle, err := f.c.Clusters().Create(f.ctx, f.spec("idle", 1, 1))
	f.must(err)
	w := f.job(dlc.NewJob("w").OnCluster(idle.ID))
	r = f.start(w.ID)
	f.settle()
	s.live[r.ID] = job.Waiting
	return s
}

// check says that each job keeps exactly its newest wantA and wantB
// finished runs, that the runs that do not finish are all there, and
// that a deleted run has left nothing: not in the store, nor the cache,
// nor a list, nor its cluster's history, nor the simulated Ray.
func (s *retentionStory) check(t *testing.T, wantA, wantB int) {
	t.Helper()
	f := s.f
	ctx := f.ctx
	d, err := f.c.Clusters().Details(ctx, s.clusterID)
	f.must(err)
	inHistory := map[string]bool{}
	for _, h := range d.History {
		inHistory[h.RunID] = true
	}
	all, err := f.c.Runs().List(ctx, dlc.RunListOptions{})
	f.must(err)
	listed := map[string]bool{}
	for _, r := range all {
		listed[r.ID] = true
	}
	for _, c := range []struct {
		name string
		runs []string
		want int
	}{{"a", s.a, wantA}, {"b", s.b, wantB}} {
		for i, id := range c.runs {
			kept := i >= len(c.runs)-c.want
			_, err := f.c.Runs().Get(ctx, id)
			_, serr := f.m.Backend.Get(ctx, "run", id)
			_, rerr := f.m.Backend.RunStatus(ctx, id)
			logs, _ := f.m.Backend.Logs(ctx, id)
			switch {
			case kept && (err != nil || serr != nil || !listed[id] || rerr != nil || len(logs) == 0):
				t.Errorf("run %d of %s (%s) was to be kept: get %v, stored %v, listed %v, Ray %v, %d log lines",
					i+1, c.name, id, err, serr, listed[id], rerr, len(logs))
			case !kept && (!errors.Is(err, dlc.ErrNotFound) || !errs.IsNotFound(serr) || listed[id] || inHistory[id] ||
				!errs.IsNotFound(rerr) || logs != nil):
				t.Errorf("run %d of %s (%s) was to be deleted: get %v, stored %v, listed %v, in history %v, Ray %v, logs %q",
					i+1, c.name, id, err, serr, listed[id], inHistory[id], rerr, logs)
			}
			if c.name == "a" && kept != inHistory[id] {
				t.Errorf("run %d of a (%s): kept %v, in its cluster's history %v", i+1, id, kept, inHistory[id])
			}
		}
	}
	for id, want := range s.live {
		if r, err := f.c.Runs().Get(ctx, id); err != nil || r.State != want {
			t.Errorf("the run that does not finish (%s): %v, want %s", id, err, want)
		}
	}
	if len(all) != wantA+wantB+len(s.live) {
		t.Errorf("%d runs listed, want %d", len(all), wantA+wantB+len(s.live))
	}
	if err := f.c.CheckQuota(ctx); err != nil {
		t.Error(err)
	}
}

// later lets d of simulated time pass, and the reconcilers take the steps
// it brings (and no more time).
func (s *retentionStory) later(d time.Duration) {
	s.f.m.Clock.Advance(d)
	s.f.m.Reconcile()
}

// Finished runs are deleted at the end of their age, the oldest beyond
// their job config's count at once; runs that have not finished never.
func TestRunRetention(t *testing.T) {
	type step struct {
		after        time.Duration // from the end of the story
		wantA, wantB int           // finished runs kept
	}
	cases := []struct {
		name  string
		opts  []dlc.Option
		steps []step
	}{
		{"default: 7 days", nil, []step{{0, 3, 2}, {7*day - time.Hour, 3, 2}, {7 * day, 0, 0}, {30 * day, 0, 0}}},
		{"kept before its age, gone after", []dlc.Option{dlc.WithRunRetention(time.Hour, 0)},
			[]step{{50 * time.Minute, 3, 2}, {70 * time.Minute, 0, 0}}},
		{"the newest 2 of each job", []dlc.Option{dlc.WithRunRetention(0, 2)},
			[]step{{0, 2, 2}, {30 * day, 2, 2}}},
		{"the newest 1 of each job", []dlc.Option{dlc.WithRunRetention(0, 1)},
			[]step{{0, 1, 1}, {30 * day, 1, 1}}},
		{"age and count", []dlc.Option{dlc.WithRunRetention(time.Hour, 2)},
			[]step{{0, 2, 2}, {50 * time.Minute, 2, 2}, {70 * time.Minute, 0, 0}}},
		{"off: kept for ever", []dlc.Option{dlc.WithRunRetention(0, 0), dlc.WithMaxFinishedRuns(0)},
			[]step{{0, 3, 2}, {365 * day, 3, 2}}},
		{"the newest 3 of every job together", []dlc.Option{dlc.WithRunRetention(0, 0), dlc.WithMaxFinishedRuns(3)},
			[]step{{0, 1, 2}, {365 * day, 1, 2}}},
		{"the newest 4 of every job together", []dlc.Option{dlc.WithRunRetention(0, 0), dlc.WithMaxFinishedRuns(4)},
			[]step{{0, 2, 2}, {30 * day, 2, 2}}},
		{"the newest 1 of each job, 3 in all", []dlc.Option{dlc.WithRunRetention(0, 1), dlc.WithMaxFinishedRuns(3)},
			[]step{{0, 1, 1}, {30 * day, 1, 1}}},
		{"age and the bound in all", []dlc.Option{dlc.WithRunRetention(time.Hour, 0), dlc.WithMaxFinishedRuns(4)},
			[]step{{0, 2, 2}, {70 * time.Minute, 0, 0}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newRetentionStory(t, tc.opts...)
			start := s.f.m.Clock.Now()
			for _, st := range tc.steps {
				s.later(start.Add(st.after).Sub(s.f.m.Clock.Now()))
				s.check(t, st.wantA, st.wantB)
				if t.Failed() {
					t.Fatalf("after %s", st.after)
				}
			}
		})
	}
}

// Two replicas that do not share the work (the memory fixture's default)
// both look at a finished run when its age is up (or when a newer run of
// its job finishes beyond the count); the one whose cache
// has not seen the other's delete yet tries it too, finds the run gone
// and does nothing: no failed step on either, and each run deleted once.
func TestRunRetentionReplicas(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    []dlc.Option
		advance time.Duration
		wantA   int
	}{
		{"age", []dlc.Option{dlc.WithRunRetention(time.Hour, 0)}, 2 * time.Hour, 0},
		{"count", []dlc.Option{dlc.WithRunRetention(0, 1)}, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var deletes, lost int
			f := newFixture(t, dlctest.MemoryOptions{Options: tc.opts, Store: memory.StoreHooks{
				Write: func(ctx context.Context, w memory.Write, next func(context.Context) (string, error)) (string, error) {
					v, err := next(ctx)
					if w.Op == memory.OpDelete && w.Doc.Kind == "run" {
						mu.Lock()
						deletes++
						if errs.IsNotFound(err) {
							lost++
						}
						mu.Unlock()
					}
					return v, err
				}}})
			regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
			// The fixture's client is replaced by one with metrics (a), and
			// joined by b, which may be told not to see runs deleted yet.
			f.m.CloseClient(f.c)
			f.c = f.m.NewClient(dlc.WithMetrics(regA))
			h := &deletesHeld{Backend: f.m.Backend}
			b := f.m.NewClient(dlc.WithBackend(h), dlc.WithMetrics(regB))
			cl := f.runningCluster("c")
			rec := f.job(dlc.NewJob("a").OnCluster(cl.ID))
			h.hold()
			var ids []string
			for range 2 {
				r := f.start(rec.ID)
				f.settle()
				ids = append(ids, r.ID)
				f.m.Clock.Advance(time.Minute)
			}
			f.m.Clock.Advance(tc.advance)
			f.settle()
			if _, err := b.Runs().Get(f.ctx, ids[0]); err != nil {
				t.Fatalf("replica b sees the first run gone already: %v", err)
			}
			h.release()
			f.settle()
			for i, id := range ids {
				_, err := f.c.Runs().Get(f.ctx, id)
				if kept := i >= len(ids)-tc.wantA; kept != (err == nil) || (!kept && !errors.Is(err, dlc.ErrNotFound)) {
					t.Errorf("run %d: kept %v, get %v", i+1, kept, err)
				}
			}
			deleted := 0.0
			for name, reg := range map[string]*prometheus.Registry{"a": regA, "b": regB} {
				if n, err := testutil.GatherAndCount(reg, "dlc_reconcile_errors_total"); err != nil || n != 0 {
					t.Errorf("replica %s: %d failed steps (%v)", name, n, err)
				}
				deleted += counterValue(t, reg, "dlc_runs_deleted_total")
			}
			want := len(ids) - tc.wantA
			if deleted != float64(want) || deletes-lost != want || lost == 0 {
				t.Errorf("%v runs deleted as the replicas count them, %d deletes in the store of which %d found the run gone; want %d deleted and a lost race",
					deleted, deletes, lost, want)
			}
		})
	}
}

// deletesHeld is a backend whose watch holds back the deletions of runs
// while it is told to, as a replica whose cache has not seen another's
// delete yet.
type deletesHeld struct {
	*memory.Backend
	mu      sync.Mutex
	holding bool
	held    []func()
}

func (h *deletesHeld) Watch(ctx context.Context, f func(backend.Change)) ([]backend.Doc, error) {
	return h.Backend.Watch(ctx, func(ch backend.Change) {
		h.mu.Lock()
		if h.holding && ch.Deleted && ch.Doc.Kind == "run" {
			h.held = append(h.held, func() { f(ch) })
			h.mu.Unlock()
			return
		}
		h.mu.Unlock()
		f(ch)
	})
}

func (h *deletesHeld) hold() { h.mu.Lock(); h.holding = true; h.mu.Unlock() }

// release delivers what was held, in order, and holds nothing more.
func (h *deletesHeld) release() {
	h.mu.Lock()
	held := h.held
	h.held, h.holding = nil, false
	h.mu.Unlock()
	for _, f := range held {
		f()
	}
}

// counterValue sums the samples of a counter in reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// A client started after runs finished, with no other client running
// meanwhile, deletes each at the end of its age as measured from when it
// finished, and keeps each job within its count from the start.
func TestRunRetentionRestart(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  []dlc.Option
		steps []struct {
			after        time.Duration
			wantA, wantB int
		}
	}{
		{"age", []dlc.Option{dlc.WithRunRetention(2*day, 0)}, []struct {
			after        time.Duration
			wantA, wantB int
		}{{2*day - time.Hour, 3, 2}, {2 * day, 0, 0}}},
		{"count", []dlc.Option{dlc.WithRunRetention(2*day, 1)}, []struct {
			after        time.Duration
			wantA, wantB int
		}{{day, 1, 1}, {2 * day, 0, 0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newRetentionStory(t, dlc.WithRunRetention(0, 0)) // nothing deleted while it runs
			start := s.f.m.Clock.Now()
			s.f.m.CloseClient(s.f.c)
			s.f.m.Clock.Advance(day) // no client at all for a day
			s.f.c = s.f.m.NewClient(tc.opts...)
			for _, st := range tc.steps {
				s.later(start.Add(st.after).Sub(s.f.m.Clock.Now()))
				s.check(t, st.wantA, st.wantB)
				if t.Failed() {
					t.Fatalf("after %s", st.after)
				}
			}
		})
	}
}

// A negative retention is refused by New, naming what is wrong.
func TestRunRetentionInvalid(t *testing.T) {
	for _, tc := range []struct {
		maxAge time.Duration
		perJob int
		fields []string
	}{
		{-time.Hour, 0, []string{"WithRunRetention.maxAge"}},
		{0, -1, []string{"WithRunRetention.perJob"}},
		{-1, -1, []string{"WithRunRetention.maxAge", "WithRunRetention.perJob"}},
	} {
		c, err := dlc.New(dlc.WithRunRetention(tc.maxAge, tc.perJob))
		if err == nil {
			_ = c.Close()
			t.Fatalf("WithRunRetention(%s, %d) accepted", tc.maxAge, tc.perJob)
		}
		var got []string
		for _, fe := range dlc.Fields(err) {
			got = append(got, fe.Path.String())
		}
		if !errors.Is(err, dlc.ErrInvalid) || !slices.Equal(got, tc.fields) || !strings.Contains(err.Error(), "negative") {
			t.Errorf("WithRunRetention(%s, %d): %v (fields %v), want ErrInvalid on %v", tc.maxAge, tc.perJob, err, got, tc.fields)
		}
	}
	if _, err := dlc.New(dlc.WithMaxFinishedRuns(-1)); !errors.Is(err, dlc.ErrInvalid) || len(dlc.Fields(err)) != 1 ||
		dlc.Fields(err)[0].Path.String() != "WithMaxFinishedRuns" {
		t.Errorf("WithMaxFinishedRuns(-1): %v", err)
	}
	for _, ok := range [][2]int{{0, 0}, {1, 0}, {0, 1}} {
		c, err := dlc.New(dlc.WithRunRetention(time.Duration(ok[0]), ok[1]))
		if err != nil {
			t.Fatalf("WithRunRetention(%d, %d): %v", ok[0], ok[1], err)
		}
		_ = c.Close()
	}
}

// With the work shared, each finished run is looked at by the replica
// that owns it only: every run is deleted once, with no delete that finds
// it gone. When a replica closes, the other takes its share over, and the
// finished runs in it are deleted at the end of their age all the same.
func TestRunRetentionWorkSharing(t *testing.T) {
	for _, closeOne := range []bool{false, true} {
		t.Run(fmt.Sprintf("one closed %v", closeOne), func(t *testing.T) {
			var mu sync.Mutex
			deletes, lost := 0, 0
			f := newFixture(t, dlctest.MemoryOptions{
				Options: []dlc.Option{dlc.WithRunRetention(2*time.Hour, 0), dlc.WithWorkSharing(24 * time.Hour)},
				Store: memory.StoreHooks{Write: func(ctx context.Context, w memory.Write, next func(context.Context) (string, error)) (string, error) {
					v, err := next(ctx)
					if w.Op == memory.OpDelete && w.Doc.Kind == "run" {
						mu.Lock()
						deletes++
						if errs.IsNotFound(err) {
							lost++
						}
						mu.Unlock()
					}
					return v, err
				}}})
			regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
			f.m.CloseClient(f.c)
			f.c = f.m.NewClient(dlc.WithMetrics(regA))
			b := f.m.NewClient(dlc.WithMetrics(regB))
			cl := f.runningCluster("c")
			rec := f.job(dlc.NewJob("a").OnCluster(cl.ID))
			const runs = 16
			ids := make([]string, 0, runs)
			for range runs {
				r := f.start(rec.ID)
				f.settle()
				if r = f.run(r.ID); r.State != job.Succeeded || !r.RayDone {
					t.Fatalf("run %s: %s", r.ID, r.State)
				}
				ids = append(ids, r.ID)
			}
			if closeOne {
				f.m.CloseClient(b) // a hands its share over; a takes it on a resync of its own goroutine
			}
			f.m.Clock.Advance(3 * time.Hour)
			remaining := func() int {
				n := 0
				for _, id := range ids {
					if _, err := f.c.Runs().Get(f.ctx, id); err == nil {
						n++
					}
				}
				return n
			}
			for i := 0; i < 2000 && remaining() > 0; i++ {
				f.m.Reconcile()
				if remaining() > 0 {
					time.Sleep(time.Millisecond)
				}
			}
			if n := remaining(); n > 0 {
				t.Fatalf("%d of %d runs left after their age", n, runs)
			}
			dA, dB := counterValue(t, regA, "dlc_runs_deleted_total"), counterValue(t, regB, "dlc_runs_deleted_total")
			t.Logf("deleted by a: %v, by b: %v", dA, dB)
			mu.Lock()
			defer mu.Unlock()
			if dA+dB != runs || deletes != runs || lost != 0 {
				t.Errorf("%v + %v runs deleted by the replicas, %d deletes in the store of which %d found the run gone; want %d, each once",
					dA, dB, deletes, lost, runs)
			}
			if closeOne && dB != 0 {
				t.Errorf("the closed replica deleted %v runs", dB)
			}
		})
	}
}
