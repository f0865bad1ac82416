package dlc_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
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

// Many goroutines create, start, hibernate, run and delete at once, on
// the real clock with the client's own reconciler goroutines, while Ray's
// delays are short. Afterwards: quota within bounds, every run in a state
// it can explain, and no lost update.
func TestConcurrentOperations(t *testing.T) {
	d := memory.Delays{Create: time.Millisecond, Start: 2 * time.Millisecond, Hibernate: time.Millisecond,
		Delete: time.Millisecond, Submit: time.Millisecond, Run: 3 * time.Millisecond}
	be := memory.New(memory.Options{Delays: &d})
	c, err := dlc.New(dlc.WithBackend(be))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	f := &fixture{t: t, c: c, ctx: dlc.WithUser(context.Background(), "load")}
	_, err = c.ResourceGroups().Register(f.ctx, quotaGroup("rg-1", 64))
	f.must(err)
	g, err := c.Groups().Create(f.ctx, "g")
	f.must(err)
	f.grp = g.ID
	groupJob := f.job(dlc.NewJob("group-job").OnGroup(g.ID))
	odCfg, err := dlc.NewJob("od").OnDemand("pkg-1", "rg-1").Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c8g").WorkerGroup("w", "cu.4c8g", 1, 2).
		COSPackage("cos://jobs-1250000000/j.zip").Entrypoint("python a.py").Build()
	f.must(err)
	odJob, err := c.Jobs().Create(f.ctx, odCfg, dlc.SaveOptions{})
	f.must(err)

	const workers = 8
	var wg sync.WaitGroup
	var ops, refused, hibConflicts atomic.Int64
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 15 {
				ops.Add(1)
				cl, err := c.Clusters().Create(f.ctx, f.spec(fmt.Sprintf("w%d_%d", w, i), 1, 3))
				if err != nil {
					t.Errorf("create: %v", err)
					return
				}
				_, _ = c.Runs().Create(f.ctx, groupJob.ID, dlc.RunOptions{})
				_, _ = c.Runs().Create(f.ctx, odJob.ID, dlc.RunOptions{})
				deadline := time.Now().Add(2 * time.Second)
				for time.Now().Before(deadline) {
					_, err := c.Clusters().Start(f.ctx, cl.ID)
					if err == nil || errors.Is(err, errs.ErrQuota) {
						break
					}
					time.Sleep(time.Millisecond)
				}
				_, _ = c.Clusters().Autoscale(f.ctx, cl.ID, "cpu", 3)
				time.Sleep(3 * time.Millisecond)
				if i%3 == 0 {
					if _, err := c.Clusters().Hibernate(f.ctx, cl.ID, dlc.DeleteOptions{Force: true}); errors.Is(err, dlc.ErrConflict) {
						hibConflicts.Add(1)
					} else if err != nil {
						refused.Add(1)
					}
				}
				for time.Now().Before(deadline) {
					err := c.Clusters().Delete(f.ctx, cl.ID, dlc.DeleteOptions{Force: true})
					if err == nil || errors.Is(err, errs.ErrNotFound) {
						break
					}
					if !errors.Is(err, errs.ErrState) {
						t.Errorf("delete: %v", err)
						return
					}
					time.Sleep(time.Millisecond)
				}
			}
		}()
	}
	// A checker reads the invariants while the load runs.
	stop := make(chan struct{})
	var checks sync.WaitGroup
	checks.Add(1)
	go func() {
		defer checks.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := c.CheckQuota(f.ctx); err != nil {
				t.Errorf("during the load: %v", err)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	wg.Wait()
	close(stop)
	checks.Wait()
	loaded := time.Now()

	// Let what is in flight finish: the reconcilers run by themselves.
	settleWithin(t, 30*time.Second, "nothing transitional, no run queued", func() (bool, string) {
		cls, _ := c.Clusters().List(f.ctx)
		for _, cl := range cls {
			if cl.State.Transitional() {
				return false, "cluster " + cl.ID + " " + string(cl.State)
			}
		}
		runs, _ := c.Runs().List(f.ctx, dlc.RunListOptions{})
		for _, r := range runs {
			if r.State == job.Queued {
				return false, "run " + r.ID + " queued"
			}
		}
		return true, ""
	})
	t.Logf("settled %v after the load", time.Since(loaded))
	runs, err := c.Runs().List(f.ctx, dlc.RunListOptions{})
	f.must(err)
	for _, r := range runs {
		switch {
		case r.State.Terminal():
			if r.State != job.Succeeded && r.Message == "" {
				t.Errorf("run %s ended %s without saying why", r.ID, r.State)
			}
		case r.State == job.Waiting:
			if r.WaitReason == "" {
				t.Errorf("run %s waits without a reason", r.ID)
			}
		case r.State == job.Queued:
			t.Errorf("run %s still queued after the reconcilers ran", r.ID)
		}
	}
	if err := c.CheckQuota(f.ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d cluster lifecycles, %d runs, %d hibernates refused, %d hibernates conflicted", ops.Load(), len(runs), refused.Load(), hibConflicts.Load())

	// No lost update: two writers of the same version, one wins.
	cl, err := c.Clusters().Create(f.ctx, f.spec("contended", 1, 1))
	f.must(err)
	settleWithin(t, 30*time.Second, "the cluster created", func() (bool, string) {
		got, err := c.Clusters().Get(f.ctx, cl.ID)
		return err == nil && got.State == cluster.Created, fmt.Sprint(got, err)
	})
	read, _ := c.Clusters().Get(f.ctx, cl.ID)
	var wins, conflicts atomic.Int64
	var edits sync.WaitGroup
	for i := range 10 {
		edits.Add(1)
		go func() {
			defer edits.Done()
			mine := read.DeepCopy()
			mine.Spec.Tags = map[string]string{"writer": fmt.Sprint(i)}
			_, err := c.Clusters().Update(f.ctx, mine)
			switch {
			case err == nil:
				wins.Add(1)
			case errors.Is(err, dlc.ErrConflict):
				conflicts.Add(1)
			default:
				t.Errorf("edit: %v", err)
			}
		}()
	}
	edits.Wait()
	if wins.Load() != 1 || conflicts.Load() != 9 {
		t.Fatalf("concurrent edits of one version: %d won, %d conflicts", wins.Load(), conflicts.Load())
	}
}

// A store hook makes every update of a cluster conflict, as
// controller-runtime's interceptors would: a start retries a lost race a
// bounded number of times, then reports the conflict and changes nothing;
// once the hook stops, the start goes through.
func TestStoreHookConflict(t *testing.T) {
	var updates atomic.Int64
	var conflicting atomic.Bool
	f := newFixture(t, dlctest.MemoryOptions{Store: memory.StoreHooks{
		Write: func(ctx context.Context, w memory.Write, next func(context.Context) (string, error)) (string, error) {
			if w.Doc.Kind == "cluster" && w.Op == memory.OpUpdate {
				updates.Add(1)
				if conflicting.Load() {
					return "", errs.Conflict(w.Doc.Kind, w.Doc.ID, "injected")
				}
			}
			return next(ctx)
		}}})
	cl, err := f.c.Clusters().Create(f.ctx, f.spec("hooked", 1, 1))
	f.must(err)
	f.settle() // first update: creating → created
	if got, _ := f.c.Clusters().Get(f.ctx, cl.ID); got.State != cluster.Created || updates.Load() != 1 {
		t.Fatalf("before the start: %s after %d updates", got.State, updates.Load())
	}
	conflicting.Store(true)
	_, err = f.c.Clusters().Start(f.ctx, cl.ID)
	if !errors.Is(err, dlc.ErrConflict) {
		t.Fatalf("start with injected conflicts: %v", err)
	}
	if n := updates.Load(); n < 3 || n > 40 {
		t.Fatalf("%d updates tried: want a few bounded retries", n)
	}
	u, _ := f.c.ResourceGroups().Get(f.ctx, "rg-1")
	got, _ := f.c.Clusters().Get(f.ctx, cl.ID)
	if !u.Reserved.IsZero() || got.State != cluster.Created {
		t.Fatalf("a failed start left %v reserved, state %s", u.Reserved, got.State)
	}
	conflicting.Store(false)
	_, err = f.c.Clusters().Start(f.ctx, cl.ID)
	f.must(err)
	f.settle()
	if got, _ := f.c.Clusters().Get(f.ctx, cl.ID); got.State != cluster.Running {
		t.Fatalf("the retried start: %s", got.State)
	}
}

// Two clients (replicas) on one store: what one does, the other sees and
// builds on; a reservation one made, the other releases; a name one
// took, the other cannot take.
func TestTwoClientsShareOneStore(t *testing.T) {
	f := newFixture(t, dlctest.MemoryOptions{})
	c1, c2 := f.c, f.m.NewClient()
	ctx := f.ctx

	// A start through c1 reserves; a hibernate through c2 frees it.
	cl, err := c1.Clusters().Create(ctx, f.spec("shared", 1, 1))
	f.must(err)
	f.settle()
	_, err = c1.Clusters().Start(ctx, cl.ID)
	f.must(err)
	f.settle()
	for i, c := range []*dlc.Client{c1, c2} {
		u, err := c.ResourceGroups().Get(ctx, "rg-1")
		f.must(err)
		if u.Reserved.MilliCPU != 8000 {
			t.Fatalf("client %d sees %v reserved after the start, want the cluster's 8 cores", i+1, u.Reserved)
		}
	}
	if got, _ := c2.Clusters().Get(ctx, cl.ID); got.State != cluster.Running {
		t.Fatalf("client 2 sees the cluster %s", got.State)
	}
	_, err = c2.Clusters().Hibernate(ctx, cl.ID, dlc.DeleteOptions{})
	f.must(err)
	f.settle()
	for i, c := range []*dlc.Client{c1, c2} {
		got, _ := c.Clusters().Get(ctx, cl.ID)
		u, _ := c.ResourceGroups().Get(ctx, "rg-1")
		if got.State != cluster.Hibernated || !u.Reserved.IsZero() {
			t.Fatalf("client %d after the hibernate: %s, %v reserved", i+1, got.State, u.Reserved)
		}
	}
	f.must(c1.CheckQuota(ctx))

	// Names are unique across the clients.
	_, err = c2.Groups().Create(ctx, "其他组")
	f.must(err)
	mine, err := c1.Clusters().Create(ctx, f.spec("mine", 1, 1))
	f.must(err)
	_, err = c2.Clusters().Create(ctx, f.spec("theirs", 1, 1))
	f.must(err)
	f.settle()
	cases := []struct {
		name string
		op   func() error
	}{
		{"cluster name taken through the other client", func() error {
			_, err := c2.Clusters().Create(ctx, f.spec("shared", 1, 1))
			return err
		}},
		{"clone onto a name taken through the other client", func() error {
			_, err := c1.Clusters().Clone(ctx, cl.ID, "theirs")
			return err
		}},
		{"group name taken through the other client", func() error {
			_, err := c2.Groups().Create(ctx, "训练组")
			return err
		}},
		{"group rename onto a name taken through the other client", func() error {
			_, err := c1.Groups().Rename(ctx, f.grp, "其他组")
			return err
		}},
		{"cluster rename onto a name taken through the other client", func() error {
			cur, err := c1.Clusters().Get(ctx, mine.ID)
			if err != nil {
				return err
			}
			cur.Spec.Name = "theirs"
			_, err = c1.Clusters().Update(ctx, cur)
			return err
		}},
	}
	for _, tc := range cases {
		if err := tc.op(); !errors.Is(err, dlc.ErrConflict) {
			t.Errorf("%s: %v, want ErrConflict", tc.name, err)
		}
	}

	// At once: two clients create the same names; each name goes to one.
	var wg sync.WaitGroup
	var clusterWins, groupWins atomic.Int64
	for _, c := range []*dlc.Client{c1, c2, c1, c2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.Clusters().Create(ctx, f.spec("race", 1, 1)); err == nil {
				clusterWins.Add(1)
			} else if !errors.Is(err, dlc.ErrConflict) {
				t.Errorf("racing cluster create: %v", err)
			}
			if _, err := c.Groups().Create(ctx, "竞争组"); err == nil {
				groupWins.Add(1)
			} else if !errors.Is(err, dlc.ErrConflict) {
				t.Errorf("racing group create: %v", err)
			}
		}()
	}
	wg.Wait()
	if clusterWins.Load() != 1 || groupWins.Load() != 1 {
		t.Fatalf("racing creates of one name: %d clusters, %d groups made", clusterWins.Load(), groupWins.Load())
	}
	f.settle()
	for i, c := range []*dlc.Client{c1, c2} {
		cls, _ := c.Clusters().List(ctx)
		names := map[string]int{}
		for _, x := range cls {
			names[x.Spec.Name]++
		}
		gs, _ := c.Groups().List(ctx)
		for _, g := range gs {
			names["group:"+g.Name]++
		}
		for n, k := range names {
			if k != 1 {
				t.Errorf("client %d lists %d objects named %q", i+1, k, n)
			}
		}
	}
	// A deleted cluster's name is free again, for either client.
	f.must(c2.Clusters().Delete(ctx, cl.ID, dlc.DeleteOptions{}))
	f.settle()
	if _, err := c1.Clusters().Create(ctx, f.spec("shared", 1, 1)); err != nil {
		t.Fatalf("the name of a deleted cluster: %v", err)
	}
}

// AddMembers is all or none: a conflict on one cluster is read again and
// retried, and a failure that does not go away puts back the clusters
// already changed.
func TestAddMembersAllOrNone(t *testing.T) {
	var failing atomic.Value // the cluster id whose updates fail, and how
	failing.Store([2]string{})
	f := newFixture(t, dlctest.MemoryOptions{Store: memory.StoreHooks{
		Write: func(ctx context.Context, w memory.Write, next func(context.Context) (string, error)) (string, error) {
			if f := failing.Load().([2]string); w.Op == memory.OpUpdate && w.Doc.ID == f[0] {
				if f[1] == "conflict-once" {
					failing.Store([2]string{})
					return "", errs.Conflict(w.Doc.Kind, w.Doc.ID, "injected")
				}
				return "", errs.Unavailable("update "+w.Doc.ID, errors.New("injected"))
			}
			return next(ctx)
		}}})
	a, err := f.c.Clusters().Create(f.ctx, f.spec("a", 1, 1))
	f.must(err)
	b, err := f.c.Clusters().Create(f.ctx, f.spec("b", 1, 1))
	f.must(err)
	f.settle()
	g1, err := f.c.Groups().Create(f.ctx, "g-one")
	f.must(err)
	g2, err := f.c.Groups().Create(f.ctx, "g-two")
	f.must(err)
	members := func(g string) int {
		ms, err := f.c.Groups().Members(f.ctx, g)
		f.must(err)
		return len(ms)
	}
	failing.Store([2]string{b.ID, "conflict-once"})
	f.must(f.c.Groups().AddMembers(f.ctx, g1.ID, a.ID, b.ID))
	if n := members(g1.ID); n != 2 {
		t.Fatalf("after a retried conflict: %d members, want 2", n)
	}
	failing.Store([2]string{b.ID, "down"})
	if err := f.c.Groups().AddMembers(f.ctx, g2.ID, a.ID, b.ID); !errors.Is(err, dlc.ErrUnavailable) {
		t.Fatalf("add with b failing: %v", err)
	}
	if n := members(g2.ID); n != 0 {
		t.Fatalf("a failed add left %d members, want none", n)
	}
	if got, _ := f.c.Clusters().Get(f.ctx, a.ID); slices.Contains(got.Spec.Groups, g2.ID) {
		t.Fatalf("a kept the group: %v", got.Spec.Groups)
	}
}

// A put-back that fails too is not dropped: the error names the cluster
// the add left changed, beside the failure that stopped it.
func TestAddMembersPutBackFailureSaid(t *testing.T) {
	var second atomic.Value // the second cluster's id, once made
	second.Store("")
	var down atomic.Value // the ids whose updates fail
	down.Store(map[string]bool{})
	f := newFixture(t, dlctest.MemoryOptions{Store: memory.StoreHooks{
		Write: func(ctx context.Context, w memory.Write, next func(context.Context) (string, error)) (string, error) {
			if w.Op == memory.OpUpdate && down.Load().(map[string]bool)[w.Doc.ID] {
				return "", errs.Unavailable("update "+w.Doc.ID, errors.New("injected"))
			}
			v, err := next(ctx)
			if b := second.Load().(string); err == nil && b != "" && w.Op == memory.OpUpdate && w.Doc.Kind == "cluster" &&
				w.Doc.ID != b && strings.Contains(string(w.Doc.Data), "now in") {
				// The first cluster's add is written: from now on its
				// writes fail (its put-back), and the second's (its add).
				down.Store(map[string]bool{w.Doc.ID: true, b: true})
			}
			return v, err
		}}})
	a, err := f.c.Clusters().Create(f.ctx, f.spec("a", 1, 1))
	f.must(err)
	b, err := f.c.Clusters().Create(f.ctx, f.spec("b", 1, 1))
	f.must(err)
	f.settle()
	g, err := f.c.Groups().Create(f.ctx, "g")
	f.must(err)
	second.Store(b.ID)
	err = f.c.Groups().AddMembers(f.ctx, g.ID, a.ID, b.ID)
	if !errors.Is(err, dlc.ErrUnavailable) || !strings.Contains(err.Error(), "cluster "+a.ID+" was changed and could not be put back") {
		t.Fatalf("add whose put-back failed: %v, want it to name %s", err, a.ID)
	}
}
