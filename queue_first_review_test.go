// The review of the queue-first quota (2026-12-07) reproduced these
// defects; each test failed at 77d1d49, before the mends that followed.
// The review's other findings are tested in queue_first_grant_test.go.
package dlc_test

import (
	"fmt"
	"time"

	"github.com/aidlc/dlc"
	"testing"
)

// Review: a growth granted by the queue is given back at once, while
// something else still waits, before Ray's autoscaler could use it: the
// followAutoscaler step after the grant sees the autoscaler still at its
// old count (it has not yet seen the new ceiling) and yields the ceiling
// down to it. The priority-9 growth is lost; the priority-1 run behind
// it takes its quota.
func TestReviewGrantedGrowthYieldedBack(t *testing.T) {
	f := newQueueFixture(t, 24)
	a := f.started("a", 1, 9, 0, 4)[0]         // head 4 + a worker of headroom: 8 cores
	fillers := f.started("filler", 2, 5, 1, 1) // 16 cores: the group is full
	f.ray.autoscale(a, "cpu", 1)               // the autoscaler takes the worker lent, asks one more
	f.settle()
	if g := f.cluster(a).Growth; g == nil || g.Want != 2 {
		t.Fatalf("growth %+v, want 2 waiting", g)
	}
	run := f.submit("od", 1, 1) // 8 cores, priority 1: behind the growth
	f.settle()
	f.free(fillers[0]) // 8 cores: the growth (4) first, the run (8) does not fit the rest
	cl := f.cluster(a)
	t.Logf("after 8 cores freed: a's replicas %d, growth %+v, yielded %v; run waits %v", cl.Replicas["cpu"], cl.Growth, cl.Yielded, f.waiting(run))
	for _, e := range cl.Events {
		if e.Action == "autoscale" || e.Action == "autoscale-refused" {
			t.Logf("  %s: %s", e.Action, e.Message)
		}
	}
	if cl.Replicas["cpu"] != 2 {
		t.Errorf("the priority-9 growth was granted and taken back before the autoscaler could use it: replicas %d", cl.Replicas["cpu"])
	}
	if !f.waiting(run) {
		t.Errorf("the priority-1 run got the quota of the priority-9 growth")
	}
}

// Review: a growth stays queued after Ray's autoscaler stopped wanting
// it, when it scales down by one (r+headroom == ceiling: followAutoscaler
// skips the group). The stale growth is granted later, raising the
// ceiling for nothing, and, while it waits, it is a waiter: the other
// clusters of the group give their headroom back to it.
func TestReviewStaleGrowthAfterScaleDown(t *testing.T) {
	f := newQueueFixture(t, 16)
	a := f.started("a", 1, 5, 0, 4)[0]         // 8 cores
	fillers := f.started("filler", 1, 5, 1, 1) // 8 cores: full
	f.ray.autoscale(a, "cpu", 1)
	f.settle()
	if g := f.cluster(a).Growth; g == nil || g.Want != 2 {
		t.Fatalf("growth %+v, want 2 waiting", g)
	}
	f.ray.autoscale(a, "cpu", 0) // the autoscaler no longer wants it
	f.settle()
	cl := f.cluster(a)
	t.Logf("autoscaler back at 0: replicas %d, growth %+v, yielded %v", cl.Replicas["cpu"], cl.Growth, cl.Yielded)
	if cl.Growth != nil {
		t.Errorf("the growth is still queued although the autoscaler scaled down: %+v", cl.Growth)
	}
	f.free(fillers[0])
	cl = f.cluster(a)
	for _, e := range cl.Events {
		if e.Action == "autoscale" || e.Action == "autoscale-refused" {
			t.Logf("  %s: %s", e.Action, e.Message)
		}
	}
}

