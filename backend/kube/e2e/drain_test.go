package e2e_test

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/kube"
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

// A start from abnormal after an edit that removed a worker group: KubeRay
// reconciles only the groups in the RayCluster's spec, so the removed
// group's workers, still running, would run on (held and metered) until
// the cluster hibernates or goes. The apply keeps the group at no workers
// until they are gone (keepRemovedGroups); the hold covers them until
// then, and is trued up to what the cluster runs after. In rg-20, a
// cluster of a head, 1 x and 2 y workers (16 cores) whose head fails is
// abnormal; y is removed, the cluster started again, and the head comes
// back. Before: the two y workers ran on, the hold at 16,000m.
func TestRestartFromAbnormalRemovesAGroupsWorkers(t *testing.T) {
	t.Parallel()
	a := newAutoscaleScene(t)
	spec, err := dlc.NewCluster("restart").Groups(a.grp).Resources("pkg-1", "rg-20").Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c8g").WorkerGroup("x", "cu.4c8g", 1, 1).WorkerGroup("y", "cu.4c8g", 2, 2).Build()
	if err != nil {
		t.Fatal(err)
	}
	id := a.run(spec).ID
	pods := func() (x, y int, all string) {
		cl, err := a.c.Clusters().Details(a.ctx, id)
		if err != nil {
			return 0, 0, err.Error()
		}
		var b strings.Builder
		for _, p := range cl.Pods {
			switch p.Group {
			case "x":
				x++
			case "y":
				y++
			}
			fmt.Fprintf(&b, " %s/%s/%s", p.Name, p.Group, p.Status)
		}
		return x, y, b.String()
	}
	waitFor(t, "1 x and 2 y workers", func() (bool, string) { x, y, all := pods(); return x == 1 && y == 2, all })
	undo := a.w.loop.Kubelet.FailMatching(a.ns, labels.SelectorFromSet(labels.Set{
		kube.KeyClusterID: id, "ray.io/node-type": "head"}), "OOMKilled")
	defer undo()
	waitFor(t, "the cluster abnormal", func() (bool, string) { s := state(t, a.c, id); return s == cluster.Abnormal, string(s) })
	cur, err := a.c.Clusters().Get(a.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.Workers = cur.Spec.Workers[:1]
	if res, err := a.c.Clusters().Update(a.ctx, cur); err != nil || len(res.NeedsRestart) == 0 {
		t.Fatalf("the edit removing y: %+v, %v; want it to need a restart", res, err)
	}
	if _, err := a.c.Clusters().Start(a.ctx, id); err != nil {
		t.Fatal(err)
	}
	undo()
	waitFor(t, "the cluster running with x alone, y's workers gone, the hold trued up", func() (bool, string) {
		x, y, all := pods()
		u, err := a.c.ResourceGroups().Get(a.ctx, "rg-20")
		if err != nil {
			return false, err.Error()
		}
		s := state(t, a.c, id)
		return s == cluster.Running && x == 1 && y == 0 && u.Holders[id].MilliCPU == 8000,
			fmt.Sprintf("%s, pods%s, holding %s", s, all, u.Holders[id])
	})
	a.clean()
}
