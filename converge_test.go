package dlc_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/dlctest"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/job"
)

// Issue 21, "converge from any state": an abnormal cluster is not a sink.
// A step that outlasts its timeout turns the cluster abnormal, and Ray's
// later observation at the cluster's generation still takes it to what
// Ray runs (before, it stayed abnormal for ever, holding its quota).
func TestAbnormalFollowsRay(t *testing.T) {
	const slow = 25 * time.Minute // past the 10-minute step timeout
	for _, tc := range []struct {
		name   string
		delays memory.Delays
		// from takes the cluster to the step that outlasts its timeout.
		from func(f *fixture, id string)
		to   cluster.State
		held bool // whether it holds quota at the end
	}{
		{"create", memory.Delays{Create: slow}, func(*fixture, string) {}, cluster.Created, false},
		{"start", memory.Delays{Start: slow}, func(f *fixture, id string) {
			_, err := f.c.Clusters().Start(f.ctx, id)
			f.must(err)
		}, cluster.Running, true},
		{"hibernate", memory.Delays{Hibernate: slow}, func(f *fixture, id string) {
			_, err := f.c.Clusters().Start(f.ctx, id)
			f.must(err)
			f.m.Settle(time.Second, 100)
			_, err = f.c.Clusters().Hibernate(f.ctx, id, dlc.DeleteOptions{})
			f.must(err)
		}, cluster.Hibernated, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.delays
			d.Create, d.Start, d.Hibernate = max(d.Create, time.Millisecond), max(d.Start, time.Millisecond), max(d.Hibernate, time.Millisecond)
			d.Delete, d.Submit, d.Run = time.Millisecond, time.Millisecond, time.Millisecond
			f := newFixture(t, dlctest.MemoryOptions{Delays: &d})
			cl, err := f.c.Clusters().Create(f.ctx, f.spec("慢", 1, 1))
			f.must(err)
			f.m.Settle(time.Millisecond, 10)
			tc.from(f, cl.ID)
			f.m.Reconcile()
			f.m.Clock.Advance(10*time.Minute + time.Second)
			f.m.Reconcile()
			got, err := f.c.Clusters().Get(f.ctx, cl.ID)
			f.must(err)
			if got.State != cluster.Abnormal || !strings.Contains(got.Reason, "timed out") {
				t.Fatalf("after 10 minutes without progress: %s %q, want abnormal, timed out:\n%s", got.State, got.Reason, f.events(cl.ID))
			}
			f.m.Clock.Advance(slow)
			f.m.Reconcile()
			got, err = f.c.Clusters().Get(f.ctx, cl.ID)
			f.must(err)
			if got.State != tc.to || got.Reason != "" {
				t.Fatalf("once Ray has done the step: %s %q, want %s:\n%s", got.State, got.Reason, tc.to, f.events(cl.ID))
			}
			if !strings.Contains(f.events(cl.ID), "after all (it was abnormal: timed out") {
				t.Errorf("the way out of abnormal is not in the log:\n%s", f.events(cl.ID))
			}
			u, err := f.c.ResourceGroups().Get(f.ctx, "rg-1")
			f.must(err)
			if _, ok := u.Holders[cl.ID]; ok != tc.held {
				t.Errorf("holds quota: %v, want %v (%v)", ok, tc.held, u.Holders)
			}
			f.must(f.c.CheckQuota(f.ctx))
		})
	}
}

