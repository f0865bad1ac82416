package dlc_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
)

// A run's logs outlive Ray's record of them: the tail kept when the run
// ended is what Logs returns once Ray has forgotten the run (here told to,
// as a head that goes with its cluster does), after a line saying how
// many earlier lines were not kept. Follow sends every line once, the
// first ones while the run is still live, and closes when it has ended.
func TestRunLogsKeptAndFollowed(t *testing.T) {
	const printed = 300
	d := fast
	// Long enough for a loaded machine (the full suite under -race on two
	// cores) to read a first line while it runs: Follow reads every 0.5 s.
	d.Run = 5 * time.Second
	var lines []string
	for i := range printed {
		lines = append(lines, fmt.Sprintf("line %d", i))
	}
	be := memory.New(memory.Options{Delays: &d, Ray: memory.RayHooks{
		RunOutcome: func(*job.Run) memory.Outcome { return memory.Outcome{Logs: lines} },
	}})
	c, err := dlc.New(dlc.WithBackend(be))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(dlc.WithUser(context.Background(), "alice"), time.Minute)
	defer cancel()
	if _, err := c.ResourceGroups().Register(ctx, quota.Group{ID: "rg-1", Package: "pkg-1",
		Capacity: quota.Resources{MilliCPU: 32000, Memory: 128 * quota.GiB}}); err != nil {
		t.Fatal(err)
	}
	cfg, err := dlc.NewJob("logs").OnDemand("pkg-1", "rg-1").Image("ray-2.46.0-py310-cpu").Head("head", "cu.4c8g").
		WorkerGroup("cpu", "cu.4c8g", 1, 1).COSPackage("cos://jobs-1250000000/a.zip").Entrypoint("python a.py").Build()
	if err != nil {
		t.Fatal(err)
	}
	_, r, err := job.Submit(ctx, c, cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	follow, err := c.Runs().Follow(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	var stateAtFirst job.RunState
	for l := range follow {
		if len(got) == 0 {
			cur, err := c.Runs().Get(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			stateAtFirst = cur.State
		}
		got = append(got, l)
	}
	want := append(slices.Clone(lines), fmt.Sprintf("Job %s succeeded", r.ID))
	if !slices.Equal(got, want) {
		t.Fatalf("followed %d lines (first %q, last %q), want %d", len(got), got[0], got[len(got)-1], len(want))
	}
	if !stateAtFirst.Live() {
		t.Errorf("the first line came with the run %s, want it live (followed as it ran)", stateAtFirst)
	}

	ended, err := c.Runs().Wait(ctx, r.ID, func(r *job.Run) (bool, error) { return r.LogsKept && !r.State.Live(), nil })
	if err != nil {
		t.Fatal(err)
	}
	if ended.State != job.Succeeded || len(ended.LogTail) != job.MaxLogTailLines || ended.LogsDropped != len(want)-job.MaxLogTailLines {
		t.Fatalf("%s, kept %d lines, dropped %d", ended.State, len(ended.LogTail), ended.LogsDropped)
	}
	if err := be.Ray.ForgetRun(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	kept, err := c.Runs().Logs(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantKept := append([]string{fmt.Sprintf("[%d earlier lines not kept]", ended.LogsDropped)}, want[ended.LogsDropped:]...)
	if !slices.Equal(kept, wantKept) {
		t.Errorf("logs once Ray forgot the run: %d lines, first %q", len(kept), kept[0])
	}
}
