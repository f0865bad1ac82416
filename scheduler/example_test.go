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
