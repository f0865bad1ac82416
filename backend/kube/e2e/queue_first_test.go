package e2e_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/cluster"
)

// Quota serves the queue first on Kubernetes (issue 42), with KubeRay's
// reconcilers and the autoscaler stand-in: two idle autoscaling clusters
// (a 4-core head, 4-core workers in [0, 4], the autoscaler running none)
// hold a worker of headroom each, 16 of the group's 20 cores. A
// priority-9 on-demand run of 8 cores does not fit the 4 left: the
// clusters give their headroom back (their maxReplicas lowered to what
// the autoscaler runs, the quota released once KubeRay runs it) and the
// run is admitted; reserved but not running is then zero until the queue
// is served, and the headroom is lent again as far as quota allows.
func TestIdleHeadroomServesTheQueueOnKubernetes(t *testing.T) {
	a := newAutoscaleScene(t)
	idle := []*cluster.Cluster{a.start("idle1", 0, 4), a.start("idle2", 0, 4)}
	waitFor(t, "the headroom lent", func() (bool, string) {
		u, err := a.c.ResourceGroups().Get(a.ctx, "rg-20")
		if err != nil {
			return false, err.Error()
		}
		return u.Reserved.MilliCPU == 16000 && u.Headroom.MilliCPU == 8000, fmt.Sprintf("reserved %s, headroom %s", u.Reserved, u.Headroom)
	})
	cfg, err := dlc.NewJob("queued").OnDemand("pkg-1", "rg-20").Priority(9).Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1).
		COSPackage("cos://jobs-1250000000/train.zip").Entrypoint("sleep 600").Build()
	if err != nil {
		t.Fatal(err)
	}
	rec, err := a.c.Jobs().Create(a.ctx, cfg, dlc.SaveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := a.c.Runs().Create(a.ctx, rec.ID, dlc.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	took := waitFor(t, "the run admitted", func() (bool, string) {
		u, err := a.c.ResourceGroups().Get(a.ctx, "rg-20")
		if err != nil {
			return false, err.Error()
		}
		_, held := u.Holders["od-"+r.ID]
		return held, fmt.Sprintf("reserved %s, headroom %s", u.Reserved, u.Headroom)
	})
	t.Logf("the priority-9 run admitted %s after its submit, the idle clusters' headroom given back", took.Round(time.Millisecond))
	// A cluster whose hold is released only once KubeRay runs its lower
	// ceiling holds its headroom a moment longer: what settles is one
	// cluster lent again, the other still yielded.
	waitFor(t, "the headroom lent again as far as quota allows", func() (bool, string) {
		u, err := a.c.ResourceGroups().Get(a.ctx, "rg-20")
		if err != nil {
			return false, err.Error()
		}
		yielded := 0
		for _, cl := range idle {
			got, err := a.c.Clusters().Get(a.ctx, cl.ID)
			if err != nil {
				return false, err.Error()
			}
			if got.Growth != nil {
				t.Fatalf("cluster %s: its headroom is stored as a growth: %+v", cl.ID, got.Growth)
			}
			yielded += len(got.Yielded)
		}
		return u.Reserved.MilliCPU == 20000 && u.Headroom.MilliCPU == 4000 && yielded == 1,
			fmt.Sprintf("reserved %s, headroom %s, %d clusters without headroom", u.Reserved, u.Headroom, yielded)
	})
	if _, err := a.c.Runs().Stop(a.ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the run stopped", func() (bool, string) {
		got, err := a.c.Runs().Get(a.ctx, r.ID)
		if err != nil {
			return false, err.Error()
		}
		return got.State.Terminal(), string(got.State)
	})
	if err := a.c.CheckQuota(a.ctx); err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.over != "" {
		t.Fatalf("the resource group: %s", a.over)
	}
}
