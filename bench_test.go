package dlc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/dlctest"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
)

// BenchmarkRunQueued measures Runs().Create on an on-demand job whose
// resource group is full, so every run queues behind quota: the
// platform's cost of one submission (store writes, and the reconcile
// steps that find it must wait).
func BenchmarkRunQueued(b *testing.B) {
	m, rec := onDemandJob(b, onDemandRun)
	ctx, c := context.Background(), m.Client
	if _, err := c.Runs().Create(ctx, rec.ID, dlc.RunOptions{}); err != nil { // takes the whole group
		b.Fatal(err)
	}
	m.Reconcile()
	b.ReportAllocs()
	for b.Loop() {
		r, err := c.Runs().Create(ctx, rec.ID, dlc.RunOptions{})
		if err != nil {
			b.Fatal(err)
		}
		m.Reconcile()
		if r, err = c.Runs().Get(ctx, r.ID); err != nil || r.State != job.Waiting {
			b.Fatalf("%v %v", err, r.State)
		}
	}
}

// BenchmarkRunLifecycle measures one group-mode run from Runs().Create to
// succeeded on a running cluster, with the fake clock moving it along.
func BenchmarkRunLifecycle(b *testing.B) {
	m := dlctest.NewMemory(dlctest.MemoryOptions{})
	defer m.Close()
	lifecycleBench(b, m)
}

// lifecycleBench runs group-mode runs to success on a running cluster of m.
func lifecycleBench(b *testing.B, m *dlctest.Memory) {
	ctx := context.Background()
	c := m.Client
	_, _ = c.ResourceGroups().Register(ctx, quota.Group{ID: "rg", Package: "p", Capacity: quota.Resources{MilliCPU: 64000, Memory: 256 * quota.GiB}})
	g, _ := c.Groups().Create(ctx, "g")
	spec, _ := dlc.NewCluster("c").Groups(g.ID).Resources("p", "rg").Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c8g").WorkerGroup("w", "cu.4c8g", 1, 1).Build()
	cl, err := c.Clusters().Create(ctx, spec)
	if err != nil {
		b.Fatal(err)
	}
	m.Settle(time.Second, 100)
	if _, err := c.Clusters().Start(ctx, cl.ID); err != nil {
		b.Fatal(err)
	}
	m.Settle(time.Second, 100)
	cfg, _ := dlc.NewJob("j").OnGroup(g.ID).COSPackage("cos://jobs-1250000000/j.zip").Entrypoint("python a.py").Build()
	rec, err := c.Jobs().Create(ctx, cfg, dlc.SaveOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		r, err := c.Runs().Create(ctx, rec.ID, dlc.RunOptions{})
		if err != nil {
			b.Fatal(err)
		}
		m.Settle(time.Second, 100)
		b.StopTimer()
		if r, _ = c.Runs().Get(ctx, r.ID); r.State != job.Succeeded {
			b.Fatalf("run %s", r.State)
		}
		b.StartTimer()
	}
}

// BenchmarkRunPending: why one run waits, with 10,000 runs queued in its
// full resource group, against the resource group's whole list
// (ResourceGroups().Pending) in the same run: the one run's place comes
// from the queue's order statistics, not from listing the queue.
func BenchmarkRunPending(b *testing.B) {
	const queued = 10000
	m, rec := onDemandJob(b, onDemandRun)
	ctx, c := context.Background(), m.Client
	var last *job.Run
	var err error
	for range queued + 1 { // the first takes the whole group
		if last, err = c.Runs().Create(ctx, rec.ID, dlc.RunOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	m.Reconcile()
	b.Run("one run", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p, err := c.Runs().Pending(ctx, last.ID)
			if err != nil || p.Position != queued {
				b.Fatalf("%+v %v", p, err)
			}
		}
	})
	b.Run("the group's list", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if all, err := c.ResourceGroups().Pending(ctx, "rg"); err != nil || len(all) != queued {
				b.Fatalf("%d %v", len(all), err)
			}
		}
	})
}

