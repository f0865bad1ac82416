package dlc_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"math"
	"slices"
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
	"github.com/aidlc/dlc/usage"
)

// rayRecord is the simulated Ray's own account of what it ran, kept from
// its Pods hook: per grouping key, milli-core·milliseconds and
// GPU·milliseconds of the pods it ran, integrated between changes.
type rayRecord struct {
	mu    sync.Mutex
	clock *backend.FakeClock
	live  map[string]rayStretch
	cpu   map[string]int64 // "team=a", "package=pkg-1", "creator=alice" → milli-core·ms
	gpu   map[string]int64 // same keys → GPU·ms
}

type rayStretch struct {
	since time.Time
	c     *cluster.Cluster
	pods  []cluster.Pod
}

func (r *rayRecord) pods(c *cluster.Cluster, pods []cluster.Pod) {
	now := r.clock.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.live[c.ID]; ok {
		ms := now.Sub(s.since).Milliseconds()
		keys := []string{"team=" + s.c.Spec.Tags["team"], "package=" + s.c.Spec.ResourcePackage, "creator=" + s.c.Creator}
		for _, p := range s.pods {
			for _, k := range keys {
				r.cpu[k] += ms * p.Requests.MilliCPU
				r.gpu[k] += ms * p.Requests.GPU
			}
		}
	}
	var running []cluster.Pod
	for _, p := range pods {
		if p.Status == "Running" {
			running = append(running, p)
		}
	}
	r.live[c.ID] = rayStretch{since: now, c: c.DeepCopy(), pods: running}
}

