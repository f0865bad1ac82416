package dlc_test

import (
	"context"
	"testing"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/quota"
)

// TestObserverClient: an observer (dlc.WithObserver) writes desired state
// and waits as any client does, while another client's reconcilers take
// what it writes the rest of the way; it queues no step of its own, stores
// no membership, and takes no share of the work.
func TestObserverClient(t *testing.T) {
	be := memory.New(memory.Options{})
	worker, err := dlc.New(dlc.WithBackend(be))
	if err != nil {
		t.Fatal(err)
	}
	defer worker.Close()
	obs, err := dlc.New(dlc.WithBackend(be), dlc.WithObserver(), dlc.WithWorkers(8), dlc.WithWorkSharing(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
	ctx, cancel := context.WithTimeout(dlc.WithUser(context.Background(), "alice"), time.Minute) // a bound, not a wait
	defer cancel()
	if err := obs.Ready(ctx); err != nil {
		t.Fatalf("an observer is not ready: %v", err)
	}
	if _, err := obs.ResourceGroups().Register(ctx, quota.Group{ID: "rg-1", Package: "pkg-1",
		Capacity: quota.Resources{MilliCPU: 32000, Memory: 128 * quota.GiB}}); err != nil {
		t.Fatal(err)
	}
	g, err := obs.Groups().Create(ctx, "observed_group")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := dlc.NewCluster("observed").Groups(g.ID).Resources("pkg-1", "rg-1").Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1).Build()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := obs.Clusters().Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obs.Clusters().Wait(ctx, cl.ID, cluster.InState(cluster.Created)); err != nil {
		t.Fatalf("the worker did not take the observer's create: %v", err)
	}
	if _, err := obs.Clusters().Start(ctx, cl.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := obs.Clusters().Wait(ctx, cl.ID, cluster.InState(cluster.Running)); err != nil {
		t.Fatalf("the worker did not start the observer's cluster: %v", err)
	}
	if n := obs.Reconcile(); n != 0 {
		t.Errorf("an observer ran %d reconcile steps", n)
	}
	members, err := be.List(ctx, "replica", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(members) != 1 {
		t.Errorf("%d membership documents, want the worker's alone", len(members))
	}
	if err := obs.CheckQuota(ctx); err != nil {
		t.Fatal(err)
	}
}
