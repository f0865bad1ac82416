package dlc_test

import (
	"maps"
	"testing"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/dlctest"
)

// C14: a lowered ceiling keeps its workers reserved until Ray has applied
// it (Ray may run them until then), per worker group: a group that grows
// meanwhile is reserved on top of them, and one that grows back within
// them takes nothing more. Before, the reservation was one sum kept at
// the larger of the old and the new: with x lowered 5 → 1 and y raised
// 1 → 3 before Ray applied either, it held 28 cores where Ray might run
// 36 of a 32-core group.
func TestQuotaDrainingC14(t *testing.T) {
	type step struct {
		// autoscale group to n; "" settles (Ray applies and the workers
		// it removed are gone), or, with apply, only runs the steps due
		// now: Ray applies, and what it removed still terminates.
		group string
		n     int
		apply bool
		// what follows: granted (for an autoscale), refused for quota,
		// the reserved milli-CPU, and what the cluster drains.
		granted  int
		refused  bool
		reserved int64
		draining map[string]int
	}
	settle := func(reserved int64) step { return step{reserved: reserved} }
	apply := func(reserved int64, draining map[string]int) step {
		return step{apply: true, reserved: reserved, draining: draining}
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"another group grows while one drains", []step{
			{group: "x", n: 5, granted: 5, reserved: 28000},
			settle(28000),
			{group: "x", n: 1, granted: 1, reserved: 28000, draining: map[string]int{"x": 5}},
			// Ray may run the head, 5 x and 3 y: 36 cores. 2 y fit.
			{group: "y", n: 3, granted: 2, refused: true, reserved: 32000, draining: map[string]int{"x": 5}},
			// Ray runs the 2 y while the 4 x it removed terminate: 32 cores.
			apply(32000, map[string]int{"x": 5}),
			// y's growth waited in the queue; with the drain done it fits.
			settle(20000),
			{group: "y", n: 3, granted: 3, reserved: 20000},
		}},
		{"a group grows back within what it drains", []step{
			{group: "x", n: 5, granted: 5, reserved: 28000},
			settle(28000),
			{group: "x", n: 1, granted: 1, reserved: 28000, draining: map[string]int{"x": 5}},
			{group: "x", n: 3, granted: 3, reserved: 28000, draining: map[string]int{"x": 5}},
			// 5 → 1 → 3 never asks for 8 workers' worth: Ray runs 5 at most.
			{group: "x", n: 5, granted: 5, reserved: 28000},
			settle(28000),
			{group: "x", n: 2, granted: 2, reserved: 28000, draining: map[string]int{"x": 5}},
			settle(16000),
		}},
		{"a group grows back within what it drains while its workers terminate", []step{
			{group: "x", n: 5, granted: 5, reserved: 28000},
			settle(28000),
			{group: "x", n: 1, granted: 1, reserved: 28000, draining: map[string]int{"x": 5}},
			apply(28000, map[string]int{"x": 5}), // 4 x terminate
			{group: "x", n: 3, granted: 3, reserved: 28000, draining: map[string]int{"x": 5}},
			// Ray runs no new x beside the 4 until they are gone (KubeRay's
			// scale expectations): never more than the 5 held.
			apply(28000, map[string]int{"x": 5}),
			settle(20000),
		}},
		{"two shrinks before Ray applies the first", []step{
			{group: "x", n: 5, granted: 5, reserved: 28000},
			settle(28000),
			{group: "x", n: 3, granted: 3, reserved: 28000, draining: map[string]int{"x": 5}},
			{group: "x", n: 1, granted: 1, reserved: 28000, draining: map[string]int{"x": 5}},
			{group: "y", n: 2, granted: 2, reserved: 32000, draining: map[string]int{"x": 5}},
			apply(32000, map[string]int{"x": 5}),
			settle(16000),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, dlctest.MemoryOptions{})
			// Head 4 cores, x and y 4 cores a worker, in a 32-core group.
			s, err := dlc.NewCluster("drain").Groups(f.grp).Resources("pkg-1", "rg-1").Image("ray-2.46.0-py310-cpu").
				Head("head", "cu.4c16g").WorkerGroup("x", "cu.4c8g", 1, 5).WorkerGroup("y", "cu.4c8g", 1, 5).Build()
			f.must(err)
			cl := f.started(s)
			for i, st := range tc.steps {
				switch {
				case st.apply:
					f.m.Reconcile()
					f.must(f.c.CheckQuota(f.ctx)) // the pods, terminating ones too, request no more than is held
				case st.group == "":
					f.settle()
					f.must(f.c.CheckQuota(f.ctx))
				default:
					res, err := f.c.Clusters().Autoscale(f.ctx, cl.ID, st.group, st.n)
					f.must(err)
					if res.Granted != st.granted || res.QuotaRefused != st.refused {
						t.Fatalf("step %d: %s to %d: granted %d, refused %v (%s); want %d, %v", i, st.group, st.n, res.Granted, res.QuotaRefused, res.Reason, st.granted, st.refused)
					}
				}
				u, err := f.c.ResourceGroups().Get(f.ctx, "rg-1")
				f.must(err)
				if u.Reserved.MilliCPU != st.reserved {
					t.Fatalf("step %d: %d milli-CPU reserved, want %d", i, u.Reserved.MilliCPU, st.reserved)
				}
				got, err := f.c.Clusters().Get(f.ctx, cl.ID)
				f.must(err)
				if !maps.Equal(got.Draining, st.draining) {
					t.Fatalf("step %d: draining %v, want %v", i, got.Draining, st.draining)
				}
			}
		})
	}
}
