package dlc_test

// The lifecycle stress test of issue 39: schedules of every concurrency
// policy, retries, deadlines, idle hibernate, retention, manual runs,
// suspends and resumes, replicas replaced and short Ray outages, on the
// fake clock, with invariants checked at every change of the store.

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/dlctest"
	"github.com/aidlc/dlc/job"
)

// lifecycleHours is how many simulated hours TestLifecycleStress runs:
// DLC_LIFECYCLE_HOURS, else 3.
func lifecycleHours(t *testing.T) int {
	if v := os.Getenv("DLC_LIFECYCLE_HOURS"); v != "" {
		var h int
		if _, err := fmt.Sscan(v, &h); err != nil || h <= 0 {
			t.Fatalf("DLC_LIFECYCLE_HOURS=%q: want a positive number of hours", v)
		}
		return h
	}
	return 3
}

// lifecycleWatch checks, at every change of the store, what the
// lifecycle promises, and counts what it saw.
type lifecycleWatch struct {
	mu      sync.Mutex
	creates map[string]int          // run → creates (a tick's or a retry's run is made once)
	ticks   map[string][]string     // job/tick → runs of that tick
	ended   map[string]job.RunState // run → the end it first had
	retries map[string]bool         // runs that are a retry (Attempt > 1)
	checks  int
	// refuseUntil: updates of configs and runs are refused until then.
	clock       *backend.FakeClock
	refuseUntil time.Time
	problems    []string
	byKind      map[string]int // what the load did, by kind
}

func (w *lifecycleWatch) fail(format string, args ...any) {
	if len(w.problems) < 20 {
		w.problems = append(w.problems, fmt.Sprintf(format, args...))
	}
}

// hook counts the creates of runs (a create that conflicts is no create),
// and refuses the updates of job configs and runs while refuseUntil is
// ahead of the clock, as an API server that does not answer.
func (w *lifecycleWatch) hook(ctx context.Context, wr memory.Write, next func(context.Context) (string, error)) (string, error) {
	w.mu.Lock()
	refuse := w.clock != nil && wr.Op == memory.OpUpdate && (wr.Doc.Kind == "job" || wr.Doc.Kind == "run") &&
		w.clock.Now().Before(w.refuseUntil)
	w.mu.Unlock()
	if refuse {
		return "", fmt.Errorf("update %s/%s: %w", wr.Doc.Kind, wr.Doc.ID, dlc.ErrUnavailable)
	}
	v, err := next(ctx)
	if err == nil && wr.Op == memory.OpCreate && wr.Doc.Kind == "run" {
		w.mu.Lock()
		w.creates[wr.Doc.ID]++
		if n := w.creates[wr.Doc.ID]; n > 1 {
			w.fail("run %s created %d times", wr.Doc.ID, n)
		}
		w.mu.Unlock()
	}
	return v, err
}

// observe checks one change of the store.
func (w *lifecycleWatch) observe(ch backend.Change) {
	if ch.Doc.Kind != "run" || ch.Deleted {
		return
	}
	var r job.Run
	if err := json.Unmarshal(ch.Doc.Data, &r); err != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.checks++
	if r.Attempt > 1 {
		w.retries[r.ID] = true
	}
	if !r.Tick.IsZero() && r.Attempt == 0 {
		key := r.JobID + "/" + r.Tick.UTC().Format(time.RFC3339)
		if ids := w.ticks[key]; len(ids) == 0 {
			w.ticks[key] = []string{r.ID}
		} else if ids[0] != r.ID {
			w.fail("tick %s has runs %s and %s", key, ids[0], r.ID)
		}
	}
	if !r.State.Terminal() {
		return
	}
	if was, ok := w.ended[r.ID]; ok {
		if was != r.State {
			w.fail("run %s ended %s, then %s (%q)", r.ID, was, r.State, r.Message)
		}
		return
	}
	w.ended[r.ID] = r.State
	for _, bad := range []string{"suspended", "hibernated by", "Ray unreachable", "kept failing"} {
		if strings.Contains(r.Message, bad) {
			w.fail("run %s %s: %q", r.ID, r.State, r.Message)
		}
	}
}

