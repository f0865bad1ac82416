package dlc_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/dlctest"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
)

// replicaSet is several clients with workers over one memory backend
// (through a counting store), as the replicas of a service over one API
// server are, each with a metrics registry of its own.
type replicaSet struct {
	t    testing.TB
	cs   *countingStore
	cs0  *memory.Backend
	cls  []*dlc.Client
	regs []*prometheus.Registry
	ctx  context.Context
	grp  string
}

// fast are the simulated Ray's delays of the sharing tests: a step takes
// a millisecond, so what is measured is the platform's work.
var fast = memory.Delays{Create: time.Millisecond, Start: time.Millisecond, Hibernate: time.Millisecond,
	Delete: time.Millisecond, Submit: time.Millisecond, Run: time.Millisecond}

func newReplicaSet(t testing.TB, n int, latency time.Duration, opts ...dlc.Option) *replicaSet {
	t.Helper()
	d := fast
	mb := memory.New(memory.Options{Delays: &d})
	rs := &replicaSet{t: t, cs0: mb, cs: newCountingStore(mb, latency), ctx: dlc.WithUser(context.Background(), "alice")}
	for range n {
		rs.add(opts...)
	}
	g, err := rs.cls[0].Groups().Create(rs.ctx, "replicas")
	if err != nil {
		t.Fatal(err)
	}
	rs.grp = g.ID
	return rs
}

// add starts one more replica.
func (rs *replicaSet) add(opts ...dlc.Option) *dlc.Client {
	reg := prometheus.NewRegistry()
	// On the real clock a probation of two periodic resyncs (ten minutes)
	// would outlast these tests: the replicas count each other at once, as
	// where only the backend's identity writes the membership documents.
	// TestMemberProbation tests the probation.
	c, err := dlc.New(append([]dlc.Option{dlc.WithBackend(rs.cs), dlc.WithWorkers(8), dlc.WithMetrics(reg), dlc.WithMemberProbation(0)}, opts...)...)
	if err != nil {
		rs.t.Fatal(err)
	}
	rs.t.Cleanup(func() { _ = c.Close() })
	rs.cls, rs.regs = append(rs.cls, c), append(rs.regs, reg)
	return c
}

// calls returns how many calls of operation op (e.g. "ray_apply_cluster")
// replica i made.
func (rs *replicaSet) calls(i int, op string) uint64 {
	mfs, err := rs.regs[i].Gather()
	if err != nil {
		rs.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "dlc_backend_call_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "operation" && l.GetValue() == op {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return 0
}

// group registers resource group id, large enough for anything.
func (rs *replicaSet) group(id string) {
	if _, err := rs.cls[0].ResourceGroups().Register(rs.ctx, quota.Group{ID: id, Package: "pkg-1",
		Capacity: quota.Resources{MilliCPU: 1 << 40, Memory: 1 << 50}}); err != nil {
		rs.t.Fatal(err)
	}
}

// createStart creates a cluster in resource group rg through c, waits
// until it is created and starts it.
func (rs *replicaSet) createStart(c *dlc.Client, name, rg string) (*cluster.Cluster, error) {
	spec, err := dlc.NewCluster(name).Groups(rs.grp).Resources("pkg-1", rg).Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1).Build()
	if err != nil {
		return nil, err
	}
	cl, err := c.Clusters().Create(rs.ctx, spec)
	if err != nil {
		return nil, err
	}
	if err := rs.until(c, cl.ID, cluster.Created, time.Minute); err != nil {
		return nil, err
	}
	_, err = c.Clusters().Start(rs.ctx, cl.ID)
	return cl, err
}

