package dlctest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/group"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
)

// Harness is what a backend supplies to RunConformance.
type Harness struct {
	// NewBackend returns an empty backend for one test: a store and a Ray
	// (real or stand-in) whose steps take milliseconds. Every client the
	// test starts shares it, as replicas share one API server.
	NewBackend func(t *testing.T) dlc.Backend
	// Options are more options for every client (catalogs, say).
	Options []dlc.Option
	// Timeout bounds how long the suite waits for the platform to settle
	// in one step; 0 means 20 s.
	Timeout time.Duration
	// RepairGrace is the clients' dlc.WithRepairGrace; 0 means 300 ms.
	// It must be well above the time between a reservation and the write
	// that justifies it, which a remote store makes longer.
	RepairGrace time.Duration
	// FaultOps, when set, narrows the Faults test, which otherwise fails
	// each call the story makes in turn, to the calls of these ops
	// (Call.Op: "ApplyCluster", "update", …), and of those to the first of
	// each op, kind and kind of object (the id's prefix, "cls" or "od"): for
	// a backend whose story takes seconds, whose store another harness
	// covers call by call.
	FaultOps []string
	// Autoscaler, when set, starts Ray's own autoscaler for the backend's
	// clusters in one test and returns how to drive it: demand asks for
	// workers in a worker group of a running cluster, as load on Ray would,
	// and the platform is to follow within quota (on Kubernetes, the
	// [Autoscaler] stand-in). Nil means Ray has no autoscaler of its own and
	// Clusters().Autoscale is its request (the memory backend).
	Autoscaler func(t *testing.T, be dlc.Backend) (demand func(clusterID, group string, workers int))
}

// RunConformance runs the platform's behaviour against a backend, as
// gocloud's drivertest does for its drivers: the product rules through
// the public API, two and more clients on one store, a restart (a new
// client on the store of a closed one), and a fault at each store write
// and each Ray call of every operation. Every backend of the SDK passes
// it; a backend of another repo can run it too.
func RunConformance(t *testing.T, h Harness) {
	if h.Timeout == 0 {
		h.Timeout = 20 * time.Second
	}
	if h.RepairGrace == 0 {
		h.RepairGrace = 300 * time.Millisecond
	}
	tests := []struct {
		name string
		fn   func(*testing.T, *suite)
	}{
		{"ClusterLifecycle", testClusterLifecycle},
		{"RunsOnClusterAndGroup", testRunsOnClusterAndGroup},
		{"OnDemandQueue", testOnDemandQueue},
		{"Idempotent", testIdempotent},
		{"NamesAcrossClients", testNamesAcrossClients},
		{"ConcurrentStartsAcrossClients", testConcurrentStarts},
		{"HibernateFreesAnotherClientsReservation", testHibernateAcrossClients},
		{"RestartKeepsQueue", testRestartKeepsQueue},
		{"Faults", testFaults},
		{"StepsThatKeepFailing", testPersistentFaults},
		{"GroupsG1toG6", testGroups},
		{"DeletesFencedAcrossClientsJ17G6", testFencedDeletes},
		{"TemplatesAndJobEditsC6J15J16", testTemplatesAndJobEdits},
		{"EditAutoscaleDetailsC11C13C14", testEditAutoscaleDetails},
		{"AllMembersAbnormalJ18", testAllMembersAbnormal},
		{"GroupPoliciesAcrossClientsG3G4", testGroupPolicies},
		{"ForeignEdits", testForeignEdits},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := &suite{t: t, h: h}
			tc.fn(t, s)
		})
	}
}

// suite is one conformance test's world: a backend and its clients.
type suite struct {
	t       *testing.T
	h       Harness
	be      dlc.Backend
	clients []*dlc.Client
}

func (s *suite) backend() dlc.Backend {
	if s.be == nil {
		s.be = s.h.NewBackend(s.t)
	}
	return s.be
}

// client starts a client on the suite's backend (or on b when given).
func (s *suite) client(b dlc.Backend, more ...dlc.Option) *dlc.Client {
	s.t.Helper()
	if b == nil {
		b = s.backend()
	}
	opts := append([]dlc.Option{dlc.WithBackend(b), dlc.WithRetries(5, 2*time.Millisecond, 40*time.Millisecond),
		dlc.WithRepairGrace(s.h.RepairGrace), dlc.WithStepTimeout(3 * time.Second)}, s.h.Options...)
	c, err := dlc.New(append(opts, more...)...)
	if err != nil {
		s.t.Fatalf("dlc.New: %v", err)
	}
	s.clients = append(s.clients, c)
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}

func (s *suite) ctx() context.Context { return dlc.WithUser(s.t.Context(), "conformance") }

func (s *suite) must(err error) {
	s.t.Helper()
	if err != nil {
		s.t.Fatal(err)
	}
}

// eventually polls cond until it holds or the timeout passes; cond says
// what it saw, for the failure message.
func (s *suite) eventually(what string, cond func() (bool, string)) {
	s.t.Helper()
	deadline := time.Now().Add(s.h.Timeout)
	seen := ""
	for time.Now().Before(deadline) {
		ok, now := cond()
		if ok {
			return
		}
		seen = now
		time.Sleep(2 * time.Millisecond)
	}
	s.t.Fatalf("%s: not within %s; last seen: %s", what, s.h.Timeout, seen)
}

// waitCtx is the context of a wait: the suite's, bounded by the harness's
// timeout.
func (s *suite) waitCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(s.ctx(), s.h.Timeout)
}

func (s *suite) clusterState(c *dlc.Client, id string, want cluster.State) {
	s.t.Helper()
	ctx, cancel := s.waitCtx()
	defer cancel()
	if _, err := c.Clusters().Wait(ctx, id, cluster.InState(want)); err != nil {
		s.t.Fatalf("cluster %s %s: %v", id, want, err)
	}
}

func (s *suite) gone(c *dlc.Client, id string) {
	s.t.Helper()
	ctx, cancel := s.waitCtx()
	defer cancel()
	if _, err := c.Clusters().Wait(ctx, id, func(*cluster.Cluster) (bool, error) { return false, nil }); !errors.Is(err, dlc.ErrNotFound) {
		s.t.Fatalf("cluster %s gone: %v", id, err)
	}
}

func (s *suite) runEnds(c *dlc.Client, id string) *job.Run {
	s.t.Helper()
	ctx, cancel := s.waitCtx()
	defer cancel()
	r, err := c.Runs().Wait(ctx, id, job.Ended)
	if err != nil {
		s.t.Fatalf("run %s ends: %v", id, err)
	}
	return r
}