// A step's timeout measures how long Ray shows no progress, on the
// measuring client's own clock: a replica whose clock is 11 minutes ahead
// of the one that started the cluster does not fail the start at once
// (before, it compared its clock with the stored date of the start).
func TestStepTimeoutIgnoresClockSkew(t *testing.T) {
	f := newFixture(t, dlctest.MemoryOptions{Delays: startTakes(5 * time.Minute)})
	ahead := f.m.NewSkewedClient(11 * time.Minute)
	cl, err := f.c.Clusters().Create(f.ctx, f.spec("偏", 1, 1))
	f.must(err)
	f.m.Settle(time.Millisecond, 10)
	_, err = f.c.Clusters().Start(f.ctx, cl.ID)
	f.must(err)
	for range 7 {
		f.m.Clock.Advance(time.Minute + time.Second)
		f.m.Reconcile()
	}
	got, err := ahead.Clusters().Get(f.ctx, cl.ID)
	f.must(err)
	if got.State != cluster.Running || strings.Contains(f.events(cl.ID), "timed out") {
		t.Fatalf("a 5-minute start seen by a replica 11 minutes ahead: %s\n%s", got.State, f.events(cl.ID))
	}
}

// backlogRay is the memory backend whose Ray says, while backlog is set,
// that it has not taken up a cluster's newest change (KubeRay's operator
// with a backlog): a pending cluster reads Queued.
type backlogRay struct {
	*memory.Backend
	backlog atomic.Bool
}

func (b *backlogRay) ClusterStatus(ctx context.Context, id string) (cluster.Observation, error) {
	o, err := b.Backend.ClusterStatus(ctx, id)
	if err == nil && b.backlog.Load() && o.Phase == cluster.PhasePending {
		o.Queued = true
	}
	return o, err
}

// startForAnHour has the fixture's client work on b, creates a cluster
// and starts it, and runs the clock 70 minutes a minute at a time; it
// returns the cluster as created and as it is then.
func (f *fixture) startForAnHour(b dlc.Backend, name string) (created, got *cluster.Cluster) {
	f.t.Helper()
	c := f.m.NewClient(dlc.WithBackend(b))
	f.m.CloseClient(f.c)
	f.c = c
	cl, err := f.c.Clusters().Create(f.ctx, f.spec(name, 1, 1))
	f.must(err)
	f.m.Settle(time.Millisecond, 10)
	_, err = f.c.Clusters().Start(f.ctx, cl.ID)
	f.must(err)
	f.m.Reconcile()
	for range 70 {
		f.m.Clock.Advance(time.Minute)
		f.m.Reconcile()
	}
	got, err = f.c.Clusters().Get(f.ctx, cl.ID)
	f.must(err)
	return cl, got
}

// An operator's backlog is not a failure of the cluster: a start that
// Ray has not taken up waits backlogFactor (6) step timeouts, not one,
// and then fails saying what it waited for.
func TestStepTimeoutBacklog(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start time.Duration // how long the backlogged start takes
		want  cluster.State
	}{
		{"a backlog of 40 minutes", 40 * time.Minute, cluster.Running},
		{"no operator at all", 3 * time.Hour, cluster.Abnormal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, dlctest.MemoryOptions{Delays: startTakes(tc.start)})
			b := &backlogRay{Backend: f.m.Backend}
			b.backlog.Store(true)
			cl, got := f.startForAnHour(b, "积压")
			if got.State != tc.want {
				t.Fatalf("after 70 minutes: %s %q, want %s:\n%s", got.State, got.Reason, tc.want, f.events(cl.ID))
			}
			if tc.want == cluster.Abnormal && !strings.Contains(got.Reason, "has not taken up generation") {
				t.Errorf("reason %q does not say Ray has not taken the start up", got.Reason)
			}
			if tc.want == cluster.Running && strings.Contains(f.events(cl.ID), "timed out") {
				t.Errorf("a backlogged start timed out on the way:\n%s", f.events(cl.ID))
			}
		})
	}
}

// refusedRay is the memory backend whose Ray says, while a pending
// cluster's start has not finished, that the platform under it refuses
// its nodes for quota (a Kubernetes ResourceQuota that other pods fill).
type refusedRay struct{ *memory.Backend }

// refusal is what refusedRay says.
const refusal = `Kubernetes refuses pods of its RayCluster in namespace team-a: exceeded quota "dlc-resource-group"`

