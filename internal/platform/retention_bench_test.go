package platform

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/job"
)

// BenchmarkRetainFinishing measures the retention's work when a run of a
// job config finishes: the run reconciler's retain step on it, with the
// job at its count (1,000 finished runs kept, so the oldest is deleted:
// Ray told to forget it, the store's compare-and-swap delete) or within
// it, beside others finished runs of other job configs. The work must
// not grow with the others: the count looks at the job's own finished
// runs only, through the index of finished runs by job.
func BenchmarkRetainFinishing(b *testing.B) {
	for _, atCount := range []bool{true, false} {
		for _, others := range []int{0, 10_000, 100_000} {
			b.Run(fmt.Sprintf("atCount=%v/others=%d", atCount, others), func(b *testing.B) {
				benchRetain(b, atCount, others)
			})
		}
	}
}

func benchRetain(b *testing.B, atCount bool, others int) {
	ctx := context.Background()
	clk := backend.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	const perJob = 1000
	c, err := New(WithBackend(memory.New(memory.Options{Clock: clk})), WithClock(clk), WithWorkers(0), WithResync(0),
		WithRunRetention(DefaultRunRetention, perJob))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	seq := 0
	finish := func(jobID string) *job.Run {
		seq++
		now := clk.Now()
		r := &job.Run{ID: fmt.Sprintf("run-%09d", seq), JobID: jobID, State: job.Succeeded, RayDone: true,
			SubmittedAt: now, FinishedAt: now, Seq: uint64(seq), Logs: "memory://logs/x"}
		if r.Version, err = c.acc.create(ctx, kindRun, r.ID, runLabels(r), r); err != nil {
			b.Fatal(err)
		}
		clk.Advance(time.Millisecond)
		return r
	}
	for i := range others {
		finish(fmt.Sprintf("job-other-%d", i%100)) // 100 other job configs
	}
	kept := perJob
	if !atCount {
		kept = perJob / 2
	}
	for range kept {
		finish("job-x")
	}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		r := finish("job-x")
		b.StartTimer()
		if _, err := (runReconciler{c}).retain(ctx, r); err != nil {
			b.Fatal(err)
		}
		if !atCount {
			b.StopTimer()
			if err := c.store.Delete(ctx, kindRun, r.ID, r.Version); err != nil { // the job stays within its count
				b.Fatal(err)
			}
			b.StartTimer()
		}
	}
	b.StopTimer()
	if n := c.finished.count("job-x"); n > perJob {
		b.Fatalf("job-x keeps %d finished runs, more than %d", n, perJob)
	}
}
