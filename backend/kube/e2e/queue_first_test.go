package e2e_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/event"
	"github.com/aidlc/dlc/job"
)

// Quota serves the queue first on Kubernetes (issue 42), with KubeRay's
// reconcilers and the autoscaler stand-in: two idle autoscaling clusters
// (a 4-core head, 4-core workers in [0, 4], the autoscaler running none)
// hold a worker of headroom each, 16 of the group's 20 cores. A
// priority-9 on-demand run of 8 cores does not fit the 4 left: the
// clusters give their headroom back (their maxReplicas lowered to what
// the autoscaler runs, the quota released once KubeRay runs it) and the
// run is admitted; reserved but not running is then zero until the queue
// is served, and the headroom is lent again as far as quota allows.
func TestIdleHeadroomServesTheQueueOnKubernetes(t *testing.T) {
	a := newAutoscaleScene(t)
	idle := []*cluster.Cluster{a.start("idle1", 0, 4), a.start("idle2", 0, 4)}
	waitFor(t, "the headroom lent", func() (bool, string) {
		u, err := a.c.ResourceGroups().Get(a.ctx, "rg-20")
		if err != nil {
			return false, err.Error()
		}
		return u.Reserved.MilliCPU == 16000 && u.Headroom.MilliCPU == 8000, fmt.Sprintf("reserved %s, headroom %s", u.Reserved, u.Headroom)
	})
	r := a.submit("queued", 9, 1, 1)
	took := waitFor(t, "the run admitted", func() (bool, string) {
		u, err := a.c.ResourceGroups().Get(a.ctx, "rg-20")
		if err != nil {
			return false, err.Error()
		}
		_, held := u.Holders["od-"+r.ID]
		return held, fmt.Sprintf("reserved %s, headroom %s", u.Reserved, u.Headroom)
	})
	t.Logf("the priority-9 run admitted %s after its submit, the idle clusters' headroom given back", took.Round(time.Millisecond))
	// A cluster whose hold is released only once KubeRay runs its lower
	// ceiling holds its headroom a moment longer: what settles is one
	// cluster lent again, the other still yielded.
	waitFor(t, "the headroom lent again as far as quota allows", func() (bool, string) {
		u, err := a.c.ResourceGroups().Get(a.ctx, "rg-20")
		if err != nil {
			return false, err.Error()
		}
		yielded := 0
		for _, cl := range idle {
			got, err := a.c.Clusters().Get(a.ctx, cl.ID)
			if err != nil {
				return false, err.Error()
			}
			if got.Growth != nil {
				t.Fatalf("cluster %s: its headroom is stored as a growth: %+v", cl.ID, got.Growth)
			}
			yielded += len(got.Yielded)
		}
		return u.Reserved.MilliCPU == 20000 && u.Headroom.MilliCPU == 4000 && yielded == 1,
			fmt.Sprintf("reserved %s, headroom %s, %d clusters without headroom", u.Reserved, u.Headroom, yielded)
	})
	if _, err := a.c.Runs().Stop(a.ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the run stopped", func() (bool, string) {
		got, err := a.c.Runs().Get(a.ctx, r.ID)
		if err != nil {
			return false, err.Error()
		}
		return got.State.Terminal(), string(got.State)
	})
	a.clean()
}

