package platform

import (
	"maps"
	"testing"

	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/quota"
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

// The hold an operation reserves for the cluster it writes (holdFor).
func TestHoldFor(t *testing.T) {
	cpu := func(n int64) quota.Resources { return quota.Resources{MilliCPU: n * 1000} }
	hold := func(n, gen int64) *quota.Hold { return &quota.Hold{Resources: cpu(n), Generation: gen} }
	for _, tc := range []struct {
		name     string
		need     int64
		h        *quota.Hold
		carry    bool
		prevNeed int64
		known    bool
		want     int64
		wantGen  int64
	}{
		{"a start: what it needs", 12, nil, false, 0, false, 12, 5},
		{"a start over a hold that went with a hibernate", 12, hold(28, 3), false, 28, true, 12, 5},
		{"a resize exactly held: what it needs", 20, hold(16, 4), true, 16, true, 20, 5},
		{"a shrink (need counts what drains): the same", 28, hold(28, 4), true, 28, true, 28, 5},
		{"pods beyond the ceilings, reserved by the true-up, kept on top", 20, hold(20, 4), true, 8, true, 32, 5},
		{"a hold made as one sum before Draining: its excess kept", 20, hold(28, 4), true, 16, true, 32, 5},
		{"what came before unknown: the larger", 20, hold(28, 4), true, 0, false, 28, 5},
		{"another operation's hold for this generation: both covered", 12, hold(20, 5), true, 16, true, 20, 5},
		{"an earlier try of this one: not counted twice", 24, hold(24, 5), true, 16, true, 24, 5},
		{"a newer generation's: kept, with its generation", 30, hold(20, 7), true, 16, true, 30, 7},
		{"a restart that removes a group (not kept alike): the hold not lowered", 12, hold(20, 4), true, 12, true, 20, 5},
		{"a restart that removes a group and grows another: on top of it", 20, hold(20, 4), true, 12, true, 28, 5},
		{"need below what it keeps: never lowered", 8, hold(20, 4), true, 16, true, 20, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, gen := holdFor(cpu(tc.need), 5, tc.h, tc.carry, cpu(tc.prevNeed), tc.known)
			if got != cpu(tc.want) || gen != tc.wantGen {
				t.Fatalf("holdFor = %v at %d, want %v at %d", got, gen, cpu(tc.want), tc.wantGen)
			}
		})
	}
}

// What a write keeps draining: a lowered ceiling of a group it runs alike,
// in the group the cluster held quota in.
func TestDrainingAfter(t *testing.T) {
	mk := func(st cluster.State, rg, spec string, x int) *cluster.Cluster {
		cl := &cluster.Cluster{State: st, Replicas: map[string]int{"x": x}, Live: &cluster.Live{ResourceGroup: rg}}
		cl.Live.Head = cluster.HeadGroup{NodeGroup: cluster.NodeGroup{Name: "head", NodeSpec: "cu.4c16g"}}
		cl.Live.AddWorkerGroup("x", spec, 1, 5)
		return cl
	}
	for _, tc := range []struct {
		name       string
		prev, next *cluster.Cluster
		want       map[string]int
	}{
		{"a shrink", mk(cluster.Running, "rg", "cu.4c8g", 5), mk(cluster.Running, "rg", "cu.4c8g", 1), map[string]int{"x": 5}},
		{"a growth", mk(cluster.Running, "rg", "cu.4c8g", 1), mk(cluster.Running, "rg", "cu.4c8g", 3), nil},
		{"a restart from abnormal, smaller", mk(cluster.Abnormal, "rg", "cu.4c8g", 5), mk(cluster.Starting, "rg", "cu.4c8g", 1), map[string]int{"x": 5}},
		{"a restart that changes the group's node spec: held beside, not drained", mk(cluster.Abnormal, "rg", "cu.4c8g", 5), mk(cluster.Starting, "rg", "cu.8c32g", 1), nil},
		{"a start from hibernated", mk(cluster.Hibernated, "rg", "cu.4c8g", 5), mk(cluster.Starting, "rg", "cu.4c8g", 1), nil},
		{"a start in another group", mk(cluster.Abnormal, "rg", "cu.4c8g", 5), mk(cluster.Starting, "rg-2", "cu.4c8g", 1), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := drainingAfter(tc.prev, tc.next); !maps.Equal(got, tc.want) {
				t.Fatalf("drainingAfter = %v, want %v", got, tc.want)
			}
		})
	}
}