func (s *suite) runState(c *dlc.Client, id string, want job.RunState) *job.Run {
	s.t.Helper()
	ctx, cancel := s.waitCtx()
	defer cancel()
	r, err := c.Runs().Wait(ctx, id, job.InState(want))
	if err != nil {
		s.t.Fatalf("run %s %s: %v", id, want, err)
	}
	return r
}

// quotaClean waits until CheckQuota finds nothing wrong (a leak is
// released once the repair grace has passed).
func (s *suite) quotaClean(c *dlc.Client) {
	s.t.Helper()
	s.eventually("quota clean", func() (bool, string) {
		if err := c.CheckQuota(s.ctx()); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
}

// world registers a resource group of cores CPU cores and makes a
// cluster group.
func (s *suite) world(c *dlc.Client, rg string, cores int64) string {
	s.t.Helper()
	_, err := c.ResourceGroups().Register(s.ctx(), quota.Group{ID: rg, Package: "pkg-1",
		Capacity: quota.Resources{MilliCPU: cores * 1000, Memory: cores * 4 * quota.GiB}})
	s.must(err)
	g, err := c.Groups().Create(s.ctx(), "group-"+rg)
	s.must(err)
	return g.ID
}

// spec is a cluster of 8 cores: a cu.4c8g head and one cu.4c8g worker.
// Fixed-size, so that the quota figures of the tests hold on a backend
// whose Ray runs an autoscaler (an autoscaling group there holds a worker
// of room above what it runs); the autoscale case makes its own range.
func (s *suite) spec(name, grp, rg string) *cluster.Spec {
	s.t.Helper()
	sp, err := dlc.NewCluster(name).Groups(grp).Resources("pkg-1", rg).Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1).Build()
	s.must(err)
	return sp
}

// runningCluster creates and starts a cluster and waits until it runs.
func (s *suite) runningCluster(c *dlc.Client, name, grp, rg string) *cluster.Cluster {
	s.t.Helper()
	cl, err := c.Clusters().Create(s.ctx(), s.spec(name, grp, rg))
	s.must(err)
	s.clusterState(c, cl.ID, cluster.Created)
	_, err = c.Clusters().Start(s.ctx(), cl.ID)
	s.must(err)
	s.clusterState(c, cl.ID, cluster.Running)
	return cl
}

// onDemand saves an on-demand job of 8 cores at priority p.
func (s *suite) onDemand(c *dlc.Client, name, rg string, p int) *job.Record {
	s.t.Helper()
	cfg, err := dlc.NewJob(name).OnDemand("pkg-1", rg).Priority(p).Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1).
		COSPackage("cos://jobs-1250000000/train.zip").Entrypoint("python train.py").Build()
	s.must(err)
	rec, err := c.Jobs().Create(s.ctx(), cfg, dlc.SaveOptions{})
	s.must(err)
	return rec
}

// jobConfig is a job on an existing cluster (clusterID) or a group.
func (s *suite) jobConfig(name, clusterID, groupID string) *job.Config {
	s.t.Helper()
	b := dlc.NewJob(name).COSPackage("cos://jobs-1250000000/wc.zip").Entrypoint("python main.py")
	if clusterID != "" {
		b.OnCluster(clusterID)
	} else {
		b.OnGroup(groupID)
	}
	cfg, err := b.Build()
	s.must(err)
	return cfg
}

func (s *suite) jobOn(c *dlc.Client, name, clusterID, groupID string) *job.Record {
	s.t.Helper()
	rec, err := c.Jobs().Create(s.ctx(), s.jobConfig(name, clusterID, groupID), dlc.SaveOptions{})
	s.must(err)
	return rec
}

// C11, C12: start, hibernate, start again, delete; transitional states
// refuse edits; quota follows.
func testClusterLifecycle(t *testing.T, s *suite) {
	// The cluster's first Ray call waits until the start below has been
	// refused, so that the cluster is still creating in the store (not
	// only in a cache) when the start is decided.
	release := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	t.Cleanup(open)
	c := s.client(NewFaulty(s.backend(), func(_ int, call Call) Fault {
		if call.Kind == "ray" {
			<-release
		}
		return NoFault
	}))
	ctx := s.ctx()
	grp := s.world(c, "rg-life", 16)
	cl, err := c.Clusters().Create(ctx, s.spec("life", grp, "rg-life"))
	s.must(err)
	if cl.State != cluster.Creating || cl.Creator != "conformance" {
		t.Fatalf("created: %s by %s", cl.State, cl.Creator)
	}
	if _, err := c.Clusters().Start(ctx, cl.ID); !errors.Is(err, dlc.ErrState) {
		t.Fatalf("start while creating: %v", err)
	}
	open()
	s.clusterState(c, cl.ID, cluster.Created)
	got, err := c.Clusters().Start(ctx, cl.ID)
	s.must(err)
	if got.State != cluster.Starting {
		t.Fatalf("after start: %s", got.State)
	}
	if _, err := c.Clusters().Update(ctx, got); !errors.Is(err, dlc.ErrState) {
		t.Fatalf("edit while starting: %v", err)
	}
	s.clusterState(c, cl.ID, cluster.Running)
	u, err := c.ResourceGroups().Get(ctx, "rg-life")
	s.must(err)
	if u.Reserved.MilliCPU != 8000 {
		t.Fatalf("running reserves %s, want 8 cores", u.Reserved)
	}
	_, err = c.Clusters().Hibernate(ctx, cl.ID, dlc.DeleteOptions{})
	s.must(err)
	s.clusterState(c, cl.ID, cluster.Hibernated)
	s.eventually("hibernate releases quota", func() (bool, string) {
		u, _ := c.ResourceGroups().Get(ctx, "rg-life")
		return u.Reserved.IsZero(), u.Reserved.String()
	})
	_, err = c.Clusters().Start(ctx, cl.ID)
	s.must(err)
	s.clusterState(c, cl.ID, cluster.Running)
	s.must(c.Clusters().Delete(ctx, cl.ID, dlc.DeleteOptions{}))
	s.gone(c, cl.ID)
	s.quotaClean(c)
	u, _ = c.ResourceGroups().Get(ctx, "rg-life")
	if !u.Reserved.IsZero() {
		t.Fatalf("after delete reserved %s", u.Reserved)
	}
}

