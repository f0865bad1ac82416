package dlc_test

import (
	"context"
	"testing"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/dlctest"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
)

// BenchmarkRunQueued measures Run on an on-demand job whose resource
// group is full, so every run queues behind quota: the platform's cost of
// one submission (store writes, queue push, a dispatch pass).
func BenchmarkRunQueued(b *testing.B) {
	m := dlctest.NewMemory(dlctest.MemoryOptions{})
	ctx := context.Background()
	c := m.Client
	if err := c.RegisterResourceGroup(ctx, quota.Group{ID: "rg", Package: "p", Capacity: quota.Resources{MilliCPU: 8000, Memory: 32 * quota.GiB}}); err != nil {
		b.Fatal(err)
	}
	cfg, err := dlc.NewJob("j").OnDemand("p", "rg").Image("ray-2.46.0-py310-cpu").Head("head", "cu.4c8g").
		WorkerGroup("w", "cu.4c8g", 1, 1).COSPackage("cos://jobs-1250000000/j.zip").Entrypoint("python a.py").Build()
	if err != nil {
		b.Fatal(err)
	}
	rec, err := c.SaveJob(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := c.Run(ctx, rec.ID); err != nil { // takes the whole group
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		r, err := c.Run(ctx, rec.ID)
		if err != nil || r.State != job.Waiting {
			b.Fatalf("%v %v", err, r.State)
		}
	}
}

// BenchmarkRunLifecycle measures one group-mode run from Run to
// succeeded on a running cluster, with the fake clock moving it along.
func BenchmarkRunLifecycle(b *testing.B) {
	m := dlctest.NewMemory(dlctest.MemoryOptions{})
	ctx := context.Background()
	c := m.Client
	_ = c.RegisterResourceGroup(ctx, quota.Group{ID: "rg", Package: "p", Capacity: quota.Resources{MilliCPU: 64000, Memory: 256 * quota.GiB}})
	g, _ := c.CreateGroup(ctx, "g")
	spec, _ := dlc.NewCluster("c").Groups(g.ID).Resources("p", "rg").Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c8g").WorkerGroup("w", "cu.4c8g", 1, 1).Build()
	cl, err := c.CreateCluster(ctx, spec)
	if err != nil {
		b.Fatal(err)
	}
	m.Settle(time.Second, 100)
	if _, err := c.StartCluster(ctx, cl.ID); err != nil {
		b.Fatal(err)
	}
	m.Settle(time.Second, 100)
	cfg, _ := dlc.NewJob("j").OnGroup(g.ID).COSPackage("cos://jobs-1250000000/j.zip").Entrypoint("python a.py").Build()
	rec, err := c.SaveJob(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		r, err := c.Run(ctx, rec.ID)
		if err != nil {
			b.Fatal(err)
		}
		m.Settle(time.Second, 100)
		b.StopTimer()
		if r, _ = c.GetRun(ctx, r.ID); r.State != job.Succeeded {
			b.Fatalf("run %s", r.State)
		}
		b.StartTimer()
	}
}