// Review: a growth that can never fit the group's whole quota (the
// autoscaler asks up to the group's maximum, which C14 lets exceed the
// quota) waits forever; past WithMaxWait it starves and holds back every
// run behind it, also one that fits, for ever.
func TestReviewNeverFittingGrowthBlocksTheQueue(t *testing.T) {
	const bound = time.Minute
	f := newQueueFixture(t, 32, dlc.WithAutoscaleHeadroom(0), dlc.WithMaxWait(bound))
	a := f.started("a", 1, 5, 1, 10)[0]          // 8 cores; at 10 workers 44 > 32
	filler := f.started("filler", 1, 5, 1, 1)[0] // 8 cores
	res, err := f.c.Clusters().Autoscale(f.ctx, a, "cpu", 10)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("autoscale to 10: %+v; growth %+v", res, f.cluster(a).Growth)
	run := f.submit("od", 5, 1) // 8 cores
	f.settle()
	f.m.Step(bound + time.Second)
	f.free(filler) // 8 cores free: the run fits; the growth (20 cores) never can
	f.m.Step(time.Hour)
	f.settle()
	u := f.usage()
	t.Logf("an hour later: allocatable %v; run waits %v; growth %+v", u.Allocatable, f.waiting(run), f.cluster(a).Growth)
	// The growth asks for no more than the group's capacity could ever
	// hold (7 workers: 4 + 7×4 = 32 cores), so it is served in its turn
	// (it asked first) and does not wait for good; the run waits for the
	// next room.
	if g := f.cluster(a).Growth; g != nil {
		t.Errorf("a growth still waits an hour later: %+v", g)
	}
	if n := f.cluster(a).Replicas["cpu"]; n != 7 {
		t.Errorf("the cluster runs %d workers, want the 7 the capacity can hold", n)
	}
	_ = run
}

// Review: a priority-1 run that does not fit, even with every headroom
// given back, takes the headroom of a priority-9 cluster all the same:
// the cluster's autoscaler, at a ceiling with no headroom, cannot ask,
// and the quota it gave back stays idle while the run waits.
func TestReviewLowPriorityRunFreezesHighPriorityAutoscaler(t *testing.T) {
	f := newQueueFixture(t, 32)
	a := f.started("a", 1, 9, 0, 4)[0] // head 4 + a worker of headroom: 8 cores
	f.started("filler", 1, 5, 1, 1)    // 8 cores; 16 free
	big := f.submit("big", 1, 5)       // 24 cores, priority 1: never fits beside them
	f.settle()
	f.ray.autoscale(a, "cpu", 1) // the priority-9 cluster's autoscaler wants a worker
	f.settle()
	cl := f.cluster(a)
	u := f.usage()
	t.Logf("big run waits %v; a: replicas %d, yielded %v, growth %+v; allocatable %v", f.waiting(big), cl.Replicas["cpu"], cl.Yielded, cl.Growth, u.Allocatable)
	if cl.Replicas["cpu"] < 1 && cl.Growth == nil {
		t.Errorf("the priority-9 cluster's autoscaler wants a worker, %v is free, and it neither has it nor waits for it", u.Allocatable)
	}
}