// J14, J18, J19: a run on a cluster waits while it is not running and
// goes once it is; a run on a group goes to a running member; a run of a
// config whose group was deleted fails saying so.
func testRunsOnClusterAndGroup(t *testing.T, s *suite) {
	c := s.client(nil)
	ctx := s.ctx()
	grp := s.world(c, "rg-runs", 32)
	cl, err := c.Clusters().Create(ctx, s.spec("runs", grp, "rg-runs"))
	s.must(err)
	onCluster := s.jobOn(c, "on-cluster", cl.ID, "")
	r, err := c.Runs().Create(ctx, onCluster.ID, dlc.RunOptions{})
	s.must(err)
	w := s.runState(c, r.ID, job.Waiting)
	if w.WaitReason != job.ClusterNotRunning {
		t.Fatalf("waits because %q", w.WaitReason)
	}
	onGroup := s.jobOn(c, "on-group", "", grp)
	gr, err := c.Runs().Create(ctx, onGroup.ID, dlc.RunOptions{})
	s.must(err)
	if w := s.runState(c, gr.ID, job.Waiting); w.WaitReason != job.NoMemberRunning {
		t.Fatalf("group run waits because %q", w.WaitReason)
	}
	s.clusterState(c, cl.ID, cluster.Created)
	_, err = c.Clusters().Start(ctx, cl.ID)
	s.must(err)
	for _, id := range []string{r.ID, gr.ID} {
		if end := s.runEnds(c, id); end.State != job.Succeeded || end.ClusterID != cl.ID {
			t.Fatalf("run %s: %s on %s: %s", id, end.State, end.ClusterID, end.Message)
		}
	}
	logs, err := c.Runs().Logs(ctx, r.ID)
	s.must(err)
	if len(logs) == 0 {
		t.Fatal("no logs")
	}
	// J17: a job with an unfinished run cannot be deleted.
	again, err := c.Runs().Create(ctx, onCluster.ID, dlc.RunOptions{})
	s.must(err)
	if err := c.Jobs().Delete(ctx, onCluster.ID); !errors.Is(err, dlc.ErrState) {
		t.Fatalf("delete with a live run: %v", err)
	}
	s.runEnds(c, again.ID)
	// J19: the group is deleted (members move to another); the next run fails.
	other, err := c.Groups().Create(ctx, "other-runs")
	s.must(err)
	s.must(c.Groups().Delete(ctx, grp, other.ID))
	late, err := c.Runs().Create(ctx, onGroup.ID, dlc.RunOptions{})
	s.must(err)
	if end := s.runEnds(c, late.ID); end.State != job.Failed || !strings.Contains(end.Message, "does not exist") {
		t.Fatalf("run on a deleted group: %s %q", end.State, end.Message)
	}
	members, err := c.Groups().Members(ctx, other.ID)
	s.must(err)
	if len(members) != 1 || members[0].ID != cl.ID {
		t.Fatalf("members moved: %d", len(members))
	}
	s.must(c.Clusters().Delete(ctx, cl.ID, dlc.DeleteOptions{Force: true}))
	s.gone(c, cl.ID)
	s.quotaClean(c)
}

// J3, J18: on-demand runs queue inside the resource group's quota; each
// takes a temporary cluster, released when it ends.
func testOnDemandQueue(t *testing.T, s *suite) {
	c := s.client(nil)
	ctx := s.ctx()
	s.world(c, "rg-od", 8) // room for one 8-core run at a time
	rec := s.onDemand(c, "od", "rg-od", 5)
	var runs []*job.Run
	for range 3 {
		r, err := c.Runs().Create(ctx, rec.ID, dlc.RunOptions{})
		s.must(err)
		runs = append(runs, r)
	}
	watch := s.watchQuota(c, "rg-od", 1)
	for _, r := range runs {
		if end := s.runEnds(c, r.ID); end.State != job.Succeeded {
			t.Fatalf("run %s: %s %s", r.ID, end.State, end.Message)
		}
	}
	s.eventually("on-demand clusters released", func() (bool, string) {
		cls, _ := c.Clusters().List(ctx)
		return len(cls) == 0, fmt.Sprint(len(cls), " clusters")
	})
	s.quotaClean(c)
	if max := watch(); max > 1 {
		t.Fatalf("%d on-demand runs held quota at once, room for 1", max)
	}
}

// watchQuota samples rg's holders from a goroutine until the returned
// stop is called, failing the test if CheckQuota ever complains or more
// than limit hold at once; stop returns the most seen at once.
func (s *suite) watchQuota(c *dlc.Client, rg string, limit int) (stop func() int) {
	var most atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	var bad atomic.Value
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			if err := c.CheckQuota(context.Background()); err != nil {
				bad.Store(err.Error())
			}
			if u, err := c.ResourceGroups().Get(context.Background(), rg); err == nil {
				if n := int64(len(u.Holders)); n > most.Load() {
					most.Store(n)
				}
			}
			time.Sleep(200 * time.Microsecond)
		}
	}()
	return func() int {
		close(done)
		wg.Wait()
		if v := bad.Load(); v != nil {
			s.t.Errorf("CheckQuota during the test: %s", v)
		}
		if n := int(most.Load()); n > limit {
			s.t.Errorf("%d holders at once in %s, at most %d fit", n, rg, limit)
		}
		return int(most.Load())
	}
}

// Request ids: a retried save or run returns what the first made.
func testIdempotent(t *testing.T, s *suite) {
	c := s.client(nil)
	other := s.client(nil)
	ctx := s.ctx()
	s.world(c, "rg-idem", 8)
	cfg, err := dlc.NewJob("idem").OnDemand("pkg-1", "rg-idem").Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1).
		COSPackage("cos://jobs-1250000000/train.zip").Entrypoint("python train.py").Build()
	s.must(err)
	rec1, r1, err := job.Submit(ctx, c, cfg, "req-1")
	s.must(err)
	rec2, r2, err := job.Submit(ctx, other, cfg, "req-1") // a retry through another replica
	s.must(err)
	if rec1.ID != rec2.ID || r1.ID != r2.ID {
		t.Fatalf("retry made new objects: %s/%s, %s/%s", rec1.ID, rec2.ID, r1.ID, r2.ID)
	}
	runs, err := c.Runs().List(ctx, dlc.RunListOptions{JobID: rec1.ID})
	s.must(err)
	if len(runs) != 1 {
		t.Fatalf("%d runs for one request", len(runs))
	}
	s.runEnds(c, r1.ID)
	s.quotaClean(c)
}