// BenchmarkStartWithHolders: a cluster's start (its reservation, a
// compare-and-swap on the resource group's account, and its write) with
// 100 and 10,000 other holders on the account, and the account's stored
// size: today's baseline for "reservations that scale" (issue 21), where
// the start's cost must not grow with the holders.
func BenchmarkStartWithHolders(b *testing.B) {
	for _, holders := range []int{100, 10000} {
		b.Run(fmt.Sprintf("holders=%d", holders), func(b *testing.B) {
			m := dlctest.NewMemory(dlctest.MemoryOptions{})
			defer m.Close()
			ctx := context.Background()
			c := m.Client
			if _, err := c.ResourceGroups().Register(ctx, quota.Group{ID: "rg", Package: "p", Capacity: quota.Resources{MilliCPU: 1 << 40, Memory: 1 << 50}}); err != nil {
				b.Fatal(err)
			}
			g, err := c.Groups().Create(ctx, "g")
			if err != nil {
				b.Fatal(err)
			}
			settledHolders(b, m, "rg", holders)
			m.Reconcile()
			d, err := m.Backend.Get(ctx, "resourcegroup", "rg")
			if err != nil {
				b.Fatal(err)
			}
			ids := make([]string, b.N)
			for i := range b.N {
				spec, err := dlc.NewCluster(fmt.Sprintf("c%d", i)).Groups(g.ID).Resources("p", "rg").Image("ray-2.46.0-py310-cpu").
					Head("head", "cu.4c8g").WorkerGroup("w", "cu.4c8g", 1, 1).Build()
				if err != nil {
					b.Fatal(err)
				}
				cl, err := c.Clusters().Create(ctx, spec)
				if err != nil {
					b.Fatal(err)
				}
				ids[i] = cl.ID
			}
			m.Settle(10*time.Millisecond, 1000)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if _, err := c.Clusters().Start(ctx, ids[i]); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			if d, err = m.Backend.Get(ctx, "resourcegroup", "rg"); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(len(d.Data)), "account-bytes")
		})
	}
}

