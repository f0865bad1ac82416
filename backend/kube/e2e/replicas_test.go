package e2e_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
)

// newClient starts a client on b, closed when t ends.
func newClient(t *testing.T, b dlc.Backend, more ...dlc.Option) *dlc.Client {
	t.Helper()
	c, err := dlc.New(append([]dlc.Option{dlc.WithBackend(b), dlc.WithRepairGrace(5 * time.Second),
		dlc.WithRetries(8, 10*time.Millisecond, time.Second)}, more...)...)
	if err != nil {
		t.Fatalf("dlc.New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Two clients, each on a backend of its own as two replicas of a service
// are, share one namespace: 50 on-demand runs submitted through both at
// once into a resource group with room for 4 all succeed, and a watcher on
// the store (a third backend's Watch, which sees every version of the
// resource group) never sees more than 4 admitted at once. A third client
// started afterwards sees the same platform.
func TestTwoClientsFiftyOnDemandRuns(t *testing.T) {
	const runs, room = 50, 4
	w := getWorld(t)
	ns := w.cp.NewNamespace(t)
	a := newClient(t, w.backend(t, kube.Options{Namespace: ns}))
	b := newClient(t, w.backend(t, kube.Options{Namespace: ns}))
	ctx := dlc.WithUser(t.Context(), "replicas")

	// The watcher: every version of the resource group, in order.
	var most, versions atomic.Int64
	var bad atomic.Value
	watcher := w.backend(t, kube.Options{Namespace: ns})
	if _, err := watcher.Watch(ctx, func(ch backend.Change) {
		if ch.Doc.Kind != "resourcegroup" || ch.Deleted {
			return
		}
		var acc quota.Account
		if err := json.Unmarshal(ch.Doc.Data, &acc); err != nil {
			bad.Store(err.Error())
			return
		}
		versions.Add(1)
		if n := acc.Sum.MilliCPU / 8000; n > most.Load() { // 8 cores a run
			most.Store(n)
		}
	}); err != nil {
		t.Fatal(err)
	}

	// Room for 4 runs of 8 cores (a cu.4c8g head and one cu.4c8g worker).
	if _, err := a.ResourceGroups().Register(ctx, quota.Group{ID: "rg-four", Package: "pkg-1",
		Capacity: quota.Resources{MilliCPU: room * 8000, Memory: room * 32 * quota.GiB}}); err != nil {
		t.Fatal(err)
	}
	cfg, err := dlc.NewJob("fifty").OnDemand("pkg-1", "rg-four").Priority(5).Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1).
		COSPackage("cos://jobs-1250000000/train.zip").Entrypoint("python train.py").Build()
	if err != nil {
		t.Fatal(err)
	}
	rec, err := a.Jobs().Create(ctx, cfg, dlc.SaveOptions{})
	if err != nil {
		t.Fatal(err)
	}

	began := time.Now()
	ids := make([]string, runs)
	var wg sync.WaitGroup
	for i := range runs {
		c := a
		if i%2 == 1 {
			c = b
		}
		wg.Go(func() {
			r, err := c.Runs().Create(ctx, rec.ID, dlc.RunOptions{})
			if err != nil {
				t.Errorf("run %d: %v", i, err)
				return
			}
			ids[i] = r.ID
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	submitted := time.Since(began)
	deadline := time.Now().Add(5 * time.Minute)
	for _, id := range ids {
		for {
			r, err := b.Runs().Get(ctx, id)
			if err == nil && r.State.Terminal() {
				if r.State != job.Succeeded {
					var why []string
					if cl, err := b.Clusters().Get(ctx, r.ClusterID); err == nil {
						for _, e := range cl.Events {
							why = append(why, e.Source+" "+e.Action+": "+e.Message)
						}
					}
					t.Fatalf("run %s: %s: %s; its cluster's events: %q; the run's: %+v", id, r.State, r.Message, why, r.Events)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("run %s not done within 5m: %+v, %v", id, r, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	took := time.Since(began)
	if v := bad.Load(); v != nil {
		t.Fatalf("the watcher could not read a resource group: %v", v)
	}
	if n := most.Load(); n > room || n == 0 {
		t.Fatalf("the watcher saw %d runs admitted at once (of %d versions); room for %d", n, versions.Load(), room)
	}
	t.Logf("timing: %d on-demand runs through two clients, room for %d: submitted in %v, all succeeded in %v; the watcher saw %d versions of the resource group, at most %d holders",
		runs, room, submitted.Round(time.Millisecond), took.Round(time.Millisecond), versions.Load(), most.Load())

	// A third client, started now, sees the same platform.
	c := newClient(t, w.backend(t, kube.Options{Namespace: ns}))
	waitFor(t, "the on-demand clusters gone and the quota released", func() (bool, string) {
		cls, err := c.Clusters().List(ctx)
		if err != nil {
			return false, err.Error()
		}
		u, err := c.ResourceGroups().Get(ctx, "rg-four")
		if err != nil {
			return false, err.Error()
		}
		return len(cls) == 0 && len(u.Holders) == 0, fmt.Sprintf("%d clusters, %d holders", len(cls), len(u.Holders))
	})
	list, err := c.Runs().List(ctx, dlc.RunListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	done := 0
	for _, r := range list {
		if r.State == job.Succeeded {
			done++
		}
	}
	if len(list) != runs || done != runs {
		t.Fatalf("the third client sees %d runs, %d succeeded; want %d", len(list), done, runs)
	}
	if err := c.CheckQuota(ctx); err != nil {
		t.Fatalf("CheckQuota: %v", err)
	}
}

// waitFor polls cond every 20 ms for up to a minute.
func waitFor(t *testing.T, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	return waitForLonger(t, what, time.Minute, cond)
}