// Names are claimed by create: two clients cannot give one name twice.
func testNamesAcrossClients(t *testing.T, s *suite) {
	a, b := s.client(nil), s.client(nil)
	ctx := s.ctx()
	grp := s.world(a, "rg-names", 64)
	var wins atomic.Int32
	var wg sync.WaitGroup
	for _, c := range []*dlc.Client{a, b, a, b} {
		wg.Add(2)
		go func() {
			defer wg.Done()
			if _, err := c.Clusters().Create(ctx, s.spec("same_name", grp, "rg-names")); err == nil {
				wins.Add(1)
			} else if !errors.Is(err, dlc.ErrConflict) {
				t.Errorf("cluster create: %v", err)
			}
		}()
		go func() {
			defer wg.Done()
			if _, err := c.Groups().Create(ctx, "same-group"); err != nil && !errors.Is(err, dlc.ErrConflict) {
				t.Errorf("group create: %v", err)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d clusters got one name", wins.Load())
	}
	gs, err := b.Groups().List(ctx)
	s.must(err)
	n := 0
	for _, g := range gs {
		if g.Name == "same-group" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d groups named same-group", n)
	}
}

// 16 clients start 16 clusters at once into a resource group that fits
// 4: exactly 4 are reserved at every instant and nothing leaks.
func testConcurrentStarts(t *testing.T, s *suite) {
	const n, fit = 16, 4
	setup := s.client(nil)
	ctx := s.ctx()
	grp := s.world(setup, "rg-race", 8*fit)
	clients := make([]*dlc.Client, n)
	ids := make([]string, n)
	for i := range n {
		clients[i] = s.client(nil)
		cl, err := clients[i].Clusters().Create(ctx, s.spec(fmt.Sprintf("race_%02d", i), grp, "rg-race"))
		s.must(err)
		ids[i] = cl.ID
	}
	for _, id := range ids {
		s.clusterState(setup, id, cluster.Created)
	}
	stop := s.watchQuota(setup, "rg-race", fit)
	var started atomic.Int32
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := clients[i].Clusters().Start(ctx, ids[i])
			switch {
			case err == nil:
				started.Add(1)
			case errors.Is(err, dlc.ErrQuota):
			default:
				cl, _ := clients[i].Clusters().Get(ctx, ids[i])
				t.Errorf("start %s: %v; now %s: %+v", ids[i], err, cl.State, cl.Events)
			}
		}()
	}
	wg.Wait()
	if started.Load() != fit {
		t.Fatalf("%d starts succeeded, room for %d", started.Load(), fit)
	}
	s.eventually("4 running", func() (bool, string) {
		running := 0
		for _, id := range ids {
			if cl, err := setup.Clusters().Get(ctx, id); err == nil && cl.State == cluster.Running {
				running++
			}
		}
		return running == fit, fmt.Sprint(running)
	})
	stop()
	u, err := setup.ResourceGroups().Get(ctx, "rg-race")
	s.must(err)
	if len(u.Holders) != fit || u.Reserved.MilliCPU != 8000*fit {
		t.Fatalf("holders %d, reserved %s", len(u.Holders), u.Reserved)
	}
	for i, id := range ids {
		s.must(clients[(i+1)%n].Clusters().Delete(ctx, id, dlc.DeleteOptions{Force: true}))
	}
	for _, id := range ids {
		s.gone(setup, id)
	}
	s.quotaClean(setup)
	// A replica whose view lagged may have put a hold back just as its
	// cluster went (a true-up between the delete's release and the
	// object's removal): the repair releases it at its grace.
	s.eventually("no hold left", func() (bool, string) {
		u, err := setup.ResourceGroups().Get(ctx, "rg-race")
		if err != nil {
			return false, err.Error()
		}
		return len(u.Holders) == 0, fmt.Sprint(u.Holders)
	})
}

// A hibernate through one client frees the reservation another client's
// start made, and a third client can then start.
func testHibernateAcrossClients(t *testing.T, s *suite) {
	a, b := s.client(nil), s.client(nil)
	ctx := s.ctx()
	grp := s.world(a, "rg-hib", 8)
	cl := s.runningCluster(a, "hib_a", grp, "rg-hib")
	second, err := b.Clusters().Create(ctx, s.spec("hib_b", grp, "rg-hib"))
	s.must(err)
	s.clusterState(b, second.ID, cluster.Created)
	if _, err := b.Clusters().Start(ctx, second.ID); !errors.Is(err, dlc.ErrQuota) {
		t.Fatalf("start with no room: %v", err)
	}
	_, err = b.Clusters().Hibernate(ctx, cl.ID, dlc.DeleteOptions{})
	s.must(err)
	s.clusterState(a, cl.ID, cluster.Hibernated)
	s.eventually("start once freed", func() (bool, string) {
		_, err := b.Clusters().Start(ctx, second.ID)
		return err == nil, fmt.Sprint(err)
	})
	s.clusterState(a, second.ID, cluster.Running)
	s.quotaClean(b)
}

// Queued runs survive a restart (a new client on the store of a closed
// one) and are admitted in priority order once quota frees.
func testRestartKeepsQueue(t *testing.T, s *suite) {
	first := s.client(nil)
	ctx := s.ctx()
	grp := s.world(first, "rg-restart", 8)
	blocker := s.runningCluster(first, "blocker", grp, "rg-restart")
	var ids []string
	for _, p := range []int{1, 9, 5, 7} {
		rec := s.onDemand(first, fmt.Sprintf("p%d", p), "rg-restart", p)
		r, err := first.Runs().Create(ctx, rec.ID, dlc.RunOptions{})
		s.must(err)
		ids = append(ids, r.ID)
	}
	for _, id := range ids {
		if r := s.runState(first, id, job.Waiting); r.WaitReason != job.InsufficientQuota {
			t.Fatalf("waits because %q", r.WaitReason)
		}
	}
	_ = first.Close()
	second := s.client(nil)
	s.must(second.Clusters().Delete(ctx, blocker.ID, dlc.DeleteOptions{}))
	// Waited for in the order they are to run (9, 7, 5, 1: ids holds 1, 9,
	// 5, 7), so that each wait covers one run, not the ones before it.
	var order []*job.Run
	for _, i := range []int{1, 3, 2, 0} {
		order = append(order, s.runEnds(second, ids[i]))
	}
	for _, r := range order {
		if r.State != job.Succeeded {
			t.Fatalf("run %s: %s %s", r.ID, r.State, r.Message)
		}
	}
	sort.Slice(order, func(i, j int) bool { return order[i].StartedAt.Before(order[j].StartedAt) })
	var got []int
	for _, r := range order {
		got = append(got, r.Priority)
	}
	if !slices.Equal(got, []int{9, 7, 5, 1}) {
		for _, r := range order {
			t.Logf("%s p%d started %s events %+v", r.ID, r.Priority, r.StartedAt.Format(time.StampMicro), r.Events)
		}
		t.Fatalf("admitted in priority order %v, want [9 7 5 1]", got)
	}
	s.quotaClean(second)
}