// TestMeteringMatchesWhatRayRan: clusters started, autoscaled,
// hibernated, started again and deleted, and an on-demand run, across two
// clients that both take every meter's step (racing), one of them
// restarted, with every fifth metering write failing and every fifth
// losing its reply after it was made. The report's CPU core-hours and
// GPU-hours per tag, package and creator equal what the simulated Ray ran,
// to the millisecond; no cluster's records overlap.
func TestMeteringMatchesWhatRayRan(t *testing.T) {
	rec := &rayRecord{live: map[string]rayStretch{}, cpu: map[string]int64{}, gpu: map[string]int64{}}
	var writes int
	var wmu sync.Mutex
	var down atomic.Bool // every metering write fails
	m := dlctest.NewMemory(dlctest.MemoryOptions{T: t,
		Ray: memory.RayHooks{Pods: func(c *cluster.Cluster, pods []cluster.Pod) { rec.pods(c, pods) },
			RunOutcome: func(*job.Run) memory.Outcome { return memory.Outcome{Duration: 20 * time.Minute} }},
		Store: memory.StoreHooks{Write: func(ctx context.Context, w memory.Write, next func(context.Context) (string, error)) (string, error) {
			if w.Doc.Kind != "meter" && w.Doc.Kind != "usage" {
				return next(ctx)
			}
			wmu.Lock()
			writes++
			n := writes
			wmu.Unlock()
			if down.Load() {
				return "", errs.Unavailable("store write", errors.New("injected: down"))
			}
			switch n % 5 {
			case 1:
				return "", errs.Unavailable("store write", errors.New("injected: not made"))
			case 3:
				if _, err := next(ctx); err != nil {
					return "", err
				}
				return "", errs.Unavailable("store write", errors.New("injected: made, reply lost"))
			}
			return next(ctx)
		}},
		Options: []dlc.Option{dlc.WithMeteringInterval(20 * time.Minute)}})
	rec.clock = m.Clock
	a := m.Client
	b := m.NewClient()
	alice, bob := dlc.WithUser(t.Context(), "alice"), dlc.WithUser(t.Context(), "bob")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, g := range []quota.Group{{ID: "rg-1", Package: "pkg-1", Capacity: quota.Resources{MilliCPU: 200000, Memory: 800 * quota.GiB}},
		{ID: "rg-2", Package: "pkg-2", Capacity: quota.Resources{MilliCPU: 200000, Memory: 800 * quota.GiB, GPU: 8}}} {
		_, err := a.ResourceGroups().Register(alice, g)
		must(err)
	}
	grp, err := a.Groups().Create(alice, "组")
	must(err)
	spec1, err := dlc.NewCluster("c1").Groups(grp.ID).Resources("pkg-1", "rg-1").Tag("team", "a").Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 4).Build()
	must(err)
	spec2, err := dlc.NewCluster("c2").Groups(grp.ID).Resources("pkg-2", "rg-2").Tag("team", "b").Image("ray-2.46.0-py310-gpu").
		Head("head", "cu.4c8g").WorkerGroup("gpu", "gu.8c32g.1xt4", 2, 2).Build()
	must(err)
	c1, err := a.Clusters().Create(alice, spec1)
	must(err)
	c2, err := b.Clusters().Create(bob, spec2)
	must(err)
	m.Step(time.Second)
	_, err = a.Clusters().Start(alice, c1.ID)
	must(err)
	_, err = b.Clusters().Start(bob, c2.ID)
	must(err)
	m.Step(7 * time.Minute)
	if _, err := b.Clusters().Autoscale(alice, c1.ID, "cpu", 3); err != nil {
		t.Fatal(err)
	}
	m.Step(13 * time.Minute)
	cfg, err := dlc.NewJob("od").OnDemand("pkg-1", "rg-1").Tag("team", "c").Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 2, 2).
		COSPackage("cos://jobs-1250000000/job.zip").Entrypoint("python main.py").Build()
	must(err)
	od, err := a.Jobs().Create(bob, cfg, dlc.SaveOptions{})
	must(err)
	_, err = a.Runs().Create(bob, od.ID, dlc.RunOptions{})
	must(err)
	m.Step(11 * time.Minute)
	_, err = a.Clusters().Hibernate(bob, c2.ID, dlc.HibernateOptions{})
	must(err)
	m.Step(17 * time.Minute)
	m.CloseClient(b) // a replica restarts
	b = m.NewClient()
	_, err = b.Clusters().Start(bob, c2.ID)
	must(err)
	m.Step(95 * time.Minute) // past several metering intervals
	mid := m.Clock.Now()
	rep, err := a.Usage(alice, usage.Query{From: dlctest.Epoch, To: mid})
	must(err)
	if rep.Total.CPUCoreHours <= 0 {
		t.Fatalf("nothing metered while clusters run: %+v", rep.Total)
	}
	if _, err := a.Clusters().Autoscale(alice, c1.ID, "cpu", 1); err != nil {
		t.Fatal(err)
	}
	m.Step(9 * time.Minute)
	// Metering cannot write for four minutes while a cluster goes and
	// another hibernates: each interval still ends when its change was.
	down.Store(true)
	must(b.Clusters().Delete(alice, c1.ID, dlc.DeleteOptions{Force: true}))
	_, err = a.Clusters().Hibernate(bob, c2.ID, dlc.HibernateOptions{})
	must(err)
	m.Step(4 * time.Minute)
	down.Store(false)
	m.Step(10 * time.Minute)
	end := m.Clock.Now()

	for _, id := range []string{c1.ID, c2.ID} {
		if got, err := a.Clusters().Get(alice, id); err == nil && got.State != cluster.Hibernated {
			t.Fatalf("cluster %s is %s at the end", id, got.State)
		}
	}
	rep, err = a.Usage(alice, usage.Query{From: dlctest.Epoch.Add(-time.Hour), To: end.Add(time.Hour)})
	must(err)
	want := func(ms int64, per float64) float64 { return float64(ms) / per / float64(time.Hour/time.Millisecond) }
	check := func(by usage.GroupBy, prefix string) {
		t.Helper()
		rep, err := a.Usage(alice, usage.Query{From: dlctest.Epoch.Add(-time.Hour), To: end.Add(time.Hour), GroupBy: by})
		must(err)
		seen := 0
		for _, row := range rep.Rows {
			key := prefix + row.Key
			wantCPU, wantGPU := want(rec.cpu[key], 1000), want(rec.gpu[key], 1)
			if math.Abs(row.CPUCoreHours-wantCPU) > 1e-9 || math.Abs(row.GPUHours["T4"]-wantGPU) > 1e-9 {
				t.Errorf("%s: metered %.6f core-hours, %.6f T4-hours; Ray ran %.6f and %.6f", key, row.CPUCoreHours, row.GPUHours["T4"], wantCPU, wantGPU)
			}
			seen++
		}
		for key, v := range rec.cpu {
			if v > 0 && len(key) > len(prefix) && key[:len(prefix)] == prefix && !slices.ContainsFunc(rep.Rows, func(r usage.Row) bool { return prefix+r.Key == key }) {
				t.Errorf("%s ran %d milli-core·ms and has no row", key, v)
			}
		}
		if seen < 2 {
			t.Errorf("grouped by %s: %d rows", by, seen)
		}
	}
	check(usage.TagKey("team"), "team=")
	check(usage.ByResourcePackage, "package=")
	check(usage.ByCreator, "creator=")
	if rep.Total.GPUHours["T4"] <= 0 {
		t.Errorf("no GPU hours: %+v", rep.Total)
	}
	// A run's on-demand cluster is billed to its job config.
	byJob, err := a.Usage(alice, usage.Query{From: dlctest.Epoch, To: end, GroupBy: usage.ByJob})
	must(err)
	if !slices.ContainsFunc(byJob.Rows, func(r usage.Row) bool { return r.Key == od.ID && r.CPUCoreHours > 0 }) {
		t.Errorf("no row for job config %s: %+v", od.ID, byJob.Rows)
	}
	// No two records of a cluster overlap: every interval counted once.
	docs, err := m.Backend.List(t.Context(), "usage", nil)
	must(err)
	byCluster := map[string][]usage.Record{}
	for _, d := range docs {
		var r usage.Record
		must(json.Unmarshal(d.Data, &r))
		byCluster[r.Cluster] = append(byCluster[r.Cluster], r)
	}
	for id, rs := range byCluster {
		slices.SortFunc(rs, func(x, y usage.Record) int { return x.Start.Compare(y.Start) })
		for i := 1; i < len(rs); i++ {
			if rs[i].Start.Before(rs[i-1].End) {
				t.Errorf("cluster %s: records %s [%s, %s) and %s [%s, %s) overlap", id, rs[i-1].ID, rs[i-1].Start, rs[i-1].End, rs[i].ID, rs[i].Start, rs[i].End)
			}
		}
	}
	if len(byCluster) < 3 {
		t.Errorf("records of %d clusters, want 3", len(byCluster))
	}
	t.Logf("metering writes %d (2 of 5 faulted); records %d", writes, len(docs))
}

