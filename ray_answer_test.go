package dlc_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/dlctest"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/job"
)

// outage is a Ray that cannot be reached about runs (every status read and
// submit fails as a head that does not answer) while down is set.
type outage struct{ down atomic.Bool }

func (o *outage) call(_ context.Context, call, id string) error {
	if o.down.Load() && (call == memory.CallRunStatus || call == memory.CallSubmitRun) {
		return errs.Unavailable(call+" "+id, errHeadSilent)
	}
	return nil
}

var errHeadSilent = errors.New("the Ray head does not answer")

// Ray's answer decides a run's end (issue 39, cases 4 and 10): a Ray that
// cannot be reached is no word on the job. Each case on the fake clock.
func TestRayAnswerDecides(t *testing.T) {
	for _, tc := range []struct {
		name string
		// the job's run on Ray, its deadline (0: none) and its outage
		lasts, deadline    time.Duration
		fail               bool
		downAt, downFor    time.Duration
		unreachable        time.Duration // WithRayUnreachableTimeout (0: default)
		state              job.RunState
		final              bool
		message, notInMsg  string
		endedAfterDeadline bool
	}{
		// Case 10: a run whose head does not answer for a few seconds
		// (or minutes, within the bound) is not failed for it.
		{name: "4s outage as the run ends", lasts: time.Minute, downAt: 59 * time.Second, downFor: 4 * time.Second,
			state: job.Succeeded},
		{name: "9 min outage as the run ends", lasts: time.Minute, downAt: 59 * time.Second, downFor: 9 * time.Minute,
			state: job.Succeeded},
		{name: "outage past the bound", lasts: time.Hour, downAt: 10 * time.Second, downFor: 2 * time.Hour,
			state: job.Failed, message: "the job's status could not be read: Ray unreachable since"},
		{name: "outage past a short bound", lasts: time.Hour, downAt: 10 * time.Second, downFor: 2 * time.Hour,
			unreachable: time.Minute, state: job.Failed, message: "(more than 1m0s)"},
		{name: "outage across the submit", lasts: time.Minute, downAt: 0, downFor: 5 * time.Minute,
			state: job.Succeeded},
		// Case 4: a job that ended in the last poll before its deadline
		// keeps what Ray says of it.
		{name: "succeeded just before its deadline, Ray silent at it", lasts: 58 * time.Second, deadline: time.Minute,
			downAt: 55 * time.Second, downFor: 30 * time.Second, state: job.Succeeded},
		{name: "failed just before its deadline, Ray silent at it", lasts: 58 * time.Second, deadline: time.Minute, fail: true,
			downAt: 55 * time.Second, downFor: 30 * time.Second, state: job.Failed, message: "exit code 1", notInMsg: deadlineWord},
		{name: "still running at its deadline, Ray silent at it", lasts: time.Hour, deadline: time.Minute,
			downAt: 55 * time.Second, downFor: 30 * time.Second, state: job.Failed, final: true, message: deadlineWord, endedAfterDeadline: true},
		{name: "Ray silent from before its deadline past the bound", lasts: time.Hour, deadline: time.Minute,
			downAt: 55 * time.Second, downFor: time.Hour, state: job.Failed, final: true, message: deadlineWord, endedAfterDeadline: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &outage{}
			mo := dlctest.MemoryOptions{Ray: memory.RayHooks{Call: o.call, RunOutcome: func(*job.Run) memory.Outcome {
				return memory.Outcome{Duration: tc.lasts, Fail: tc.fail, Message: "exit code 1"}
			}}}
			if tc.unreachable > 0 {
				mo.Options = append(mo.Options, dlc.WithRayUnreachableTimeout(tc.unreachable))
			}
			f := newFixture(t, mo)
			cl := f.runningCluster("c1")
			b := dlc.NewJob("j").OnCluster(cl.ID)
			if tc.deadline > 0 {
				b = b.ActiveDeadline(tc.deadline)
			}
			rec := f.job(b)
			if tc.downAt == 0 {
				o.down.Store(true)
			}
			r := f.start(rec.ID)
			f.m.Step(tc.downAt)
			o.down.Store(true)
			f.m.Step(tc.downFor / 2)
			if mid := f.run(r.ID); mid.State.Terminal() && tc.downFor/2 < unreachableBound(tc.unreachable) {
				t.Fatalf("half-way through the outage: %s %q", mid.State, mid.Message)
			}
			f.m.Step(tc.downFor - tc.downFor/2)
			o.down.Store(false)
			f.m.Step(2 * time.Hour)
			f.settle()
			r = f.run(r.ID)
			if r.State != tc.state || r.Final != tc.final || !strings.Contains(r.Message, tc.message) ||
				(tc.notInMsg != "" && strings.Contains(r.Message, tc.notInMsg)) {
				t.Fatalf("%s final=%v %q; want %s final=%v with %q", r.State, r.Final, r.Message, tc.state, tc.final, tc.message)
			}
			if !r.RayUnreachableSince.IsZero() {
				t.Errorf("an ended run still says Ray is unreachable since %s", r.RayUnreachableSince)
			}
			if tc.state == job.Succeeded && r.FinishedAt.Sub(r.StartedAt) > tc.lasts+time.Second {
				t.Errorf("ended %s after it started, as Ray said it did after %s", r.FinishedAt.Sub(r.StartedAt), tc.lasts)
			}
			if dl, ok := r.Deadline(); ok && tc.endedAfterDeadline == r.FinishedAt.Before(dl) {
				t.Errorf("finished at %s, its deadline %s", r.FinishedAt, dl)
			}
			if tc.fail && !tc.final && r.NextAttempt == "" && r.Config.BackoffLimit > 0 {
				t.Errorf("a failure Ray reported before the deadline was not retried")
			}
		})
	}
}