// A fault at each store write and each Ray call of every operation ends
// with every object running, abnormal or failed with the reason, and the
// quota clean: never stuck.
func testFaults(t *testing.T, s *suite) {
	// One clean pass counts the calls the story makes.
	clean := NewFaulty(s.h.NewBackend(t), nil)
	story(t, s, clean)
	calls := clean.Calls()
	if len(calls) == 0 {
		t.Fatal("the story made no call")
	}
	for _, n := range s.h.faultCalls(calls) {
		for _, f := range []Fault{Before, After} {
			name := fmt.Sprintf("%03d-%s-%s", n, map[Fault]string{Before: "before", After: "after"}[f], calls[n])
			t.Run(strings.ReplaceAll(name, "/", "_"), func(t *testing.T) {
				t.Parallel()
				fb := NewFaulty(s.h.NewBackend(t), func(i int, c Call) Fault {
					if i == n {
						return f
					}
					return NoFault
				})
				story(t, &suite{t: t, h: s.h}, fb)
			})
		}
	}
}

// faultCalls returns the indexes of the calls the Faults test fails.
func (h Harness) faultCalls(calls []Call) []int {
	var out []int
	seen := map[string]bool{}
	for n, c := range calls {
		if len(h.FaultOps) == 0 {
			out = append(out, n)
			continue
		}
		prefix, _, _ := strings.Cut(c.ID, "-")
		key := c.Op + " " + c.Kind + " " + prefix
		if slices.Contains(h.FaultOps, c.Op) && !seen[key] {
			seen[key] = true
			out = append(out, n)
		}
	}
	return out
}

// story is every operation once, on one client over b: a cluster is
// created, started, runs a job, is hibernated, started and deleted; a
// group run and an on-demand run go through. User calls that fail with
// ErrUnavailable are retried, as a caller would; each step then checks
// that the platform settles: nothing transitional, every failure with
// its reason, quota clean.
func story(t *testing.T, s *suite, b dlc.Backend) {
	c := s.client(b)
	ctx := s.ctx()
	retry := func(what string, f func() error) {
		t.Helper()
		var err error
		for range 20 {
			if err = f(); !errors.Is(err, dlc.ErrUnavailable) {
				break
			}
		}
		if err != nil && !errors.Is(err, dlc.ErrState) {
			t.Fatalf("%s: %v", what, err)
		}
	}
	settled := func(what string) {
		t.Helper()
		s.eventually(what+": settled", func() (bool, string) {
			cls, _ := c.Clusters().List(ctx)
			for _, cl := range cls {
				if cl.State.Transitional() {
					return false, "cluster " + cl.ID + " " + string(cl.State)
				}
				if cl.State == cluster.Abnormal && cl.Reason == "" {
					t.Fatalf("cluster %s abnormal with no reason", cl.ID)
				}
			}
			runs, _ := c.Runs().List(ctx, dlc.RunListOptions{})
			for _, r := range runs {
				if r.State == job.Provisioning || r.State == job.Queued {
					return false, "run " + r.ID + " " + string(r.State)
				}
				if r.State == job.Failed && r.Message == "" {
					t.Fatalf("run %s failed with no reason", r.ID)
				}
			}
			if err := c.CheckQuota(ctx); err != nil {
				return false, err.Error()
			}
			return true, ""
		})
	}
	var rgErr error
	for range 20 {
		if _, rgErr = c.ResourceGroups().Register(ctx, quota.Group{ID: "rg-story", Package: "pkg-1",
			Capacity: quota.Resources{MilliCPU: 24000, Memory: 96 * quota.GiB}}); !errors.Is(rgErr, dlc.ErrUnavailable) {
			break
		}
	}
	s.must(rgErr)
	var grp string
	retry("group", func() error {
		g, err := c.Groups().Create(ctx, "story")
		if errors.Is(err, dlc.ErrConflict) { // a lost reply: it was made
			gs, _ := c.Groups().List(ctx)
			for _, x := range gs {
				if x.Name == "story" {
					grp = x.ID
				}
			}
			return nil
		}
		if err == nil {
			grp = g.ID
		}
		return err
	})
	var clID string
	retry("create cluster", func() error {
		cl, err := c.Clusters().Create(ctx, s.spec("story", grp, "rg-story"))
		if errors.Is(err, dlc.ErrConflict) {
			cls, _ := c.Clusters().List(ctx)
			for _, x := range cls {
				if x.Spec.Name == "story" {
					clID = x.ID
				}
			}
			return nil
		}
		if err == nil {
			clID = cl.ID
		}
		return err
	})
	if clID == "" {
		t.Fatal("no cluster")
	}
	settled("create")
	retry("start", func() error { _, err := c.Clusters().Start(ctx, clID); return err })
	settled("start")
	rec := s.jobOnRetry(c, retry, "story-job", clID, "")
	var runID string
	retry("run on cluster", func() error {
		r, err := c.Runs().Create(ctx, rec.ID, dlc.RunOptions{RequestID: "story-1"})
		if err == nil {
			runID = r.ID
		}
		return err
	})
	settled("run on cluster")
	grec := s.jobOnRetry(c, retry, "story-group", "", grp)
	retry("run on group", func() error {
		_, err := c.Runs().Create(ctx, grec.ID, dlc.RunOptions{RequestID: "story-2"})
		return err
	})
	settled("run on group")
	retry("hibernate", func() error { _, err := c.Clusters().Hibernate(ctx, clID, dlc.DeleteOptions{Force: true}); return err })
	settled("hibernate")
	retry("start again", func() error { _, err := c.Clusters().Start(ctx, clID); return err })
	settled("start again")
	var od *job.Record
	retry("save on-demand", func() error {
		cfg, err := dlc.NewJob("story-od").OnDemand("pkg-1", "rg-story").Image("ray-2.46.0-py310-cpu").
			Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1).
			COSPackage("cos://jobs-1250000000/train.zip").Entrypoint("python train.py").Build()
		s.must(err)
		od, err = c.Jobs().Create(ctx, cfg, dlc.SaveOptions{RequestID: "story-od"})
		return err
	})
	retry("run on demand", func() error {
		_, err := c.Runs().Create(ctx, od.ID, dlc.RunOptions{RequestID: "story-3"})
		return err
	})
	settled("run on demand")
	retry("delete", func() error { return c.Clusters().Delete(ctx, clID, dlc.DeleteOptions{Force: true}) })
	s.eventually("story: all gone", func() (bool, string) {
		cls, _ := c.Clusters().List(ctx)
		return len(cls) == 0, fmt.Sprint(len(cls), " clusters")
	})
	settled("delete")
	s.eventually("story: nothing reserved", func() (bool, string) {
		u, err := c.ResourceGroups().Get(ctx, "rg-story")
		return err == nil && len(u.Holders) == 0, fmt.Sprint(u.Holders)
	})
	_ = runID
}

