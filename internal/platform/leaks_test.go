package platform

import (
	"context"
	"testing"
	"time"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
)

// endedRun is a run that ended on cluster clusterID at the fake epoch.
func endedRun(id, clusterID string) (backend.Doc, *job.Run) {
	r := &job.Run{ID: id, JobID: "j", State: job.Failed, RayDone: true, ClusterID: clusterID,
		FinishedAt: time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC), Config: job.Config{Group: "g"}}
	d, err := encode(kindRun, id, "", runLabels(r), r)
	if err != nil {
		panic(err)
	}
	return d, r
}

// When the last run on each cluster ended (runLoad, for idle timeouts) is
// kept only for clusters the client has: an ended run written again after
// its cluster's delete (its retry recorded on it, its cleanup) and the
// runs of clusters gone before the client started leave nothing behind,
// however many there were.
func TestRunEndsOfGoneClustersForgotten(t *testing.T) {
	mb := memory.New(memory.Options{})
	ctx := context.Background()
	for _, id := range []string{"run-old-1", "run-old-2"} {
		d, _ := endedRun(id, "cls-gone-"+id)
		if _, err := mb.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	c, err := New(WithBackend(mb), WithWorkers(0), WithResync(0))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if n := len(c.load.lastEnd); n != 0 {
		t.Errorf("after the start, the ends of %d clusters the store does not have are kept: %v", n, c.load.lastEnd)
	}
	// A run written again after its cluster's delete was seen.
	d, r := endedRun("run-retried", "cls-deleted")
	c.observeRunEnd(d, r)
	if n := len(c.load.lastEnd); n != 0 {
		t.Errorf("the end of a run on a deleted cluster is kept: %v", c.load.lastEnd)
	}
}

// What a client keeps of the holds it saw (holdAge's sightings) goes with
// the holder: a client that does not own the holder's resource group
// (whose passes trim them) forgets a cluster's when it sees the cluster
// deleted, and CheckQuota forgets those its accounts have no more.
func TestHoldSightingsForgotten(t *testing.T) {
	h := newHoldsEngine(t, quota.Resources{MilliCPU: 64000, Memory: 256 * quota.GiB}, 1000)
	c := h.c
	now := h.clock.Now()
	c.ledger.holdAge("rg", "cls-deleted", quota.Hold{Resources: quota.Resources{MilliCPU: 1000}, Since: now}, now)
	c.onChange(backend.Change{Doc: backend.Doc{Kind: kindCluster, ID: "cls-deleted"}, Deleted: true})
	c.mu.Lock()
	_, kept := c.ledger.seen["rg"]["cls-deleted"]
	c.mu.Unlock()
	if kept {
		t.Error("the sighting of a deleted cluster's hold is kept")
	}

	h.set(t, "cls-released", quota.Resources{MilliCPU: 1000, Memory: quota.GiB})
	_ = c.CheckQuota(t.Context()) // the hold has no holder: reported, not the point here
	h.set(t, "cls-released", quota.Resources{})
	if _, err := c.ledger.changeAccount(t.Context(), "rg", func(a *quota.Account) (bool, error) {
		return a.Release("cls-released"), nil
	}); err != nil {
		t.Fatal(err)
	}
	_ = c.CheckQuota(t.Context())
	c.mu.Lock()
	_, kept = c.ledger.seen["rg"]["cls-released"]
	c.mu.Unlock()
	if kept {
		t.Error("CheckQuota keeps the sighting of a hold its account has no more")
	}
}
