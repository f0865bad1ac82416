package runner_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/internal/runner"
)

// script is a reconciler whose steps answer from a list, and which
// records the steps and give-ups it was asked.
type script struct {
	mu      sync.Mutex
	answers map[string][]answer // id → the answers of its next steps; the last one repeats
	steps   []string
	gaveUp  []string
	giveUp  error
	ctxs    []context.Context
}

type answer struct {
	after time.Duration
	err   error
	block bool // wait until the step's context is done
}

func (s *script) Reconcile(ctx context.Context, id string) (runner.Result, error) {
	s.mu.Lock()
	s.steps = append(s.steps, id)
	s.ctxs = append(s.ctxs, ctx)
	as := s.answers[id]
	a := answer{}
	if len(as) > 0 {
		a = as[0]
		if len(as) > 1 {
			s.answers[id] = as[1:]
		}
	}
	s.mu.Unlock()
	if a.block {
		<-ctx.Done()
		return runner.Result{}, ctx.Err()
	}
	return runner.Result{After: a.after}, a.err
}

func (s *script) GiveUp(_ context.Context, id, why string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gaveUp = append(s.gaveUp, id+": "+why)
	return s.giveUp
}

func (*script) LogKey() string { return "thing" }

func (s *script) taken() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.steps)
}

// counts is the runner's metrics.
type counts struct {
	mu              sync.Mutex
	retried, failed int
}

func (c *counts) Retried(string) { c.mu.Lock(); c.retried++; c.mu.Unlock() }
func (c *counts) Failed(string)  { c.mu.Lock(); c.failed++; c.mu.Unlock() }

// shared owns the keys in mine; it adopted those in adopted.
type shared struct {
	mu      sync.Mutex
	mine    map[string]bool
	adopted map[string]bool
	ended   []string
}

func (s *shared) Owner(key string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mine[key] {
		return "me", true
	}
	return "other", false
}

type adoptedKey struct{}

func (s *shared) Adopt(ctx context.Context, key, owner string) (context.Context, func(), bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.adopted[key] {
		return nil, nil, false
	}
	delete(s.adopted, key)
	return context.WithValue(ctx, adoptedKey{}, key), func() {
		s.mu.Lock()
		s.ended = append(s.ended, owner+" "+key)
		s.mu.Unlock()
	}, true
}

var errConflict = errors.New("conflict")

func newRunner(t *testing.T, rec *script, o runner.Options) (*runner.Runner, *backend.FakeClock, context.CancelFunc) {
	t.Helper()
	clk := backend.NewFakeClock(time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC))
	o.Clock = clk
	if o.StepTimeout == 0 {
		o.StepTimeout = time.Minute
	}
	if o.BaseDelay == 0 {
		o.BaseDelay, o.MaxDelay = time.Second, time.Minute
	}
	o.Log = logr.Discard()
	if o.Transient == nil {
		o.Transient = func(err error) bool { return errors.Is(err, errConflict) }
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := runner.New(ctx, o, map[string]runner.Reconciler{"thing": rec})
	t.Cleanup(func() { cancel(); r.Stop() })
	return r, clk, cancel
}

