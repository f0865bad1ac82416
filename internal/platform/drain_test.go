package platform

import (
	"maps"
	"testing"

	"github.com/aidlc/dlc/cluster"
)

// What a lowered ceiling drains follows Ray's report down, never up, and
// a report counts only at the cluster's generation (workersAt).
func TestDrainLeft(t *testing.T) {
	for _, tc := range []struct {
		name              string
		replicas, drains  map[string]int
		workers, wantLeft map[string]int
	}{
		{"Ray runs the lower ceiling: nothing drains", map[string]int{"x": 1}, map[string]int{"x": 5}, map[string]int{"x": 1}, nil},
		{"Ray runs fewer than the ceiling", map[string]int{"x": 2}, map[string]int{"x": 5}, map[string]int{}, nil},
		{"part way down", map[string]int{"x": 1, "y": 2}, map[string]int{"x": 5}, map[string]int{"x": 3, "y": 2}, map[string]int{"x": 3}},
		{"not yet down", map[string]int{"x": 1}, map[string]int{"x": 5}, map[string]int{"x": 5}, map[string]int{"x": 5}},
		{"a report of more never raises it", map[string]int{"x": 1}, map[string]int{"x": 5}, map[string]int{"x": 9}, map[string]int{"x": 5}},
		{"each group on its own", map[string]int{"x": 1, "y": 1}, map[string]int{"x": 4, "y": 3}, map[string]int{"x": 1, "y": 3}, map[string]int{"y": 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := &cluster.Cluster{Replicas: tc.replicas, Draining: tc.drains}
			if got := drainLeft(cl, tc.workers); !maps.Equal(got, tc.wantLeft) {
				t.Fatalf("drainLeft = %v, want %v", got, tc.wantLeft)
			}
		})
	}
}

func TestWorkersAt(t *testing.T) {
	obs := cluster.Observation{Generation: 4, Pods: []cluster.Pod{
		{Role: "head", Group: "head"}, {Role: "worker", Group: "x"}, {Role: "worker", Group: "x"}, {Role: "worker", Group: "y"},
	}}
	if got, want := workersAt(obs, 4), map[string]int{"x": 2, "y": 1}; !maps.Equal(got, want) {
		t.Fatalf("at the cluster's generation: %v, want %v", got, want)
	}
	if got := workersAt(obs, 5); got != nil {
		t.Fatalf("Ray behind the cluster's generation: %v, want nil (it may still apply an older ceiling)", got)
	}
	if got := workersAt(cluster.Observation{Generation: 4, Queued: true, Pods: obs.Pods}, 4); got != nil {
		t.Fatalf("Ray's operator has the change in its backlog: %v, want nil", got)
	}
	if got := workersAt(cluster.Observation{Generation: 5}, 5); got == nil || len(got) != 0 {
		t.Fatalf("no pods at the generation: %v, want an empty count", got)
	}
}