// until waits until cluster id is in state want, as c reads it.
func (rs *replicaSet) until(c *dlc.Client, id string, want cluster.State, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		got, err := c.Clusters().Get(rs.ctx, id)
		if err == nil && got.State == want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster %s: %v %v after %s, want %s", id, got, err, limit, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// Replicas share the background work: with three clients over one store,
// clusters created and started through all of them are all brought up,
// every replica does part of the Ray side, and the background steps
// cost no conflict per extra replica (before, each of the 2 extra
// replicas raced every step: 2×(N−1) conflicts per create and start).
func TestReplicasShareTheWork(t *testing.T) {
	const clusters = 24
	for _, tc := range []struct {
		name   string
		shared bool
	}{{"shared", true}, {"every replica does everything", false}} {
		t.Run(tc.name, func(t *testing.T) {
			var opts []dlc.Option
			if !tc.shared {
				opts = append(opts, dlc.WithWorkSharing(0))
			}
			rs := newReplicaSet(t, 3, 0, opts...)
			for i := range clusters {
				rs.group(fmt.Sprintf("rg-%d", i))
			}
			// Each replica must have seen the others before the work starts.
			settleWithin(t, time.Minute, "the replicas to see each other", func() (bool, string) {
				return !tc.shared || rs.allSee(3), ""
			})
			before := rs.cs.conflicts.Load()
			var wg sync.WaitGroup
			ids := make([]string, clusters)
			for i := range clusters {
				wg.Add(1)
				go func() {
					defer wg.Done()
					cl, err := rs.createStart(rs.cls[i%3], fmt.Sprintf("c%d", i), fmt.Sprintf("rg-%d", i))
					if err != nil {
						t.Error(err)
						return
					}
					ids[i] = cl.ID
				}()
			}
			wg.Wait()
			for i, id := range ids {
				if id != "" {
					if err := rs.until(rs.cls[(i+1)%3], id, cluster.Running, time.Minute); err != nil {
						t.Fatal(err)
					}
				}
			}
			conflicts := rs.cs.conflicts.Load() - before
			var applies []uint64
			for i := range rs.cls {
				applies = append(applies, rs.calls(i, "ray_apply_cluster"))
			}
			t.Logf("%d clusters created and started through 3 replicas: %d conflicts (%.2f per operation); Ray applies by replica %v",
				clusters, conflicts, float64(conflicts)/(2*clusters), applies)
			if !tc.shared {
				return
			}
			for i, n := range applies {
				if n == 0 {
					t.Errorf("replica %d applied nothing to Ray: the work is not shared (%v)", i, applies)
				}
			}
			if per := float64(conflicts) / (2 * clusters); per > 1 {
				t.Errorf("%.2f conflicts per operation with 3 replicas sharing the work, want at most 1", per)
			}
			for _, c := range rs.cls {
				if err := c.CheckQuota(rs.ctx); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// allSee reports whether every replica's membership lists n live members:
// it reads the store's membership documents, which each replica writes.
func (rs *replicaSet) allSee(n int) bool {
	docs, err := rs.cs0.List(rs.ctx, "replica", nil)
	return err == nil && len(docs) == n
}

// A replica that crashed (its membership document stays, never renewed)
// keeps its share only until the TTL: the others take it over, delete its
// document, and every cluster comes up. One that closes hands its share
// over at once, whatever the TTL.
func TestReplicaShareTakenOver(t *testing.T) {
	t.Run("crashed", func(t *testing.T) {
		d := fast
		mb := memory.New(memory.Options{Delays: &d})
		// The crashed replica: its document, never renewed.
		if _, err := mb.Create(context.Background(), backend.Doc{Kind: "replica", ID: "replica-crashed",
			Data: []byte(`{"id":"replica-crashed","beat":1,"ttl":"300ms"}`)}); err != nil {
			t.Fatal(err)
		}
		rs := &replicaSet{t: t, cs0: mb, cs: newCountingStore(mb, 0), ctx: dlc.WithUser(context.Background(), "alice")}
		rs.add(dlc.WithWorkSharing(300 * time.Millisecond))
		rs.add(dlc.WithWorkSharing(300 * time.Millisecond))
		g, err := rs.cls[0].Groups().Create(rs.ctx, "g")
		if err != nil {
			t.Fatal(err)
		}
		rs.grp = g.ID
		rs.group("rg-1")
		for i := range 12 {
			cl, err := rs.createStart(rs.cls[i%2], fmt.Sprintf("c%d", i), "rg-1")
			if err != nil {
				t.Fatal(err)
			}
			if err := rs.until(rs.cls[0], cl.ID, cluster.Running, time.Minute); err != nil {
				t.Fatal(err)
			}
		}
		settleWithin(t, time.Minute, "the crashed replica's document to be deleted", func() (bool, string) {
			_, err := mb.Get(context.Background(), "replica", "replica-crashed")
			return err != nil, fmt.Sprint(err)
		})
	})
	t.Run("closed", func(t *testing.T) {
		rs := newReplicaSet(t, 2, 0, dlc.WithWorkSharing(time.Hour))
		rs.group("rg-1")
		settleWithin(t, time.Minute, "the replicas to see each other", func() (bool, string) { return rs.allSee(2), "" })
		if err := rs.cls[1].Close(); err != nil {
			t.Fatal(err)
		}
		// With an hour's TTL, only the hand-over at Close lets the other
		// replica take the clusters the closed one would own.
		for i := range 12 {
			cl, err := rs.createStart(rs.cls[0], fmt.Sprintf("c%d", i), "rg-1")
			if err != nil {
				t.Fatal(err)
			}
			if err := rs.until(rs.cls[0], cl.ID, cluster.Running, 30*time.Second); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// On-demand runs go with their resource group: the replica that admits a
// group's runs follows them, so admissions cost no conflict per extra
// replica, and runs in several groups are spread over the replicas.
func TestReplicasShareOnDemandRuns(t *testing.T) {
	const groups, perGroup = 8, 3
	rs := newReplicaSet(t, 2, 0)
	settleWithin(t, time.Minute, "the replicas to see each other", func() (bool, string) { return rs.allSee(2), "" })
	var recs []*job.Record
	for i := range groups {
		rg := fmt.Sprintf("rg-%d", i)
		rs.group(rg)
		cfg, err := dlc.NewJob(fmt.Sprintf("j%d", i)).OnDemand("pkg-1", rg).Image("ray-2.46.0-py310-cpu").Head("head", "cu.4c8g").
			WorkerGroup("cpu", "cu.4c8g", 1, 1).COSPackage("cos://jobs-1250000000/a.zip").Entrypoint("python a.py").Build()
		if err != nil {
			t.Fatal(err)
		}
		rec, err := rs.cls[0].Jobs().Create(rs.ctx, cfg, dlc.SaveOptions{})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	before := rs.cs.conflicts.Load()
	var runs []string
	for i := range groups * perGroup {
		r, err := rs.cls[i%2].Runs().Create(rs.ctx, recs[i%groups].ID, dlc.RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r.ID)
	}
	settleWithin(t, time.Minute, "every run to succeed", func() (bool, string) {
		n := int32(0)
		for _, id := range runs {
			if r, err := rs.cls[0].Runs().Get(rs.ctx, id); err == nil && r.State == job.Succeeded {
				n++
			}
		}
		return int(n) == len(runs), fmt.Sprintf("%d of %d succeeded", n, len(runs))
	})
	conflicts := rs.cs.conflicts.Load() - before
	t.Logf("%d on-demand runs in %d resource groups through 2 replicas: %d conflicts (%.2f per run); submits by replica %d, %d",
		len(runs), groups, conflicts, float64(conflicts)/float64(len(runs)), rs.calls(0, "ray_submit_run"), rs.calls(1, "ray_submit_run"))
	if per := float64(conflicts) / float64(len(runs)); per > 1 {
		t.Errorf("%.2f conflicts per on-demand run with 2 replicas, want at most 1", per)
	}
}

// BenchmarkReplicas: 16 goroutines per replica create and start clusters
// (each goroutine in a resource group of its own, or all of them in one:
// "one-rg", where every start changes the same account), or run on-demand jobs
// (a resource group per goroutine), through 1, 2 or 4 replicas over one
// store that adds 5 ms to every call, with the work shared (the default) or not. Reported:
// operations (a create and a start count one each; an on-demand run one,
// once it has succeeded) per second, and the store's conflicts per
// operation.
func BenchmarkReplicas(b *testing.B) {
	for _, mode := range []string{"create+start", "create+start/one-rg", "on-demand"} {
		for _, tc := range []struct {
			replicas int
			shared   bool
		}{{1, true}, {2, true}, {4, true}, {2, false}, {4, false}} {
			name := fmt.Sprintf("%s/replicas=%d/shared=%v", mode, tc.replicas, tc.shared)
			b.Run(name, func(b *testing.B) {
				var opts []dlc.Option
				if !tc.shared {
					opts = append(opts, dlc.WithWorkSharing(0))
				}
				rs := newReplicaSet(b, tc.replicas, 5*time.Millisecond, opts...)
				// Each replica serves 16 callers, as replicas are added to
				// serve more of them.
				goroutines := 16 * tc.replicas
				var recs []*job.Record
				for i := range goroutines {
					rg := fmt.Sprintf("rg-%d", i)
					rs.group(rg)
					if mode == "on-demand" {
						cfg, err := dlc.NewJob(fmt.Sprintf("j%d", i)).OnDemand("pkg-1", rg).Image("ray-2.46.0-py310-cpu").Head("head", "cu.4c8g").
							WorkerGroup("cpu", "cu.4c8g", 1, 1).COSPackage("cos://jobs-1250000000/a.zip").Entrypoint("python a.py").Build()
						if err != nil {
							b.Fatal(err)
						}
						rec, err := rs.cls[0].Jobs().Create(rs.ctx, cfg, dlc.SaveOptions{})
						if err != nil {
							b.Fatal(err)
						}
						recs = append(recs, rec)
					}
				}
				if tc.shared {
					settleWithin(b, time.Minute, "the replicas to see each other", func() (bool, string) { return rs.allSee(tc.replicas), "" })
				}
				var seq atomic.Int64
				per := (b.N + goroutines - 1) / goroutines
				before := rs.cs.conflicts.Load()
				b.ReportAllocs()
				b.ResetTimer()
				start := time.Now()
				var ops atomic.Int64
				var wg sync.WaitGroup
				for w := range goroutines {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for range per {
							n := seq.Add(1)
							c := rs.cls[int(n)%len(rs.cls)]
							switch mode {
							case "create+start", "create+start/one-rg":
								rg := fmt.Sprintf("rg-%d", w)
								if mode == "create+start/one-rg" {
									rg = "rg-0"
								}
								if _, err := rs.createStart(c, fmt.Sprintf("b%d", n), rg); err != nil {
									b.Error(err)
									return
								}
								ops.Add(2)
							default:
								r, err := c.Runs().Create(rs.ctx, recs[w].ID, dlc.RunOptions{})
								if err != nil {
									b.Error(err)
									return
								}
								for {
									got, err := c.Runs().Get(rs.ctx, r.ID)
									if err == nil && !got.State.Live() {
										if got.State != job.Succeeded {
											b.Errorf("run %s: %s %s", r.ID, got.State, got.Message)
										}
										break
									}
									time.Sleep(time.Millisecond)
								}
								ops.Add(1)
							}
						}
					}()
				}
				wg.Wait()
				el := time.Since(start)
				b.StopTimer()
				b.ReportMetric(float64(ops.Load())/el.Seconds(), "ops/s")
				b.ReportMetric(float64(rs.cs.conflicts.Load()-before)/float64(max(ops.Load(), 1)), "conflicts/op")
			})
		}
	}
}

// A membership document that anyone with write rights on the store can
// forge and keep changing (or a replica that renews its document while
// its workers hang) makes every client count a member that never does
// its share: the keys it owns would wait for ever. The clients adopt, at
// each periodic resync, the keys they saw unchanged since the one before
// (whatever their owner); a member whose share needed steps at two
// consecutive resyncs is reported and left out of the live members, so
// that its whole share is taken over: clusters created then are created
// within a resync. Clusters created and started, and on-demand runs
// (their resource group's, whose admissions they are), all reach their
// end state; the forged member is reported, and no real one. (Issue 21.)
func TestForgedReplicaShareIsTakenOver(t *testing.T) {
	const ttl, resync, step = 30 * time.Second, time.Minute, 5 * time.Second
	const groups, clusters = 16, 16
	regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
	m := dlctest.NewMemory(dlctest.MemoryOptions{Options: []dlc.Option{
		dlc.WithWorkSharing(ttl), dlc.WithResync(resync), dlc.WithMetrics(regA)}})
	t.Cleanup(m.Close)
	a := m.Client
	b := m.NewClient(dlc.WithMetrics(regB)) // its registry replaces regA
	cls := []*dlc.Client{a, b}
	ctx := dlc.WithUser(context.Background(), "alice")

	// The forged member: a document of kind "replica" written straight
	// into the store, changed at every tick, as a renewal would be.
	const forged = "replica-forged"
	beat := 0
	doc := func(version string) backend.Doc {
		beat++
		return backend.Doc{Kind: "replica", ID: forged, Version: version,
			Data: fmt.Appendf(nil, `{"id":%q,"beat":%d,"ttl":%q}`, forged, beat, ttl)}
	}
	version, err := m.Backend.Create(ctx, doc(""))
	if err != nil {
		t.Fatal(err)
	}
	tick := func() {
		t.Helper()
		if version, err = m.Backend.Update(ctx, doc(version)); err != nil {
			t.Fatalf("renewing the forged member: %v", err)
		}
		m.Reconcile()
		m.Clock.Advance(step)
	}
	// until ticks until cond holds, for at most limit on the fake clock.
	until := func(what string, limit time.Duration, cond func() (bool, string)) {
		t.Helper()
		tickUntil(t, m, resync, tick, what, limit, cond)
	}
	until("the store to hold the three members' documents", ttl, func() (bool, string) {
		docs, err := m.Backend.List(ctx, "replica", nil)
		return err == nil && len(docs) == 3, fmt.Sprint(len(docs), err)
	})
	// A member whose document appears after a client started is counted
	// only after two periodic resyncs (its probation): let them pass, so
	// that the forged member owns its share.
	for end := m.Clock.Now().Add(3 * resync); m.Clock.Now().Before(end); {
		tick()
	}

	g, err := a.Groups().Create(ctx, "forged")
	if err != nil {
		t.Fatal(err)
	}
	var recs []*job.Record
	for i := range groups {
		rg := fmt.Sprintf("rg-%d", i)
		if _, err := a.ResourceGroups().Register(ctx, quota.Group{ID: rg, Package: "pkg-1",
			Capacity: quota.Resources{MilliCPU: 1 << 40, Memory: 1 << 50}}); err != nil {
			t.Fatal(err)
		}
		cfg, err := dlc.NewJob(fmt.Sprintf("j%d", i)).OnDemand("pkg-1", rg).Image("ray-2.46.0-py310-cpu").Head("head", "cu.4c8g").
			WorkerGroup("cpu", "cu.4c8g", 1, 1).COSPackage("cos://jobs-1250000000/a.zip").Entrypoint("python a.py").Build()
		if err != nil {
			t.Fatal(err)
		}
		rec, err := a.Jobs().Create(ctx, cfg, dlc.SaveOptions{})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	var ids []string
	create := func(n int) []string {
		t.Helper()
		var batch []string
		for range n {
			i := len(ids)
			spec, err := dlc.NewCluster(fmt.Sprintf("c%d", i)).Groups(g.ID).Resources("pkg-1", fmt.Sprintf("rg-%d", i%groups)).
				Image("ray-2.46.0-py310-cpu").Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1).Build()
			if err != nil {
				t.Fatal(err)
			}
			cl, err := cls[i%2].Clusters().Create(ctx, spec)
			if err != nil {
				t.Fatal(err)
			}
			ids, batch = append(ids, cl.ID), append(batch, cl.ID)
		}
		return batch
	}
	// notIn reports whether every cluster of batch, as read through b, is
	// in state want, and those that are not.
	notIn := func(batch []string, want cluster.State) (bool, string) {
		var left []string
		for _, id := range batch {
			if cl, err := b.Clusters().Get(ctx, id); err != nil || cl.State != want {
				left = append(left, fmt.Sprintf("%s: %v %v", id, cl.State, err))
			}
		}
		return len(left) == 0, fmt.Sprintf("%d of %d not %s: %v", len(left), len(batch), want, left)
	}
	reports := func() (forgedN, realN float64) {
		for _, reg := range []*prometheus.Registry{regA, regB} {
			f, r := stalledReports(t, reg, forged)
			forgedN, realN = forgedN+f, realN+r
		}
		return forgedN, realN
	}

	// The clusters and runs the forged member owns wait until the clients
	// adopt them, and the forged member is reported.
	create(clusters)
	var runs []string
	for i := range 2 * groups {
		r, err := cls[i%2].Runs().Create(ctx, recs[i%groups].ID, dlc.RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r.ID)
	}
	const limit = 12 * resync
	until("every cluster to be created", limit, func() (bool, string) { return notIn(ids, cluster.Created) })
	until("the forged member to be reported", limit, func() (bool, string) {
		f, r := reports()
		return f > 0, fmt.Sprintf("reported %v times; real members %v times", f, r)
	})
	// Left out, its share is taken over at once: clusters created now are
	// created within a resync, before any could be adopted.
	batch := create(clusters)
	until("the clusters created after the report to be created", resync-step, func() (bool, string) { return notIn(batch, cluster.Created) })
	for i, id := range ids {
		if _, err := cls[i%2].Clusters().Start(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	until("every cluster to run", limit, func() (bool, string) { return notIn(ids, cluster.Running) })
	until("every on-demand run to succeed", limit, func() (bool, string) {
		var left []string
		for _, id := range runs {
			if r, err := b.Runs().Get(ctx, id); err != nil || r.State != job.Succeeded {
				left = append(left, fmt.Sprintf("%s: %v %v", id, r.State, err))
			}
		}
		return len(left) == 0, fmt.Sprintf("%d of %d not succeeded: %v", len(left), len(runs), left)
	})
	if _, realN := reports(); realN != 0 {
		t.Errorf("real members reported stalled %v times", realN)
	}
	for _, c := range cls {
		if err := c.CheckQuota(ctx); err != nil {
			t.Error(err)
		}
	}
}

// Forged membership documents whose ids change every two periodic
// resyncs (each id gone before adoption could leave it out, a new one in
// its place) never hold up the work: a member that appears after a client
// started is counted only after its probation of two resyncs, so no
// forged id ever owns a key. With 12 of them beside two real replicas,
// every batch of 16 creates and then starts is done within a resync
// (before this, each took three and it never recovered). (Issue 38.)
func TestRotatingForgedReplicasHoldNothingUp(t *testing.T) {
	const ttl, resync, step = 30 * time.Second, time.Minute, 5 * time.Second
	const forgers, batch = 12, 16
	m := dlctest.NewMemory(dlctest.MemoryOptions{Options: []dlc.Option{dlc.WithWorkSharing(ttl), dlc.WithResync(resync)}})
	t.Cleanup(m.Close)
	a := m.Client
	b := m.NewClient()
	cls := []*dlc.Client{a, b}
	ctx := dlc.WithUser(context.Background(), "alice")

	type forgedDoc struct{ id, version string }
	var forged []forgedDoc
	gen, beat := 0, 0
	rotate := func() {
		t.Helper()
		for _, f := range forged {
			if err := m.Backend.Delete(ctx, "replica", f.id, ""); err != nil {
				t.Fatal(err)
			}
		}
		forged = forged[:0]
		gen++
		for i := range forgers {
			id := fmt.Sprintf("replica-forged-%d-%d", gen, i)
			v, err := m.Backend.Create(ctx, backend.Doc{Kind: "replica", ID: id,
				Data: fmt.Appendf(nil, `{"id":%q,"beat":0,"ttl":%q}`, id, ttl)})
			if err != nil {
				t.Fatal(err)
			}
			forged = append(forged, forgedDoc{id, v})
		}
	}
	lastRotation := m.Clock.Now()
	rotate()
	tick := func() {
		t.Helper()
		beat++
		for i, f := range forged {
			v, err := m.Backend.Update(ctx, backend.Doc{Kind: "replica", ID: f.id, Version: f.version,
				Data: fmt.Appendf(nil, `{"id":%q,"beat":%d,"ttl":%q}`, f.id, beat, ttl)})
			if err != nil {
				t.Fatalf("renewing a forged member: %v", err)
			}
			forged[i].version = v
		}
		if m.Clock.Now().Sub(lastRotation) >= 2*resync {
			rotate()
			lastRotation = m.Clock.Now()
		}
		m.Reconcile()
		m.Clock.Advance(step)
	}
	until := func(what string, limit time.Duration, cond func() (bool, string)) {
		t.Helper()
		tickUntil(t, m, resync, tick, what, limit, cond)
	}
	// Some rounds of rotation first: the forged ids the clients have seen
	// come and go.
	for end := m.Clock.Now().Add(5 * resync); m.Clock.Now().Before(end); {
		tick()
	}
	if _, err := a.ResourceGroups().Register(ctx, quota.Group{ID: "rg-1", Package: "pkg-1",
		Capacity: quota.Resources{MilliCPU: 1 << 40, Memory: 1 << 50}}); err != nil {
		t.Fatal(err)
	}
	g, err := a.Groups().Create(ctx, "rotating")
	if err != nil {
		t.Fatal(err)
	}
	notIn := func(ids []string, want cluster.State) (bool, string) {
		var left []string
		for _, id := range ids {
			if cl, err := b.Clusters().Get(ctx, id); err != nil || cl.State != want {
				left = append(left, fmt.Sprintf("%s: %v %v", id, cl.State, err))
			}
		}
		return len(left) == 0, fmt.Sprintf("%d of %d not %s: %v", len(left), len(ids), want, left)
	}
	for round := range 3 {
		var ids []string
		for i := range batch {
			spec, err := dlc.NewCluster(fmt.Sprintf("r%d_%d", round, i)).Groups(g.ID).Resources("pkg-1", "rg-1").
				Image("ray-2.46.0-py310-cpu").Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1).Build()
			if err != nil {
				t.Fatal(err)
			}
			cl, err := cls[i%2].Clusters().Create(ctx, spec)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, cl.ID)
		}
		until(fmt.Sprintf("batch %d created", round), resync-step, func() (bool, string) { return notIn(ids, cluster.Created) })
		for i, id := range ids {
			if _, err := cls[i%2].Clusters().Start(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		until(fmt.Sprintf("batch %d running", round), resync-step, func() (bool, string) { return notIn(ids, cluster.Running) })
	}
	for _, c := range cls {
		if err := c.CheckQuota(ctx); err != nil {
			t.Error(err)
		}
	}
}

// A replica that joins is not counted by the one it found for its
// probation (two periodic resyncs): that one still does all of the work
// (the newcomer its share too); then it counts the newcomer, and leaves
// it its share.
func TestMemberProbation(t *testing.T) {
	const ttl, resync = 30 * time.Second, time.Minute
	regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
	m := dlctest.NewMemory(dlctest.MemoryOptions{Options: []dlc.Option{dlc.WithWorkSharing(ttl), dlc.WithResync(resync), dlc.WithMetrics(regA)}})
	t.Cleanup(m.Close)
	a := m.Client
	b := m.NewClient(dlc.WithMetrics(regB))
	ctx := dlc.WithUser(context.Background(), "alice")
	if _, err := a.ResourceGroups().Register(ctx, quota.Group{ID: "rg-1", Package: "pkg-1",
		Capacity: quota.Resources{MilliCPU: 1 << 40, Memory: 1 << 50}}); err != nil {
		t.Fatal(err)
	}
	g, err := a.Groups().Create(ctx, "probation")
	if err != nil {
		t.Fatal(err)
	}
	applies := func(reg *prometheus.Registry) float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		n := 0.0
		for _, mf := range mfs {
			if mf.GetName() != "dlc_backend_call_duration_seconds" {
				continue
			}
			for _, mt := range mf.GetMetric() {
				for _, l := range mt.GetLabel() {
					if l.GetName() == "operation" && l.GetValue() == "ray_apply_cluster" {
						n += float64(mt.GetHistogram().GetSampleCount())
					}
				}
			}
		}
		return n
	}
	batch := func(name string) []string {
		var ids []string
		for i := range 16 {
			spec, err := dlc.NewCluster(fmt.Sprintf("%s%d", name, i)).Groups(g.ID).Resources("pkg-1", "rg-1").
				Image("ray-2.46.0-py310-cpu").Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1).Build()
			if err != nil {
				t.Fatal(err)
			}
			cl, err := a.Clusters().Create(ctx, spec)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, cl.ID)
		}
		m.Settle(time.Second, 1000)
		for _, id := range ids {
			if cl, err := b.Clusters().Get(ctx, id); err != nil || cl.State != cluster.Created {
				t.Fatalf("%s: %v %v", id, cl.State, err)
			}
		}
		return ids
	}
	batch("early")
	if n := applies(regA); n != 16 {
		t.Fatalf("the first replica applied %v of 16 clusters while the other was on probation", n)
	}
	for range 3 {
		m.Step(resync)
	}
	a0, b0 := applies(regA), applies(regB)
	batch("late")
	if da, db := applies(regA)-a0, applies(regB)-b0; da == 16 || db == 0 {
		t.Fatalf("after the probation: the first replica applied %v of 16, the newcomer %v", da, db)
	}
	if err := a.CheckQuota(ctx); err != nil {
		t.Error(err)
	}
	if _, err := dlc.New(dlc.WithMemberProbation(-1)); !errors.Is(err, dlc.ErrInvalid) {
		t.Errorf("WithMemberProbation(-1): %v", err)
	}
}

// tickUntil takes the steps queued and ticks the fake clock (tick) until
// cond holds, for at most limit of it, failing t with what cond last saw.
func tickUntil(t *testing.T, m *dlctest.Memory, resync time.Duration, tick func(), what string, limit time.Duration, cond func() (bool, string)) {
	t.Helper()
	end := m.Clock.Now().Add(limit)
	for {
		m.Reconcile()
		ok, seen := cond()
		if ok {
			return
		}
		if m.Clock.Now().After(end) {
			t.Fatalf("%s: not within %s (%d resyncs) of the fake clock; last seen: %s", what, limit, limit/resync, seen)
		}
		tick()
	}
}

// stalledReports returns dlc_replica_stalled_total in reg for member id,
// and for every other member.
func stalledReports(t *testing.T, reg *prometheus.Registry, id string) (forID, others float64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "dlc_replica_stalled_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() != "replica" {
					continue
				}
				if l.GetValue() == id {
					forID += m.GetCounter().GetValue()
				} else {
					others += m.GetCounter().GetValue()
				}
			}
		}
	}
	return forID, others
}

// With the work shared, a resource group's reservations are settled into
// documents of their own by the replica that owns the group, whichever
// replica made them: the settling step goes with its group.
func TestReplicasSettleReservations(t *testing.T) {
	rs := newReplicaSet(t, 2, 0)
	settleWithin(t, time.Minute, "the replicas to see each other", func() (bool, string) { return rs.allSee(2), "" })
	rs.group("rg-settle")
	const n = 40 // past the 32 pending at which a group's holds are settled
	var wg sync.WaitGroup
	errc := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			if _, err := rs.createStart(rs.cls[i%2], fmt.Sprintf("settle_%02d", i), "rg-settle"); err != nil {
				errc <- err
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	settleWithin(t, time.Minute, "the reservations to be settled", func() (bool, string) {
		docs, err := rs.cs0.List(rs.ctx, "hold", nil)
		u, uerr := rs.cls[1].ResourceGroups().Get(rs.ctx, "rg-settle")
		return err == nil && uerr == nil && len(docs) >= 32 && len(u.Holders) == n,
			fmt.Sprintf("%d hold documents (%v), %d holders (%v)", len(docs), err, len(u.Holders), uerr)
	})
}

// BenchmarkClusterCreateLatency measures Clusters().Create, one at a time,
// over a store that adds 5 ms to each call as a remote store's round trip
// would, against one store Create through the same store (bare): the
// ratio is the round trips on a create's critical path, whatever the
// machine's speed. Each create waits, untimed, until the last one's
// cluster is created, so that the reconciler's calls for it do not
// delay the next.
func BenchmarkClusterCreateLatency(b *testing.B) {
	rs := newReplicaSet(b, 1, 5*time.Millisecond)
	rs.group("rg-0")
	c := rs.cls[0]
	var seq atomic.Int64
	b.Run("bare", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			id := fmt.Sprintf("bench:bare-%d", seq.Add(1))
			if _, err := rs.cs.Create(rs.ctx, backend.Doc{Kind: "name", ID: id, Data: []byte(`{"owner":"nobody"}`)}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sdk", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			b.StopTimer()
			spec, err := dlc.NewCluster(fmt.Sprintf("lat%d", seq.Add(1))).Groups(rs.grp).Resources("pkg-1", "rg-0").Image("ray-2.46.0-py310-cpu").
				Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1).Build()
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			cl, err := c.Clusters().Create(rs.ctx, spec)
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if err := rs.until(c, cl.ID, cluster.Created, time.Minute); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
}
