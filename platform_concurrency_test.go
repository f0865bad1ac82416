package dlc_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/dlctest"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/job"
)

// Many goroutines create, start, hibernate, run and delete at once, on
// the real clock, while Ray's delays are short. Afterwards: quota within
// bounds, every run in a state it can explain, and no lost update.
func TestConcurrentOperations(t *testing.T) {
	d := memory.Delays{Create: time.Millisecond, Start: 2 * time.Millisecond, Hibernate: time.Millisecond,
		Delete: time.Millisecond, Submit: time.Millisecond, Run: 3 * time.Millisecond}
	be := memory.New(memory.Options{Delays: &d})
	c := dlc.New(dlc.WithBackend(be))
	f := &fixture{t: t, c: c, ctx: dlc.WithUser(context.Background(), "load")}
	f.must(c.RegisterResourceGroup(f.ctx, quotaGroup("rg-1", 64)))
	g, err := c.CreateGroup(f.ctx, "g")
	f.must(err)
	f.grp = g.ID
	groupJob := f.job(dlc.NewJob("group-job").OnGroup(g.ID))
	odCfg, err := dlc.NewJob("od").OnDemand("pkg-1", "rg-1").Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c8g").WorkerGroup("w", "cu.4c8g", 1, 2).
		COSPackage("cos://jobs-1250000000/j.zip").Entrypoint("python a.py").Build()
	f.must(err)
	odJob, err := c.SaveJob(f.ctx, odCfg)
	f.must(err)

	const workers = 8
	var wg sync.WaitGroup
	var ops, refused atomic.Int64
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 15 {
				ops.Add(1)
				cl, err := c.CreateCluster(f.ctx, f.spec(fmt.Sprintf("w%d_%d", w, i), 1, 3))
				if err != nil {
					t.Errorf("create: %v", err)
					return
				}
				_, _ = c.Run(f.ctx, groupJob.ID)
				_, _ = c.Run(f.ctx, odJob.ID)
				deadline := time.Now().Add(2 * time.Second)
				for time.Now().Before(deadline) {
					_, err := c.StartCluster(f.ctx, cl.ID)
					if err == nil || errors.Is(err, errs.ErrQuota) {
						break
					}
					time.Sleep(time.Millisecond)
				}
				_, _ = c.Autoscale(f.ctx, cl.ID, "cpu", 3)
				time.Sleep(3 * time.Millisecond)
				if i%3 == 0 {
					if _, err := c.HibernateCluster(f.ctx, cl.ID, dlc.Force()); err != nil {
						refused.Add(1)
					}
				}
				for time.Now().Before(deadline) {
					err := c.DeleteCluster(f.ctx, cl.ID, dlc.Force())
					if err == nil || errors.Is(err, errs.ErrNotFound) {
						break
					}
					if !errors.Is(err, errs.ErrState) {
						t.Errorf("delete: %v", err)
						return
					}
					time.Sleep(time.Millisecond)
				}
			}
		}()
	}
	// A checker reads the invariants while the load runs.
	stop := make(chan struct{})
	var checks sync.WaitGroup
	checks.Add(1)
	go func() {
		defer checks.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := c.CheckQuota(); err != nil {
				t.Errorf("during the load: %v", err)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	wg.Wait()
	close(stop)
	checks.Wait()

	// Let what is in flight finish, then stop what still waits.
	waitFor(t, 5*time.Second, func() bool {
		cls, _ := c.ListClusters(f.ctx)
		for _, cl := range cls {
			if cl.State.Transitional() {
				return false
			}
		}
		return true
	})
	runs, err := c.ListRuns(f.ctx, "")
	f.must(err)
	for _, r := range runs {
		switch {
		case r.State.Terminal():
			if r.State != job.Succeeded && r.Message == "" {
				t.Errorf("run %s ended %s without saying why", r.ID, r.State)
			}
		case r.State == job.Waiting:
			if r.WaitReason == "" {
				t.Errorf("run %s waits without a reason", r.ID)
			}
		case r.State == job.Queued:
			t.Errorf("run %s still queued after dispatch", r.ID)
		}
	}
	if err := c.CheckQuota(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d cluster lifecycles, %d runs, %d hibernates refused", ops.Load(), len(runs), refused.Load())

	// No lost update: two writers of the same version, one wins.
	cl, err := c.CreateCluster(f.ctx, f.spec("contended", 1, 1))
	f.must(err)
	waitFor(t, 2*time.Second, func() bool { got, _ := c.GetCluster(f.ctx, cl.ID); return got.State == cluster.Created })
	read, _ := c.GetCluster(f.ctx, cl.ID)
	var wins, conflicts atomic.Int64
	var edits sync.WaitGroup
	for i := range 10 {
		edits.Add(1)
		go func() {
			defer edits.Done()
			mine := read.DeepCopy()
			mine.Spec.Tags = map[string]string{"writer": fmt.Sprint(i)}
			_, err := c.EditCluster(f.ctx, mine)
			switch {
			case err == nil:
				wins.Add(1)
			case errors.Is(err, dlc.ErrConflict):
				conflicts.Add(1)
			default:
				t.Errorf("edit: %v", err)
			}
		}()
	}
	edits.Wait()
	if wins.Load() != 1 || conflicts.Load() != 9 {
		t.Fatalf("concurrent edits of one version: %d won, %d conflicts", wins.Load(), conflicts.Load())
	}
}

// A store hook makes the second update conflict, as controller-runtime's
// interceptors would; the operation reports it and changes nothing.
func TestStoreHookConflict(t *testing.T) {
	var puts atomic.Int64
	f := newFixture(t, dlctest.MemoryOptions{Store: memory.StoreHooks{
		Put: func(ctx context.Context, d backend.Doc, next func(context.Context, backend.Doc) (int64, error)) (int64, error) {
			if d.Kind == "cluster" && d.Version > 0 && puts.Add(1) == 2 {
				return 0, errs.Conflict(d.Kind, d.ID, "injected")
			}
			return next(ctx, d)
		}}})
	cl, err := f.c.CreateCluster(f.ctx, f.spec("hooked", 1, 1))
	f.must(err)
	f.settle() // first update: creating → created
	_, err = f.c.StartCluster(f.ctx, cl.ID)
	if !errors.Is(err, dlc.ErrConflict) {
		t.Fatalf("start with an injected conflict: %v", err)
	}
	u, _ := f.c.ResourceGroup(f.ctx, "rg-1")
	got, _ := f.c.GetCluster(f.ctx, cl.ID)
	if !u.Reserved.IsZero() || got.State != cluster.Created {
		t.Fatalf("a failed start left %v reserved, state %s", u.Reserved, got.State)
	}
	_, err = f.c.StartCluster(f.ctx, cl.ID)
	f.must(err)
}

func waitFor(t *testing.T, d time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