func (b refusedRay) ClusterStatus(ctx context.Context, id string) (cluster.Observation, error) {
	o, err := b.Backend.ClusterStatus(ctx, id)
	if err == nil && o.Phase == cluster.PhasePending {
		o.Refused = refusal
	}
	return o, err
}

// A start whose nodes the platform refuses for quota is not a failure of
// the cluster: it is recorded on the cluster once (a quota-refused entry,
// a Warning on Kubernetes) and waits backlogFactor (6) step timeouts, not
// one, then fails saying why.
func TestStepTimeoutQuotaRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start time.Duration // how long the refused start takes
		want  cluster.State
	}{
		{"room within 40 minutes", 40 * time.Minute, cluster.Running},
		{"no room for hours", 3 * time.Hour, cluster.Abnormal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, dlctest.MemoryOptions{Delays: startTakes(tc.start)})
			cl, got := f.startForAnHour(refusedRay{f.m.Backend}, "配额")
			if got.State != tc.want {
				t.Fatalf("after 70 minutes: %s %q, want %s:\n%s", got.State, got.Reason, tc.want, f.events(cl.ID))
			}
			if n := strings.Count(f.events(cl.ID), "quota-refused"); n != 1 {
				t.Errorf("the refusal recorded %d times, want once:\n%s", n, f.events(cl.ID))
			}
			if tc.want == cluster.Abnormal && !strings.Contains(got.Reason, "exceeded quota") {
				t.Errorf("reason %q does not say Kubernetes refused its nodes", got.Reason)
			}
			if tc.want == cluster.Running && strings.Contains(f.events(cl.ID), "timed out") {
				t.Errorf("a refused start timed out on the way:\n%s", f.events(cl.ID))
			}
		})
	}
}

// A run placed on a cluster that another replica hibernates before the
// run's job reaches Ray waits again, saying why, and runs once the
// cluster runs again: once (before, it sat provisioning on the hibernated
// cluster with no reason and no deadline).
func TestRunPlacedOnHibernatingClusterWaitsAgain(t *testing.T) {
	var outcomes atomic.Int32
	f, h := hookedWith(t, dlctest.MemoryOptions{
		Ray: memory.RayHooks{RunOutcome: func(*job.Run) memory.Outcome { outcomes.Add(1); return memory.Outcome{} }}})
	other := f.m.NewClient()
	cl := f.runningCluster("休眠")
	rec := f.job(dlc.NewJob("j").OnCluster(cl.ID))
	r, err := f.c.Runs().Create(f.ctx, rec.ID, dlc.RunOptions{})
	f.must(err)
	placed := false
	*h = func(ctx context.Context, w memory.Write, next func(context.Context) (string, error)) (string, error) {
		if !placed && w.Doc.Kind == "run" && w.Doc.ID == r.ID && strings.Contains(string(w.Doc.Data), `"state":"provisioning"`) {
			placed = true
			// The other replica hibernates the cluster while this one
			// places the run on it: it sees no run on the cluster yet.
			if _, err := other.Clusters().Hibernate(f.ctx, cl.ID, dlc.DeleteOptions{}); err != nil {
				t.Errorf("hibernate beside the placement: %v", err)
			}
		}
		return next(ctx)
	}
	f.settle()
	if !placed {
		t.Fatal("the run was never placed")
	}
	got := f.run(r.ID)
	if got.State != job.Waiting || got.WaitReason != job.ClusterNotRunning || got.ClusterID != "" {
		t.Fatalf("run placed on a cluster hibernated meanwhile: %s %q %q on %q, want waiting, %s", got.State, got.WaitReason, got.Message, got.ClusterID, job.ClusterNotRunning)
	}
	if c, _ := f.c.Clusters().Get(f.ctx, cl.ID); c.State != cluster.Hibernated {
		t.Fatalf("cluster %s, want hibernated", c.State)
	}
	f.startNow(cl.ID)
	if got = f.run(r.ID); got.State != job.Succeeded {
		t.Fatalf("once the cluster runs again: %s %q", got.State, got.Message)
	}
	if n := outcomes.Load(); n != 1 {
		t.Errorf("Ray started the job %d times, want once", n)
	}
}

