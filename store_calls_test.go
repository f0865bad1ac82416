package dlc_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/dlctest"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
)

// countingStore wraps a backend, counts its store calls by operation and
// kind, and adds latency to each, as a remote store would.
type countingStore struct {
	dlc.Backend
	latency   time.Duration
	mu        sync.Mutex
	counts    map[string]int
	total     atomic.Int64
	conflicts atomic.Int64 // writes refused for a stale version or a taken id
}

// refused counts err if it is a conflict, and returns it.
func (s *countingStore) refused(err error) error {
	if errors.Is(err, errs.ErrConflict) {
		s.conflicts.Add(1)
	}
	return err
}

func newCountingStore(b dlc.Backend, latency time.Duration) *countingStore {
	return &countingStore{Backend: b, latency: latency, counts: map[string]int{}}
}

func (s *countingStore) count(op, kind string) {
	s.mu.Lock()
	s.counts[op+" "+kind]++
	s.mu.Unlock()
	s.total.Add(1)
	if s.latency > 0 {
		time.Sleep(s.latency)
	}
}

// take returns the counts since the last take, and resets them.
func (s *countingStore) take() (int, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]string, 0, len(s.counts))
	n := 0
	for k, v := range s.counts {
		keys = append(keys, fmt.Sprintf("%s×%d", k, v))
		n += v
	}
	sort.Strings(keys)
	s.counts = map[string]int{}
	return n, strings.Join(keys, ", ")
}

func (s *countingStore) Get(ctx context.Context, kind, id string) (backend.Doc, error) {
	s.count("get", kind)
	return s.Backend.Get(ctx, kind, id)
}

func (s *countingStore) List(ctx context.Context, kind string, sel map[string]string) ([]backend.Doc, error) {
	s.count("list", kind)
	return s.Backend.List(ctx, kind, sel)
}

func (s *countingStore) Create(ctx context.Context, d backend.Doc) (string, error) {
	s.count("create", d.Kind)
	v, err := s.Backend.Create(ctx, d)
	return v, s.refused(err)
}

func (s *countingStore) Update(ctx context.Context, d backend.Doc) (string, error) {
	s.count("update", d.Kind)
	v, err := s.Backend.Update(ctx, d)
	return v, s.refused(err)
}

func (s *countingStore) Delete(ctx context.Context, kind, id, version string) error {
	s.count("delete", kind)
	return s.refused(s.Backend.Delete(ctx, kind, id, version))
}