// A starving priority-9 run holds back a priority-1 cluster's growth on
// Kubernetes (issue 42: freed quota went to the growth within a second,
// and the run waited past WithMaxWait). A group of 20 cores is full: two
// 4-core clusters, and a priority-1 autoscaling cluster (a 4-core head,
// 4-core workers in [1, 4]) whose autoscaler wants 4 and runs the 2 that
// fit, its growth waiting in the queue. A priority-9 run of 8 cores comes,
// starving at once (WithMaxWait of a millisecond). The first 4 cores freed
// would fit the growth: they are held for the run, which is admitted when
// the next 4 come, the growth still waiting.
func TestStarvingRunHoldsBackAGrowthOnKubernetes(t *testing.T) {
	a := newAutoscaleScene(t, dlc.WithMaxWait(time.Millisecond))
	var fillers []*cluster.Cluster
	for _, name := range []string{"filler1", "filler2"} {
		spec, err := dlc.NewCluster(name).Groups(a.grp).Resources("pkg-1", "rg-20").Image("ray-2.46.0-py310-cpu").
			Head("head", "cu.2c4g").WorkerGroup("cpu", "cu.2c4g", 1, 1).Build()
		if err != nil {
			t.Fatal(err)
		}
		cl, err := a.c.Clusters().Create(a.ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, name+" created", func() (bool, string) { s := state(t, a.c, cl.ID); return s == cluster.Created, string(s) })
		if _, err := a.c.Clusters().Start(a.ctx, cl.ID); err != nil {
			t.Fatal(err)
		}
		fillers = append(fillers, cl)
	}
	spec, err := dlc.NewCluster("growing").Groups(a.grp).Resources("pkg-1", "rg-20").Priority(1).Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 4).Build()
	if err != nil {
		t.Fatal(err)
	}
	grow, err := a.c.Clusters().Create(a.ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "growing created", func() (bool, string) { s := state(t, a.c, grow.ID); return s == cluster.Created, string(s) })
	if _, err := a.c.Clusters().Start(a.ctx, grow.ID); err != nil {
		t.Fatal(err)
	}
	a.as.Demand(a.ns, grow.ID, "cpu", 4)
	replicas := func() (int, *cluster.Growth) {
		cl, err := a.c.Clusters().Get(a.ctx, grow.ID)
		if err != nil {
			t.Fatal(err)
		}
		return cl.Replicas["cpu"], cl.Growth
	}
	waitFor(t, "the group full, the autoscaler's growth refused", func() (bool, string) {
		u, err := a.c.ResourceGroups().Get(a.ctx, "rg-20")
		if err != nil {
			return false, err.Error()
		}
		d, err := a.c.Clusters().Details(a.ctx, grow.ID)
		if err != nil {
			return false, err.Error()
		}
		refused := slices.ContainsFunc(d.Events, func(e event.Event) bool {
			return e.Action == "autoscale-refused" && strings.HasPrefix(e.Message, "cpu: 2 → 2 workers (asked 3)")
		})
		n, g := replicas()
		return u.Allocatable.MilliCPU == 0 && n == 2 && refused, fmt.Sprintf("allocatable %s, %d workers, refused %v, growth %+v", u.Allocatable, n, refused, g)
	})
	if _, g := replicas(); g == nil || g.Want != 3 {
		t.Fatalf("the autoscaler at its ceiling: growth %+v, want 3 workers waiting", g)
	}
	r := a.submit("starving", 9, 1, 1)
	waitFor(t, "the run told it waits", func() (bool, string) {
		got, err := a.c.Runs().Get(a.ctx, r.ID)
		if err != nil {
			return false, err.Error()
		}
		return got.WaitReason == job.InsufficientQuota, fmt.Sprintf("%s %s", got.State, got.WaitReason)
	})
	for i, f := range fillers {
		if _, err := a.c.Clusters().Hibernate(a.ctx, f.ID, dlc.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// Each freed 4 cores would fit the growth; the run needs both.
		if i == 0 {
			waitFor(t, "the first 4 cores freed", func() (bool, string) {
				u, err := a.c.ResourceGroups().Get(a.ctx, "rg-20")
				if err != nil {
					return false, err.Error()
				}
				_, held := u.Holders[f.ID]
				return !held, u.Reserved.String()
			})
		}
	}
	took := waitFor(t, "the run admitted", func() (bool, string) {
		u, err := a.c.ResourceGroups().Get(a.ctx, "rg-20")
		if err != nil {
			return false, err.Error()
		}
		_, held := u.Holders["od-"+r.ID]
		n, g := replicas()
		return held, fmt.Sprintf("reserved %s, %d workers, growth %+v", u.Reserved, n, g)
	})
	if n, g := replicas(); n != 2 || g == nil {
		t.Fatalf("the growth took quota the starving run ahead of it waited for: %d workers, growth %+v", n, g)
	}
	t.Logf("the starving run admitted %s after the second 4 cores were asked back; the growth still waits", took.Round(time.Millisecond))
	if err := a.c.CheckQuota(a.ctx); err != nil {
		t.Fatal(err)
	}
}
