package scheduler_test

import (
	"fmt"

	"github.com/aidlc/dlc/scheduler"
)

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

// Primary and standby (G4): the primary takes runs while it runs; while it
// is abnormal the standby does; once it runs again it takes them back.
func ExampleOrderedFailover() {
	members := []scheduler.Candidate{
		{ClusterID: "cls-standby", Running: true, Order: 2},
		{ClusterID: "cls-primary", Running: true, Order: 1},
		{ClusterID: "cls-spare", Running: true}, // a member not in the order comes last
	}
	var p scheduler.OrderedFailover
	show := func() {
		ch, _ := p.Place("run-1", members)
		fmt.Println(ch.ClusterID, "|", ch.Reason)
	}
	show()
	members[1].Abnormal = true
	show()
	members[0].Running = false
	show()
	members[0].Running, members[1].Abnormal = true, false
	show()
	// Output:
	// cls-primary | ordered-failover: #1 in order, the first
	// cls-standby | ordered-failover: #2 in order, the first running (cls-primary abnormal)
	// cls-spare | ordered-failover: no member in the order is running; first running member by id (cls-primary abnormal, cls-standby not running)
	// cls-primary | ordered-failover: #1 in order, the first
}

// Least-loaded (G4, one entry for many clusters): the member with the
// fewest active runs; a tie is broken by the run's id, the same on every
// replica.
func ExampleLeastLoaded() {
	members := []scheduler.Candidate{
		{ClusterID: "cls-a", Running: true, ActiveRuns: 4},
		{ClusterID: "cls-b", Running: true, ActiveRuns: 2},
		{ClusterID: "cls-c", Running: true, Abnormal: true},
	}
	ch, _ := scheduler.LeastLoaded{}.Place("run-1", members)
	fmt.Println(ch.ClusterID, "|", ch.Reason)
	// Output:
	// cls-b | least-loaded: 2 active runs, fewest of 2 running members
}