// settledHolders gives resource group rg of fixture m the reservations
// of n other holders (clusters that are not there), settled: each in its
// own document, and in the account's sum and change count, as a
// platform that settled them has them.
func settledHolders(b *testing.B, m *dlctest.Memory, rg string, n int) {
	b.Helper()
	ctx := context.Background()
	var last string
	var err error
	for i := range n {
		holder := fmt.Sprintf("cls-filler%05d", i)
		data, _ := json.Marshal(map[string]any{"resourceGroup": rg, "holder": holder, "seq": i + 1,
			"resources": map[string]any{"milliCPU": 1000, "memory": quota.GiB, "gpu": 0},
			"since":     dlctest.Epoch.Format(time.RFC3339Nano), "generation": 2})
		if last, err = m.Backend.Create(ctx, backend.Doc{Kind: "hold", ID: rg + "." + holder, Data: data}); err != nil {
			b.Fatal(err)
		}
	}
	if err := dlctest.EditStored(ctx, m.Backend, "resourcegroup", rg, func(data map[string]any, _ map[string]string) {
		data["reserved"] = map[string]any{"milliCPU": 1000 * n, "memory": quota.GiB * int64(n), "gpu": 0}
		data["seq"], data["settled"] = n, last
	}); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkAdmitWithHolders: an on-demand run submitted and admitted (its
// resource group's steps: the settled holds read, then walked for the
// sightings, the corrupt check and the true-up, the group's clusters for
// the restore, then the compare-and-swap) in a group with 100 and with
// 10,000 other holders, both in each iteration, and the ratio of the two:
// what a group's step pays for every hold it keeps. The other holders
// have no clusters and the fake clock stands still, so each step finds
// them young leaks and runs the repair too (its walk of the holds and of
// their documents): a group's worst case, not its usual one. Each
// iteration adds a run and its cluster to both groups.
func BenchmarkAdmitWithHolders(b *testing.B) {
	sizes := [2]int{100, 10000}
	var fixtures [2]*dlctest.Memory
	var recs [2]*job.Record
	for i, n := range sizes {
		fixtures[i], recs[i] = onDemandJob(b, quota.Resources{MilliCPU: 1 << 40, Memory: 1 << 50})
		settledHolders(b, fixtures[i], "rg", n)
		fixtures[i].Reconcile()
	}
	ctx := context.Background()
	var took [2]time.Duration
	b.ReportAllocs()
	for b.Loop() {
		for i, m := range fixtures {
			start := time.Now()
			r, err := m.Client.Runs().Create(ctx, recs[i].ID, dlc.RunOptions{})
			if err != nil {
				b.Fatal(err)
			}
			m.Reconcile()
			took[i] += time.Since(start)
			b.StopTimer()
			if r, err = m.Client.Runs().Get(ctx, r.ID); err != nil {
				b.Fatal(err)
			} else if r.State != job.Provisioning {
				b.Fatalf("run %s, want it admitted (provisioning)", r.State)
			}
			b.StartTimer()
		}
	}
	b.ReportMetric(float64(took[0].Microseconds())/1000/float64(b.N), "ms/admit-holders-100")
	b.ReportMetric(float64(took[1].Microseconds())/1000/float64(b.N), "ms/admit-holders-10000")
	b.ReportMetric(float64(took[1])/float64(took[0]), "holders-10000/holders-100")
}

// onDemandRun is what an onDemandJob's run reserves, and the capacity
// that it takes whole.
var onDemandRun = quota.Resources{MilliCPU: 8000, Memory: 32 * quota.GiB}

// onDemandJob is a memory fixture with resource group "rg" of capacity
// (onDemandRun: 8 cores, which a run of it takes whole) and an on-demand
// job config; the fixture closes with b.
func onDemandJob(b *testing.B, capacity quota.Resources) (*dlctest.Memory, *job.Record) {
	b.Helper()
	m := dlctest.NewMemory(dlctest.MemoryOptions{})
	b.Cleanup(m.Close)
	ctx := context.Background()
	if _, err := m.Client.ResourceGroups().Register(ctx, quota.Group{ID: "rg", Package: "p", Capacity: capacity}); err != nil {
		b.Fatal(err)
	}
	cfg, err := dlc.NewJob("j").OnDemand("p", "rg").Image("ray-2.46.0-py310-cpu").Head("head", "cu.4c8g").
		WorkerGroup("w", "cu.4c8g", 1, 1).COSPackage("cos://jobs-1250000000/j.zip").Entrypoint("python a.py").Build()
	if err != nil {
		b.Fatal(err)
	}
	rec, err := m.Client.Jobs().Create(ctx, cfg, dlc.SaveOptions{})
	if err != nil {
		b.Fatal(err)
	}
	return m, rec
}

// BenchmarkRunList: 20,000 runs of one job config, listed whole (List)
// and one page of 100 (ListPage), from the cache's decoded objects: the
// page costs copies of its 100 runs only.
func BenchmarkRunList(b *testing.B) {
	const runs = 20000
	m, rec := onDemandJob(b, onDemandRun)
	ctx, c := context.Background(), m.Client
	for range runs {
		if _, err := c.Runs().Create(ctx, rec.ID, dlc.RunOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("List", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if all, err := c.Runs().List(ctx, dlc.RunListOptions{JobID: rec.ID}); err != nil || len(all) != runs {
				b.Fatalf("%d %v", len(all), err)
			}
		}
	})
	b.Run("ListPage-100", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if p, err := c.Runs().ListPage(ctx, dlc.RunListOptions{JobID: rec.ID, Limit: 100}); err != nil || len(p.Items) != 100 {
				b.Fatalf("%+v %v", p, err)
			}
		}
	})
}
