package dlc_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/dlctest"
	"github.com/aidlc/dlc/quota"
)

// BenchmarkScheduleTick measures what 1,000 scheduled job configs cost
// the reconcilers per tick of the clock (one simulated minute): with no
// tick due, and with every config firing, against the baseline of the
// same 1,000 runs created by hand in the same minute. One op is one
// minute; the store calls are counted per minute, and those on the
// configs themselves (the schedule's own cost) apart.
func BenchmarkScheduleTick(b *testing.B) {
	const jobs = 1000
	for _, tc := range []struct {
		name, cron string // "": no schedule
		byHand     bool
	}{
		{"none due", "0 0 1 1 *", false},
		{"all due", "* * * * *", false},
		{"baseline: by hand", "", true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			clk := backend.NewFakeClock(dlctest.Epoch)
			cs := newCountingStore(memory.New(memory.Options{Clock: clk, Delays: &memory.Delays{
				Create: time.Millisecond, Start: time.Millisecond, Hibernate: time.Millisecond, Delete: time.Millisecond,
				Submit: time.Millisecond, Run: time.Millisecond}}), 0)
			c, err := dlc.New(dlc.WithBackend(cs), dlc.WithClock(clk), dlc.WithWorkers(0), dlc.WithResync(0))
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			ctx := dlc.WithUser(context.Background(), "bench")
			settle := func() {
				for range 1000 {
					c.Reconcile()
					next, ok := clk.Next()
					if !ok || next.Sub(clk.Now()) > 10*time.Second {
						return
					}
					clk.Advance(next.Sub(clk.Now()))
				}
			}
			_, _ = c.ResourceGroups().Register(ctx, quota.Group{ID: "rg", Package: "p", Capacity: quota.Resources{MilliCPU: 64000, Memory: 256 * quota.GiB}})
			g, _ := c.Groups().Create(ctx, "g")
			spec, _ := dlc.NewCluster("c").Groups(g.ID).Resources("p", "rg").Image("ray-2.46.0-py310-cpu").
				Head("head", "cu.4c8g").WorkerGroup("w", "cu.4c8g", 1, 1).Build()
			cl, err := c.Clusters().Create(ctx, spec)
			if err != nil {
				b.Fatal(err)
			}
			settle()
			if _, err := c.Clusters().Start(ctx, cl.ID); err != nil {
				b.Fatal(err)
			}
			settle()
			ids := make([]string, jobs)
			for i := range ids {
				jb := dlc.NewJob(fmt.Sprintf("j%d", i)).OnCluster(cl.ID).COSPackage("cos://jobs-1250000000/a.zip").Entrypoint("python a.py")
				if tc.cron != "" {
					jb.Schedule(tc.cron)
				}
				cfg, err := jb.Build()
				if err != nil {
					b.Fatal(err)
				}
				rec, err := c.Jobs().Create(ctx, cfg, dlc.SaveOptions{})
				if err != nil {
					b.Fatal(err)
				}
				ids[i] = rec.ID
			}
			// Start on the minute, so that each op's minute holds one tick.
			clk.Advance(clk.Now().Truncate(time.Minute).Add(time.Minute).Sub(clk.Now()) - time.Second)
			settle()
			before, err := c.Runs().List(ctx, dlc.RunListOptions{})
			if err != nil {
				b.Fatal(err)
			}
			cs.take()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if tc.byHand {
					for _, id := range ids {
						if _, err := c.Runs().Create(ctx, id, dlc.RunOptions{}); err != nil {
							b.Fatal(err)
						}
					}
				}
				clk.Advance(time.Minute)
				settle()
			}
			b.StopTimer()
			calls, detail := cs.take()
			onJobs := 0
			for _, part := range strings.Split(detail, ", ") {
				var op, kind string
				var n int
				if _, err := fmt.Sscanf(strings.Replace(part, "×", " ", 1), "%s %s %d", &op, &kind, &n); err == nil && kind == "job" {
					onJobs += n
				}
			}
			b.ReportMetric(float64(calls)/float64(b.N), "calls/tick")
			b.ReportMetric(float64(onJobs)/float64(b.N), "job-calls/tick")
			runs, err := c.Runs().List(ctx, dlc.RunListOptions{})
			if err != nil {
				b.Fatal(err)
			}
			made, want := len(runs)-len(before), jobs*b.N
			if tc.cron == "0 0 1 1 *" {
				want = 0
			}
			if made != want {
				b.Fatalf("%d runs made in %d ticks, want %d", made, b.N, want)
			}
		})
	}
}
