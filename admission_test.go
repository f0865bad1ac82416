package dlc_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
)

// Admission has a lane of its own: with the one worker of clusters and
// runs held by a step that hangs (a Ray call that does not answer), an
// on-demand run is still admitted into its resource group, at once, not
// after the step's deadline.
func TestAdmissionNotBehindOtherSteps(t *testing.T) {
	var (
		mu      sync.Mutex
		hang    = true
		entered = make(chan struct{})
		release = make(chan struct{})
	)
	hooks := memory.RayHooks{Call: func(ctx context.Context, call, id string) error {
		if call != memory.CallApplyCluster {
			return nil
		}
		mu.Lock()
		h := hang
		hang = false
		mu.Unlock()
		if !h {
			return nil
		}
		close(entered)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return ctx.Err()
	}}
	rc := newRealClient(t, hooks, dlc.WithWorkers(1))
	defer close(release)
	spec, err := dlc.NewCluster("held").Groups(rc.grp).Resources("pkg-1", "rg-1").Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c16g").WorkerGroup("cpu", "cu.4c8g", 1, 1).Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rc.c.Clusters().Create(rc.ctx, spec); err != nil {
		t.Fatal(err)
	}
	<-entered // the one worker is in the cluster's step, which hangs
	cfg, err := dlc.NewJob("od").OnDemand("pkg-1", "rg-1").Priority(5).Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1).
		COSPackage("cos://jobs-1250000000/train.zip").Entrypoint("python train.py").Build()
	if err != nil {
		t.Fatal(err)
	}
	rec, err := rc.c.Jobs().Create(rc.ctx, cfg, dlc.SaveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := rc.c.Runs().Create(rc.ctx, rec.ID, dlc.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rc.until("run "+r.ID+" admitted", func() (bool, string) {
		u, err := rc.c.ResourceGroups().Get(rc.ctx, "rg-1")
		return err == nil && !u.Reserved.IsZero(), fmt.Sprint(u.Reserved, err)
	})
}

// TestAdmissionPastPendingRoom: more on-demand runs fit a resource group
// than an account keeps reservation changes pending (quota.MaxPending):
// every one is admitted, the pending ones settled out of the account to
// make room, and none is told it waits for quota. An admission pass used
// to admit all that fit, fail at the first hold past the bound, and write
// nothing, the holds settled meanwhile included, so that no pass
// succeeded again: the runs stayed queued for ever.
func TestAdmissionPastPendingRoom(t *testing.T) {
	const runs = quota.MaxPending + 200
	b, ids := queuedOnDemand(t, runs, memory.StoreHooks{})
	ctx := dlc.WithUser(t.Context(), "alice")
	c, err := dlc.New(dlc.WithBackend(b))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	want := quota.Resources{MilliCPU: runs * 8000, Memory: runs * 16 * quota.GiB} // a cu.4c8g head and worker each
	settleWithin(t, 2*time.Minute, "every run admitted", func() (bool, string) {
		u, err := c.ResourceGroups().Get(ctx, "rg-big")
		return err == nil && u.Reserved == want, fmt.Sprintf("reserved %v of %v (%v)", u.Reserved, want, err)
	})
	for _, id := range ids {
		r, err := c.Runs().Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.WaitReason == job.InsufficientQuota {
			t.Fatalf("run %s was told it waits for quota (%s), with room for all", id, r.Message)
		}
	}
}

// A resource group's pass tells the runs it cannot admit that they wait
// for quota (J18), a bounded number at a time (a write each): room made
// while a long backlog is being told is used by the group's next pass,
// not once every run of the backlog has been written to. A pass used to
// tell them all, one write after another, while the pass that would use
// the room waited: 300 queued runs held a capacity raise for seconds on
// the API server.
func TestAdmissionNotBehindTellingABacklog(t *testing.T) {
	const runs = 300
	var (
		mu      sync.Mutex
		told    int
		once    sync.Once
		telling = make(chan struct{})
		gate    = make(chan struct{})
	)
	b, _ := queuedOnDemand(t, runs, memory.StoreHooks{
		Write: func(ctx context.Context, w memory.Write, next func(context.Context) (string, error)) (string, error) {
			if w.Doc.Kind != "run" || w.Doc.Labels["state"] != string(job.Waiting) {
				return next(ctx)
			}
			mu.Lock()
			told++
			mu.Unlock()
			once.Do(func() { close(telling) })
			select {
			case <-gate:
			case <-ctx.Done():
				return "", ctx.Err()
			}
			return next(ctx)
		}})
	ctx := dlc.WithUser(t.Context(), "alice")
	owner, c := withoutRoom(t, b)
	select {
	case <-telling: // the first pass tells the backlog it waits, held here
	case <-time.After(2 * time.Minute):
		t.Fatal("no run was told it waits for quota after 2 minutes")
	}
	if _, err := owner.ResourceGroups().Register(ctx, quota.Group{ID: "rg-big", Package: "pkg-1",
		Capacity: quota.Resources{MilliCPU: 1 << 40, Memory: 1 << 50}}); err != nil {
		t.Fatal(err)
	}
	close(gate)
	want := quota.Resources{MilliCPU: runs * 8000, Memory: runs * 16 * quota.GiB} // a cu.4c8g head and worker each
	settleWithin(t, 2*time.Minute, "every run admitted", func() (bool, string) {
		u, err := c.ResourceGroups().Get(ctx, "rg-big")
		return err == nil && u.Reserved == want, fmt.Sprintf("reserved %v of %v (%v)", u.Reserved, want, err)
	})
	mu.Lock()
	n := told
	mu.Unlock()
	if n > 64 {
		t.Fatalf("%d of the %d runs were told they wait for quota before the room made was used; want one pass's, at most 64", n, runs)
	}
}

// Every run a resource group cannot admit is told so (J18), however many
// queue at once: those one pass leaves untold, the next tells.
func TestEveryRunOfABacklogToldItWaits(t *testing.T) {
	const runs = 150
	b, ids := queuedOnDemand(t, runs, memory.StoreHooks{})
	_, c := withoutRoom(t, b)
	allToldTheyWait(t, c, ids)
}

// A backlog whose runs cannot be told that they wait (the store refuses
// the writes) is retried after a backoff, not in a loop: the pass that
// leaves runs for the next one queues it only once its own writes are
// made. Once the store takes the writes again, every run is told.
func TestUntoldBacklogBacksOff(t *testing.T) {
	const runs = 200
	var refuse atomic.Bool
	var tries atomic.Int64
	b, ids := queuedOnDemand(t, runs, memory.StoreHooks{
		Write: func(ctx context.Context, w memory.Write, next func(context.Context) (string, error)) (string, error) {
			if refuse.Load() && w.Doc.Kind == "run" && w.Op == memory.OpUpdate {
				tries.Add(1)
				return "", errs.Unavailable("store update run", fmt.Errorf("refused by the test"))
			}
			return next(ctx)
		}})
	refuse.Store(true)
	_, c := withoutRoom(t, b)
	settleWithin(t, 2*time.Minute, "a pass that tries to tell the runs", func() (bool, string) {
		return tries.Load() > 0, "no write of a run tried"
	})
	// Backing off from 10 ms (the default), the steps of the group in the
	// next 2 s are about ten, each trying at most 64 writes: a loop makes
	// thousands a second. A busy machine only makes fewer.
	from := tries.Load()
	time.Sleep(2 * time.Second)
	n := tries.Load() - from
	if n > 1500 {
		t.Fatalf("%d refused writes of runs in 2 s: the group's pass is not backing off", n)
	}
	t.Logf("%d refused writes of runs in 2 s", n)
	refuse.Store(false)
	allToldTheyWait(t, c, ids)
}

// allToldTheyWait waits until every run of ids has been told that it
// waits for quota (J18).
func allToldTheyWait(t *testing.T, c *dlc.Client, ids []string) {
	t.Helper()
	ctx := dlc.WithUser(t.Context(), "alice")
	settleWithin(t, 2*time.Minute, "every run told it waits for quota", func() (bool, string) {
		for i, id := range ids {
			r, err := c.Runs().Get(ctx, id)
			if err != nil || r.State != job.Waiting || r.WaitReason != job.InsufficientQuota {
				return false, fmt.Sprintf("%d of %d told; run %s: %v", i, len(ids), id, err)
			}
		}
		return true, ""
	})
}

// withoutRoom takes away the room of the resource group queuedOnDemand
// filled, through owner, a client without workers (it admits nothing),
// and then starts c, a client that admits.
func withoutRoom(t *testing.T, b *memory.Backend) (owner, c *dlc.Client) {
	t.Helper()
	owner, err := dlc.New(dlc.WithBackend(b), dlc.WithWorkers(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = owner.Close() })
	if _, err := owner.ResourceGroups().Register(dlc.WithUser(t.Context(), "alice"), quota.Group{ID: "rg-big", Package: "pkg-1"}); err != nil {
		t.Fatal(err)
	}
	if c, err = dlc.New(dlc.WithBackend(b)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return owner, c
}

// While a resource group keeps as many pending reservation changes as it
// may and none can be settled (the store refuses their documents), a run
// that fits is not admitted; what the run is told when asked why it waits
// says so, rather than only that it fits.
func TestPendingSaysAdmissionWaitsForSettling(t *testing.T) {
	const runs = quota.MaxPending + 10
	b, _ := queuedOnDemand(t, runs, memory.StoreHooks{
		Write: func(ctx context.Context, w memory.Write, next func(context.Context) (string, error)) (string, error) {
			if w.Doc.Kind == "hold" && w.Op == memory.OpCreate {
				return "", errs.Unavailable("store create hold", fmt.Errorf("refused by the test"))
			}
			return next(ctx)
		}})
	ctx := dlc.WithUser(t.Context(), "alice")

	c, err := dlc.New(dlc.WithBackend(b))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	full := quota.Resources{MilliCPU: quota.MaxPending * 8000, Memory: quota.MaxPending * 16 * quota.GiB}
	settleWithin(t, 2*time.Minute, "the pending reservation changes at their bound", func() (bool, string) {
		u, err := c.ResourceGroups().Get(ctx, "rg-big")
		return err == nil && u.Reserved == full, fmt.Sprintf("reserved %v of %v (%v)", u.Reserved, full, err)
	})
	waiting, err := c.ResourceGroups().Pending(ctx, "rg-big")
	if err != nil {
		t.Fatal(err)
	}
	if len(waiting) != runs-quota.MaxPending {
		t.Fatalf("%d runs wait, want %d", len(waiting), runs-quota.MaxPending)
	}
	for _, p := range waiting {
		if !strings.Contains(p.Lacks, "pending reservation changes are settled") {
			t.Errorf("run %s at %d: %q, want it to say that admission waits for the pending changes to be settled", p.RunID, p.Position, p.Lacks)
		}
	}
	one, err := c.Runs().Pending(ctx, waiting[0].RunID)
	if err != nil || one.Lacks != waiting[0].Lacks {
		t.Errorf("the run's own Pending: %+v, %v; want the queue's entry %q", one, err, waiting[0].Lacks)
	}
}

// queuedOnDemand returns a memory backend (Ray never done, the store's
// hooks h) holding resource group rg-big, of all but unbounded capacity,
// and n queued on-demand runs into it, with their ids. The runs are
// stored by a client that admits nothing, so that the queue is that long
// when the admitting client first looks.
func queuedOnDemand(t *testing.T, n int, h memory.StoreHooks) (*memory.Backend, []string) {
	t.Helper()
	never := memory.Delays{Create: time.Hour, Start: time.Hour, Hibernate: time.Hour, Delete: time.Hour,
		Submit: time.Hour, Run: time.Hour}
	b := memory.New(memory.Options{Delays: &never, Store: h})
	ctx := dlc.WithUser(t.Context(), "alice")
	seed, err := dlc.New(dlc.WithBackend(b), dlc.WithWorkers(0))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = seed.Close() }()
	if _, err := seed.ResourceGroups().Register(ctx, quota.Group{ID: "rg-big", Package: "pkg-1",
		Capacity: quota.Resources{MilliCPU: 1 << 40, Memory: 1 << 50}}); err != nil {
		t.Fatal(err)
	}
	cfg, err := dlc.NewJob("many").OnDemand("pkg-1", "rg-big").Priority(5).Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1).
		COSPackage("cos://jobs-1250000000/train.zip").Entrypoint("python train.py").Build()
	if err != nil {
		t.Fatal(err)
	}
	rec, err := seed.Jobs().Create(ctx, cfg, dlc.SaveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, n)
	for i := range ids {
		r, err := seed.Runs().Create(ctx, rec.ID, dlc.RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = r.ID
	}
	return b, ids
}
