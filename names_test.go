package dlc_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/dlctest"
	"github.com/aidlc/dlc/errs"
)

// A cluster's name is claimed while the cluster is stored (two writes at
// once). A name this client knows is taken is refused before either:
// nothing is written.
func TestCreateOfATakenNameWritesNothing(t *testing.T) {
	var writes atomic.Int64
	counting := atomic.Bool{}
	f := newFixture(t, dlctest.MemoryOptions{Store: memory.StoreHooks{
		Write: func(ctx context.Context, w memory.Write, next func(context.Context) (string, error)) (string, error) {
			if counting.Load() {
				writes.Add(1)
			}
			return next(ctx)
		}}})
	first, err := f.c.Clusters().Create(f.ctx, f.spec("taken", 1, 1))
	f.must(err)
	f.settle()
	counting.Store(true)
	c2 := f.m.NewClient() // another replica, whose cache has the claim too
	for i, c := range []*dlc.Client{f.c, c2} {
		_, err := c.Clusters().Create(f.ctx, f.spec("taken", 1, 1))
		if !errors.Is(err, dlc.ErrConflict) || !strings.Contains(err.Error(), first.ID) {
			t.Errorf("client %d: %v, want a conflict naming %s", i+1, err, first.ID)
		}
	}
	if n := writes.Load(); n != 0 {
		t.Errorf("refused creates wrote %d times", n)
	}
}

// A client that dies between the cluster's write and its name's claim
// leaves a cluster that holds no claim. The cluster reconciler finds it
// (after the repair grace: a claim on its way reaches the cache later
// than its cluster may): a name nobody holds is claimed for it, so that
// no later create takes it; a never-started cluster whose name another
// cluster holds is a duplicate, and deleted saying why; a started one is
// left as it is.
func TestClusterWithoutItsClaim(t *testing.T) {
	var why atomic.Value // what the duplicate's delete said
	var startedReads atomic.Int64
	f := newFixture(t, dlctest.MemoryOptions{Options: []dlc.Option{dlc.WithResync(5 * time.Minute)}, Store: memory.StoreHooks{
		Read: func(ctx context.Context, kind, id string) error {
			if kind == "cluster" && id == "cls-dup-started" {
				startedReads.Add(1)
			}
			return nil
		},
		Write: func(ctx context.Context, w memory.Write, next func(context.Context) (string, error)) (string, error) {
			var cl cluster.Cluster
			if w.Doc.ID == "cls-dup" && json.Unmarshal(w.Doc.Data, &cl) == nil && cl.State == cluster.Deleting {
				why.Store(cl.Events[len(cl.Events)-1].Message)
			}
			return next(ctx)
		}}})
	held, err := f.c.Clusters().Create(f.ctx, f.spec("held", 1, 1))
	f.must(err)
	f.settle()
	stored := func(id, name string, state cluster.State, generation int64) {
		t.Helper()
		f.storedCopy(held.ID, id, name, state, generation)
	}
	stored("cls-orphan", "orphan", cluster.Created, 1)
	stored("cls-dup", "held", cluster.Created, 1)
	stored("cls-dup-started", "held", cluster.Hibernated, 3)
	f.settle()

	if _, err := f.c.Clusters().Create(f.ctx, f.spec("orphan", 1, 1)); !errors.Is(err, dlc.ErrConflict) || !strings.Contains(err.Error(), "cls-orphan") {
		t.Errorf("a create of the name of a cluster that held no claim: %v, want a conflict naming cls-orphan", err)
	}
	if _, err := f.c.Clusters().Get(f.ctx, "cls-dup"); !errors.Is(err, dlc.ErrNotFound) {
		t.Errorf("the never-started duplicate: %v, want it deleted", err)
	} else if w, _ := why.Load().(string); !strings.Contains(w, "held by cluster "+held.ID) {
		t.Errorf("the duplicate's delete says %q", w)
	}
	got, err := f.c.Clusters().Get(f.ctx, "cls-dup-started")
	if err != nil || got.State != cluster.Hibernated {
		t.Fatalf("the started duplicate: %v, %v, want it left hibernated", got, err)
	}
	if said := entries(got.Events, "name-unclaimed", "held by cluster "+held.ID); said != 1 {
		t.Errorf("the started duplicate's log says %d times that its name is another's, want once: %+v", said, got.Events)
	}
	if got, err := f.c.Clusters().Get(f.ctx, held.ID); err != nil || got.State != cluster.Created {
		t.Errorf("the cluster that holds the name: %v, %v", got, err)
	}
	// The started duplicate is read again on the store once per 10
	// minutes, not at each reconcile: three resyncs in 15 minutes read it
	// at most twice.
	startedReads.Store(0)
	for range 3 {
		f.m.Clock.Advance(5*time.Minute + time.Second)
		f.m.Reconcile()
	}
	if n := startedReads.Load(); n == 0 || n > 2 {
		t.Errorf("the started duplicate was read %d times on the store in 15 minutes, want 1 or 2", n)
	}
	if again, err := f.c.Clusters().Get(f.ctx, "cls-dup-started"); err != nil || again.Version != got.Version {
		t.Errorf("the started duplicate was written again after its log said it once: %v, version %s then %s", err, got.Version, again.Version)
	}
}

