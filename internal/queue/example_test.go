package queue_test

import (
	"fmt"
	"time"

	"github.com/aidlc/dlc/internal/queue"
	"github.com/aidlc/dlc/quota"
)

func ExampleQueue_Admit() {
	start := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	q := queue.NewQueue(queue.QueueOptions{MaxWait: 30 * time.Minute})
	for _, it := range []queue.Item{
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
	_ = q.Push(queue.Item{RunID: "small", Priority: 1, Seq: 4, Enqueued: start.Add(time.Hour), Demand: quota.Cores(1)})
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
