package cluster_test

import (
	"maps"
	"testing"

	"github.com/aidlc/dlc/cluster"
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
