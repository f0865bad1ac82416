package dlc_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
)

// A platform at rest writes nothing. Two clients on the real clock (the
// memory backend's short Ray delays) bring every kind of object to a state
// that waits for nobody: a running cluster with a finished run on it, a
// hibernated cluster, an on-demand run ended and its cluster gone, one
// waiting for quota, a config scheduled a year ahead. Then, for a second of real time, no
// store write may come (the clients' membership renewals aside). A step
// that writes each time it runs and is run again by its own write loops
// as fast as the store takes writes; the fake clock of the other tests
// hides such a loop (its "now" does not move between the two steps), the
// real one does not: a schedule's step did so (TestScheduleStepWritesOnlyTicks).
func TestAtRestNothingIsWritten(t *testing.T) {
	var (
		mu      sync.Mutex
		writing bool
		writes  = map[string]int{}
	)
	b := memory.New(memory.Options{Store: memory.StoreHooks{
		Write: func(ctx context.Context, w memory.Write, next func(context.Context) (string, error)) (string, error) {
			if w.Doc.Kind != "replica" {
				mu.Lock()
				if writing {
					writes[fmt.Sprintf("%s %s/%s", w.Op, w.Doc.Kind, w.Doc.ID)]++
				}
				mu.Unlock()
			}
			return next(ctx)
		}}})
	var clients [2]*dlc.Client
	for i := range clients {
		c, err := dlc.New(dlc.WithBackend(b))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		clients[i] = c
	}
	rc := &realClient{t: t, c: clients[0], ctx: dlc.WithUser(context.Background(), "alice")}
	if _, err := rc.c.ResourceGroups().Register(rc.ctx, quota.Group{ID: "rg-1", Package: "pkg-1",
		Capacity: quota.Resources{MilliCPU: 64000, Memory: 256 * quota.GiB}}); err != nil {
		t.Fatal(err)
	}
	g, err := rc.c.Groups().Create(rc.ctx, "组")
	if err != nil {
		t.Fatal(err)
	}
	rc.grp = g.ID

	running := rc.running("running")
	if r := rc.ended(rc.runOn(running.ID, "on-running").ID); r.State != job.Succeeded {
		t.Fatalf("the run on the cluster: %s %s", r.State, r.Message)
	}
	asleep := rc.running("asleep")
	if _, err := clients[1].Clusters().Hibernate(rc.ctx, asleep.ID, dlc.HibernateOptions{}); err != nil {
		t.Fatal(err)
	}
	rc.until("cluster asleep hibernated", func() (bool, string) {
		got, err := rc.c.Clusters().Get(rc.ctx, asleep.ID)
		return err == nil && got.State == cluster.Hibernated, fmt.Sprint(got.State, err)
	})
	od, err := dlc.NewJob("od").OnDemand("pkg-1", "rg-1").Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1).
		COSPackage("cos://jobs-1250000000/job.zip").Entrypoint("python main.py").Build()
	if err != nil {
		t.Fatal(err)
	}
	_, odRun, err := job.Submit(rc.ctx, clients[1], od, "")
	if err != nil {
		t.Fatal(err)
	}
	if r := rc.ended(odRun.ID); r.State != job.Succeeded {
		t.Fatalf("the on-demand run: %s %s", r.State, r.Message)
	}
	// A run that waits for quota: its group's capacity is taken away after
	// its config is saved.
	if _, err := rc.c.ResourceGroups().Register(rc.ctx, quota.Group{ID: "rg-small", Package: "pkg-1",
		Capacity: quota.Resources{MilliCPU: 8000, Memory: 16 * quota.GiB}}); err != nil {
		t.Fatal(err)
	}
	small := od.DeepCopy()
	small.Name, small.OnDemand.ResourceGroup = "od-small", "rg-small"
	smallRec, err := rc.c.Jobs().Create(rc.ctx, small, dlc.SaveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rc.c.ResourceGroups().Register(rc.ctx, quota.Group{ID: "rg-small", Package: "pkg-1"}); err != nil {
		t.Fatal(err)
	}
	waiting, err := clients[1].Runs().Create(rc.ctx, smallRec.ID, dlc.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rc.until("a run waiting for quota", func() (bool, string) {
		r, err := rc.c.Runs().Get(rc.ctx, waiting.ID)
		return err == nil && r.State == job.Waiting && r.WaitReason == job.InsufficientQuota, fmt.Sprint(r, err)
	})
	yearly, err := dlc.NewJob("yearly").OnCluster(running.ID).COSPackage("cos://jobs-1250000000/job.zip").
		Entrypoint("python main.py").Schedule("0 0 1 1 *").Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rc.c.Jobs().Create(rc.ctx, yearly, dlc.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	rc.until("the on-demand run's cluster gone and its reservation released", func() (bool, string) {
		cls, err := rc.c.Clusters().List(rc.ctx)
		if err != nil {
			return false, err.Error()
		}
		for _, cl := range cls {
			if cl.Temporary {
				return false, "cluster " + cl.ID + " " + string(cl.State)
			}
		}
		u, err := rc.c.ResourceGroups().Get(rc.ctx, "rg-1")
		return err == nil && len(u.Holders) == 1, fmt.Sprint(u.Holders, err) // the running cluster's
	})
	// What the last changes brought about (their steps, the watch's
	// deliveries) ends within a few steps; a loop does not.
	quiet := func() (map[string]int, bool) {
		mu.Lock()
		writing, writes = true, map[string]int{}
		mu.Unlock()
		time.Sleep(time.Second) // a window of real time: what is measured is what comes in it
		mu.Lock()
		defer mu.Unlock()
		writing = false
		return writes, len(writes) == 0
	}
	var got map[string]int
	for range 3 {
		var ok bool
		if got, ok = quiet(); ok {
			return
		}
	}
	keys := make([]string, 0, len(got))
	for k, n := range got {
		keys = append(keys, fmt.Sprintf("%s ×%d", k, n))
	}
	sort.Strings(keys)
	t.Fatalf("at rest, three seconds in a row each had store writes; the last: %s", strings.Join(keys, ", "))
}
