package e2e_test

import (
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/quota"
)

// Issue 42's measurement, again (set DLC_QUEUE_MEASURE=1; it takes a
// minute or two): 20 idle autoscaling clusters (a cu.2c4g head, cu.4c8g
// workers in [0, 4], the autoscaler running none) in a group of 120
// cores, each holding a worker of headroom: 120 cores reserved, 40 run.
// Then 20 priority-9 on-demand runs of 4 cores each (80 cores): how long
// from its submit until each is admitted. Before issue 42 they waited more
// than 30 s ("insufficient unused quota") while the headroom held the
// cores.
func TestMeasureIdleHeadroomAndWaitingRuns(t *testing.T) {
	if os.Getenv("DLC_QUEUE_MEASURE") == "" {
		t.Skip("a measurement: set DLC_QUEUE_MEASURE=1")
	}
	w := getWorld(t)
	ns := w.cp.NewNamespace(t)
	ctx := dlc.WithUser(t.Context(), "measure")
	c := newClient(t, w.backend(t, kube.Options{Namespace: ns}))
	if _, err := c.ResourceGroups().Register(ctx, quota.Group{ID: "rg-120", Package: "pkg-1",
		Capacity: quota.Resources{MilliCPU: 120000, Memory: 480 * quota.GiB}}); err != nil {
		t.Fatal(err)
	}
	grp, err := c.Groups().Create(ctx, "idle")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 20 {
		spec, err := dlc.NewCluster(fmt.Sprintf("idle_%d", i)).Groups(grp.ID).Resources("pkg-1", "rg-120").Priority(1).
			Image("ray-2.46.0-py310-cpu").Head("head", "cu.2c4g").WorkerGroup("cpu", "cu.4c8g", 0, 4).Build()
		if err != nil {
			t.Fatal(err)
		}
		cl, err := c.Clusters().Create(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, cl.ID)
	}
	for _, id := range ids {
		waitForLonger(t, id+" created", 3*time.Minute, func() (bool, string) { s := state(t, c, id); return s == cluster.Created, string(s) })
		if _, err := c.Clusters().Start(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	waitForLonger(t, "the headroom lent", 3*time.Minute, func() (bool, string) {
		u, err := c.ResourceGroups().Get(ctx, "rg-120")
		if err != nil {
			return false, err.Error()
		}
		return u.Reserved.MilliCPU == 120000 && u.Headroom.MilliCPU == 80000, fmt.Sprintf("reserved %s, headroom %s", u.Reserved, u.Headroom)
	})
	cfg, err := dlc.NewJob("urgent").OnDemand("pkg-1", "rg-120").Priority(9).Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.2c4g").WorkerGroup("cpu", "cu.2c4g", 1, 1).
		COSPackage("cos://jobs-1250000000/train.zip").Entrypoint("sleep 600").Build()
	if err != nil {
		t.Fatal(err)
	}
	rec, err := c.Jobs().Create(ctx, cfg, dlc.SaveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	submitted := map[string]time.Time{}
	for range 20 {
		r, err := c.Runs().Create(ctx, rec.ID, dlc.RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		submitted[r.ID] = time.Now()
	}
	var mu sync.Mutex
	admitted := map[string]time.Duration{}
	waitForLonger(t, "the runs admitted", 3*time.Minute, func() (bool, string) {
		u, err := c.ResourceGroups().Get(ctx, "rg-120")
		if err != nil {
			return false, err.Error()
		}
		mu.Lock()
		defer mu.Unlock()
		for id, at := range submitted {
			if _, ok := admitted[id]; !ok {
				if _, held := u.Holders["od-"+id]; held {
					admitted[id] = time.Since(at)
				}
			}
		}
		return len(admitted) == len(submitted), fmt.Sprintf("%d of %d admitted; reserved %s, headroom %s", len(admitted), len(submitted), u.Reserved, u.Headroom)
	})
	var took []time.Duration
	for _, d := range admitted {
		took = append(took, d)
	}
	slices.Sort(took)
	u, err := c.ResourceGroups().Get(ctx, "rg-120")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("20 priority-9 runs of 4 cores beside 20 idle clusters: admitted after %s (first), %s (median), %s (last); then reserved %s, headroom %s",
		took[0].Round(time.Millisecond), took[len(took)/2].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond), u.Reserved, u.Headroom)
}
