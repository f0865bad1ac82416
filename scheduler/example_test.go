package scheduler_test

import (
	"fmt"
	"time"

	"github.com/aidlc/dlc/quota"
	"github.com/aidlc/dlc/scheduler"
)

func ExampleQueue_Admit() {
	start := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	q := scheduler.NewQueue(scheduler.QueueOptions{MaxWait: 30 * time.Minute})
	for _, it := range []scheduler.Item{
		{RunID: "train-big", Priority: 9, Seq: 1, Enqueued: start, Demand: quota.Cores(64)},
		{RunID: "eval", Priority: 5, Seq: 2, Enqueued: start, Demand: quota.Cores(8)},
		{RunID: "etl", Priority: 5, Seq: 3, Enqueued: start, Demand: quota.Cores(8)},
	} {
		if err := q.Push(it); err != nil {
			fmt.Println(err)
		}
	}

	// 16 cores free: the big head does not fit, the smaller runs behind it go.
	for _, it := range q.Admit(start.Add(time.Minute), quota.Cores(16)) {
		fmt.Println("admitted", it.RunID)
	}

	// An hour later train-big has waited past MaxWait: it holds back what is
	// queued behind it until 64 cores are free.
	_ = q.Push(scheduler.Item{RunID: "small", Priority: 1, Seq: 4, Enqueued: start.Add(time.Hour), Demand: quota.Cores(1)})
	fmt.Println("admitted", len(q.Admit(start.Add(time.Hour), quota.Cores(32))))
	for _, it := range q.Admit(start.Add(time.Hour), quota.Cores(65)) {
		fmt.Println("admitted", it.RunID)
	}
	// Output:
	// admitted eval
	// admitted etl
	// admitted 0
	// admitted train-big
	// admitted small
}

func ExampleRandom() {
	members := []scheduler.Candidate{
		{ClusterID: "gpu-a100", Running: true},
		{ClusterID: "gpu-v100", Running: true, Abnormal: true},
		{ClusterID: "cpu-pool"},
	}
	p := scheduler.NewRandom(1)
	id, ok := p.Pick(members)
	fmt.Println(id, ok)

	none := []scheduler.Candidate{{ClusterID: "gpu-v100", Running: true, Abnormal: true}}
	if _, ok := p.Pick(none); !ok {
		fmt.Println("waits:", scheduler.WhyNone(none))
	}
	// Output:
	// gpu-a100 true
	// waits: all members abnormal
}
