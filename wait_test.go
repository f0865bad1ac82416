package dlc_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/job"
)

// waitSet is one real-time client (workers on, Ray fast) with a resource
// group rg-1, for the wait and watch tests.
func waitSet(t *testing.T) *replicaSet {
	t.Helper()
	rs := newReplicaSet(t, 1, 0)
	rs.group("rg-1")
	return rs
}

func (rs *replicaSet) spec(name string) *cluster.Spec {
	rs.t.Helper()
	spec, err := dlc.NewCluster(name).Groups(rs.grp).Resources("pkg-1", "rg-1").Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1).Build()
	if err != nil {
		rs.t.Fatal(err)
	}
	return spec
}

// Wait follows a cluster through create and start, as a caller writes it
// (the README's first program): no poll loop, and the state it returns
// is the one waited for. cond sees each state the client sees, once per
// change at most.
func TestClusterWait(t *testing.T) {
	rs := waitSet(t)
	c := rs.cls[0]
	ctx, cancel := context.WithTimeout(rs.ctx, time.Minute)
	defer cancel()
	cl, err := c.Clusters().Create(ctx, rs.spec("w1"))
	if err != nil {
		t.Fatal(err)
	}
	var seen []cluster.State
	got, err := c.Clusters().Wait(ctx, cl.ID, func(cl *cluster.Cluster) (bool, error) {
		if len(seen) == 0 || seen[len(seen)-1] != cl.State {
			seen = append(seen, cl.State)
		}
		return cl.State == cluster.Created, nil
	})
	if err != nil || got.State != cluster.Created || got.Version == "" {
		t.Fatalf("wait for created: %v, %+v", err, got)
	}
	if seen[len(seen)-1] != cluster.Created {
		t.Errorf("states seen %v", seen)
	}
	if _, err := c.Clusters().Start(ctx, cl.ID); err != nil {
		t.Fatal(err)
	}
	got, err = c.Clusters().Wait(ctx, cl.ID, cluster.InState(cluster.Running))
	if err != nil || got.State != cluster.Running {
		t.Fatalf("wait for running: %v, %+v", err, got)
	}
}