// countingClient is a client on the fake clock over a counting store, and
// a settle that runs its steps until nothing is due within 100 s.
func countingClient(t *testing.T) (*dlc.Client, *countingStore, func(), *backend.FakeClock) {
	clk := backend.NewFakeClock(dlctest.Epoch)
	cs := newCountingStore(memory.New(memory.Options{Clock: clk}), 0)
	c, err := dlc.New(dlc.WithBackend(cs), dlc.WithClock(clk), dlc.WithWorkers(0), dlc.WithResync(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	settle := func() {
		until := clk.Now().Add(100 * time.Second) // 10,000 steps
		for range 10000 {
			c.Reconcile()
			if next, ok := clk.Next(); !ok || next.After(until) {
				return // nothing left to happen, but what is days away (a finished run's deletion)
			}
			clk.Advance(10 * time.Millisecond)
		}
		t.Fatal("did not settle")
	}
	return c, cs, settle, clk
}

// TestStoreCallsPerOperation counts the store calls each operation makes,
// the background steps that finish it included, on the fake clock. The
// bounds are the minimum each needs (see docs/consistency.md's table).
func TestStoreCallsPerOperation(t *testing.T) {
	c, cs, settle, clk := countingClient(t)
	ctx := dlc.WithUser(t.Context(), "alice")
	var err error
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err = c.ResourceGroups().Register(ctx, quota.Group{ID: "rg-1", Package: "pkg-1", Capacity: quota.Resources{MilliCPU: 64000, Memory: 256 * quota.GiB}})
	must(err)
	g, err := c.Groups().Create(ctx, "g1")
	must(err)
	spec, err := dlc.NewCluster("c1").Groups(g.ID).Resources("pkg-1", "rg-1").Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 2).Build()
	must(err)
	cs.take()
	var cl *cluster.Cluster
	steps := []struct {
		name string
		max  int
		do   func()
	}{
		// A create reads each of the cluster's groups from the store once
		// the cluster is stored: the fence against a delete of the group (G6).
		{"create cluster", 4, func() { cl, err = c.Clusters().Create(ctx, spec); must(err) }},
		{"start", 4, func() { _, err = c.Clusters().Start(ctx, cl.ID); must(err) }},
		// A run: its create, a read of its job config from the store once
		// the run is stored (the fence against a delete of the config, J17),
		// its placement, a read of its cluster from the store before the
		// submit (the fence against a hibernate or delete looking for active
		// runs), the record that Ray accepted its job (so that a job Ray
		// forgets is never submitted again), its running and its end.
		{"run on the cluster", 7, func() {
			cfg, _ := dlc.NewJob("j1").OnCluster(cl.ID).COSPackage("cos://jobs-1250000000/a.zip").Entrypoint("python a.py").Build()
			rec, err := c.Jobs().Create(ctx, cfg, dlc.SaveOptions{})
			must(err)
			cs.take() // the save is one create
			_, err = c.Runs().Create(ctx, rec.ID, dlc.RunOptions{})
			must(err)
		}},
		{"run on the group", 7, func() {
			cfg, _ := dlc.NewJob("j2").OnGroup(g.ID).COSPackage("cos://jobs-1250000000/a.zip").Entrypoint("python a.py").Build()
			rec, err := c.Jobs().Create(ctx, cfg, dlc.SaveOptions{})
			must(err)
			cs.take()
			_, err = c.Runs().Create(ctx, rec.ID, dlc.RunOptions{})
			must(err)
		}},
		{"run on demand", 16, func() {
			cfg, _ := dlc.NewJob("j3").OnDemand("pkg-1", "rg-1").Image("ray-2.46.0-py310-cpu").Head("head", "cu.4c8g").
				WorkerGroup("cpu", "cu.4c8g", 1, 1).COSPackage("cos://jobs-1250000000/a.zip").Entrypoint("python a.py").Build()
			rec, err := c.Jobs().Create(ctx, cfg, dlc.SaveOptions{})
			must(err)
			cs.take()
			_, err = c.Runs().Create(ctx, rec.ID, dlc.RunOptions{})
			must(err)
		}},
		// The cluster is marked, then its active runs are looked for in the
		// store (listed: the cache shows none), then it is hibernated over
		// the mark.
		{"hibernate", 7, func() { _, err = c.Clusters().Hibernate(ctx, cl.ID, dlc.DeleteOptions{}); must(err) }},
		{"delete", 7, func() { must(c.Clusters().Delete(ctx, cl.ID, dlc.DeleteOptions{})) }},
		// The three runs above, finished, are deleted at the end of their
		// retention: one delete each.
		{"3 runs' retention ends", 3, func() { clk.Advance(dlc.DefaultRunRetention) }},
		// Read in the store, its runs listed there, its hold documents
		// listed (none: fewer than 32 changes were pending, none settled),
		// then itself deleted on the version read.
		{"delete the resource group", 4, func() { must(c.ResourceGroups().Delete(ctx, "rg-1")) }},
	}
	for _, s := range steps {
		s.do()
		settle()
		n, detail := cs.take()
		t.Logf("%-20s %2d store calls: %s", s.name, n, detail)
		if n > s.max {
			t.Errorf("%s: %d store calls, at most %d needed", s.name, n, s.max)
		}
	}
	must(c.CheckQuota(ctx))
}

// TestPlacingWaitingRuns: starting a cluster that many waiting runs
// target places them all with three store writes each (placed, accepted
// by Ray, running) and a fourth when each ends, and nothing else per run.
func TestPlacingWaitingRuns(t *testing.T) {
	const waiting = 1000
	c, cs, settle, _ := countingClient(t)
	ctx := t.Context()
	if _, err := c.ResourceGroups().Register(ctx, quota.Group{ID: "rg-1", Package: "pkg-1", Capacity: quota.Resources{MilliCPU: 64000, Memory: 256 * quota.GiB}}); err != nil {
		t.Fatal(err)
	}
	g, _ := c.Groups().Create(ctx, "g1")
	spec, _ := dlc.NewCluster("c1").Groups(g.ID).Resources("pkg-1", "rg-1").Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 2).Build()
	cl, err := c.Clusters().Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := dlc.NewJob("j").OnCluster(cl.ID).COSPackage("cos://jobs-1250000000/a.zip").Entrypoint("python a.py").Build()
	rec, err := c.Jobs().Create(ctx, cfg, dlc.SaveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for range waiting {
		if _, err := c.Runs().Create(ctx, rec.ID, dlc.RunOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	settle()
	cs.take()
	if _, err := c.Clusters().Start(ctx, cl.ID); err != nil {
		t.Fatal(err)
	}
	settle()
	n, detail := cs.take()
	runs, _ := c.Runs().List(ctx, dlc.RunListOptions{JobID: rec.ID})
	done := 0
	for _, r := range runs {
		if r.State == job.Succeeded {
			done++
		}
	}
	if done != waiting {
		t.Fatalf("%d of %d runs succeeded", done, waiting)
	}
	per := float64(n) / waiting
	t.Logf("start + %d runs placed, run and finished: %d store calls, %.3f per run: %s", waiting, n, per, detail)
	if per > 5.01 {
		t.Fatalf("%.3f store calls per placed run, want at most 5 (+ the cluster's own)", per)
	}
}

// BenchmarkCreateStartSlowStore: 16 goroutines create and start clusters,
// each in a resource group of its own, over a store that adds 5 ms to
// every call; a create and a start count one operation each.
func BenchmarkCreateStartSlowStore(b *testing.B) {
	const goroutines = 16
	d := memory.Delays{}
	cs := newCountingStore(memory.New(memory.Options{Delays: &d}), 5*time.Millisecond)
	c, err := dlc.New(dlc.WithBackend(cs), dlc.WithWorkers(64))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	g, err := c.Groups().Create(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	for i := range goroutines {
		if _, err := c.ResourceGroups().Register(ctx, quota.Group{ID: fmt.Sprintf("rg-%d", i), Package: "pkg-1",
			Capacity: quota.Resources{MilliCPU: 1 << 40, Memory: 1 << 50}}); err != nil {
			b.Fatal(err)
		}
	}
	var seq atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	before := cs.total.Load()
	var ops atomic.Int64
	var wg sync.WaitGroup
	per := (b.N + goroutines - 1) / goroutines
	for w := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				spec, _ := dlc.NewCluster(fmt.Sprintf("b%d", seq.Add(1))).Groups(g.ID).Resources("pkg-1", fmt.Sprintf("rg-%d", w)).
					Image("ray-2.46.0-py310-cpu").Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1).Build()
				cl, err := c.Clusters().Create(ctx, spec)
				if err != nil {
					b.Error(err)
					return
				}
				for {
					got, _ := c.Clusters().Get(ctx, cl.ID)
					if got.State == cluster.Created {
						break
					}
					time.Sleep(200 * time.Microsecond)
				}
				if _, err := c.Clusters().Start(ctx, cl.ID); err != nil {
					b.Error(err)
					return
				}
				ops.Add(2)
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(ops.Load())/el.Seconds(), "ops/s")
	b.ReportMetric(float64(cs.total.Load()-before)/float64(ops.Load()), "storecalls/op")
}