func TestRunner(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name    string
		retries int
		answers []answer
		giveUp  error
		// rounds: each runs what is queued, then advances the clock by a
		// minute (past any backoff here); what is queued then runs once more
		rounds     int
		steps      int
		gaveUp     int
		retried    int
		failed     int
		waitingEnd bool
	}{
		{name: "a step that settles is taken once", answers: []answer{{}}, rounds: 3, steps: 1},
		{name: "a step asks to be taken again after a while", answers: []answer{{after: 30 * time.Second}, {after: 30 * time.Second}, {}}, rounds: 4, steps: 3},
		{name: "a failing step is retried with backoff, then given up, then taken again", retries: 2,
			answers: []answer{{err: boom}, {err: boom}, {err: boom}, {}}, rounds: 6, steps: 4, gaveUp: 1, retried: 3, failed: 3},
		{name: "a give-up that keeps retrying does not stop the retries", retries: 1, giveUp: runner.ErrRetry,
			answers: []answer{{err: boom}}, rounds: 5, steps: 6, gaveUp: 5, retried: 6, failed: 6, waitingEnd: true},
		{name: "a conflict is retried and never given up", retries: 1,
			answers: []answer{{err: errConflict}}, rounds: 5, steps: 6, retried: 6, waitingEnd: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &script{answers: map[string][]answer{"a": tc.answers}, giveUp: tc.giveUp}
			m := &counts{}
			r, clk, _ := newRunner(t, rec, runner.Options{Retries: tc.retries, Metrics: m})
			r.Enqueue("thing/a")
			for range tc.rounds {
				r.RunQueued()
				clk.Advance(time.Minute)
			}
			r.RunQueued()
			if got := len(rec.taken()); got != tc.steps {
				t.Errorf("%d steps, want %d", got, tc.steps)
			}
			if len(rec.gaveUp) != tc.gaveUp {
				t.Errorf("gave up %d times (%v), want %d", len(rec.gaveUp), rec.gaveUp, tc.gaveUp)
			}
			if m.retried != tc.retried || m.failed != tc.failed {
				t.Errorf("retried %d, failed %d; want %d, %d", m.retried, m.failed, tc.retried, tc.failed)
			}
			if r.Waiting("thing/a") != tc.waitingEnd {
				t.Errorf("Waiting = %v at the end, want %v", r.Waiting("thing/a"), tc.waitingEnd)
			}
		})
	}
}

// The backoff of a failed key doubles, on the runner's clock.
func TestRunnerBackoff(t *testing.T) {
	rec := &script{answers: map[string][]answer{"a": {{err: errors.New("boom")}}}}
	r, clk, _ := newRunner(t, rec, runner.Options{Retries: 100})
	r.Enqueue("thing/a")
	r.RunQueued()
	for i, d := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second} {
		clk.Advance(d - time.Millisecond)
		if n := r.RunQueued(); n != 0 {
			t.Fatalf("retry %d: taken %d steps before its backoff of %s", i+1, n, d)
		}
		clk.Advance(time.Millisecond)
		if n := r.RunQueued(); n != 1 {
			t.Fatalf("retry %d: taken %d steps at its backoff of %s, want 1", i+1, n, d)
		}
	}
}

// Admission keys have a lane of their own, taken first.
func TestRunnerLanes(t *testing.T) {
	rec := &script{answers: map[string][]answer{}}
	r, _, _ := newRunner(t, rec, runner.Options{Admission: func(key string) bool { return key == "thing/admit" }})
	for _, id := range []string{"b", "c", "admit"} {
		r.Enqueue("thing/" + id)
	}
	r.RunQueued()
	if got := rec.taken(); !slices.Equal(got, []string{"admit", "b", "c"}) {
		t.Errorf("steps in order %v, want the admission lane's first", got)
	}
	if !r.Handles("thing") || r.Handles("other") {
		t.Error("Handles does not say which kinds have a reconciler")
	}
	if runner.AdmitWorkers(0) != 0 || runner.AdmitWorkers(4) != 2 || runner.AdmitWorkers(16) != 4 {
		t.Error("AdmitWorkers is not a quarter of the workers, at least two, none with none")
	}
}

