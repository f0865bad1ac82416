package dlctest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/dlctest"
	"github.com/aidlc/dlc/job"
)

// docs/testing.md's memory fixture: Ray's outcomes scripted by hooks, the
// reconcilers run on a fake clock, a second replica (TestReadmeSnippets,
// in the repository's root, checks the region against docs/testing.md).
func ExampleNewMemory() {
	// snippet memory
	m := dlctest.NewMemory(dlctest.MemoryOptions{Ray: memory.RayHooks{
		RunOutcome: func(r *job.Run) memory.Outcome {
			return memory.Outcome{Fail: true, Message: "exit code 1", Logs: []string{"Traceback ..."}}
		},
		ClusterStart: func(c *cluster.Cluster) error { return nil },                   // an error makes it abnormal
		Call:         func(ctx context.Context, call, id string) error { return nil }, // fail any Ray call
	}})
	defer m.Close()
	// ... m.Client.Clusters().Create, Start, m.Client.Runs().Create ...
	m.Settle(10*time.Millisecond, 1000) // run the reconcilers and advance the fake clock until nothing is due within 1000 steps
	m.Step(time.Minute)                 // or: move the clock by exactly a minute, running what comes due on the way
	other := m.NewClient()              // a second replica on the same store, settled too
	// end snippet memory
	fmt.Println(other != m.Client, m.Clock.Now().Sub(dlctest.Epoch) >= time.Minute)
	// Output: true true
}
