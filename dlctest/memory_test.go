package dlctest_test

import (
	"context"
	"testing"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/dlctest"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
)

// Step moves the fake clock by exactly d, running what comes due on the
// way: an hour-long run is running after a minute's step and after 59
// more, and has ended only once the hour has passed; Settle, by
// contrast, runs it to its end.
func TestMemoryStep(t *testing.T) {
	d := memory.DefaultDelays
	d.Run = time.Hour
	m := dlctest.NewMemory(dlctest.MemoryOptions{Delays: &d})
	defer m.Close()
	ctx := context.Background()
	c := m.Client
	r := submitOnDemand(t, ctx, c, "long")
	start := m.Clock.Now()
	state := func() job.RunState {
		got, err := c.Runs().Get(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got.State
	}
	if m.Step(time.Minute); !m.Clock.Now().Equal(start.Add(time.Minute)) || state() != job.Running {
		t.Fatalf("after a minute's step: clock +%s, run %s", m.Clock.Now().Sub(start), state())
	}
	for range 58 {
		m.Step(time.Minute)
	}
	if s := state(); s != job.Running || !m.Clock.Now().Equal(start.Add(59*time.Minute)) {
		t.Fatalf("after 59 minutes: %s", s)
	}
	m.Step(2 * time.Minute)
	if s := state(); s != job.Succeeded {
		t.Fatalf("after 61 minutes: %s", s)
	}
}

// TestMemoryDrive: code that blocks on the platform (a handler's Wait)
// returns while Drive moves the fixture from its own goroutine; the
// test's own Step takes turns with it; MemoryOptions.T closes the
// clients when the test ends.
func TestMemoryDrive(t *testing.T) {
	var closed *dlc.Client
	t.Run("drive", func(t *testing.T) {
		d := memory.DefaultDelays
		d.Run = time.Hour // no step of the test's own reaches its end
		m := dlctest.NewMemory(dlctest.MemoryOptions{T: t, Delays: &d})
		closed = m.NewClient()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a bound, not a wait
		defer cancel()
		c := m.Client
		r := submitOnDemand(t, ctx, c, "driven")
		stop := m.Drive(ctx, time.Minute, time.Millisecond)
		defer stop()
		m.Step(time.Second) // the test's own steps take turns with the driver's
		got, err := c.Runs().Wait(ctx, r.ID, func(r *job.Run) (bool, error) { return r.State.Terminal(), nil })
		if err != nil || got.State != job.Succeeded {
			t.Fatalf("Wait while driven: %v, %+v", err, got)
		}
	})
	if err := closed.Ready(context.Background()); err == nil {
		t.Fatal("a client of a fixture made with T is still open after the test")
	}
}

// submitOnDemand registers resource group rg-1 on c and submits a run of
// an on-demand job config named name in it.
func submitOnDemand(t *testing.T, ctx context.Context, c *dlc.Client, name string) *job.Run {
	t.Helper()
	if _, err := c.ResourceGroups().Register(ctx, quota.Group{ID: "rg-1", Package: "pkg-1",
		Capacity: quota.Resources{MilliCPU: 32000, Memory: 128 * quota.GiB}}); err != nil {
		t.Fatal(err)
	}
	cfg, err := dlc.NewJob(name).OnDemand("pkg-1", "rg-1").Image("ray-2.46.0-py310-cpu").Head("head", "cu.4c8g").
		WorkerGroup("cpu", "cu.4c8g", 1, 1).COSPackage("cos://jobs-1250000000/a.zip").Entrypoint("python a.py").Build()
	if err != nil {
		t.Fatal(err)
	}
	_, r, err := job.Submit(ctx, c, cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	return r
}
