package dlc_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/dlctest"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/job"
)

// A plan of an on-demand run in a full resource group says it does not
// fit, what it lacks and where it would wait, and writes nothing; a
// second client plans the same.
func TestPlanRunWritesNothing(t *testing.T) {
	clk := backend.NewFakeClock(dlctest.Epoch)
	cs := newCountingStore(memory.New(memory.Options{Clock: clk}), 0)
	newC := func() *dlc.Client {
		c, err := dlc.New(dlc.WithBackend(cs), dlc.WithClock(clk), dlc.WithWorkers(0), dlc.WithResync(0))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	c, other := newC(), newC()
	ctx := dlc.WithUser(t.Context(), "alice")
	if _, err := c.ResourceGroups().Register(ctx, quotaGroup("rg-1", 16)); err != nil {
		t.Fatal(err)
	}
	cfg, err := dlc.NewJob("od").OnDemand("pkg-1", "rg-1").Priority(5).Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c8g").WorkerGroup("w", "cu.4c8g", 2, 4).COSPackage("cos://jobs-1250000000/a.zip").Entrypoint("python a.py").Build()
	if err != nil {
		t.Fatal(err)
	}
	rec, err := c.Jobs().Create(ctx, cfg, dlc.SaveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Two runs fill the group (12 of 16 cores admitted, then one queued).
	for range 2 {
		if _, err := c.Runs().Create(ctx, rec.ID, dlc.RunOptions{}); err != nil {
			t.Fatal(err)
		}
		c.Reconcile()
		other.Reconcile()
	}
	cs.take()
	p, err := c.Jobs().PlanRun(ctx, rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if n, detail := cs.take(); strings.Contains(detail, "create") || strings.Contains(detail, "update") || strings.Contains(detail, "delete") {
		t.Fatalf("a plan wrote (%d calls): %s", n, detail)
	}
	q := p.Quota
	if q == nil || q.Fits || q.Needs.MilliCPU != 12000 || q.Allocatable.MilliCPU != 4000 || !strings.Contains(q.Lacks, "needs cpu=12") ||
		q.ReservedBefore.MilliCPU != 12000 || q.ReservedAfter.MilliCPU != 24000 || q.Capacity.MilliCPU != 16000 {
		t.Fatalf("quota plan %+v", q)
	}
	if p.Position != 2 || p.Ahead != 1 {
		t.Fatalf("would-be place %d with %d ahead, want 2 behind the queued run", p.Position, p.Ahead)
	}
	if p.Cluster == nil || !p.Cluster.Temporary || len(p.Manifests) != 2 || p.Run.State != job.Queued {
		t.Fatalf("planned cluster %+v, manifests %d, run %+v", p.Cluster, len(p.Manifests), p.Run)
	}
	p2, err := other.Jobs().PlanRun(ctx, rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(p)
	b, _ := json.Marshal(p2)
	if string(a) != string(b) {
		t.Fatalf("two clients plan differently:\n%s\n%s", a, b)
	}
	if n, detail := cs.take(); strings.Contains(detail, "create") || strings.Contains(detail, "update") || strings.Contains(detail, "delete") {
		t.Fatalf("a plan wrote (%d calls): %s", n, detail)
	}
}

// Plans of a cluster's create and start: every problem as Validate
// reports it, what a start reserves before and after, and an autoscaling
// maximum beyond the whole quota noted, not refused (C14); a cluster
// whose start could never fit is refused at create and at plan (C4).
func TestPlanCluster(t *testing.T) {
	f := newFixture(t, dlctest.MemoryOptions{})
	bad := f.spec("bad", 1, 2)
	bad.Name, bad.Groups = "坏 名字!", nil
	if _, err := f.c.Clusters().PlanCreate(f.ctx, bad); !errors.Is(err, dlc.ErrInvalid) || len(errs.Fields(err)) != 2 {
		t.Fatalf("a plan of a bad spec: %v (want both problems, C1 and C2)", err)
	}
	never := f.spec("never", 9, 9) // 4 + 36 cores of 32
	if _, err := f.c.Clusters().PlanCreate(f.ctx, never); !errors.Is(err, dlc.ErrInvalid) || !strings.Contains(err.Error(), "could never start") {
		t.Fatalf("a plan of a cluster that could never start: %v", err)
	}
	wide := f.spec("wide", 1, 10) // 4 + 4 cores to start, 44 at its maximum
	p, err := f.c.Clusters().PlanCreate(f.ctx, wide)
	if err != nil {
		t.Fatal(err)
	}
	if p.Cluster.State != cluster.Creating || p.Quota.Needs.MilliCPU != 8000 || !p.Quota.Fits || p.Quota.ReservedAfter != p.Quota.ReservedBefore {
		t.Fatalf("plan of a create: %+v %+v", p.Cluster.State, p.Quota)
	}
	if len(p.Notes) != 1 || !strings.Contains(p.Notes[0], "C14") {
		t.Fatalf("notes %q, want the unreachable maximum", p.Notes)
	}
	if list, _ := f.c.Clusters().List(f.ctx); len(list) != 0 {
		t.Fatalf("a plan created %d clusters", len(list))
	}
	cl, err := f.c.Clusters().Create(f.ctx, wide)
	f.must(err)
	f.m.Step(time.Second)
	p, err = f.c.Clusters().PlanStart(f.ctx, cl.ID)
	f.must(err)
	if p.Cluster.State != cluster.Starting || p.Quota.ReservedAfter.MilliCPU != 8000 || !p.Quota.Fits {
		t.Fatalf("plan of a start: %s %+v", p.Cluster.State, p.Quota)
	}
	if got, _ := f.c.Clusters().Get(f.ctx, cl.ID); got.State != cluster.Created {
		t.Fatalf("a plan of a start moved the cluster to %s", got.State)
	}
	_, err = f.c.Clusters().Start(f.ctx, cl.ID)
	f.must(err)
	f.m.Step(time.Second)
	if _, err := f.c.Clusters().PlanStart(f.ctx, cl.ID); !errors.Is(err, dlc.ErrState) {
		t.Fatalf("a plan of a start of a running cluster: %v", err)
	}
	// An edit of the running cluster: a higher minimum reserves at once, a
	// new image waits for the next start.
	cur, err := f.c.Clusters().Get(f.ctx, cl.ID)
	f.must(err)
	cur.Spec.Workers[0].Instances.Min = 3
	cur.Spec.Image = "ray-2.46.0-py311-cpu"
	p, err = f.c.Clusters().PlanUpdate(f.ctx, cur)
	f.must(err)
	if p.Quota.ReservedBefore.MilliCPU != 8000 || p.Quota.ReservedAfter.MilliCPU != 16000 || !p.Quota.Fits ||
		!slices.Contains(p.Notes, "applies at the next start: image") || p.Cluster.Generation != cur.Generation+1 {
		t.Fatalf("plan of an edit: %+v, notes %q", p.Quota, p.Notes)
	}
	if got, _ := f.c.Clusters().Get(f.ctx, cl.ID); got.Version != cur.Version {
		t.Fatal("a plan of an edit wrote the cluster")
	}
	stale := cur.DeepCopy()
	stale.Version = "0"
	if _, err := f.c.Clusters().PlanUpdate(f.ctx, stale); !errors.Is(err, dlc.ErrConflict) {
		t.Fatalf("a plan of a stale edit: %v", err)
	}
	// A start that would not fit what is free now: Fits false, the figures.
	big, err := f.c.Clusters().Create(f.ctx, f.spec("big", 7, 7)) // 32 cores: fits the whole quota, not what is free
	f.must(err)
	f.m.Step(time.Second)
	p, err = f.c.Clusters().PlanStart(f.ctx, big.ID)
	f.must(err)
	if p.Quota.Fits || !strings.Contains(p.Quota.Lacks, "needs cpu=32") {
		t.Fatalf("plan of a start that does not fit: %+v", p.Quota)
	}
	if _, err := f.c.Clusters().Start(f.ctx, big.ID); !errors.Is(err, dlc.ErrQuota) {
		t.Fatalf("the start the plan said would not fit: %v", err)
	}
}

// TestPlanMakesTheNameCheck: a plan makes the name check its operation
// makes. A create whose name another cluster has, and a rename onto it,
// are ErrConflict in the plan as in the operation; a free name plans.
func TestPlanMakesTheNameCheck(t *testing.T) {
	f := newFixture(t, dlctest.MemoryOptions{})
	taken, err := f.c.Clusters().Create(f.ctx, f.spec("taken", 1, 1))
	f.must(err)
	other, err := f.c.Clusters().Create(f.ctx, f.spec("other", 1, 1))
	f.must(err)
	f.settle()
	renamed := func(name string) *cluster.Cluster {
		cur, err := f.c.Clusters().Get(f.ctx, other.ID)
		f.must(err)
		cur.Spec.Name = name
		return cur
	}
	for _, tc := range []struct {
		name     string
		plan, op func() error
		conflict bool
	}{
		{"create on a taken name",
			func() error { _, err := f.c.Clusters().PlanCreate(f.ctx, f.spec("taken", 1, 1)); return err },
			func() error { _, err := f.c.Clusters().Create(f.ctx, f.spec("taken", 1, 1)); return err }, true},
		{"rename onto a taken name",
			func() error { _, err := f.c.Clusters().PlanUpdate(f.ctx, renamed(taken.Spec.Name)); return err },
			func() error { _, err := f.c.Clusters().Update(f.ctx, renamed(taken.Spec.Name)); return err }, true},
		{"create on a free name",
			func() error { _, err := f.c.Clusters().PlanCreate(f.ctx, f.spec("free", 1, 1)); return err }, nil, false},
		{"rename onto a free name",
			func() error { _, err := f.c.Clusters().PlanUpdate(f.ctx, renamed("free_too")); return err }, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.plan()
			if got := errors.Is(err, dlc.ErrConflict); got != tc.conflict || (!tc.conflict && err != nil) {
				t.Fatalf("plan: %v (want conflict: %v)", err, tc.conflict)
			}
			if tc.op != nil {
				if err := tc.op(); !errors.Is(err, dlc.ErrConflict) {
					t.Fatalf("the operation: %v, want ErrConflict as its plan said", err)
				}
			}
		})
	}
}