// TestMeteringFollowsTagEdits: a running cluster's tags edited mid-run
// close its interval then: the report by tag bills the time before the
// edit to the old value and the time after to the new one.
func TestMeteringFollowsTagEdits(t *testing.T) {
	m, ctx, id := meteredCluster(t, memory.StoreHooks{})
	c := m.Client
	up := m.Clock.Now().Add(-2*time.Minute + 150*time.Millisecond) // the pods came up 150 ms after the start
	m.Step(time.Hour)
	edited := m.Clock.Now()
	got, err := c.Clusters().Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	got.Spec.Tags = map[string]string{"team": "b"}
	if _, err := c.Clusters().Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	m.Step(2 * time.Hour)
	now := m.Clock.Now()
	rep, err := c.Usage(ctx, usage.Query{From: dlctest.Epoch, To: now, GroupBy: usage.TagKey("team")})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"a": 8 * edited.Sub(up).Hours(), "b": 16} // 8 cores: an hour as a, then two as b
	if len(rep.Rows) != 2 {
		t.Fatalf("rows %+v, want a and b", rep.Rows)
	}
	for _, r := range rep.Rows {
		if math.Abs(r.CPUCoreHours-want[r.Key]) > 1e-9 {
			t.Errorf("team %s: %v core-hours, want %v (up at %s)", r.Key, r.CPUCoreHours, want[r.Key], up)
		}
	}
}

// TestUsageCompaction: an autoscaling cluster whose workers change every
// half hour for three days leaves a record per change; with compaction
// after three days, each day old enough becomes one record, through two
// clients that both compact, with every third delete of a usage record
// failing (half of them after it was made). At every step a report by
// day equals what it was before any compaction, to the millisecond; no
// record is counted twice while a day is half compacted.
func TestUsageCompaction(t *testing.T) {
	var deletes atomic.Int64
	var noDeletes atomic.Bool // every delete of a usage record fails
	m, ctx, id := meteredCluster(t, memory.StoreHooks{Write: func(ctx context.Context, w memory.Write, next func(context.Context) (string, error)) (string, error) {
		if w.Op != memory.OpDelete || w.Doc.Kind != "usage" {
			return next(ctx)
		}
		if noDeletes.Load() {
			return "", errs.Unavailable("store delete", errors.New("injected: deletes fail"))
		}
		switch deletes.Add(1) % 6 {
		case 1:
			return "", errs.Unavailable("store delete", errors.New("injected: not made"))
		case 4:
			if _, err := next(ctx); err != nil {
				return "", err
			}
			return "", errs.Unavailable("store delete", errors.New("injected: made, reply lost"))
		}
		return next(ctx)
	}}, dlc.WithUsageCompaction(72*time.Hour), dlc.WithRetries(8, time.Second, 30*time.Minute))
	m.NewClient() // a second replica that compacts too
	c := m.Client
	for i := range 2 * 24 * 3 { // three days, a change every half hour
		m.Step(30 * time.Minute)
		if _, err := c.Clusters().Autoscale(ctx, id, "cpu", 1+i%4); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Clusters().Hibernate(ctx, id, dlc.HibernateOptions{}); err != nil {
		t.Fatal(err)
	}
	m.Step(time.Minute)
	days := func() map[string]float64 {
		t.Helper()
		out := map[string]float64{}
		for d := range 5 {
			from := dlctest.Epoch.AddDate(0, 0, d)
			rep, err := c.Usage(ctx, usage.Query{From: from, To: from.AddDate(0, 0, 1)})
			if err != nil {
				t.Fatal(err)
			}
			out[usage.Day(from)] = rep.Total.CPUCoreHours
		}
		return out
	}
	records := func() int {
		docs, err := m.Backend.List(t.Context(), "usage", nil)
		if err != nil {
			t.Fatal(err)
		}
		return len(docs)
	}
	before, n := days(), records()
	if n < 140 {
		t.Fatalf("%d records before compaction, want one per change", n)
	}
	for i := range 8 * 4 { // four more days, three hours at a time
		// For a day, no record can be deleted once it is added: the day
		// compacted then is half done (its records and its compacted
		// record both stored) until the deletes come back.
		noDeletes.Store(i >= 4 && i < 12)
		m.Step(3 * time.Hour)
		if got := days(); !maps.EqualFunc(got, before, func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }) {
			t.Fatalf("at %s the report by day is %v, before compaction %v", m.Clock.Now(), got, before)
		}
	}
	after := records()
	t.Logf("records: %d before compaction, %d after; core-hours by day %v; %d deletes (a third faulted)", n, after, before, deletes.Load())
	if after > 5 {
		t.Errorf("%d records after compaction, want one per day that ran", after)
	}
}