// A key another member owns is queued only by Add, and taken a step only
// when the sharing adopted it; what follows an adopted step is its
// owner's.
func TestRunnerSharing(t *testing.T) {
	rec := &script{answers: map[string][]answer{"theirs": {{after: time.Minute}}, "failing": {{err: errors.New("boom")}}}}
	sh := &shared{mine: map[string]bool{"thing/mine": true}, adopted: map[string]bool{"thing/theirs": true, "thing/failing": true}}
	r, _, _ := newRunner(t, rec, runner.Options{Retries: 5, Sharing: sh})
	r.Enqueue("thing/theirs") // not this client's: not queued
	r.Enqueue("thing/mine")
	r.Add("thing/unadopted") // queued, but not adopted: dropped
	r.RunQueued()
	if got := rec.taken(); !slices.Equal(got, []string{"mine"}) {
		t.Fatalf("steps %v, want only this client's key", got)
	}
	r.Add("thing/theirs")
	r.Add("thing/failing")
	r.RunQueued()
	if got := rec.taken(); !slices.Equal(got, []string{"mine", "theirs", "failing"}) {
		t.Fatalf("steps %v, want the adopted keys taken once each", got)
	}
	for _, ctx := range rec.ctxs[1:] {
		if ctx.Value(adoptedKey{}) == nil {
			t.Error("an adopted step did not run in the context Adopt gave")
		}
	}
	if !slices.Equal(sh.ended, []string{"other thing/theirs", "other thing/failing"}) {
		t.Errorf("adopted steps ended %v", sh.ended)
	}
	if r.Waiting("thing/theirs") || r.Waiting("thing/failing") {
		t.Error("an adopted key was left a timer: what follows it is its owner's")
	}
	r.ForgetFailures(func(string) bool { return false })
}

// A step that runs past its deadline is a failed step, and its worker
// goes on.
func TestRunnerStepTimeout(t *testing.T) {
	rec := &script{answers: map[string][]answer{"slow": {{block: true}, {}}}}
	clk := backend.NewFakeClock(time.Now())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var failed []error
	var mu sync.Mutex
	r := runner.New(ctx, runner.Options{Clock: clk, StepTimeout: 10 * time.Millisecond, Retries: 5, BaseDelay: time.Second, MaxDelay: time.Second,
		Log: logr.New(sink{func(err error) { mu.Lock(); failed = append(failed, err); mu.Unlock() }})}, map[string]runner.Reconciler{"thing": rec})
	defer r.Stop()
	r.Enqueue("thing/slow")
	r.RunQueued()
	mu.Lock()
	defer mu.Unlock()
	if len(failed) != 1 || !errors.Is(failed[0], errs.ErrUnavailable) {
		t.Fatalf("logged %v, want the step's timeout as unavailable", failed)
	}
	if !r.Waiting("thing/slow") {
		t.Error("a step that timed out is not queued again after its backoff")
	}
}

// Once the runner's context is done nothing is queued; Stop stops the
// timers and returns.
func TestRunnerStop(t *testing.T) {
	rec := &script{answers: map[string][]answer{"a": {{after: time.Hour}}}}
	r, clk, cancel := newRunner(t, rec, runner.Options{Workers: 2})
	r.Start()
	r.Enqueue("thing/a")
	for deadline := time.Now().Add(time.Minute); !r.Waiting("thing/a"); {
		if time.Now().After(deadline) {
			t.Fatal("the workers did not take the key's step within a minute")
		}
		time.Sleep(time.Millisecond) // polls a condition: the worker's step has asked for its timer
	}
	cancel()
	r.Stop()
	if clk.Pending() != 0 {
		t.Errorf("%d timers left after Stop", clk.Pending())
	}
	r.Enqueue("thing/a")
	clk.Advance(2 * time.Hour)
	if n := r.RunQueued(); n != 0 || len(rec.taken()) != 1 {
		t.Errorf("after Stop: %d steps run, %d in all; want none more", n, len(rec.taken()))
	}
}