// Review: a cluster with two autoscaling worker groups both at their
// ceilings in a full group: each one's request takes the other's place
// (one growth per cluster), so the stored growth flips between them at
// every step, a write each time, and its Since is reset every time (it
// never ages towards the starvation bound, nor keeps its FIFO place).
func TestReviewTwoWorkerGroupsFlipTheGrowth(t *testing.T) {
	f := newQueueFixture(t, 24)
	s, err := dlc.NewCluster("two").Groups(f.grp).Resources("pkg-1", "rg-q").Priority(5).
		Image("ray-2.46.0-py310-cpu").Head("head", "cu.4c8g").
		WorkerGroup("x", "cu.4c8g", 0, 4).WorkerGroup("y", "cu.4c8g", 0, 4).Build()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := f.c.Clusters().Create(f.ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	f.settle()
	if _, err := f.c.Clusters().Start(f.ctx, cl.ID); err != nil {
		t.Fatal(err)
	}
	f.settle()                      // head 4 + a worker of headroom in x and y: 12 cores
	f.started("filler", 1, 5, 2, 2) // 12 cores: full
	f.ray.autoscale(cl.ID, "x", 1)
	f.ray.autoscale(cl.ID, "y", 1)
	// In a write loop the steps never end: run them in the background,
	// and wait until they end (or the bound says they never will).
	v0 := f.cluster(cl.ID).Version
	done := make(chan int, 1)
	go func() { done <- f.c.Reconcile() }()
	select {
	case steps := <-done:
		t.Logf("%d reconcile steps", steps)
	case <-time.After(30 * time.Second):
		f.m.CloseClient(f.c)
		<-done
		t.Fatal("the steps never end: the idle cluster's two groups take turns in a write loop")
	}
	versions := map[string]bool{v0: true}
	for range 6 {
		f.m.Step(10 * time.Second)
		versions[f.cluster(cl.ID).Version] = true
	}
	t.Logf("%d versions of the idle cluster over a minute", len(versions))
	if len(versions) > 3 {
		t.Errorf("an idle cluster whose two groups wait is written again and again")
	}
}

// Review: when the last thing waiting is a growth that its cluster
// withdraws (it asks for no more than it has), nothing queues the
// resource group's pass (apply only does while the growth label is on),
// so the clusters that yielded their headroom to it are not lent it back.
func TestReviewWithdrawnGrowthLeavesHeadroomYielded(t *testing.T) {
	f := newQueueFixture(t, 28)
	a := f.started("a", 1, 5, 1, 4)[0]                                      // head 4 + 1 worker + 1 of headroom: 12 cores
	b := f.started("b", 1, 5, 0, 4)[0]                                      // head 4 + 1 of headroom: 8 cores
	f.started("filler", 1, 5, 1, 1)                                         // 8 cores: full
	if _, err := f.c.Clusters().Autoscale(f.ctx, a, "cpu", 4); err != nil { // 8 cores more: never fits beside b's head and the filler
		t.Fatal(err)
	}
	f.settle()
	t.Logf("a asks 4: growth %+v; b yielded %v; allocatable %v", f.cluster(a).Growth, f.cluster(b).Yielded, f.usage().Allocatable)
	if _, err := f.c.Clusters().Autoscale(f.ctx, a, "cpu", f.cluster(a).Replicas["cpu"]); err != nil { // no more than it has
		t.Fatal(err)
	}
	f.settle()
	f.m.Step(time.Hour)
	cb := f.cluster(b)
	t.Logf("a withdrew (growth %+v): an hour later b yielded %v, replicas %d; allocatable %v", f.cluster(a).Growth, cb.Yielded, cb.Replicas["cpu"], f.usage().Allocatable)
	if len(cb.Yielded) > 0 {
		t.Error("nothing waits, quota is free, and b's headroom is not lent again")
	}
}

// Review: the same when the last waiter is a queued run that is stopped.
func TestReviewStoppedRunLeavesHeadroomYielded(t *testing.T) {
	f := newQueueFixture(t, 32)
	b := f.started("b", 1, 5, 0, 4)[0] // 8 cores
	f.started("filler", 1, 5, 1, 1)    // 8 cores; 16 free
	big := f.submit("big", 1, 5)       // 24 cores: does not fit
	f.settle()
	t.Logf("big waits %v; b yielded %v", f.waiting(big), f.cluster(b).Yielded)
	if _, err := f.c.Runs().Stop(f.ctx, big); err != nil {
		t.Fatal(err)
	}
	f.settle()
	f.m.Step(time.Hour)
	cb := f.cluster(b)
	t.Logf("run stopped (waits %v): an hour later b yielded %v, replicas %d; allocatable %v", f.waiting(big), cb.Yielded, cb.Replicas["cpu"], f.usage().Allocatable)
	if len(cb.Yielded) > 0 {
		t.Error("nothing waits, quota is free, and b's headroom is not lent again")
	}
}

// Review: while anything waits, every pass of the resource group queues
// every cluster still marked lent, also those that have nothing to give
// back (an autoscaler at its maximum): a cluster step each, per pass.
func TestReviewPassQueuesEveryLentCluster(t *testing.T) {
	f := newQueueFixture(t, 200)
	ids := f.started("max", 20, 5, 0, 1) // 8 cores each: 160
	for _, id := range ids {
		f.ray.autoscale(id, "cpu", 1) // at their maximum: no headroom to give back
	}
	f.settle()
	big := f.submit("big", 1, 20) // 84 cores: never fits in the 40 left
	f.settle()
	n := f.m.Reconcile()
	for i := range 5 {
		f.submit(fmt.Sprintf("small_%d", i), 1, 1) // 8 cores: admitted at once
		n = f.m.Reconcile()
		t.Logf("submit %d: %d steps (big waits %v)", i, n, f.waiting(big))
	}
	if n > 15 {
		t.Errorf("a run's admission costs %d steps, most of them clusters that have nothing to give back", n)
	}
}