func (s *suite) jobOnRetry(c *dlc.Client, retry func(string, func() error), name, clusterID, groupID string) *job.Record {
	cfg := s.jobConfig(name, clusterID, groupID)
	var rec *job.Record
	retry("save "+name, func() error {
		var err error
		rec, err = c.Jobs().Create(s.ctx(), cfg, dlc.SaveOptions{RequestID: name})
		return err
	})
	return rec
}

// A background step that keeps failing turns its object abnormal (a
// cluster Ray will not apply), and a run whose submit cannot reach Ray
// fails once that lasts past WithRayUnreachableTimeout, each with the
// error as the reason; a forced delete still removes the cluster.
func testPersistentFaults(t *testing.T, s *suite) {
	var applyFails, submitFails atomic.Bool
	fb := s.failingCalls(map[string]*atomic.Bool{"ApplyCluster": &applyFails, "SubmitRun": &submitFails})
	// A submit that cannot reach Ray is no failure of Ray's: the run waits
	// for Ray up to this bound, then fails saying since when.
	c := s.client(fb, dlc.WithRayUnreachableTimeout(time.Second))
	ctx := s.ctx()
	grp := s.world(c, "rg-fail", 32)
	cl, err := c.Clusters().Create(ctx, s.spec("fails", grp, "rg-fail"))
	s.must(err)
	s.clusterState(c, cl.ID, cluster.Created)
	applyFails.Store(true)
	_, err = c.Clusters().Start(ctx, cl.ID)
	s.must(err)
	s.clusterState(c, cl.ID, cluster.Abnormal)
	got, err := c.Clusters().Get(ctx, cl.ID)
	s.must(err)
	if !strings.Contains(got.Reason, "ApplyCluster") || !strings.Contains(got.Reason, "kept failing") {
		t.Fatalf("abnormal because %q", got.Reason)
	}
	applyFails.Store(false)
	_, err = c.Clusters().Start(ctx, cl.ID) // C11: an abnormal cluster can be started again
	s.must(err)
	s.clusterState(c, cl.ID, cluster.Running)
	submitFails.Store(true)
	rec := s.jobOn(c, "fails", cl.ID, "")
	r, err := c.Runs().Create(ctx, rec.ID, dlc.RunOptions{})
	s.must(err)
	end := s.runEnds(c, r.ID)
	if end.State != job.Failed || !strings.Contains(end.Message, "SubmitRun") || !strings.Contains(end.Message, "Ray unreachable since") {
		t.Fatalf("run: %s %q", end.State, end.Message)
	}
	applyFails.Store(true)
	s.must(c.Clusters().Delete(ctx, cl.ID, dlc.DeleteOptions{Force: true}))
	s.gone(c, cl.ID)
	s.quotaClean(c)
}

// G1–G6: a cluster in two groups, a rename, the last group kept (C2),
// and a delete that moves the members to a target.
func testGroups(t *testing.T, s *suite) {
	c := s.client(nil)
	ctx := s.ctx()
	g1 := s.world(c, "rg-groups", 32)
	cl, err := c.Clusters().Create(ctx, s.spec("grouped", g1, "rg-groups"))
	s.must(err)
	g2, err := c.Groups().Create(ctx, "second")
	s.must(err)
	s.must(c.Groups().AddMembers(ctx, g2.ID, cl.ID)) // G1: in two groups
	for _, g := range []string{g1, g2.ID} {
		if ms, err := c.Groups().Members(ctx, g); err != nil || len(ms) != 1 {
			t.Fatalf("members of %s: %d, %v", g, len(ms), err)
		}
	}
	if _, err := c.Groups().Rename(ctx, g2.ID, "renamed"); err != nil { // G5
		t.Fatal(err)
	}
	if _, err := c.Groups().Rename(ctx, g2.ID, "group-rg-groups"); !errors.Is(err, dlc.ErrConflict) {
		t.Fatalf("rename onto a taken name: %v", err)
	}
	s.must(c.Groups().RemoveMembers(ctx, g1, cl.ID))
	if err := c.Groups().RemoveMembers(ctx, g2.ID, cl.ID); !errors.Is(err, dlc.ErrInvalid) { // C2
		t.Fatalf("removing the last group: %v", err)
	}
	if err := c.Groups().Delete(ctx, g2.ID, ""); !errors.Is(err, dlc.ErrInvalid) { // G6 needs a target
		t.Fatalf("delete without a target: %v", err)
	}
	s.must(c.Groups().Delete(ctx, g2.ID, g1))
	got, err := c.Clusters().Get(ctx, cl.ID)
	s.must(err)
	if !slices.Equal(got.Spec.Groups, []string{g1}) {
		t.Fatalf("after the delete the cluster is in %v, want [%s]", got.Spec.Groups, g1)
	}
	if _, err := c.Groups().Get(ctx, g2.ID); !errors.Is(err, dlc.ErrNotFound) {
		t.Fatalf("deleted group: %v", err)
	}
	if _, err := c.Groups().Create(ctx, "renamed"); err != nil { // a deleted group's name is free
		t.Fatalf("the name of a deleted group: %v", err)
	}
}

