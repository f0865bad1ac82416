package dlc_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/dlctest"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
)

// A resource group is deleted only when nothing holds quota or queues in
// it: a running cluster and a waiting on-demand run each refuse it, with
// the state saying why; once they are gone it is deleted, and what only
// named it says so when used.
func TestResourceGroupDelete(t *testing.T) {
	f := newFixture(t, dlctest.MemoryOptions{})
	rgs := f.c.ResourceGroups()
	small := quota.Group{ID: "rg-small", Package: "pkg-1", Capacity: quota.Resources{MilliCPU: 8000, Memory: 32 * quota.GiB}}
	_, err := rgs.Register(f.ctx, small)
	f.must(err)

	for _, tc := range []struct {
		name, id string
		want     error
	}{
		{"empty id", "", dlc.ErrInvalid},
		{"unknown", "rg-none", dlc.ErrNotFound},
	} {
		if err := rgs.Delete(f.ctx, tc.id); !errors.Is(err, tc.want) {
			t.Errorf("%s: Delete(%q) = %v, want %v", tc.name, tc.id, err, tc.want)
		}
	}

	// A running cluster holds quota in rg-1.
	cl := f.runningCluster("held")
	refused := func(id, says string) {
		t.Helper()
		err := rgs.Delete(f.ctx, id)
		var se *dlc.StateError
		if !errors.As(err, &se) || !errors.Is(err, dlc.ErrState) || !strings.Contains(err.Error(), says) {
			t.Fatalf("Delete(%s) = %v, want a state error saying %q", id, err, says)
		}
		if _, err := rgs.Get(f.ctx, id); err != nil {
			t.Fatalf("a refused delete changed the group: %v", err)
		}
	}
	refused("rg-1", "reserved in it")

	// An on-demand run that cannot fit waits in rg-small's queue.
	cfg, err := dlc.NewJob("od").OnDemand("pkg-1", "rg-small").Priority(5).Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1).
		COSPackage("cos://jobs-1250000000/train.zip").Entrypoint("python train.py").Build()
	f.must(err)
	rec, err := f.c.Jobs().Create(f.ctx, cfg, dlc.SaveOptions{})
	f.must(err)
	small.Capacity = quota.Resources{MilliCPU: 4000, Memory: 16 * quota.GiB} // now it never fits: it waits, holding nothing
	_, err = rgs.Register(f.ctx, small)
	f.must(err)
	r, err := f.c.Runs().Create(f.ctx, rec.ID, dlc.RunOptions{})
	f.must(err)
	f.settle()
	if got := f.run(r.ID); got.State != job.Waiting {
		t.Fatalf("the on-demand run is %s, want waiting for quota", got.State)
	}
	refused("rg-small", "1 runs not finished")

	// Once the run is stopped and done, and the cluster hibernated, both go.
	_, err = f.c.Runs().Stop(f.ctx, r.ID)
	f.must(err)
	_, err = f.c.Clusters().Hibernate(f.ctx, cl.ID, dlc.HibernateOptions{})
	f.must(err)
	f.settle()
	for _, id := range []string{"rg-small", "rg-1"} {
		if err := rgs.Delete(f.ctx, id); err != nil {
			t.Fatalf("Delete(%s) of an unused group: %v", id, err)
		}
		if _, err := rgs.Get(f.ctx, id); !errors.Is(err, dlc.ErrNotFound) {
			t.Fatalf("Get(%s) after its delete: %v, want not found", id, err)
		}
	}
	if err := f.c.CheckQuota(f.ctx); err != nil {
		t.Fatalf("CheckQuota after the deletes: %v", err)
	}

	// What only named a deleted group: the hibernated cluster cannot start
	// (nothing is reserved), and the config's next run fails saying why.
	_, err = f.c.Clusters().Start(f.ctx, cl.ID)
	if fe := dlc.Fields(err); len(fe) != 1 || fe[0].Rule != "C4" || fe[0].Path.String() != "resourceGroup" {
		t.Fatalf("Start of a cluster in a deleted resource group: %v, want C4 at resourceGroup", err)
	}
	r2, err := f.c.Runs().Create(f.ctx, rec.ID, dlc.RunOptions{})
	f.must(err)
	f.settle()
	if got := f.run(r2.ID); got.State != job.Failed || !strings.Contains(got.Message, "does not exist") {
		t.Fatalf("a run in a deleted resource group is %s (%q), want failed saying it does not exist", got.State, got.Message)
	}

	// The id can be registered again, and holds what is started in it.
	_, err = rgs.Register(f.ctx, quota.Group{ID: "rg-1", Package: "pkg-1", Capacity: quota.Resources{MilliCPU: 32000, Memory: 128 * quota.GiB}})
	f.must(err)
	f.settle()
	_, err = f.c.Clusters().Start(f.ctx, cl.ID)
	f.must(err)
	f.settle()
	if got, _ := f.c.Clusters().Get(f.ctx, cl.ID); got.State != cluster.Running {
		t.Fatalf("the cluster in the group registered again is %s, want running", got.State)
	}
	if err := f.c.CheckQuota(f.ctx); err != nil {
		t.Fatalf("CheckQuota after the group came back: %v", err)
	}
}

