package dlc_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/dlctest"
	"github.com/aidlc/dlc/errs"
)

// A step that keeps failing is retried with a backoff that grows to the
// client's longest (30 s), whatever giving up on it did: nothing (a
// cluster abnormal already), a note on a config whose schedule fails, or
// a deleting cluster's reason, however its words change from one failure
// to the next. Each is counted over 10 minutes of the fake clock; a
// backoff that starts again from 10 ms after every 9 failures makes
// about 2,300 tries in that time, one that grows about 30.
func TestFailingStepsBackOff(t *testing.T) {
	const window = 10 * time.Minute
	// breaker ends a loop that would never let the fake clock move: past
	// it, the failures stop, and the count says what happened.
	const breaker = 20000
	for _, tc := range []struct {
		name string
		// failing makes the failures begin (what fails is in hooks);
		// it returns what to count.
		failing func(f *fixture, fail *atomic.Bool, n *failures) *atomic.Int64
		max     int64
	}{
		{"abnormal cluster, Ray's status failing", func(f *fixture, fail *atomic.Bool, n *failures) *atomic.Int64 {
			cl, err := f.c.Clusters().Create(f.ctx, f.spec("c1", 1, 1))
			f.must(err)
			f.settle()
			fail.Store(true)
			_, err = f.c.Clusters().Start(f.ctx, cl.ID)
			f.must(err)
			f.m.Step(5 * time.Minute)
			if got, err := f.c.Clusters().Get(f.ctx, cl.ID); err != nil || got.State != cluster.Abnormal {
				f.t.Fatalf("the cluster whose status fails: %v, %v, want abnormal", got.State, err)
			}
			return &n.status
		}, 60},
		{"schedule whose runs cannot be made", func(f *fixture, fail *atomic.Bool, n *failures) *atomic.Int64 {
			cl := f.runningCluster("c1")
			f.job(dlc.NewJob("minutely").OnCluster(cl.ID).Schedule("* * * * *"))
			f.m.Reconcile()
			fail.Store(true)
			f.m.Step(5 * time.Minute)
			return &n.creates
		}, 60},
		{"deleting cluster, Ray's delete failing in other words each time", func(f *fixture, fail *atomic.Bool, n *failures) *atomic.Int64 {
			cl, err := f.c.Clusters().Create(f.ctx, f.spec("c1", 1, 1))
			f.must(err)
			f.settle()
			fail.Store(true)
			f.must(f.c.Clusters().Delete(f.ctx, cl.ID, dlc.DeleteOptions{}))
			f.m.Step(5 * time.Minute)
			return &n.deletes
		}, 60},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n failures
			var fail atomic.Bool
			var writes atomic.Int64 // writes of the failing object's kind
			refused := func(what string, n int64) error {
				if n > breaker {
					fail.Store(false)
				}
				// Its words change each time, as a cause quoting an
				// ephemeral port or a request id does.
				return errs.Unavailable(what, fmt.Errorf("read tcp 10.0.0.5:%d->10.0.0.1:443: connection reset by peer", 30000+n%30000))
			}
			f := newFixture(t, dlctest.MemoryOptions{
				Ray: memory.RayHooks{Call: func(ctx context.Context, call, id string) error {
					if !fail.Load() {
						return nil
					}
					switch call {
					case memory.CallClusterStatus:
						return refused("ray "+call, n.status.Add(1))
					case memory.CallDeleteCluster:
						return refused("ray "+call, n.deletes.Add(1))
					}
					return nil
				}},
				Store: memory.StoreHooks{Write: func(ctx context.Context, w memory.Write, next func(context.Context) (string, error)) (string, error) {
					if fail.Load() && w.Doc.Kind == "run" && w.Op == memory.OpCreate {
						return "", refused("store create run", n.creates.Add(1))
					}
					if fail.Load() && (w.Doc.Kind == "cluster" || w.Doc.Kind == "job") {
						writes.Add(1)
					}
					return next(ctx)
				}}})
			counted := tc.failing(f, &fail, &n)
			if !fail.Load() {
				t.Fatalf("the failures ended after %d tries: a loop", counted.Load())
			}
			from, fromWrites := counted.Load(), writes.Load()
			f.m.Step(window)
			tries, w := counted.Load()-from, writes.Load()-fromWrites
			t.Logf("in %s: %d failing tries, %d writes", window, tries, w)
			if tries > tc.max {
				t.Errorf("%d failing tries in %s, want at most %d: the backoff does not grow", tries, window, tc.max)
			}
			if w > int64(window/(30*time.Second))+1 {
				t.Errorf("%d writes in %s, want at most one per 30 s", w, window)
			}
		})
	}
}

// failures counts what TestFailingStepsBackOff's hooks refused: Ray's
// status and delete calls, and the store's creates of runs.
type failures struct{ status, creates, deletes atomic.Int64 }

// A delete that Ray accepts and never finishes leaves the cluster
// deleting (there is nothing to fall back to), but not without a reason:
// after a step's time it says that Ray still has it, once.
func TestDeleteRayNeverFinishesSaysWhy(t *testing.T) {
	f := newFixture(t, dlctest.MemoryOptions{Delays: &memory.Delays{Delete: 1000 * time.Hour}})
	cl := f.runningCluster("c1")
	f.must(f.c.Clusters().Delete(f.ctx, cl.ID, dlc.DeleteOptions{}))
	f.settle()
	for range 6 {
		f.m.Step(30 * time.Minute)
	}
	got, err := f.c.Clusters().Get(f.ctx, cl.ID)
	f.must(err)
	if got.State != cluster.Deleting || !strings.Contains(got.Reason, "Ray has not removed it") {
		t.Fatalf("a cluster whose delete Ray never finishes, 3 hours on: %s, reason %q", got.State, got.Reason)
	}
	if said := entries(got.Events, "delete-retrying", ""); said != 1 {
		t.Errorf("its log says %d times that Ray still has it, want once", said)
	}
}