// J17, G6 across clients: a job config deleted through one client while
// another runs it, and a group deleted through one client while another
// puts a cluster into it, at the same moment, round after round. A delete
// and a create never both take effect: no run of a deleted config is left
// running, and no cluster is left in a deleted group.
func testFencedDeletes(t *testing.T, s *suite) {
	a, b := s.client(nil), s.client(nil)
	ctx := s.ctx()
	grp := s.world(a, "rg-fenced", 32)
	cl, err := a.Clusters().Create(ctx, s.spec("fenced", grp, "rg-fenced"))
	s.must(err)
	const rounds = 6
	for i := range rounds {
		// A run of a config on the group waits (no member runs): it is
		// live until something ends it.
		rec := s.jobOn(a, fmt.Sprintf("fenced-%d", i), "", grp)
		var (
			wg             sync.WaitGroup
			r              *job.Run
			runErr, delErr error
		)
		start := make(chan struct{})
		wg.Go(func() { <-start; r, runErr = b.Runs().Create(ctx, rec.ID, dlc.RunOptions{}) })
		wg.Go(func() { <-start; delErr = a.Jobs().Delete(ctx, rec.ID) })
		close(start)
		wg.Wait()
		t.Logf("round %d: run: %v; job delete: %v", i, runErr, delErr)
		if runErr == nil && delErr == nil {
			t.Fatalf("round %d: run %s created and its job config deleted (J17)", i, r.ID)
		}
		for _, err := range []error{runErr, delErr} {
			if err != nil && !errors.Is(err, dlc.ErrState) && !errors.Is(err, dlc.ErrNotFound) {
				t.Fatalf("round %d: %v", i, err)
			}
		}
		if delErr == nil {
			s.eventually("the runs of a deleted config ended", func() (bool, string) {
				runs, err := a.Runs().List(ctx, dlc.RunListOptions{JobID: rec.ID})
				if err != nil {
					return false, err.Error()
				}
				for _, r := range runs {
					if !r.State.Terminal() {
						return false, r.ID + " " + string(r.State)
					}
				}
				return true, ""
			})
		}

		g, err := a.Groups().Create(ctx, fmt.Sprintf("fenced-%d", i))
		s.must(err)
		var addErr error
		start = make(chan struct{})
		wg.Go(func() { <-start; addErr = b.Groups().AddMembers(ctx, g.ID, cl.ID) })
		wg.Go(func() { <-start; delErr = a.Groups().Delete(ctx, g.ID, grp) })
		close(start)
		wg.Wait()
		t.Logf("round %d: add members: %v; group delete: %v", i, addErr, delErr)
		for _, err := range []error{addErr, delErr} {
			if err != nil && !errors.Is(err, dlc.ErrState) && !errors.Is(err, dlc.ErrNotFound) {
				t.Fatalf("round %d: %v", i, err)
			}
		}
		s.eventually("the cluster in no deleted group", func() (bool, string) {
			got, err := a.Clusters().Get(ctx, cl.ID)
			if err != nil {
				return false, err.Error()
			}
			for _, id := range got.Spec.Groups {
				if _, err := a.Groups().Get(ctx, id); err != nil {
					return false, fmt.Sprintf("in %v: %s: %v", got.Spec.Groups, id, err)
				}
			}
			return true, ""
		})
	}
}