// A start and a delete of its resource group at once, through two
// clients: either the start reserves and the delete is refused, or the
// delete goes first and the start fails; never a reservation in a group
// that is gone.
func TestResourceGroupDeleteRacesStart(t *testing.T) {
	won := map[string]int{}
	defer func() { t.Logf("outcomes: %v", won) }()
	for i := range 20 {
		f := newFixture(t, dlctest.MemoryOptions{Seed: int64(i + 1)})
		cl, err := f.c.Clusters().Create(f.ctx, f.spec("c", 1, 1))
		f.must(err)
		f.settle()
		c2 := f.m.NewClient()
		var startErr, deleteErr error
		var wg sync.WaitGroup
		wg.Go(func() { _, startErr = f.c.Clusters().Start(f.ctx, cl.ID) })
		wg.Go(func() { deleteErr = c2.ResourceGroups().Delete(f.ctx, "rg-1") })
		wg.Wait()
		switch {
		case startErr == nil && deleteErr == nil:
			t.Fatalf("round %d: the start reserved and the group was deleted too", i)
		case startErr != nil && deleteErr != nil:
			t.Fatalf("round %d: both failed: start %v, delete %v", i, startErr, deleteErr)
		case deleteErr != nil && !errors.Is(deleteErr, dlc.ErrState):
			t.Fatalf("round %d: the delete failed with %v, want a state error", i, deleteErr)
		}
		if startErr == nil {
			won["start"]++
		} else {
			won["delete"]++
		}
		f.settle()
		if err := f.c.CheckQuota(f.ctx); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		got, err := f.c.Clusters().Get(f.ctx, cl.ID)
		f.must(err)
		if startErr == nil && got.State != cluster.Running {
			t.Fatalf("round %d: the cluster whose start won is %s", i, got.State)
		}
	}
}

// The start lands between the delete's read of the account and its
// delete (another replica's start, made from inside the delete's write):
// the delete, on the version it read, conflicts, looks again, and is
// refused; the start's reservation stands.
func TestResourceGroupDeleteFencedByAStartBetween(t *testing.T) {
	var hook atomic.Pointer[func()]
	f := newFixture(t, dlctest.MemoryOptions{Store: memory.StoreHooks{
		Write: func(ctx context.Context, w memory.Write, next func(context.Context) (string, error)) (string, error) {
			if w.Op == memory.OpDelete && w.Doc.Kind == "resourcegroup" {
				if h := hook.Swap(nil); h != nil {
					(*h)()
				}
			}
			return next(ctx)
		}}})
	cl, err := f.c.Clusters().Create(f.ctx, f.spec("c", 1, 1))
	f.must(err)
	f.settle()
	c2 := f.m.NewClient()
	var startErr error
	started := func() { _, startErr = c2.Clusters().Start(f.ctx, cl.ID) }
	hook.Store(&started)
	err = f.c.ResourceGroups().Delete(f.ctx, "rg-1")
	if startErr != nil {
		t.Fatalf("the start between: %v", startErr)
	}
	if !errors.Is(err, dlc.ErrState) {
		t.Fatalf("the delete after a start between its read and its write: %v, want refused (ErrState)", err)
	}
	f.settle()
	if got, _ := f.c.Clusters().Get(f.ctx, cl.ID); got.State != cluster.Running {
		t.Fatalf("the cluster is %s, want running", got.State)
	}
	if err := f.c.CheckQuota(f.ctx); err != nil {
		t.Fatal(err)
	}
}

// A group deleted and registered again under the same id in another
// package is not drawn on by what named the first: a cluster's start is
// C4 at resourcePackage, an on-demand run fails saying so.
func TestResourceGroupReRegisteredInAnotherPackage(t *testing.T) {
	f := newFixture(t, dlctest.MemoryOptions{})
	cl, err := f.c.Clusters().Create(f.ctx, f.spec("c", 1, 1))
	f.must(err)
	cfg, err := dlc.NewJob("od").OnDemand("pkg-1", "rg-1").Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1).
		COSPackage("cos://jobs-1250000000/train.zip").Entrypoint("python train.py").Build()
	f.must(err)
	rec, err := f.c.Jobs().Create(f.ctx, cfg, dlc.SaveOptions{})
	f.must(err)
	f.settle()
	f.must(f.c.ResourceGroups().Delete(f.ctx, "rg-1"))
	_, err = f.c.ResourceGroups().Register(f.ctx, quota.Group{ID: "rg-1", Package: "pkg-other", Capacity: quota.Resources{MilliCPU: 64000, Memory: 256 * quota.GiB}})
	f.must(err)
	f.settle()
	_, err = f.c.Clusters().Start(f.ctx, cl.ID)
	if fe := dlc.Fields(err); len(fe) != 1 || fe[0].Rule != "C4" || fe[0].Path.String() != "resourcePackage" {
		t.Fatalf("start in a group of another package now: %v, want C4 at resourcePackage", err)
	}
	r, err := f.c.Runs().Create(f.ctx, rec.ID, dlc.RunOptions{})
	f.must(err)
	f.settle()
	if got := f.run(r.ID); got.State != job.Failed || !strings.Contains(got.Message, "belongs to package pkg-other") {
		t.Fatalf("an on-demand run in a group of another package now is %s (%q)", got.State, got.Message)
	}
	u, err := f.c.ResourceGroups().Get(f.ctx, "rg-1")
	f.must(err)
	if !u.Reserved.IsZero() {
		t.Fatalf("the group of another package holds %s", u.Reserved)
	}
}