// After a give-up the key starts afresh: its failures are counted from
// none and its backoff from the base again; ForgetFailures does the same
// for the keys it does not keep.
func TestRunnerFailuresStartAfresh(t *testing.T) {
	boom := errors.New("boom")
	// steps is how many steps RunQueued ran, after the clock moved by d.
	steps := func(r *runner.Runner, clk *backend.FakeClock, d time.Duration) int {
		clk.Advance(d)
		return r.RunQueued()
	}
	t.Run("give-up", func(t *testing.T) {
		rec := &script{answers: map[string][]answer{"a": {{err: boom}}}}
		r, clk, _ := newRunner(t, rec, runner.Options{Retries: 2})
		r.Enqueue("thing/a")
		r.RunQueued()                // 1 failure, 1s
		steps(r, clk, time.Second)   // 2, 2s
		steps(r, clk, 2*time.Second) // 3: given up, queued at once, 4 fails: 1 failure again
		if len(rec.gaveUp) != 1 || len(rec.taken()) != 4 {
			t.Fatalf("gave up %d times in %d steps, want once in 4", len(rec.gaveUp), len(rec.taken()))
		}
		if n := steps(r, clk, time.Second-time.Millisecond); n != 0 {
			t.Fatal("the backoff after a give-up did not start from the base again")
		}
		if n := steps(r, clk, time.Millisecond); n != 1 {
			t.Fatalf("%d steps at the base backoff after a give-up, want 1", n)
		}
		if len(rec.gaveUp) != 1 {
			t.Errorf("gave up again after %d failures since the last give-up; want it after 3", 2)
		}
	})
	t.Run("forget", func(t *testing.T) {
		rec := &script{answers: map[string][]answer{"a": {{err: boom}}}}
		r, clk, _ := newRunner(t, rec, runner.Options{Retries: 3})
		r.Enqueue("thing/a")
		r.RunQueued()                // 1 failure, 1s
		steps(r, clk, time.Second)   // 2, 2s
		steps(r, clk, 2*time.Second) // 3, 4s
		r.ForgetFailures(func(key string) bool { return key != "thing/a" })
		if n := steps(r, clk, 4*time.Second); n != 1 || len(rec.gaveUp) != 0 {
			t.Fatalf("%d steps, %d give-ups after the failures were forgotten; want a step and no give-up", n, len(rec.gaveUp))
		}
		if n := steps(r, clk, time.Second); n != 1 {
			t.Errorf("%d steps at the base backoff after ForgetFailures, want 1", n)
		}
	})
}

// A key's timer queues it only if this client still owns it then.
func TestRunnerTimerAsksTheOwner(t *testing.T) {
	rec := &script{answers: map[string][]answer{"a": {{after: time.Minute}}}}
	sh := &shared{mine: map[string]bool{"thing/a": true}}
	r, clk, _ := newRunner(t, rec, runner.Options{Sharing: sh})
	r.Enqueue("thing/a")
	r.RunQueued()
	sh.mu.Lock()
	delete(sh.mine, "thing/a") // another member's now
	sh.mu.Unlock()
	clk.Advance(time.Minute)
	if n := r.RunQueued(); n != 0 {
		t.Errorf("the timer of a key this client no longer owns queued it (%d steps)", n)
	}
}

// sink is a logr sink that passes each error logged to f.
type sink struct{ f func(error) }

func (sink) Init(logr.RuntimeInfo)                 {}
func (sink) Enabled(int) bool                      { return true }
func (sink) Info(int, string, ...any)              {}
func (s sink) Error(err error, _ string, _ ...any) { s.f(err) }
func (s sink) WithValues(...any) logr.LogSink      { return s }
func (s sink) WithName(string) logr.LogSink        { return s }

// TestRunnerWorkers: the workers a readiness probe counts — none before
// Start, all of both lanes after it, none once stopped.
func TestRunnerWorkers(t *testing.T) {
	for _, n := range []int{0, 1, 8} {
		r, _, cancel := newRunner(t, &script{}, runner.Options{Workers: n})
		want := n + runner.AdmitWorkers(n)
		if live, w := r.Workers(); live != 0 || w != want {
			t.Errorf("workers %d, before Start: %d of %d, want 0 of %d", n, live, w, want)
		}
		r.Start()
		if live, w := r.Workers(); live != want || w != want {
			t.Errorf("workers %d, started: %d of %d, want %d of %d", n, live, w, want, want)
		}
		cancel()
		r.Stop()
		if live, _ := r.Workers(); live != 0 {
			t.Errorf("workers %d, stopped: %d still take keys", n, live)
		}
	}
}