// Several replicas run a world of scheduled configs of every policy, with
// retries and deadlines, on standing clusters that hibernate when idle,
// while the load makes runs by hand, suspends and resumes schedules,
// starts hibernated clusters, replaces replicas, holds back one replica's
// watch of runs and configs, refuses the writes of configs and runs for
// up to 30 s and cuts Ray off for a few seconds at a time; retention keeps 10 minutes and 5 runs per
// config. At every change of the store: no run is made twice (a tick's
// or a retry's), no tick has two runs, no end changes, no run fails for
// an idle hibernate, a Ray outage or a failing step. At the end: each
// config that was never suspended has started or counted missed every
// tick through its last recorded one.
//
// DLC_LIFECYCLE_HOURS sets the simulated hours (default 3);
// DLC_STRESS_SEED repeats a seed.
func TestLifecycleStress(t *testing.T) {
	if testing.Short() {
		t.Skip("stress test: skipped with -short")
	}
	seed := stressSeed(t)
	rng := rand.New(rand.NewPCG(seed, 39))
	t.Logf("seed %d (DLC_STRESS_SEED)", seed)
	w := &lifecycleWatch{creates: map[string]int{}, ticks: map[string][]string{}, ended: map[string]job.RunState{}, retries: map[string]bool{}, byKind: map[string]int{}}
	var outage struct {
		sync.Mutex
		until time.Time
	}
	var outcomes sync.Map
	var orngMu sync.Mutex
	orng := rand.New(rand.NewPCG(seed, 40)) // the runs' outcomes
	var clock *backend.FakeClock
	f := newFixture(t, dlctest.MemoryOptions{
		Options: []dlc.Option{dlc.WithRunRetention(10*time.Minute, 5), dlc.WithRunRetryBackoff(20*time.Second, time.Minute)},
		Store:   memory.StoreHooks{Write: w.hook},
		Ray: memory.RayHooks{
			Call: func(_ context.Context, call, id string) error {
				outage.Lock()
				down := clock != nil && clock.Now().Before(outage.until)
				outage.Unlock()
				if down && (call == memory.CallRunStatus || call == memory.CallSubmitRun) {
					return errHeadSilentUnavailable(call, id)
				}
				return nil
			},
			RunOutcome: func(r *job.Run) memory.Outcome {
				orngMu.Lock()
				o := memory.Outcome{Duration: time.Duration(10+orng.IntN(170)) * time.Second, Fail: orng.IntN(5) == 0, Message: "exit code 1"}
				orngMu.Unlock()
				got, _ := outcomes.LoadOrStore(r.ID, o)
				return got.(memory.Outcome)
			},
		}})
	clock = f.m.Clock
	w.mu.Lock()
	w.clock = clock
	w.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := f.m.Backend.Watch(ctx, w.observe); err != nil {
		t.Fatal(err)
	}
	clusters := []*cluster.Cluster{
		f.runningClusterWith(f.spec("idle_a", 1, 1), 5*time.Minute),
		f.runningClusterWith(f.spec("idle_b", 1, 1), 5*time.Minute),
		f.runningCluster("busy"),
	}
	policies := []job.ConcurrencyPolicy{job.AllowConcurrent, job.ForbidConcurrent, job.ReplaceConcurrent}
	var configs []*job.Record
	for i := range 12 {
		b := dlc.NewJob(fmt.Sprintf("cfg-%d", i)).Schedule(fmt.Sprintf("*/%d * * * *", 1+i%3), job.Concurrency(policies[i%3]))
		if i%4 == 3 {
			b = b.OnGroup(f.grp)
		} else {
			b = b.OnCluster(clusters[i%3].ID)
		}
		if i%2 == 1 {
			b = b.Retries(1 + i%3)
		}
		if i%5 == 2 {
			b = b.ActiveDeadline(time.Duration(90+30*i) * time.Second)
		}
		configs = append(configs, f.job(b))
	}
	lagger, l := laggingReplica(f) // a replica whose watch lags at times
	defer l.release()
	replicas := []*dlc.Client{f.c, f.m.NewClient(), lagger}
	suspended := map[string]bool{}
	end := f.m.Clock.Now().Add(time.Duration(lifecycleHours(t)) * time.Hour)
	for f.m.Clock.Now().Before(end) {
		c := replicas[rng.IntN(len(replicas))]
		cfg := configs[rng.IntN(len(configs))]
		half := configs[rng.IntN(len(configs)/2)] // the only ones suspended and resumed
		switch n := rng.IntN(100); {
		case n < 6:
			outage.Lock()
			outage.until = f.m.Clock.Now().Add(time.Duration(2+rng.IntN(7)) * time.Second)
			outage.Unlock()
			w.byKind["ray outage"]++
		case n < 12:
			if _, err := c.Runs().Create(f.ctx, cfg.ID, dlc.RunOptions{}); err == nil {
				w.byKind["run by hand"]++
			}
		case n < 14:
			if _, err := c.Jobs().SuspendSchedule(f.ctx, half.ID); err == nil {
				suspended[half.ID] = true
				w.byKind["suspend"]++
			}
		case n < 18:
			if _, err := c.Jobs().ResumeSchedule(f.ctx, half.ID); err == nil {
				w.byKind["resume"]++
			}
		case n < 24:
			cl := clusters[rng.IntN(2)]
			if got, err := c.Clusters().Get(f.ctx, cl.ID); err == nil && got.State == cluster.Hibernated {
				if _, err := c.Clusters().Start(f.ctx, cl.ID); err == nil {
					w.byKind["start a hibernated cluster"]++
				}
			}
		case n < 26:
			if _, err := c.Clusters().Hibernate(f.ctx, clusters[rng.IntN(2)].ID, dlc.HibernateOptions{}); err == nil {
				w.byKind["hibernate (not forced)"]++
			}
		case n < 31:
			w.mu.Lock()
			w.refuseUntil = f.m.Clock.Now().Add(time.Duration(5+rng.IntN(25)) * time.Second)
			w.mu.Unlock()
			w.byKind["config and run writes refused"]++
		case n < 34:
			l.lag("run", "job")
			w.byKind["a replica's watch lags"]++
		case n < 38:
			l.release()
		case n < 40:
			i := rng.IntN(len(replicas) - 1) // the lagging one stays
			f.m.CloseClient(replicas[i])
			replicas[i] = f.m.NewClient()
			if i == 0 {
				f.c = replicas[0]
			}
			w.byKind["replica replaced"]++
		}
		f.m.Step(time.Duration(1+rng.IntN(10)) * time.Second)
	}
	outage.Lock()
	outage.until = time.Time{}
	outage.Unlock()
	l.release()
	w.mu.Lock()
	w.refuseUntil = time.Time{}
	w.mu.Unlock()
	f.m.Step(30 * time.Minute) // every run ends, every retry is made
	// Each tick of a config never suspended was started or counted missed.
	for _, cfg := range configs {
		if suspended[cfg.ID] {
			continue
		}
		got, err := f.c.Jobs().Get(f.ctx, cfg.ID)
		f.must(err)
		due := 0
		for from := cfg.CreatedAt; ; {
			next, err := got.Config.Schedule.NextTimes(from, 1)
			f.must(err)
			if len(next) == 0 || next[0].After(got.ScheduleStatus.LastTick) {
				break
			}
			due, from = due+1, next[0]
		}
		started := 0
		w.mu.Lock()
		for key := range w.ticks {
			if strings.HasPrefix(key, cfg.ID+"/") {
				started++
			}
		}
		w.mu.Unlock()
		if started+got.ScheduleStatus.Missed != due { // what to look at
			var keys []string
			w.mu.Lock()
			for key := range w.ticks {
				if strings.HasPrefix(key, cfg.ID+"/") {
					keys = append(keys, key[len(cfg.ID)+1:])
				}
			}
			w.mu.Unlock()
			sort.Strings(keys)
			t.Logf("started %v", keys)
			for _, e := range got.Events {
				t.Logf("event %s %s %s", e.Time.Format(time.RFC3339), e.Action, e.Message)
			}
		}
		if started+got.ScheduleStatus.Missed != due {
			t.Errorf("config %s (%s, %s): %d ticks due through %s, %d started and %d counted missed",
				cfg.ID, got.Config.Schedule.Cron, got.Config.Schedule.Policy(), due, got.ScheduleStatus.LastTick, started, got.ScheduleStatus.Missed)
		}
		w.byKind["ticks due"] += due
		w.byKind["ticks missed or skipped"] += got.ScheduleStatus.Missed
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range w.problems {
		t.Error(p)
	}
	retries := len(w.retries)
	t.Logf("%d simulated hours: %d runs made (%d of them retries), %d ended, %d invariant checks at store changes; load %v",
		lifecycleHours(t), len(w.creates), retries, len(w.ended), w.checks, w.byKind)
}

// errHeadSilentUnavailable is a Ray call that reaches no head.
func errHeadSilentUnavailable(call, id string) error {
	return fmt.Errorf("%s %s: %w", call, id, dlc.ErrUnavailable)
}
