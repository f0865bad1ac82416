package queue

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/aidlc/dlc/quota"
)

// benchShapes are resource packages of a few sizes and shapes; every one
// fits benchCapacity, so a queue always drains.
var benchShapes = []quota.Resources{
	{MilliCPU: 2000, Memory: 8 * quota.GiB},
	{MilliCPU: 4000, Memory: 16 * quota.GiB},
	{MilliCPU: 8000, Memory: 32 * quota.GiB},
	{MilliCPU: 8000, Memory: 32 * quota.GiB, GPU: 1},
	{MilliCPU: 16000, Memory: 64 * quota.GiB, GPU: 2},
	{MilliCPU: 32000, Memory: 128 * quota.GiB, GPU: 4},
	{MilliCPU: 4000, Memory: 64 * quota.GiB},
	{MilliCPU: 64000, Memory: 256 * quota.GiB, GPU: 8},
}

var benchCapacity = quota.Resources{MilliCPU: 128000, Memory: 512 * quota.GiB, GPU: 8}

const (
	benchGroups   = 10
	benchPerGroup = 10_000
)

// benchItems returns, per resource group, the items to queue: mixed
// priorities and demands, enqueued over the hour before t0.
func benchItems() [][]Item {
	rng := rand.New(rand.NewPCG(1, 2))
	groups := make([][]Item, benchGroups)
	for g := range groups {
		items := make([]Item, benchPerGroup)
		for i := range items {
			items[i] = Item{
				RunID:    fmt.Sprintf("g%d-r%d", g, i),
				Priority: 1 + rng.IntN(9),
				Seq:      uint64(i),
				Enqueued: t0.Add(-time.Hour + time.Duration(i)*time.Hour/benchPerGroup),
				Demand:   benchShapes[rng.IntN(len(benchShapes))],
			}
		}
		groups[g] = items
	}
	return groups
}

// BenchmarkAdmit100k queues 100,000 on-demand runs across 10 resource
// groups (10,000 each) and admits them all the way the platform would: each
// step the older half of the running runs finish, their quota is freed and
// Admit is called, the clock moving on a second per step (with a 10-minute
// starvation bound, so some steps are held back by a starving run).
//
// Building the queues (100,000 Pushes) is excluded with b.StopTimer /
// b.StartTimer; ns/run is the timed time per admitted run, admits/op the
// number of Admit calls per iteration.
func BenchmarkAdmit100k(b *testing.B) {
	groups := benchItems()
	queues := make([]*Queue, benchGroups)
	running := make([][]Item, benchGroups)
	b.ReportAllocs()
	calls := 0
	for b.Loop() {
		b.StopTimer()
		for g, items := range groups {
			q := NewQueue(QueueOptions{MaxWait: 10 * time.Minute})
			for _, it := range items {
				if err := q.Push(it); err != nil {
					b.Fatal(err)
				}
			}
			queues[g] = q
			running[g] = running[g][:0]
		}
		b.StartTimer()
		for g, q := range queues {
			now := t0
			free := benchCapacity
			for q.Len() > 0 {
				done := (len(running[g]) + 1) / 2
				for _, it := range running[g][:done] {
					free = free.Add(it.Demand)
				}
				running[g] = append(running[g][:0], running[g][done:]...)
				admitted := q.Admit(now, free)
				calls++
				for _, it := range admitted {
					free = free.Sub(it.Demand)
				}
				running[g] = append(running[g], admitted...)
				now = now.Add(time.Second)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchGroups*benchPerGroup), "ns/run")
	b.ReportMetric(float64(calls)/float64(b.N), "admits/op")
}

// BenchmarkAdmitNothingFits10k is the common call after a quota change
// that frees too little: 10,000 queued, nothing fits, nothing starving.
func BenchmarkAdmitNothingFits10k(b *testing.B) {
	q := NewQueue(QueueOptions{MaxWait: 24 * time.Hour})
	for _, it := range benchItems()[0] {
		if err := q.Push(it); err != nil {
			b.Fatal(err)
		}
	}
	free := quota.Resources{MilliCPU: 1000, Memory: 64 * quota.GiB, GPU: 8}
	b.ReportAllocs()
	for b.Loop() {
		if got := q.Admit(t0, free); got != nil {
			b.Fatal("admitted")
		}
	}
}

// BenchmarkPush10k builds one resource group's queue of 10,000 runs.
func BenchmarkPush10k(b *testing.B) {
	items := benchItems()[0]
	b.ReportAllocs()
	for b.Loop() {
		q := NewQueue(QueueOptions{})
		for _, it := range items {
			if err := q.Push(it); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(items)), "ns/push")
}

// BenchmarkAdmitNothingFitsOddShapes10k is the worst case of the pruning:
// two demand shapes neither of which fits, whose component-wise minimum
// does, so Admit looks at every item to find that none fits.
func BenchmarkAdmitNothingFitsOddShapes10k(b *testing.B) {
	q := NewQueue(QueueOptions{})
	for i := range benchPerGroup {
		d := quota.Resources{MilliCPU: 8000, Memory: 4 * quota.GiB}
		if i%2 == 1 {
			d = quota.Resources{MilliCPU: 1000, Memory: 64 * quota.GiB}
		}
		if err := q.Push(Item{RunID: fmt.Sprint(i), Priority: 1 + i%9, Seq: uint64(i), Enqueued: t0, Demand: d}); err != nil {
			b.Fatal(err)
		}
	}
	free := quota.Resources{MilliCPU: 4000, Memory: 32 * quota.GiB}
	b.ReportAllocs()
	for b.Loop() {
		if got := q.Admit(t0, free); got != nil {
			b.Fatal("admitted")
		}
	}
}