// C6: a saved template fills a cluster and an on-demand job; J15: an edit
// changes only what it may and bumps the revision; J16: a copy.
func testTemplatesAndJobEdits(t *testing.T, s *suite) {
	c := s.client(nil)
	ctx := s.ctx()
	grp := s.world(c, "rg-tpl", 32)
	tpl, err := dlc.NewCluster("x").Image("ray-2.46.0-py310-cpu").Head("head", "cu.4c8g").
		WorkerGroup("cpu", "cu.4c8g", 1, 2).BuildTemplate("small")
	s.must(err)
	s.must(c.Templates().Save(ctx, tpl))
	s.must(c.Templates().Save(ctx, tpl)) // replacing one of the same name
	got, err := c.Templates().Get(ctx, "small")
	s.must(err)
	spec, err := dlc.NewCluster("from_tpl").FromTemplate(got).Groups(grp).Resources("pkg-1", "rg-tpl").Build()
	s.must(err)
	if _, err := c.Clusters().Create(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if list, err := c.Templates().List(ctx); err != nil || len(list) != 1 {
		t.Fatalf("templates: %d, %v", len(list), err)
	}
	rec := s.onDemand(c, "editable", "rg-tpl", 4)
	edit := rec.DeepCopy()
	edit.Config.Entrypoint = "python train.py --epochs 2"
	next, err := c.Jobs().Update(ctx, edit)
	s.must(err)
	if next.Revision != 2 || next.Config.Entrypoint != edit.Config.Entrypoint {
		t.Fatalf("after the edit: revision %d, %q", next.Revision, next.Config.Entrypoint)
	}
	if _, err := c.Jobs().Update(ctx, edit); !errors.Is(err, dlc.ErrConflict) { // a stale version
		t.Fatalf("an edit of a stale version: %v", err)
	}
	bad := next.DeepCopy()
	bad.Config.Name = "another name"
	if _, err := c.Jobs().Update(ctx, bad); !errors.Is(err, dlc.ErrInvalid) {
		t.Fatalf("an edit of the name (J15): %v", err)
	}
	cp, err := c.Jobs().Clone(ctx, rec.ID, "")
	s.must(err)
	if cp.ID == rec.ID || cp.Config.Name != "editable (copy)" || cp.Revision != 1 {
		t.Fatalf("copy: %+v", cp)
	}
	s.must(c.Templates().Delete(ctx, "small"))
	if _, err := c.Templates().Get(ctx, "small"); !errors.Is(err, dlc.ErrNotFound) {
		t.Fatalf("deleted template: %v", err)
	}
}

// C11: an edit of a running cluster applies worker ranges at once and
// the rest at the next start; C14: autoscaling within the range and the
// quota; C13: details with pods and the dashboard.
func testEditAutoscaleDetails(t *testing.T, s *suite) {
	c := s.client(nil)
	ctx := s.ctx()
	grp := s.world(c, "rg-edit", 16) // room for the head and 3 workers of 4 cores
	cl := s.runningCluster(c, "editing", grp, "rg-edit")
	var res *dlc.EditResult
	for attempt := 0; ; attempt++ {
		cur, err := c.Clusters().Get(ctx, cl.ID)
		s.must(err)
		cur.Spec.Workers[0].Instances = cluster.Range(1, 4)
		cur.Spec.Image = "ray-2.41.0-py310-cpu"
		res, err = c.Clusters().Update(ctx, cur)
		if errors.Is(err, dlc.ErrConflict) && attempt < 5 {
			continue // the platform moved it meanwhile (following Ray's autoscaler): edit again
		}
		s.must(err)
		break
	}
	if len(res.Applied) != 1 || len(res.NeedsRestart) != 1 || res.NeedsRestart[0] != "image" {
		t.Fatalf("edit: applied %v, needs restart %v", res.Applied, res.NeedsRestart)
	}
	demand := func(workers int) {
		up, err := c.Clusters().Autoscale(ctx, cl.ID, "cpu", workers)
		s.must(err)
		if want := min(max(workers, 1), 3); up.Granted != want || up.QuotaRefused != (workers > 3) || (up.QuotaRefused && up.Reason == "") {
			t.Fatalf("autoscale to %d: %+v", workers, up) // 16 cores: head + 3 workers
		}
	}
	if s.h.Autoscaler != nil {
		d := s.h.Autoscaler(t, s.backend())
		demand = func(workers int) { d(cl.ID, "cpu", workers) }
	}
	// workers counts the worker pods, and reserved the cluster's hold and
	// what its Replicas need, checking that Ray never runs more than held.
	workers := func() (int, quota.Resources, *cluster.Details) {
		d, err := c.Clusters().Details(ctx, cl.ID)
		s.must(err)
		n, inRay := 0, quota.Resources{}
		for _, p := range d.Pods {
			inRay = inRay.Add(p.Requests)
			if p.Role == "worker" {
				n++
			}
		}
		if !inRay.Fits(d.Resources) {
			t.Fatalf("Ray runs %s of the cluster, its reservation is %s", inRay, d.Resources)
		}
		return n, d.Resources, d
	}
	demand(4) // one more than fits
	s.eventually("three workers running, the fourth refused", func() (bool, string) {
		n, held, d := workers()
		refused := false
		for _, e := range d.Events {
			refused = refused || (e.Action == "autoscale-refused" && strings.Contains(e.Message, "rg-edit"))
		}
		return n == 3 && refused && d.Dashboard != "" && held.MilliCPU == 16000,
			fmt.Sprintf("%d workers, reserving %s, refusal recorded %v", n, held, refused)
	})
	demand(0) // to the range's minimum
	s.eventually("quota follows the scale-down", func() (bool, string) {
		n, held, _ := workers()
		u, _ := c.ResourceGroups().Get(ctx, "rg-edit")
		// Ray's own autoscaler keeps one worker of room above what it runs.
		ok := n == 1 && u.Reserved == held && (held.MilliCPU == 8000 || (s.h.Autoscaler != nil && held.MilliCPU == 12000))
		return ok, fmt.Sprintf("%d workers, reserving %s", n, u.Reserved)
	})
	s.quotaClean(c)
}

// J18: a group whose members are all abnormal makes its runs wait, saying
// so; a healthy member lets them go.
func testAllMembersAbnormal(t *testing.T, s *suite) {
	var fail atomic.Bool
	fail.Store(true)
	fb := s.failingCalls(map[string]*atomic.Bool{"ApplyCluster": &fail})
	c := s.client(fb)
	ctx := s.ctx()
	grp := s.world(c, "rg-abn", 32)
	cl, err := c.Clusters().Create(ctx, s.spec("sick", grp, "rg-abn"))
	s.must(err)
	fail.Store(false)
	s.clusterState(c, cl.ID, cluster.Created)
	fail.Store(true)
	_, err = c.Clusters().Start(ctx, cl.ID)
	s.must(err)
	s.clusterState(c, cl.ID, cluster.Abnormal)
	rec := s.jobOn(c, "on-sick-group", "", grp)
	r, err := c.Runs().Create(ctx, rec.ID, dlc.RunOptions{})
	s.must(err)
	if w := s.runState(c, r.ID, job.Waiting); w.WaitReason != job.AllMembersAbnormal {
		t.Fatalf("waits because %q", w.WaitReason)
	}
	fail.Store(false)
	_, err = c.Clusters().Start(ctx, cl.ID)
	s.must(err)
	if end := s.runEnds(c, r.ID); end.State != job.Succeeded {
		t.Fatalf("run: %s %s", end.State, end.Message)
	}
}

// G3, G4 across clients: a group created through one client with the
// ordered-failover policy, its order set through the other, sends runs
// created through either to the primary while it runs, to the standby
// while it does not (hibernated), and back; each run says why
// (Run.Placement). The group reads the same through both clients.
func testGroupPolicies(t *testing.T, s *suite) {
	a, b := s.client(nil), s.client(nil)
	ctx := s.ctx()
	_, err := a.ResourceGroups().Register(ctx, quota.Group{ID: "rg-policy", Package: "pkg-1",
		Capacity: quota.Resources{MilliCPU: 32000, Memory: 128 * quota.GiB}})
	s.must(err)
	g, err := a.Groups().Create(ctx, "主备", dlc.GroupCreateOptions{Scheduling: group.Scheduling{Policy: group.OrderedFailover}})
	s.must(err)
	standby := s.runningCluster(a, "standby", g.ID, "rg-policy")
	primary := s.runningCluster(a, "primary", g.ID, "rg-policy")
	_, err = b.Groups().SetPolicy(ctx, g.ID, group.Scheduling{Policy: group.OrderedFailover, Order: []string{primary.ID, standby.ID}})
	s.must(err)
	s.eventually("both clients read the order", func() (bool, string) {
		for _, c := range []*dlc.Client{a, b} {
			got, err := c.Groups().Get(ctx, g.ID)
			if err != nil || got.Policy != group.OrderedFailover || !slices.Equal(got.Order, []string{primary.ID, standby.ID}) {
				return false, fmt.Sprintf("%+v %v", got, err)
			}
		}
		return true, ""
	})
	rec := s.jobOn(a, "failover", "", g.ID)
	both := func(id string, want cluster.State) {
		s.t.Helper()
		s.clusterState(a, id, want)
		s.clusterState(b, id, want)
	}
	run := func(through *dlc.Client, want *cluster.Cluster, why string) {
		s.t.Helper()
		r, err := through.Runs().Create(ctx, rec.ID, dlc.RunOptions{})
		s.must(err)
		end := s.runEnds(through, r.ID)
		if end.State != job.Succeeded || end.ClusterID != want.ID || end.Placement != why {
			t.Fatalf("run %s: %s on %s (%q), want succeeded on %s (%q)", r.ID, end.State, end.ClusterID, end.Placement, want.ID, why)
		}
	}
	run(b, primary, "ordered-failover: #1 in order, the first")
	_, err = b.Clusters().Hibernate(ctx, primary.ID, dlc.HibernateOptions{})
	s.must(err)
	both(primary.ID, cluster.Hibernated)
	run(a, standby, "ordered-failover: #2 in order, the first running ("+primary.ID+" not running)")
	_, err = a.Clusters().Start(ctx, primary.ID)
	s.must(err)
	both(primary.ID, cluster.Running)
	run(b, primary, "ordered-failover: #1 in order, the first")
}

// failingCalls wraps the suite's backend so that each call named in
// switches fails (before it is made) while its switch is on.
func (s *suite) failingCalls(switches map[string]*atomic.Bool) *Faulty {
	return NewFaulty(s.backend(), func(_ int, c Call) Fault {
		if on, ok := switches[c.Op]; ok && on.Load() {
			return Before
		}
		return NoFault
	})
}
