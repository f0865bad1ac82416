package cluster_test

import (
	"maps"
	"testing"

	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/quota"
)

// HeldReplicas covers the larger of a group's ceiling and what it drains;
// a drain of a group with no ceiling is nothing.
func TestHeldReplicas(t *testing.T) {
	cl := &cluster.Cluster{Replicas: map[string]int{"x": 1, "y": 3}, Draining: map[string]int{"x": 5, "y": 2, "z": 7}}
	if got, want := cl.HeldReplicas(), map[string]int{"x": 5, "y": 3}; !maps.Equal(got, want) {
		t.Fatalf("HeldReplicas = %v, want %v", got, want)
	}
	got := cl.HeldReplicas()
	got["x"] = 0
	if cl.Replicas["x"] != 1 {
		t.Fatal("HeldReplicas shares its map with Replicas")
	}
}

// What Ray may run of a live cluster: per node group, the larger of its
// held workers and its pods, and the pods of a group it no longer has.
func TestMayRun(t *testing.T) {
	cpu := func(cores int64) int64 { return cores * 1000 }
	pod := func(role, group string, cores int64) cluster.Pod {
		return cluster.Pod{Role: role, Group: group, Requests: quota.Resources{MilliCPU: cpu(cores)}}
	}
	live := func() *cluster.Cluster {
		cl := &cluster.Cluster{Replicas: map[string]int{"x": 1, "y": 2}, Live: &cluster.Live{ResourceGroup: "rg"}}
		cl.Live.Head = cluster.HeadGroup{NodeGroup: cluster.NodeGroup{Name: "head", NodeSpec: "cu.4c16g"}}
		cl.Live.AddWorkerGroup("x", "cu.4c8g", 1, 5)
		cl.Live.AddWorkerGroup("y", "cu.4c8g", 0, 5)
		return cl
	}
	for _, tc := range []struct {
		name     string
		draining map[string]int
		pods     []cluster.Pod
		want     int64 // cores
	}{
		{"Ray cannot tell: the held workers", nil, nil, 4 + 4 + 8},
		{"fewer pods than the ceilings: the ceilings", nil, []cluster.Pod{pod("head", "head", 4), pod("worker", "x", 4)}, 16},
		{"what drains counts per group", map[string]int{"x": 4}, nil, 4 + 16 + 8},
		{"more pods of a group than it holds: the pods", nil, []cluster.Pod{pod("worker", "x", 4), pod("worker", "x", 4), pod("worker", "x", 4)}, 4 + 12 + 8},
		{"a head asking more than its spec: the pod", nil, []cluster.Pod{pod("head", "head", 5)}, 5 + 4 + 8},
		{"pods of a group it no longer has: on top", nil, []cluster.Pod{pod("worker", "gone", 4), pod("worker", "gone", 4)}, 4 + 4 + 8 + 8},
		{"a y pod does not make up for an x one", nil, []cluster.Pod{pod("worker", "y", 4), pod("worker", "y", 4), pod("worker", "y", 4)}, 4 + 4 + 12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := live()
			cl.Draining = tc.draining
			got, err := cl.MayRun(quota.DefaultCatalog(), tc.pods)
			if err != nil {
				t.Fatal(err)
			}
			if got.MilliCPU != cpu(tc.want) {
				t.Fatalf("MayRun = %v, want %d cores", got, tc.want)
			}
		})
	}
	if got, err := (&cluster.Cluster{}).MayRun(quota.DefaultCatalog(), []cluster.Pod{pod("head", "head", 4)}); err != nil || !got.IsZero() {
		t.Fatalf("no live environment: %v %v, want nothing", got, err)
	}
}

// What a cluster held of the groups another environment runs alike.
func TestHeldAlike(t *testing.T) {
	cl := &cluster.Cluster{Replicas: map[string]int{"x": 2, "y": 1}, Draining: map[string]int{"y": 3}, Live: &cluster.Live{ResourceGroup: "rg"}}
	cl.Live.Head = cluster.HeadGroup{NodeGroup: cluster.NodeGroup{Name: "head", NodeSpec: "cu.4c16g"}}
	cl.Live.AddWorkerGroup("x", "cu.4c8g", 1, 5)
	cl.Live.AddWorkerGroup("y", "cu.4c8g", 0, 5)
	env := func(edit func(*cluster.Environment)) *cluster.Environment {
		e := cl.Live.Environment.DeepCopy()
		edit(e)
		return e
	}
	for _, tc := range []struct {
		name string
		env  *cluster.Environment
		want int64 // cores
	}{
		{"the same environment: all it holds", env(func(*cluster.Environment) {}), 4 + 8 + 12},
		{"a group removed", env(func(e *cluster.Environment) { e.Workers = e.Workers[:1] }), 4 + 8},
		{"a group's node spec changed", env(func(e *cluster.Environment) { e.Workers[0].NodeSpec = "cu.8c32g" }), 4 + 12},
		{"the head made highly available", env(func(e *cluster.Environment) { e.Head.HighAvailability = true }), 8 + 12},
		{"a group added: nothing of it held", env(func(e *cluster.Environment) { e.AddWorkerGroup("z", "cu.4c8g", 1, 1) }), 4 + 8 + 12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := cl.HeldAlike(quota.DefaultCatalog(), tc.env)
			if err != nil || got.MilliCPU != tc.want*1000 {
				t.Fatalf("HeldAlike = %v, %v; want %d cores", got, err, tc.want)
			}
		})
	}
}
