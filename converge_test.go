package dlc_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/dlctest"
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
	d := memory.Delays{Create: time.Millisecond, Start: 5 * time.Minute, Hibernate: time.Millisecond,
		Delete: time.Millisecond, Submit: time.Millisecond, Run: time.Millisecond}
	f := newFixture(t, dlctest.MemoryOptions{Delays: &d})
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
			d := memory.Delays{Create: time.Millisecond, Start: tc.start, Hibernate: time.Millisecond,
				Delete: time.Millisecond, Submit: time.Millisecond, Run: time.Millisecond}
			f := newFixture(t, dlctest.MemoryOptions{Delays: &d})
			b := &backlogRay{Backend: f.m.Backend}
			b.backlog.Store(true)
			c := f.m.NewClient(dlc.WithBackend(b))
			f.m.CloseClient(f.c)
			f.c = c
			cl, err := f.c.Clusters().Create(f.ctx, f.spec("积压", 1, 1))
			f.must(err)
			f.m.Settle(time.Millisecond, 10)
			_, err = f.c.Clusters().Start(f.ctx, cl.ID)
			f.must(err)
			f.m.Reconcile()
			for range 70 {
				f.m.Clock.Advance(time.Minute)
				f.m.Reconcile()
			}
			got, err := f.c.Clusters().Get(f.ctx, cl.ID)
			f.must(err)
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