// A wait ends with an error that says why and what it last saw: the
// caller's context (errors.Is its error), the cluster
// deleted (ErrNotFound), the condition's own error, the client closed
// (ErrUnavailable); and at once for a cluster that does not exist.
func TestClusterWaitEnds(t *testing.T) {
	rs := waitSet(t)
	c := rs.cls[0]
	ctx, cancel := context.WithTimeout(rs.ctx, time.Minute)
	defer cancel()
	cl, err := c.Clusters().Create(ctx, rs.spec("w1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Clusters().Wait(ctx, cl.ID, cluster.InState(cluster.Created)); err != nil {
		t.Fatal(err)
	}

	short, stop := context.WithCancel(ctx)
	_, err = c.Clusters().Wait(short, cl.ID, func(cl *cluster.Cluster) (bool, error) {
		stop() // the caller gives up once it has seen the cluster: it is never started
		return cl.State == cluster.Running, nil
	})
	if !errors.Is(err, context.Canceled) || !contains(err, "last seen created") {
		t.Errorf("caller gave up: %v", err)
	}

	boom := errors.New("boom")
	if _, err := c.Clusters().Wait(ctx, cl.ID, func(*cluster.Cluster) (bool, error) { return false, boom }); !errors.Is(err, boom) {
		t.Errorf("condition's error: %v", err)
	}

	if _, err := c.Clusters().Wait(ctx, "cls-nope", cluster.InState(cluster.Running)); !errs.IsNotFound(err) {
		t.Errorf("no such cluster: %v", err)
	}

	deleted := make(chan error, 1)
	go func() {
		_, err := c.Clusters().Wait(ctx, cl.ID, cluster.InState(cluster.Running))
		deleted <- err
	}()
	if err := c.Clusters().Delete(ctx, cl.ID, dlc.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := <-deleted; !errs.IsNotFound(err) {
		t.Errorf("deleted while waited for: %v", err)
	}

	other := rs.add()
	cl2, err := other.Clusters().Create(ctx, rs.spec("w2"))
	if err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() {
		_, err := other.Clusters().Wait(ctx, cl2.ID, cluster.InState(cluster.Running))
		closed <- err
	}()
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-closed; !errors.Is(err, errs.ErrUnavailable) {
		t.Errorf("client closed: %v", err)
	}
}

func contains(err error, s string) bool { return err != nil && strings.Contains(err.Error(), s) }

// onDemandJob saves an on-demand job config named name in resource group rg.
func (rs *replicaSet) onDemandJob(c *dlc.Client, name, rg string) *job.Record {
	rs.t.Helper()
	cfg, err := dlc.NewJob(name).OnDemand("pkg-1", rg).Image("ray-2.46.0-py310-cpu").Head("head", "cu.4c8g").
		WorkerGroup("cpu", "cu.4c8g", 1, 1).COSPackage("cos://jobs-1250000000/a.zip").Entrypoint("python a.py").Build()
	if err != nil {
		rs.t.Fatal(err)
	}
	rec, err := c.Jobs().Create(rs.ctx, cfg, dlc.SaveOptions{})
	if err != nil {
		rs.t.Fatal(err)
	}
	return rec
}

// A run's wait: job.Ended until it ends; job.InState fails at once when
// the run ended in another state than the one waited for.
func TestRunWait(t *testing.T) {
	rs := waitSet(t)
	c := rs.cls[0]
	ctx, cancel := context.WithTimeout(rs.ctx, time.Minute)
	defer cancel()
	rec := rs.onDemandJob(c, "waited", "rg-1")
	r, err := c.Runs().Create(ctx, rec.ID, dlc.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Runs().Wait(ctx, r.ID, job.Ended)
	if err != nil || got.State != job.Succeeded {
		t.Fatalf("wait until ended: %v, %+v", err, got)
	}
	if _, err := c.Runs().Wait(ctx, r.ID, job.InState(job.Running)); !errors.Is(err, errs.ErrState) {
		t.Errorf("waiting for running on a run that succeeded: %v", err)
	}
}

// A watch tells of every cluster's changes and the cache's clusters first
// (Initial); a reader that reads late gets each cluster once, as it is
// then; a cluster created and deleted before the reader looks is not told
// at all; the channel closes with the watch's context.
func TestClusterWatch(t *testing.T) {
	rs := waitSet(t)
	c := rs.cls[0]
	ctx, cancel := context.WithTimeout(rs.ctx, time.Minute)
	defer cancel()
	first, err := c.Clusters().Create(ctx, rs.spec("before"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Clusters().Wait(ctx, first.ID, cluster.InState(cluster.Created)); err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	events, err := c.Clusters().Watch(wctx, dlc.ClusterWatchOptions{Initial: true})
	if err != nil {
		t.Fatal(err)
	}
	// Nothing is read while these clusters are made and started, and one
	// made and deleted.
	var ids []string
	for i := range 5 {
		cl, err := c.Clusters().Create(ctx, rs.spec(fmt.Sprintf("w%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, cl.ID)
	}
	gone, err := c.Clusters().Create(ctx, rs.spec("gone"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Clusters().Delete(ctx, gone.ID, dlc.DeleteOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if _, err := c.Clusters().Wait(ctx, id, cluster.InState(cluster.Created)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Clusters().Wait(ctx, gone.ID, func(*cluster.Cluster) (bool, error) { return false, nil }); !errs.IsNotFound(err) {
		t.Fatalf("the deleted cluster: %v", err)
	}
	// Now read: the first event of each is Added, with the cluster as it
	// is now (created); "gone" is never told.
	want := map[string]bool{first.ID: true}
	for _, id := range ids {
		want[id] = true
	}
	told := map[string]int{}
	for len(told) < len(want) {
		ev := <-events
		if ev.ID == gone.ID {
			t.Fatalf("told of a cluster made and deleted before the read: %+v", ev)
		}
		told[ev.ID]++
		if told[ev.ID] == 1 && (ev.Type != dlc.Added || ev.Cluster == nil || ev.Cluster.State != cluster.Created) {
			t.Errorf("first event of %s: %s %+v", ev.ID, ev.Type, ev.Cluster)
		}
	}
	for id, n := range told {
		if !want[id] || n != 1 {
			t.Errorf("cluster %s told %d times", id, n)
		}
	}
	// Changes after: a start is told as Modified.
	if _, err := c.Clusters().Start(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	for ev := range events {
		if ev.ID == ids[0] && ev.Type == dlc.Modified && ev.Cluster.State == cluster.Running {
			break
		}
	}
	stop()
	for range events { // closes
	}
}

// A run watch by job config tells of that config's runs only.
func TestRunWatchByJob(t *testing.T) {
	rs := waitSet(t)
	c := rs.cls[0]
	ctx, cancel := context.WithTimeout(rs.ctx, time.Minute)
	defer cancel()
	a, b := rs.onDemandJob(c, "a", "rg-1"), rs.onDemandJob(c, "b", "rg-1")
	events, err := c.Runs().Watch(ctx, dlc.RunWatchOptions{JobID: a.ID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Runs().Create(ctx, b.ID, dlc.RunOptions{}); err != nil {
		t.Fatal(err)
	}
	ra, err := c.Runs().Create(ctx, a.ID, dlc.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for ev := range events {
		if ev.Run == nil || ev.Run.JobID != a.ID {
			t.Fatalf("told of %+v", ev)
		}
		if ev.ID == ra.ID && ev.Run.State == job.Succeeded {
			return
		}
	}
}
