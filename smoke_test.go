package dlc_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/dlctest"
	"github.com/aidlc/dlc/event"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
)

// fixture: a memory client, a resource group rg-1 (32 cores, 128 GiB,
// 4 GPUs) and a cluster group. The client runs no reconciler goroutines:
// settle (or m.Reconcile) runs what user calls queued, on the fake clock.
type fixture struct {
	t   *testing.T
	m   *dlctest.Memory
	c   *dlc.Client
	ctx context.Context
	grp string
}

func newFixture(t *testing.T, o dlctest.MemoryOptions) *fixture {
	t.Helper()
	m := dlctest.NewMemory(o)
	t.Cleanup(m.Close)
	ctx := dlc.WithUser(context.Background(), "alice")
	f := &fixture{t: t, m: m, c: m.Client, ctx: ctx}
	_, err := f.c.ResourceGroups().Register(ctx, quota.Group{ID: "rg-1", Package: "pkg-1",
		Capacity: quota.Resources{MilliCPU: 32000, Memory: 128 * quota.GiB, GPU: 4}})
	f.must(err)
	g, err := f.c.Groups().Create(ctx, "训练组")
	f.must(err)
	f.grp = g.ID
	return f
}

func (f *fixture) must(err error) {
	f.t.Helper()
	if err != nil {
		f.t.Fatal(err)
	}
}

// settle lets simulated time pass until nothing is pending.
func (f *fixture) settle() { f.m.Settle(100*time.Millisecond, 10000) }

func (f *fixture) spec(name string, min, max int) *cluster.Spec {
	s, err := dlc.NewCluster(name).Groups(f.grp).Resources("pkg-1", "rg-1").Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c16g").WorkerGroup("cpu", "cu.4c8g", min, max).Build()
	f.must(err)
	return s
}

func (f *fixture) runningCluster(name string) *cluster.Cluster {
	f.t.Helper()
	return f.started(f.spec(name, 1, 3))
}

// started creates a cluster of spec s, starts it and returns it running.
func (f *fixture) started(s *cluster.Spec) *cluster.Cluster {
	f.t.Helper()
	cl, err := f.c.Clusters().Create(f.ctx, s)
	f.must(err)
	f.settle()
	_, err = f.c.Clusters().Start(f.ctx, cl.ID)
	f.must(err)
	f.settle()
	cl, err = f.c.Clusters().Get(f.ctx, cl.ID)
	f.must(err)
	if cl.State != cluster.Running {
		f.t.Fatalf("cluster %s is %s, want running", cl.ID, cl.State)
	}
	return cl
}

func (f *fixture) job(b *job.Builder) *job.Record {
	f.t.Helper()
	cfg, err := b.COSPackage("cos://jobs-1250000000/job.zip").Entrypoint("python main.py").Build()
	f.must(err)
	rec, err := f.c.Jobs().Create(f.ctx, cfg, dlc.SaveOptions{})
	f.must(err)
	return rec
}

func (f *fixture) run(id string) *job.Run {
	f.t.Helper()
	r, err := f.c.Runs().Get(f.ctx, id)
	f.must(err)
	return r
}

// start creates a run of jobID and lets the reconcilers place it (no
// simulated time passes), returning the run as it is then.
func (f *fixture) start(jobID string) *job.Run {
	f.t.Helper()
	r, err := f.c.Runs().Create(f.ctx, jobID, dlc.RunOptions{})
	f.must(err)
	f.m.Reconcile()
	return f.run(r.ID)
}

func TestSmokeGroupRun(t *testing.T) {
	f := newFixture(t, dlctest.MemoryOptions{})
	cl := f.runningCluster("c1")
	rec := f.job(dlc.NewJob("j").OnGroup(f.grp))
	r, err := f.c.Runs().Create(f.ctx, rec.ID, dlc.RunOptions{})
	f.must(err)
	if r.State != job.Queued {
		t.Fatalf("run right after Create = %s, want queued", r.State)
	}
	f.m.Reconcile()
	if r = f.run(r.ID); r.State != job.Provisioning || r.ClusterID != cl.ID {
		t.Fatalf("run = %s on %q", r.State, r.ClusterID)
	}
	f.settle()
	if r = f.run(r.ID); r.State != job.Succeeded {
		t.Fatalf("run = %s %s", r.State, r.Message)
	}
	if err := f.c.CheckQuota(f.ctx); err != nil {
		t.Fatal(err)
	}
}

func quotaGroup(id string, cores int64) quota.Group {
	return quota.Group{ID: id, Package: "pkg-1", Capacity: quota.Resources{MilliCPU: cores * 1000, Memory: cores * 4 * quota.GiB, GPU: 0}}
}

// entries counts the times entries of log whose action is action and
// whose message contains saying ("": any) happened: a folded entry counts
// as many times as it happened (event.Event.Times), so that a test of
// something said once still fails when it is said again and folded.
func entries(log []event.Event, action, saying string) int {
	n := 0
	for _, e := range log {
		if e.Action == action && strings.Contains(e.Message, saying) {
			n += e.Times()
		}
	}
	return n
}

// entriesOf returns the entries of log whose action is action, each as
// stored (a folded entry once).
func entriesOf(log []event.Event, action string) []event.Event {
	var out []event.Event
	for _, e := range log {
		if e.Action == action {
			out = append(out, e)
		}
	}
	return out
}
