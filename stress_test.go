package dlc_test

// The stress test of issue 20: several replicas on one memory backend, on
// the real clock with their own reconciler goroutines, under injected
// faults, while a watcher compares what Ray runs with each resource
// group's capacity at every change of the store and of Ray.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
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
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
)

// stressDuration is how long TestStress loads the platform: DLC_STRESS
// (a Go duration, "3m") or, by default, long enough to cover every kind of
// operation many times while CI stays fast.
func stressDuration(t *testing.T) time.Duration {
	v := os.Getenv("DLC_STRESS")
	if v == "" {
		return 12 * time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("DLC_STRESS=%q: want a positive duration such as 3m", v)
	}
	return d
}

// stressSeed is DLC_STRESS_SEED, or a new seed; it decides the faults and
// the operations each load goroutine picks (the interleaving is the
// scheduler's).
func stressSeed(t *testing.T) uint64 {
	if v := os.Getenv("DLC_STRESS_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("DLC_STRESS_SEED=%q: %v", v, err)
		}
		return s
	}
	return uint64(time.Now().UnixNano())
}

// Five replicas share one memory backend, each behind a Faulty that
// fails about 8% of its store writes and Ray calls (before or after the
// call is made). Goroutines create fixed-size and autoscaling clusters in
// two resource groups that fit only a few, start, hibernate, edit
// (instance ranges too), autoscale, force-delete, and run and stop
// on-demand and group jobs, each through a random replica. A watcher sees
// every change of the store and every change of the pods Ray runs, and
// records any moment at which the pods of a resource group's clusters
// need more than its capacity, a cluster runs more than it holds, or a
// resource group's reservations exceed its capacity. Then the load stops,
// faults end, and the platform settles: no cluster stays transitional,
// CheckQuota is clean, every hold has a live holder; and once everything
// is deleted, nothing is held and Ray runs nothing.
//
// DLC_STRESS=3m runs it for minutes; DLC_STRESS_SEED repeats a seed.
func TestStress(t *testing.T) {
	if testing.Short() {
		t.Skip("stress test: skipped with -short")
	}
	dur, seed := stressDuration(t), stressSeed(t)
	t.Logf("stress: %s, seed %d (DLC_STRESS_SEED=%d repeats it)", dur, seed, seed)
	ctx, cancel := context.WithCancel(dlc.WithUser(context.Background(), "stress"))
	defer cancel()

	w := newRayWatch(quota.DefaultCatalog())
	var outcomes lockedRand
	outcomes.r = rand.New(rand.NewPCG(seed, 1))
	delays := memory.Delays{Create: 5 * time.Millisecond, Start: 25 * time.Millisecond, Hibernate: 15 * time.Millisecond,
		Delete: 15 * time.Millisecond, Submit: 5 * time.Millisecond, Run: 80 * time.Millisecond}
	be := memory.New(memory.Options{Delays: &delays, Ray: memory.RayHooks{
		Pods: w.pods,
		RunOutcome: func(*job.Run) memory.Outcome {
			n := outcomes.intN(100)
			return memory.Outcome{Fail: n < 10, Duration: time.Duration(20+n*4) * time.Millisecond}
		}}})
	snap, err := be.Watch(ctx, w.change)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range snap {
		w.change(backend.Change{Doc: d})
	}

	// The replicas, each behind its own fault injector.
	var faultsOn atomic.Bool
	faultsOn.Store(true)
	var before, after atomic.Int64
	const replicas = 5
	clients := make([]*dlc.Client, replicas)
	for i := range clients {
		fr := &lockedRand{r: rand.New(rand.NewPCG(seed, uint64(100+i)))}
		fb := dlctest.NewFaulty(be, func(_ int, call dlctest.Call) dlctest.Fault {
			f := dlctest.NoFault
			if faultsOn.Load() {
				switch n := fr.intN(1000); {
				case n < 40:
					before.Add(1)
					f = dlctest.Before
				case n < 80:
					after.Add(1)
					f = dlctest.After
				}
			}
			if call.Op != "ClusterStatus" && call.Op != "RunStatus" {
				w.call(i, call, f)
			}
			return f
		})
		c, err := dlc.New(dlc.WithBackend(fb), dlc.WithRetries(5, time.Millisecond, 20*time.Millisecond),
			dlc.WithRepairGrace(200*time.Millisecond), dlc.WithStepTimeout(3*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		clients[i] = c
		defer func() { _ = c.Close() }()
	}

	// The world, made without faults: two resource groups that fit a few
	// clusters each, a cluster group each, and the job configs.
	faultsOn.Store(false)
	setup := clients[0]
	rgs := []string{"rg-a", "rg-b"}
	capacity := map[string]int64{"rg-a": 24, "rg-b": 20}
	groups := map[string]string{}
	var odJobs, groupJobs []string
	for _, rg := range rgs {
		if _, err := setup.ResourceGroups().Register(ctx, quotaGroup(rg, capacity[rg])); err != nil {
			t.Fatal(err)
		}
		g, err := setup.Groups().Create(ctx, "group-"+rg)
		if err != nil {
			t.Fatal(err)
		}
		groups[rg] = g.ID
		for _, p := range []int{1, 5, 9} {
			for _, max := range []int{1, 3} {
				cfg, err := dlc.NewJob(fmt.Sprintf("od-%s-p%d-w%d", rg, p, max)).OnDemand("pkg-1", rg).Priority(p).
					Image("ray-2.46.0-py310-cpu").Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, max).
					COSPackage("cos://jobs-1250000000/train.zip").Entrypoint("python train.py").Build()
				if err != nil {
					t.Fatal(err)
				}
				rec, err := setup.Jobs().Create(ctx, cfg, dlc.SaveOptions{})
				if err != nil {
					t.Fatal(err)
				}
				odJobs = append(odJobs, rec.ID)
			}
		}
		cfg, err := dlc.NewJob("on-group-" + rg).OnGroup(g.ID).COSPackage("cos://jobs-1250000000/wc.zip").
			Entrypoint("python main.py").Build()
		if err != nil {
			t.Fatal(err)
		}
		rec, err := setup.Jobs().Create(ctx, cfg, dlc.SaveOptions{})
		if err != nil {
			t.Fatal(err)
		}
		groupJobs = append(groupJobs, rec.ID)
	}
	faultsOn.Store(true)

	// The load.
	ops := &opCounts{m: map[string]map[string]int{}}
	runs := &recentRuns{}
	const loaders = 8
	start := time.Now()
	deadline := start.Add(dur)
	var wg sync.WaitGroup
	for l := range loaders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(seed, uint64(l)))
			ld := &loader{t: t, ctx: ctx, rnd: rnd, clients: clients, ops: ops, rgs: rgs, groups: groups,
				odJobs: odJobs, groupJobs: groupJobs, runs: runs, name: fmt.Sprintf("s%d", l)}
			for time.Now().Before(deadline) {
				ld.step()
				time.Sleep(time.Duration(1+rnd.IntN(4)) * time.Millisecond) // pacing, not synchronisation
			}
		}()
	}
	wg.Wait()
	loadTime := time.Since(start)
	if cls, err := clients[0].Clusters().List(ctx); err == nil {
		by := map[cluster.State]int{}
		for _, cl := range cls {
			by[cl.State]++
		}
		t.Logf("clusters when the load stopped: %v", by)
	}

	// Settle: faults end; every replica keeps running.
	faultsOn.Store(false)
	settleStart := time.Now()
	c := clients[0]
	settleWithin(t, 30*time.Second, "no cluster in a transitional state", func() (bool, string) {
		cls, err := c.Clusters().List(ctx)
		if err != nil {
			return false, err.Error()
		}
		var stuck []string
		for _, cl := range cls {
			if cl.State.Transitional() {
				stuck = append(stuck, fmt.Sprintf("%s %s (%s)", cl.ID, cl.State, cl.Reason))
			}
		}
		return len(stuck) == 0, strings.Join(stuck, "; ")
	})
	settleWithin(t, 30*time.Second, "CheckQuota clean on every replica", func() (bool, string) {
		for i, r := range clients {
			if err := r.CheckQuota(ctx); err != nil {
				return false, fmt.Sprintf("replica %d: %v", i, err)
			}
		}
		return true, ""
	})
	settleWithin(t, 30*time.Second, "every hold has a live holder", func() (bool, string) {
		bad, err := orphanHolds(ctx, c, rgs)
		if err != nil {
			return false, err.Error()
		}
		return len(bad) == 0, strings.Join(bad, "; ")
	})
	settled := time.Since(settleStart)

	// Clean up through the platform: everything deleted and stopped, then
	// nothing is held and Ray runs nothing.
	all, err := c.Runs().List(ctx, dlc.RunListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range all {
		if !r.State.Terminal() {
			if _, err := c.Runs().Stop(ctx, r.ID); err != nil && !errors.Is(err, dlc.ErrState) && !errors.Is(err, dlc.ErrNotFound) {
				t.Errorf("stop run %s: %v", r.ID, err)
			}
		}
	}
	settleWithin(t, 30*time.Second, "every cluster deleted", func() (bool, string) {
		cls, err := c.Clusters().List(ctx)
		if err != nil {
			return false, err.Error()
		}
		var left []string
		for _, cl := range cls {
			left = append(left, fmt.Sprintf("%s %s", cl.ID, cl.State))
			if cl.State != cluster.Deleting && !cl.Temporary {
				_ = c.Clusters().Delete(ctx, cl.ID, dlc.DeleteOptions{Force: true})
			}
		}
		return len(cls) == 0, strings.Join(left, "; ")
	})
	settleWithin(t, 30*time.Second, "every run ended, nothing held, Ray runs nothing", func() (bool, string) {
		runs, err := c.Runs().List(ctx, dlc.RunListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var left []string
		for _, r := range runs {
			if !r.State.Terminal() {
				left = append(left, fmt.Sprintf("run %s %s", r.ID, r.State))
			}
		}
		for _, rg := range rgs {
			u, err := c.ResourceGroups().Get(ctx, rg)
			if err != nil {
				return false, err.Error()
			}
			for h, res := range u.Holders {
				left = append(left, fmt.Sprintf("%s holds %s in %s", h, res, rg))
			}
		}
		left = append(left, w.runningNow()...)
		return len(left) == 0, strings.Join(left, "; ")
	})

	cancel()
	st := w.stats()
	t.Logf("load %s by %d goroutines on %d replicas; settled in %s", loadTime.Round(time.Millisecond), loaders, replicas, settled.Round(time.Millisecond))
	t.Logf("operations: %s", ops)
	if testing.Verbose() {
		for _, k := range slices.Sorted(maps.Keys(ops.samples)) {
			t.Logf("  first %s: %s", k, ops.samples[k])
		}
	}
	t.Logf("faults injected: %d before the call, %d after it (reply lost)", before.Load(), after.Load())
	t.Logf("checked: %d store changes (%d resource-group versions), %d changes of Ray's pods", st.storeChanges, st.accountVersions, st.rayChanges)
	for _, rg := range rgs {
		t.Logf("%s: capacity %d cores; most Ray ran at once %s; most reserved %s", rg, capacity[rg], st.peakRun[rg], st.peakReserved[rg])
	}
	if others := ops.others(); len(others) > 0 {
		t.Errorf("operations failed with errors that are none of the platform's: %s", strings.Join(others, "; "))
	}
	if st.rayChanges == 0 || st.accountVersions == 0 {
		t.Fatalf("the watcher saw nothing: %+v", st)
	}
	if len(st.violations) > 0 {
		t.Errorf("%d violations (seed %d), the first ones:\n%s\n%s", st.count, seed, strings.Join(st.violations, "\n"), strings.Join(st.stories, "\n"))
	}
}

// lockedRand is a random source several goroutines share.
type lockedRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

func (l *lockedRand) intN(n int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.IntN(n)
}

// settleWithin polls cond until it holds, failing the test after timeout with
// what cond saw last.
func settleWithin(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	end := time.Now().Add(timeout)
	seen := ""
	for time.Now().Before(end) {
		ok, now := cond()
		if ok {
			return
		}
		seen = now
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s: not within %s; last seen: %s", what, timeout, seen)
}

// orphanHolds lists the holds whose holder is gone: a cluster that no
// longer exists or no longer holds quota, or an on-demand run that has
// ended (or is gone) and whose cluster is gone.
func orphanHolds(ctx context.Context, c *dlc.Client, rgs []string) ([]string, error) {
	var bad []string
	for _, rg := range rgs {
		u, err := c.ResourceGroups().Get(ctx, rg)
		if err != nil {
			return nil, err
		}
		for h := range u.Holders {
			cl, err := c.Clusters().Get(ctx, h)
			switch {
			case err == nil && cl.State.HoldsQuota():
				continue
			case err == nil:
				bad = append(bad, fmt.Sprintf("%s: cluster %s is %s and holds %s", rg, h, cl.State, u.Holders[h]))
				continue
			case !errors.Is(err, dlc.ErrNotFound):
				return nil, err
			}
			if runID, ok := strings.CutPrefix(h, "od-"); ok {
				r, err := c.Runs().Get(ctx, runID)
				if err == nil && r.State.Live() {
					continue // admitted, its cluster on the way
				}
				state := "gone"
				if err == nil {
					state = string(r.State)
				}
				bad = append(bad, fmt.Sprintf("%s: on-demand run %s is %s and holds %s", rg, runID, state, u.Holders[h]))
				continue
			}
			bad = append(bad, fmt.Sprintf("%s: cluster %s is gone and holds %s", rg, h, u.Holders[h]))
		}
	}
	sort.Strings(bad)
	return bad, nil
}

// opCounts counts the load's operations by kind and outcome.
type opCounts struct {
	mu      sync.Mutex
	m       map[string]map[string]int
	samples map[string]string // op/outcome → the first error
}

func (o *opCounts) add(op string, err error) {
	outcome := "ok"
	switch {
	case err == nil:
	case errors.Is(err, dlc.ErrUnavailable):
		outcome = "unavailable"
	case errors.Is(err, dlc.ErrConflict):
		outcome = "conflict"
	case errors.Is(err, dlc.ErrState):
		outcome = "state"
	case errors.Is(err, dlc.ErrQuota):
		outcome = "quota"
	case errors.Is(err, dlc.ErrNotFound):
		outcome = "notfound"
	case errors.Is(err, dlc.ErrInvalid):
		outcome = "invalid"
	default:
		outcome = "other: " + err.Error()
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m[op] == nil {
		o.m[op] = map[string]int{}
	}
	o.m[op][outcome]++
	if err != nil && o.samples[op+"/"+outcome] == "" {
		if o.samples == nil {
			o.samples = map[string]string{}
		}
		o.samples[op+"/"+outcome] = err.Error()
	}
}

// others returns the outcomes that are none of the platform's errors.
func (o *opCounts) others() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	for op, by := range o.m {
		for k := range by {
			if strings.HasPrefix(k, "other") {
				out = append(out, op+": "+k)
			}
		}
	}
	return out
}

func (o *opCounts) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var lines []string
	for op, by := range o.m {
		total := 0
		var parts []string
		for k, n := range by {
			total += n
			if !strings.HasPrefix(k, "other") {
				parts = append(parts, fmt.Sprintf("%s %d", k, n))
			}
		}
		sort.Strings(parts)
		lines = append(lines, fmt.Sprintf("%s %d (%s)", op, total, strings.Join(parts, ", ")))
	}
	sort.Strings(lines)
	return strings.Join(lines, "; ")
}

// loader is one load goroutine: each step is one operation through a
// random replica.
type loader struct {
	t         *testing.T
	ctx       context.Context
	rnd       *rand.Rand
	clients   []*dlc.Client
	ops       *opCounts
	rgs       []string
	groups    map[string]string
	odJobs    []string
	groupJobs []string
	runs      *recentRuns
	name      string
	seq       int
}

// maxClusters bounds the clusters the load keeps (on-demand ones aside).
const maxClusters = 14

func (l *loader) step() {
	c := l.clients[l.rnd.IntN(len(l.clients))]
	cls, err := c.Clusters().List(l.ctx)
	if err != nil {
		l.ops.add("list", err)
		return
	}
	var own []*cluster.Cluster
	for _, cl := range cls {
		if !cl.Temporary {
			own = append(own, cl)
		}
	}
	// pick mostly chooses among the clusters in one of states, sometimes
	// among all, so that refusals are exercised too.
	pick := func(from []*cluster.Cluster, states ...cluster.State) *cluster.Cluster {
		if l.rnd.IntN(5) > 0 {
			from = slices.DeleteFunc(slices.Clone(from), func(cl *cluster.Cluster) bool { return !slices.Contains(states, cl.State) })
		}
		if len(from) == 0 {
			return nil
		}
		return from[l.rnd.IntN(len(from))]
	}
	switch n := l.rnd.IntN(100); {
	case n < 10:
		if len(own) >= maxClusters {
			return
		}
		l.seq++
		rg := l.rgs[l.rnd.IntN(len(l.rgs))]
		lo, hi := 1, 1
		if l.rnd.IntN(2) == 0 {
			hi = 2 + l.rnd.IntN(3) // autoscaling: [1, 2..4]
		}
		spec, err := dlc.NewCluster(fmt.Sprintf("%s_%d", l.name, l.seq)).Groups(l.groups[rg]).Resources("pkg-1", rg).
			Image("ray-2.46.0-py310-cpu").Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", lo, hi).Build()
		if err != nil {
			l.t.Error(err)
			return
		}
		_, err = c.Clusters().Create(l.ctx, spec)
		l.ops.add("create", err)
	case n < 28:
		if cl := pick(own, cluster.Created, cluster.Hibernated, cluster.Abnormal); cl != nil {
			_, err := c.Clusters().Start(l.ctx, cl.ID)
			l.ops.add("start", err)
		}
	case n < 43:
		if cl := pick(own, cluster.Running, cluster.Abnormal); cl != nil {
			_, err := c.Clusters().Hibernate(l.ctx, cl.ID, dlc.DeleteOptions{Force: l.rnd.IntN(3) > 0})
			l.ops.add("hibernate", err)
		}
	case n < 51:
		if cl := pick(own, cluster.Created, cluster.Running, cluster.Hibernated, cluster.Abnormal); cl != nil {
			cur, err := c.Clusters().Get(l.ctx, cl.ID)
			if err != nil {
				l.ops.add("edit", err)
				return
			}
			lo := 1 + l.rnd.IntN(2)
			cur.Spec.Workers[0].Instances = cluster.Range(lo, lo+l.rnd.IntN(4))
			if l.rnd.IntN(4) == 0 {
				cur.Spec.Image = []string{"ray-2.46.0-py310-cpu", "ray-2.41.0-py310-cpu"}[l.rnd.IntN(2)]
			}
			_, err = c.Clusters().Update(l.ctx, cur)
			l.ops.add("edit", err)
		}
	case n < 65:
		if cl := pick(cls, cluster.Running); cl != nil { // on-demand clusters too
			_, err := c.Clusters().Autoscale(l.ctx, cl.ID, "cpu", l.rnd.IntN(6))
			l.ops.add("autoscale", err)
		}
	case n < 70:
		if cl := pick(own, cluster.Created, cluster.Running, cluster.Hibernated, cluster.Abnormal); cl != nil && len(own) > maxClusters/2 {
			err := c.Clusters().Delete(l.ctx, cl.ID, dlc.DeleteOptions{Force: true})
			l.ops.add("delete", err)
		}
	case n < 85:
		if l.liveRuns(c) >= maxLiveRuns {
			return
		}
		r, err := c.Runs().Create(l.ctx, l.odJobs[l.rnd.IntN(len(l.odJobs))], dlc.RunOptions{})
		l.ops.add("run on-demand", err)
		l.runs.add(r)
	case n < 90:
		if l.liveRuns(c) >= maxLiveRuns {
			return
		}
		r, err := c.Runs().Create(l.ctx, l.groupJobs[l.rnd.IntN(len(l.groupJobs))], dlc.RunOptions{})
		l.ops.add("run on group", err)
		l.runs.add(r)
	default:
		ids := l.runs.recent()
		if len(ids) > 0 {
			_, err := c.Runs().Stop(l.ctx, ids[l.rnd.IntN(len(ids))])
			l.ops.add("stop run", err)
		}
	}
}

// maxLiveRuns bounds the runs the load keeps unfinished, so that queues
// stay short and clusters get quota too.
const maxLiveRuns = 5

// liveRuns counts the unfinished runs among the recent ones.
func (l *loader) liveRuns(c *dlc.Client) int {
	n := 0
	for _, id := range l.runs.recent() {
		if r, err := c.Runs().Get(l.ctx, id); err == nil && r.State.Live() {
			n++
		}
	}
	return n
}

// recentRuns keeps the ids of the runs the load made last.
type recentRuns struct {
	mu  sync.Mutex
	ids []string
}

func (rr *recentRuns) add(r *job.Run) {
	if r == nil {
		return
	}
	rr.mu.Lock()
	defer rr.mu.Unlock()
	rr.ids = append(rr.ids, r.ID)
	if len(rr.ids) > 3*maxLiveRuns {
		rr.ids = slices.Delete(rr.ids, 0, len(rr.ids)-3*maxLiveRuns)
	}
}

func (rr *recentRuns) recent() []string {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	return slices.Clone(rr.ids)
}

// rayWatch follows what Ray runs (through the memory Ray's Pods hook,
// with Ray locked) and the resource groups (through the store's watch,
// with the store locked), so it sees every change of either in order, and
// checks at each one that no resource group runs more than its capacity,
// no cluster runs more than it holds, and no resource group reserves more
// than its capacity.
type rayWatch struct {
	nodes quota.Catalog

	mu       sync.Mutex
	accounts map[string]*quota.Account // by resource group: the latest version
	holds    map[string]quota.HoldMap  // by resource group: the settled holds
	running  map[string]ranCluster     // by cluster id: what Ray runs of it
	st       watchStats
	trace    []string        // the last traceLen events, for a violation's story
	told     map[string]bool // the clusters whose story is told
}

// traceLen is how many events the watcher keeps for a violation's story.
const traceLen = 50000

// ranCluster is what Ray runs of one cluster.
type ranCluster struct {
	rg    string
	gen   int64
	pods  int
	needs quota.Resources
}

// watchStats is what the watcher counted and found.
type watchStats struct {
	storeChanges, accountVersions, rayChanges int
	peakRun, peakReserved                     map[string]quota.Resources
	violations                                []string // the first ones
	stories                                   []string // the events of the clusters involved
	count                                     int      // all of them
}

func newRayWatch(nodes quota.Catalog) *rayWatch {
	return &rayWatch{nodes: nodes, accounts: map[string]*quota.Account{}, holds: map[string]quota.HoldMap{}, running: map[string]ranCluster{}, told: map[string]bool{},
		st: watchStats{peakRun: map[string]quota.Resources{}, peakReserved: map[string]quota.Resources{}}}
}

// pods is the memory Ray's Pods hook.
func (w *rayWatch) pods(c *cluster.Cluster, pods []cluster.Pod) {
	rg := c.QuotaGroup
	if rg == "" && c.Live != nil {
		rg = c.Live.ResourceGroup
	}
	if rg == "" {
		rg = c.Spec.ResourceGroup
	}
	var sum quota.Resources
	for _, p := range pods {
		sum = sum.Add(p.Requests)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.st.rayChanges++
	w.note(fmt.Sprintf("Ray: %s@%d %s runs %d pods %s", c.ID, c.Generation, c.State, len(pods), sum))
	if len(pods) == 0 {
		delete(w.running, c.ID)
	} else {
		w.running[c.ID] = ranCluster{rg: rg, gen: c.Generation, pods: len(pods), needs: sum}
	}
	w.check(fmt.Sprintf("Ray: cluster %s at generation %d runs %d pods (%s)", c.ID, c.Generation, len(pods), sum))
}

// change is the store's watch handler.
func (w *rayWatch) change(ch backend.Change) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.st.storeChanges++
	if ch.Doc.Kind == "cluster" {
		var cl cluster.Cluster
		if ch.Deleted || json.Unmarshal(ch.Doc.Data, &cl) != nil {
			w.note(fmt.Sprintf("store v%s: cluster %s deleted", ch.Doc.Version, ch.Doc.ID))
		} else {
			ranges := ""
			if cl.Live != nil {
				for _, g := range cl.Live.Workers {
					ranges += fmt.Sprintf(" %s[%d,%d]", g.Name, g.Instances.Min, g.Instances.MaxOrMin())
				}
			}
			last := ""
			if len(cl.Events) > 0 {
				e := cl.Events[len(cl.Events)-1]
				last = e.Action + ": " + e.Message
			}
			w.note(fmt.Sprintf("store v%s: cluster %s %s gen %d replicas %v live%s quota %q reason %q; last event %q",
				ch.Doc.Version, cl.ID, cl.State, cl.Generation, cl.Replicas, ranges, cl.QuotaGroup, cl.Reason, last))
		}
	}
	if ch.Doc.Kind == "hold" {
		// A settled hold: the account's pending one until it is settled.
		var h struct {
			ResourceGroup string `json:"resourceGroup"`
			Holder        string `json:"holder"`
			quota.Hold
		}
		if rg, holder, ok := strings.Cut(ch.Doc.ID, "."); ok && ch.Deleted {
			delete(w.holds[rg], holder)
		} else if ok && json.Unmarshal(ch.Doc.Data, &h) == nil {
			if w.holds[rg] == nil {
				w.holds[rg] = quota.HoldMap{}
			}
			w.holds[rg][holder] = h.Hold
		}
	}
	if ch.Doc.Kind == "resourcegroup" {
		var a quota.Account
		if ch.Deleted || json.Unmarshal(ch.Doc.Data, &a) != nil {
			delete(w.accounts, ch.Doc.ID)
		} else {
			w.st.accountVersions++
			if w.holds[a.ID] == nil {
				w.holds[a.ID] = quota.HoldMap{}
			}
			a.Bind(w.holds[a.ID])
			w.accounts[a.ID] = &a
			w.note(fmt.Sprintf("store v%s: resource group %s holds %s", ch.Doc.Version, a.ID, holdsOf(&a)))
			reserved := a.Reserved()
			w.st.peakReserved[a.ID] = w.st.peakReserved[a.ID].Max(reserved)
			if !reserved.Fits(a.Capacity) {
				w.violate(fmt.Sprintf("resource group %s at version %s reserves %s, capacity %s: %s",
					a.ID, ch.Doc.Version, reserved, a.Capacity, holdsOf(&a)))
			}
			// The sum is the holds' at every version: a settled hold
			// changes only through a pending one, which the sum counts.
			var sum quota.Resources
			for _, h := range a.Holds() {
				sum = sum.Add(h.Resources)
			}
			if sum != a.Sum {
				w.violate(fmt.Sprintf("resource group %s at version %s reserves %s, but its holds add up to %s: %s",
					a.ID, ch.Doc.Version, a.Sum, sum, holdsOf(&a)))
			}
		}
	}
	w.check(fmt.Sprintf("store: %s %s at version %s", ch.Doc.Kind, ch.Doc.ID, ch.Doc.Version))
}

// check compares what Ray runs with the resource groups; the caller holds
// w.mu.
func (w *rayWatch) check(at string) {
	sums := map[string]quota.Resources{}
	for id, r := range w.running {
		sums[r.rg] = sums[r.rg].Add(r.needs)
		a := w.accounts[r.rg]
		if a == nil {
			continue
		}
		if held := a.Held(id); !r.needs.Fits(held) {
			w.tell(id)
			w.violate(fmt.Sprintf("after %s: cluster %s runs %d pods needing %s in %s, holding %s there",
				at, id, r.pods, r.needs, r.rg, held))
		}
	}
	for rg, sum := range sums {
		w.st.peakRun[rg] = w.st.peakRun[rg].Max(sum)
		a := w.accounts[rg]
		if a == nil {
			w.violate(fmt.Sprintf("after %s: Ray runs %s in %s, which has no account", at, sum, rg))
			continue
		}
		if !sum.Fits(a.Capacity) {
			var who []string
			for id, r := range w.running {
				if r.rg == rg {
					w.tell(id)
					who = append(who, fmt.Sprintf("%s@%d: %d pods %s", id, r.gen, r.pods, r.needs))
				}
			}
			sort.Strings(who)
			w.violate(fmt.Sprintf("after %s: resource group %s runs %s, capacity %s; running: %s; holds: %s",
				at, rg, sum, a.Capacity, strings.Join(who, ", "), holdsOf(a)))
		}
	}
}

func holdsOf(a *quota.Account) string {
	var hs []string
	for h, hold := range a.Holds() {
		hs = append(hs, fmt.Sprintf("%s %s (gen %d)", h, hold.Resources, hold.Generation))
	}
	sort.Strings(hs)
	return strings.Join(hs, ", ")
}

// note adds an event to the trace; the caller holds w.mu.
func (w *rayWatch) note(s string) {
	if len(w.trace) >= traceLen {
		w.trace = slices.Delete(w.trace, 0, traceLen/10)
	}
	w.trace = append(w.trace, s)
}

// call notes a call a replica makes through its fault injector.
func (w *rayWatch) call(replica int, c dlctest.Call, f dlctest.Fault) {
	w.mu.Lock()
	defer w.mu.Unlock()
	fault := ""
	switch f {
	case dlctest.Before:
		fault = " (fails before)"
	case dlctest.After:
		fault = " (fails after)"
	}
	w.note(fmt.Sprintf("replica %d: %s%s", replica, c, fault))
}

// tell records the story of cluster id (the last events naming it) the
// first time it is involved in a violation; the caller holds w.mu.
func (w *rayWatch) tell(id string) {
	if w.told[id] || len(w.told) >= 3 {
		return
	}
	w.told[id] = true
	var story []string
	for _, e := range w.trace {
		if strings.Contains(e, id) {
			story = append(story, "    "+e)
		}
	}
	if len(story) > 80 {
		story = story[len(story)-80:]
	}
	w.st.stories = append(w.st.stories, fmt.Sprintf("the story of %s:\n%s", id, strings.Join(story, "\n")))
}

// violate records a violation; the caller holds w.mu.
func (w *rayWatch) violate(s string) {
	w.st.count++
	if len(w.st.violations) < 20 {
		w.st.violations = append(w.st.violations, s)
	}
}

// runningNow lists what Ray runs now.
func (w *rayWatch) runningNow() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for id, r := range w.running {
		out = append(out, fmt.Sprintf("Ray runs %d pods of %s", r.pods, id))
	}
	sort.Strings(out)
	return out
}

func (w *rayWatch) stats() watchStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.st
	st.violations = slices.Clone(w.st.violations)
	st.stories = slices.Clone(w.st.stories)
	return st
}
