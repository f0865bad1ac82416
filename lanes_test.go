package dlc_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/memory"
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