// storedCopy stores a copy of cluster src under another id and name, in
// state at generation, as a create that died after its first write
// leaves it: no claim of its name.
func (f *fixture) storedCopy(src, id, name string, state cluster.State, generation int64) {
	f.t.Helper()
	d, err := f.m.Backend.Get(f.ctx, "cluster", src)
	f.must(err)
	var cl cluster.Cluster
	f.must(json.Unmarshal(d.Data, &cl))
	cl.ID, cl.Spec.Name, cl.State, cl.Generation = id, name, state, generation
	data, err := json.Marshal(cl)
	f.must(err)
	labels := map[string]string{}
	for k, v := range d.Labels {
		labels[k] = v
	}
	labels["state"] = string(state)
	_, err = f.m.Backend.Create(f.ctx, backend.Doc{Kind: "cluster", ID: id, Labels: labels, Data: data})
	f.must(err)
}

// A started cluster whose name another holds says so in its log even when
// the first write of that fails: the step's retry says it, not the
// recheck ten minutes on (nor, without resyncs, never).
func TestUnclaimedNameSaidAfterAFailedWrite(t *testing.T) {
	var refused atomic.Int64
	f := newFixture(t, dlctest.MemoryOptions{Options: []dlc.Option{dlc.WithResync(0)}, Store: memory.StoreHooks{
		Write: func(ctx context.Context, w memory.Write, next func(context.Context) (string, error)) (string, error) {
			if w.Doc.ID == "cls-dup-started" && w.Op == memory.OpUpdate && bytes.Contains(w.Doc.Data, []byte("name-unclaimed")) &&
				refused.Add(1) == 1 {
				return "", errs.Unavailable("store update cluster/cls-dup-started", errors.New("refused by the test"))
			}
			return next(ctx)
		}}})
	held, err := f.c.Clusters().Create(f.ctx, f.spec("held", 1, 1))
	f.must(err)
	f.settle()
	f.storedCopy(held.ID, "cls-dup-started", "held", cluster.Hibernated, 3)
	f.m.Clock.Advance(31 * time.Second) // past the repair grace
	f.m.Settle(10*time.Millisecond, 1000)
	if refused.Load() == 0 {
		t.Fatal("the log's first write was not tried")
	}
	got, err := f.c.Clusters().Get(f.ctx, "cls-dup-started")
	f.must(err)
	if said := entries(got.Events, "name-unclaimed", ""); said != 1 {
		t.Errorf("after a refused first write, the started duplicate's log says %d times that its name is another's, want once", said)
	}
}