// A run is submitted at most once: a job Ray accepted and then forgot
// while the run was still provisioning (a head restarted without fault
// tolerance) fails the run, saying so, and is not submitted again
// (before, the run was submitted twice).
func TestJobForgottenWhileProvisioningIsNotSubmittedTwice(t *testing.T) {
	var outcomes atomic.Int32
	d := memory.Delays{Create: time.Millisecond, Start: time.Millisecond, Hibernate: time.Millisecond,
		Delete: time.Millisecond, Submit: time.Minute, Run: time.Millisecond}
	f := newFixture(t, dlctest.MemoryOptions{Delays: &d,
		Ray: memory.RayHooks{RunOutcome: func(*job.Run) memory.Outcome { outcomes.Add(1); return memory.Outcome{} }}})
	cl := f.runningCluster("忘")
	rec := f.job(dlc.NewJob("j").OnCluster(cl.ID))
	r := f.start(rec.ID)
	if r.State != job.Provisioning || !r.RaySubmitted {
		t.Fatalf("run after its submit: %s, accepted by Ray %v; want provisioning and recorded", r.State, r.RaySubmitted)
	}
	f.m.Backend.RestartHead(cl.ID)
	f.settle()
	got := f.run(r.ID)
	if got.State != job.Failed || !strings.Contains(got.Message, "Ray has no record of the job") {
		t.Fatalf("run whose job Ray forgot while provisioning: %s %q, want failed, no record", got.State, got.Message)
	}
	if n := outcomes.Load(); n != 1 {
		t.Errorf("Ray was given the job %d times, want once", n)
	}
}

// A name claim's age is how long a client has seen it without its owner,
// on its own clock: a replica whose clock is an hour ahead does not take
// over the claim of a create still on its way (before, it read the
// claim's date as an hour old, took the name, and the create on its way
// made a second cluster of the same name). A claim that stays ownerless
// for the grace is still taken over.
func TestSkewedReplicaDoesNotTakeAFreshClaim(t *testing.T) {
	f, h := hooked(t)
	ahead := f.m.NewSkewedClient(time.Hour)
	var second error
	tried := false
	*h = func(ctx context.Context, w memory.Write, next func(context.Context) (string, error)) (string, error) {
		if w.Op == memory.OpCreate && w.Doc.Kind == "cluster" && !tried {
			tried = true // the cluster is on its way; its claim is made beside it
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
				if _, err := f.m.Backend.Get(ctx, "name", "cluster:同名"); err == nil {
					break
				} else if time.Now().After(deadline) {
					t.Error("the first create's claim was not made in 30 s")
					break
				}
			}
			_, second = ahead.Clusters().Create(f.ctx, f.spec("同名", 1, 1))
		}
		return next(ctx)
	}
	first, err := f.c.Clusters().Create(f.ctx, f.spec("同名", 1, 1))
	f.must(err)
	if !errors.Is(second, errs.ErrConflict) {
		t.Fatalf("a create of the same name through a replica an hour ahead, while the first is on its way: %v, want ErrConflict", second)
	}
	f.settle()
	named := 0
	docs, err := f.m.Backend.List(f.ctx, "cluster", nil)
	f.must(err)
	for _, d := range docs {
		if strings.Contains(string(d.Data), `"name":"同名"`) {
			named++
		}
	}
	if named != 1 {
		t.Fatalf("%d clusters named 同名, want 1 (%s)", named, first.ID)
	}
}

// startTakes is the simulated Ray's delays with a start taking d and
// every other step a millisecond.
func startTakes(d time.Duration) *memory.Delays {
	return &memory.Delays{Create: time.Millisecond, Start: d, Hibernate: time.Millisecond,
		Delete: time.Millisecond, Submit: time.Millisecond, Run: time.Millisecond}
}