const deadlineWord = "deadline exceeded"

// unreachableBound is the bound a client has with WithRayUnreachableTimeout(d).
func unreachableBound(d time.Duration) time.Duration {
	if d == 0 {
		return dlc.DefaultRayUnreachableTimeout
	}
	return d
}

// A step's failed status read is not a failed step: with WithRetries(1),
// a run whose head does not answer for far longer than the retries take
// keeps running, its message saying since when, and goes on when Ray
// answers; the outage and its end are in its events.
func TestRayUnreachableNotCountedAsFailure(t *testing.T) {
	o := &outage{}
	f := newFixture(t, dlctest.MemoryOptions{Options: []dlc.Option{dlc.WithRetries(1, time.Millisecond, time.Millisecond)},
		Ray: memory.RayHooks{Call: o.call, RunOutcome: func(*job.Run) memory.Outcome { return memory.Outcome{Duration: time.Minute} }}})
	cl := f.runningCluster("c1")
	rec := f.job(dlc.NewJob("j").OnCluster(cl.ID))
	r := f.start(rec.ID)
	f.m.Step(55 * time.Second)
	if r = f.run(r.ID); r.State != job.Running {
		t.Fatalf("before the outage: %s", r.State)
	}
	o.down.Store(true) // as the job ends on Ray
	f.m.Step(20 * time.Second)
	r = f.run(r.ID)
	if r.State != job.Running || !strings.HasPrefix(r.Message, "Ray unreachable since") || r.RayUnreachableSince.IsZero() {
		t.Fatalf("in the outage: %s %q", r.State, r.Message)
	}
	o.down.Store(false)
	f.m.Step(time.Minute)
	r = f.run(r.ID)
	if r.State != job.Succeeded || !r.RayUnreachableSince.IsZero() {
		t.Fatalf("after the outage: %s %q", r.State, r.Message)
	}
	var seen []string
	for _, e := range r.Events {
		if strings.HasPrefix(e.Action, "ray-") {
			seen = append(seen, e.Action)
		}
	}
	if strings.Join(seen, ",") != "ray-unreachable,ray-reachable" {
		t.Errorf("events %v", seen)
	}
}

// WithRayUnreachableTimeout refuses a bound that is not above 0.
func TestRayUnreachableTimeoutOption(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		if _, err := dlc.New(dlc.WithRayUnreachableTimeout(d)); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("%s: %v", d, err)
		}
	}
}
