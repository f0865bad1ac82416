package dlc_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/dlctest"
	"github.com/aidlc/dlc/job"
)

// A job Ray accepted and keeps pending (its driver never starts: a head
// without its own start limit, or one that answers "pending" for ever)
// fails the run at the run start timeout after Ray accepted it, saying
// so, and its cleanup stops the job on Ray. Before, the run stayed
// provisioning for as long as Ray said pending, with no reason and no
// end unless its config had a deadline. With the bound off (0) it waits.
func TestRunPendingOnRayFailsAtStartTimeout(t *testing.T) {
	for _, c := range []struct {
		name    string
		timeout time.Duration
		fails   bool
	}{
		{"bounded", 10 * time.Minute, true},
		{"unbounded", 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stopped []string
			f := newFixture(t, dlctest.MemoryOptions{
				Delays:  &memory.Delays{Submit: 1000 * time.Hour}, // the driver never starts
				Options: []dlc.Option{dlc.WithRunStartTimeout(c.timeout)},
				Ray: memory.RayHooks{Call: func(_ context.Context, call, id string) error {
					if call == memory.CallStopRun {
						stopped = append(stopped, id)
					}
					return nil
				}},
			})
			cl := f.runningCluster("c1")
			rec := f.job(dlc.NewJob("j").OnCluster(cl.ID))
			r := f.start(rec.ID)
			if r.State != job.Provisioning || !r.RaySubmitted || r.RayAcceptedAt.IsZero() {
				t.Fatalf("run after its submit: %s, accepted %v at %v; want provisioning, Ray's acceptance recorded", r.State, r.RaySubmitted, r.RayAcceptedAt)
			}
			accepted := r.RayAcceptedAt
			f.m.Settle(time.Minute, 180) // up to 3 hours
			r = f.run(r.ID)
			if !c.fails {
				if r.State != job.Provisioning {
					t.Fatalf("with no bound, the run is %s (%s), want provisioning still", r.State, r.Message)
				}
				return
			}
			if r.State != job.Failed || !strings.Contains(r.Message, "has not started its driver") {
				t.Fatalf("run %s: %q; want failed, saying Ray never started the driver", r.State, r.Message)
			}
			if took := r.FinishedAt.Sub(accepted); took < c.timeout || took > c.timeout+2*time.Minute {
				t.Fatalf("failed %v after Ray accepted it, want at the timeout (%v)", took, c.timeout)
			}
			if len(stopped) == 0 || stopped[len(stopped)-1] != r.ID {
				t.Fatalf("the job was not stopped on Ray: stops %v", stopped)
			}
		})
	}
}

// A negative run start timeout is refused.
func TestRunStartTimeoutNegative(t *testing.T) {
	if _, err := dlc.New(dlc.WithRunStartTimeout(-time.Second)); !errors.Is(err, dlc.ErrInvalid) {
		t.Fatalf("New with a negative run start timeout: %v, want ErrInvalid", err)
	}
}

// An ended run whose cleanup keeps failing (Ray refuses to stop its job)
// keeps retrying, there being nothing to fall back to, and its log says
// why: one entry, replaced at most once per longest backoff (30 s), not
// one per attempt. Its retry (L3) waits for the cleanup (two drivers are
// never run at once). Before, the run's log said nothing of it.
func TestRunCleanupRetryingSaysWhy(t *testing.T) {
	stopRefused := true
	f := newFixture(t, dlctest.MemoryOptions{Delays: &memory.Delays{Submit: 1000 * time.Hour},
		Options: []dlc.Option{dlc.WithRunStartTimeout(10 * time.Minute)},
		Ray: memory.RayHooks{Call: func(_ context.Context, call, id string) error {
			if call == memory.CallStopRun && stopRefused {
				return errors.New("ray: 500 internal error stopping the job")
			}
			return nil
		}}})
	cl := f.runningCluster("c1")
	rec := f.job(dlc.NewJob("j").OnCluster(cl.ID).Retries(1))
	r := f.start(rec.ID)
	f.m.Settle(time.Minute, 60)
	r = f.run(r.ID)
	if r.State != job.Failed || r.RayDone || r.NextAttempt != "" {
		t.Fatalf("run %s, Ray done %v, next attempt %q: want failed, its cleanup pending, no retry yet", r.State, r.RayDone, r.NextAttempt)
	}
	if n := entries(r.Events, "cleanup-retrying", "500 internal error stopping the job"); n != 1 {
		t.Fatalf("%d cleanup-retrying entries in the run's log, want 1:\n%+v", n, r.Events)
	}
	stopRefused = false // Ray stops the job again: the cleanup ends, the retry comes
	f.m.Settle(time.Minute, 60)
	if r = f.run(r.ID); !r.RayDone || r.NextAttempt == "" {
		t.Fatalf("once Ray stops the job: Ray done %v, next attempt %q", r.RayDone, r.NextAttempt)
	}
}
