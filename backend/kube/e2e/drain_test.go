package e2e_test

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/cluster"
)

// A shrink's workers keep their quota while they terminate, per worker
// group (C14; cluster.Cluster.Draining). In rg-20 (20 cores), a cluster of
// a 4-core head, 3 workers of group x and 1 of group y (4 cores each)
// holds all 20. KubeRay deletes a shrinking group's pods and creates a
// growing one's in one reconcile, and a deleted pod runs until its
// containers have stopped (the kubelet stand-in lets them linger). So an
// edit of x to 1 and y to 2 at once, which Ray would run as 3 x and 2 y
// for as long as the two x terminate (24 cores), is refused for quota;
// before, the hold was one sum, kept at the larger of old and new (20),
// and the edit went through. x alone to 1: its two workers terminate
// with their quota held, and y to 2 is refused until they are gone; then
// it fits. A watcher of the namespace's pods sees at most 4 workers at
// every event, and one of the store never a version of the group over
// capacity.
func TestShrinkHoldsWhileWorkersTerminate(t *testing.T) {
	t.Parallel()
	a := newAutoscaleScene(t)
	undo := a.w.loop.Kubelet.Linger(a.ns, 10*time.Minute) // the x pods go when undo says
	defer undo()
	spec, err := dlc.NewCluster("drain").Groups(a.grp).Resources("pkg-1", "rg-20").Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c8g").WorkerGroup("x", "cu.4c8g", 3, 3).WorkerGroup("y", "cu.4c8g", 1, 1).Build()
	if err != nil {
		t.Fatal(err)
	}
	id := a.run(spec).ID
	held := func() (int64, error) {
		u, err := a.c.ResourceGroups().Get(a.ctx, "rg-20")
		return u.Holders[id].MilliCPU, err
	}
	// workers waits until the cluster runs n workers (terminating ones
	// too) and holds cpu milli-CPU, checking that Kubernetes never ran
	// more than 4 of its workers at once (20 cores less the head's 4).
	workers := func(what string, n int, cpu int64) {
		t.Helper()
		waitFor(t, what, func() (bool, string) {
			now, most := a.workers.now(id)
			if most > 4 {
				t.Fatalf("%s: Kubernetes ran %d workers of the cluster at once, rg-20 covers 4", what, most)
			}
			h, err := held()
			if err != nil {
				return false, err.Error()
			}
			return now == n && h == cpu, fmt.Sprintf("%d workers, holding %dm", now, h)
		})
	}
	resize := func(x, y int) error {
		t.Helper()
		cur, err := a.c.Clusters().Get(a.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		cur.Spec.Workers[0].Instances, cur.Spec.Workers[1].Instances = cluster.Range(x, x), cluster.Range(y, y)
		_, err = a.c.Clusters().Update(a.ctx, cur)
		return err
	}
	draining := func(want map[string]int) {
		t.Helper()
		waitFor(t, fmt.Sprintf("draining %v", want), func() (bool, string) {
			cl, err := a.c.Clusters().Get(a.ctx, id)
			if err != nil {
				return false, err.Error()
			}
			return maps.Equal(cl.Draining, want), fmt.Sprint(cl.Draining)
		})
	}

	workers("the cluster running", 4, 20000)
	if err := resize(1, 2); !errors.Is(err, dlc.ErrQuota) {
		t.Fatalf("x to 1 and y to 2 at once, while Ray would run 3 x and 2 y: %v, want refused for quota", err)
	}
	if err := resize(1, 1); err != nil {
		t.Fatal(err)
	}
	draining(map[string]int{"x": 3})
	waitFor(t, "KubeRay deleting two x workers", func() (bool, string) {
		cl, err := a.c.Clusters().Details(a.ctx, id)
		if err != nil {
			return false, err.Error()
		}
		deleting := 0
		var pods strings.Builder
		for _, p := range cl.Pods {
			if p.Group == "x" && p.Status == "Terminating" {
				deleting++
			}
			fmt.Fprintf(&pods, " %s/%s/%s", p.Name, p.Group, p.Status)
		}
		return deleting == 2, fmt.Sprintf("pods%s; replicas %v, draining %v", pods.String(), cl.Cluster.Replicas, cl.Cluster.Draining)
	})
	if err := resize(1, 2); !errors.Is(err, dlc.ErrQuota) {
		t.Fatalf("y to 2 while two x workers terminate: %v, want refused for quota", err)
	}
	draining(map[string]int{"x": 3})
	workers("the x workers terminating, their quota held", 4, 20000)

	undo() // the x workers stop
	workers("the x workers gone", 2, 12000)
	draining(nil)
	if err := resize(1, 2); err != nil {
		t.Fatal(err)
	}
	workers("y grown", 3, 16000)
	a.clean()
}
