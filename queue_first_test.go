package dlc_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/dlctest"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
)

// Issue 42, quota serves the queue first: a cluster's request to grow
// waits in its resource group's queue beside the on-demand runs, at the
// cluster's priority, and autoscaling headroom is lent only from quota
// that nothing in the queue needs.

// autoscalerBackend is the memory backend with a stand-in for Ray's own
// autoscaler, as the Kubernetes backend sees KubeRay's in-tree one: each
// running cluster's autoscaling worker groups run what the test sets
// (nothing set: none, an idle cluster), reported as the observation's
// Autoscaled at the generation Ray follows. The simulated Ray runs the
// ceiling's pods; the platform reads the autoscaler's counts only from
// Autoscaled, as on Kubernetes.
type autoscalerBackend struct {
	*memory.Backend

	mu        sync.Mutex
	applied   map[string]*cluster.Cluster // as last applied
	runs      map[string]int              // "cluster/group" → workers the autoscaler runs
	observers []rayObserver
}

type rayObserver struct {
	ctx context.Context
	f   func(kind, id string)
}

func newAutoscalerBackend(be *memory.Backend) *autoscalerBackend {
	return &autoscalerBackend{Backend: be, applied: map[string]*cluster.Cluster{}, runs: map[string]int{}}
}

func (b *autoscalerBackend) ApplyCluster(ctx context.Context, c *cluster.Cluster) error {
	if err := b.Backend.ApplyCluster(ctx, c); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if old := b.applied[c.ID]; old == nil || old.Generation <= c.Generation {
		b.applied[c.ID] = c.DeepCopy()
	}
	return nil
}

func (b *autoscalerBackend) ClusterStatus(ctx context.Context, id string) (cluster.Observation, error) {
	o, err := b.Backend.ClusterStatus(ctx, id)
	if err != nil || o.Phase != cluster.PhaseReady {
		return o, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.applied[id]
	if c == nil || c.Live == nil {
		return o, nil
	}
	a := &cluster.Autoscaled{Generation: o.Generation, Workers: map[string]int{}}
	for _, w := range c.Live.Workers {
		if w.Instances.Autoscaling() {
			a.Workers[w.Name] = b.runs[id+"/"+w.Name]
		}
	}
	o.Autoscaled = a
	return o, nil
}

func (b *autoscalerBackend) Observe(ctx context.Context, f func(kind, id string)) {
	b.Backend.Observe(ctx, f)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.observers = append(b.observers, rayObserver{ctx, f})
}

// autoscale has the autoscaler run n workers of the cluster's group, and
// tells the clients' watches.
func (b *autoscalerBackend) autoscale(id, group string, n int) {
	b.mu.Lock()
	b.runs[id+"/"+group] = n
	obs := append([]rayObserver(nil), b.observers...)
	b.mu.Unlock()
	for _, o := range obs {
		if o.ctx.Err() == nil {
			o.f("cluster", id)
		}
	}
}

// queueFixture is a memory fixture whose one client follows the
// autoscaler stand-in (headroom one worker, the default), its on-demand
// runs running for ten hours, and one resource group, rg-q, of the given
// cores (4 GiB of memory a core).
type queueFixture struct {
	t   *testing.T
	m   *dlctest.Memory
	c   *dlc.Client
	ray *autoscalerBackend
	ctx context.Context
	grp string
}

func newQueueFixture(t *testing.T, cores int64, opts ...dlc.Option) *queueFixture {
	t.Helper()
	return newHookedQueueFixture(t, cores, memory.StoreHooks{}, opts...)
}

// newHookedQueueFixture is newQueueFixture over a store with hooks.
func newHookedQueueFixture(t *testing.T, cores int64, hooks memory.StoreHooks, opts ...dlc.Option) *queueFixture {
	t.Helper()
	m := dlctest.NewMemory(dlctest.MemoryOptions{T: t, Store: hooks, Ray: memory.RayHooks{
		RunOutcome: func(*job.Run) memory.Outcome { return memory.Outcome{Duration: 10 * time.Hour} },
	}})
	ray := newAutoscalerBackend(m.Backend)
	m.CloseClient(m.Client)
	c := m.NewClient(append([]dlc.Option{dlc.WithBackend(ray)}, opts...)...)
	f := &queueFixture{t: t, m: m, c: c, ray: ray, ctx: dlc.WithUser(context.Background(), "alice")}
	if _, err := c.ResourceGroups().Register(f.ctx, quotaGroup("rg-q", cores)); err != nil {
		t.Fatal(err)
	}
	g, err := c.Groups().Create(f.ctx, "queue")
	if err != nil {
		t.Fatal(err)
	}
	f.grp = g.ID
	return f
}

func (f *queueFixture) settle() { f.m.Settle(100*time.Millisecond, 600) }

// started creates and starts clusters of a 4-core head and a worker group
// "cpu" of 4-core workers (min to max; none when max is 0), at priority
// prio, and waits until they run.
func (f *queueFixture) started(prefix string, n, prio, min, max int) []string {
	f.t.Helper()
	var ids []string
	for i := range n {
		b := dlc.NewCluster(fmt.Sprintf("%s_%d", prefix, i)).Groups(f.grp).Resources("pkg-1", "rg-q").Priority(prio).
			Image("ray-2.46.0-py310-cpu").Head("head", "cu.4c8g")
		if max > 0 {
			b = b.WorkerGroup("cpu", "cu.4c8g", min, max)
		}
		s, err := b.Build()
		if err != nil {
			f.t.Fatal(err)
		}
		cl, err := f.c.Clusters().Create(f.ctx, s)
		if err != nil {
			f.t.Fatal(err)
		}
		ids = append(ids, cl.ID)
	}
	f.settle()
	for _, id := range ids {
		if _, err := f.c.Clusters().Start(f.ctx, id); err != nil {
			f.t.Fatal(err)
		}
	}
	f.settle()
	for _, id := range ids {
		if cl := f.cluster(id); cl.State != cluster.Running {
			f.t.Fatalf("cluster %s is %s, want running", id, cl.State)
		}
	}
	return ids
}

func (f *queueFixture) cluster(id string) *cluster.Cluster {
	f.t.Helper()
	cl, err := f.c.Clusters().Get(f.ctx, id)
	if err != nil {
		f.t.Fatal(err)
	}
	return cl
}

// submit creates an on-demand run at priority prio of a 4-core head and
// workers 4-core workers.
func (f *queueFixture) submit(name string, prio, workers int) string {
	f.t.Helper()
	b := dlc.NewJob(name).OnDemand("pkg-1", "rg-q").Priority(prio).Image("ray-2.46.0-py310-cpu").Head("head", "cu.4c8g")
	if workers > 0 {
		b = b.WorkerGroup("cpu", "cu.4c8g", workers, workers)
	}
	cfg, err := b.COSPackage("cos://jobs-1250000000/job.zip").Entrypoint("python main.py").Build()
	if err != nil {
		f.t.Fatal(err)
	}
	rec, err := f.c.Jobs().Create(f.ctx, cfg, dlc.SaveOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	r, err := f.c.Runs().Create(f.ctx, rec.ID, dlc.RunOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return r.ID
}

// waiting reports whether run id still waits for quota.
func (f *queueFixture) waiting(id string) bool {
	f.t.Helper()
	r, err := f.c.Runs().Get(f.ctx, id)
	if err != nil {
		f.t.Fatal(err)
	}
	return r.State == job.Queued || r.State == job.Waiting
}

func (f *queueFixture) usage() quota.Usage {
	f.t.Helper()
	u, err := f.c.ResourceGroups().Get(f.ctx, "rg-q")
	if err != nil {
		f.t.Fatal(err)
	}
	return u
}

// free hibernates cluster id and waits until its quota is given back.
func (f *queueFixture) free(id string) {
	f.t.Helper()
	if _, err := f.c.Clusters().Hibernate(f.ctx, id, dlc.HibernateOptions{}); err != nil {
		f.t.Fatal(err)
	}
	f.settle()
}

func cores(n int64) quota.Resources {
	return quota.Resources{MilliCPU: n * 1000, Memory: n * 2 * quota.GiB}
}

// Freed quota goes to what the queue puts first, runs and growths alike:
// a priority-9 run before a priority-1 cluster's growth, a priority-9
// growth before a priority-1 run, and at one priority the one that asked
// first. The growth is Clusters().Autoscale refused for quota (no
// autoscaler followed here: headroom 0), stored on the cluster.
func TestFreedQuotaGoesToTheQueueFirst(t *testing.T) {
	cases := []struct {
		name                 string
		clusterPrio, runPrio int
		growthFirst          bool
	}{
		{"a priority-9 run before a priority-1 growth", 1, 9, false},
		{"a priority-9 growth before a priority-1 run", 9, 1, true},
		{"at one priority, the growth asked first", 5, 5, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newQueueFixture(t, 32, dlc.WithAutoscaleHeadroom(0))
			grow := f.started("grow", 1, tc.clusterPrio, 1, 4)[0] // 8 cores
			fillers := f.started("filler", 3, 5, 1, 1)            // 24 cores: the group is full
			res, err := f.c.Clusters().Autoscale(f.ctx, grow, "cpu", 3)
			if err != nil {
				t.Fatal(err)
			}
			if !res.QuotaRefused || res.Granted != 1 {
				t.Fatalf("autoscale of a full group: %+v, want refused, 1 granted", res)
			}
			if g := f.cluster(grow).Growth; g == nil || g.Group != "cpu" || g.Want != 3 {
				t.Fatalf("the refused growth is not stored: %+v", g)
			}
			run := f.submit("od", tc.runPrio, 1) // 8 cores
			f.settle()
			if !f.waiting(run) {
				t.Fatal("the run is admitted into a full group")
			}
			// The growth is in the queue's order: ahead of the run or not.
			ahead := 0
			if tc.growthFirst {
				ahead = 1
			}
			p, err := f.c.Runs().Pending(f.ctx, run)
			if err != nil {
				t.Fatal(err)
			}
			list, err := f.c.ResourceGroups().Pending(f.ctx, "rg-q")
			if err != nil {
				t.Fatal(err)
			}
			if p.Ahead != ahead || len(list) != 1 || list[0].Ahead != ahead {
				t.Fatalf("the run has %d ahead of it (listed: %+v), want %d", p.Ahead, list, ahead)
			}
			f.free(fillers[0]) // 8 cores: one of the two
			cl := f.cluster(grow)
			grown := cl.Replicas["cpu"] == 3 && cl.Growth == nil
			if grown != tc.growthFirst || f.waiting(run) != tc.growthFirst {
				t.Fatalf("after 8 cores freed: growth granted %v (replicas %d, growth %+v), run waits %v; want the growth first %v",
					grown, cl.Replicas["cpu"], cl.Growth, f.waiting(run), tc.growthFirst)
			}
			f.free(fillers[1]) // and the other
			if cl := f.cluster(grow); cl.Replicas["cpu"] != 3 || cl.Growth != nil || f.waiting(run) {
				t.Fatalf("after 16 cores freed: replicas %d, growth %+v, run waits %v; want both served", cl.Replicas["cpu"], cl.Growth, f.waiting(run))
			}
			if err := f.c.CheckQuota(f.ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A growth is stored, not remembered: a client started after it was asked
// for (a restart, another replica) finds it in the queue and grants it
// when quota frees; asking for no more than the cluster has takes it out.
func TestGrowthWaitsAcrossARestart(t *testing.T) {
	f := newQueueFixture(t, 32, dlc.WithAutoscaleHeadroom(0))
	grow := f.started("grow", 1, 1, 1, 4)[0]
	fillers := f.started("filler", 3, 5, 1, 1)
	if _, err := f.c.Clusters().Autoscale(f.ctx, grow, "cpu", 2); err != nil {
		t.Fatal(err)
	}
	f.m.CloseClient(f.c)
	reg := prometheus.NewRegistry()
	f.c = f.m.NewClient(dlc.WithBackend(f.ray), dlc.WithAutoscaleHeadroom(0), dlc.WithMetrics(reg))
	f.m.Reconcile()
	expect := `
# HELP dlc_pending_growths Clusters' growths waiting in a resource group's queue, by the cluster's priority.
# TYPE dlc_pending_growths gauge
dlc_pending_growths{priority="1",resource_group="rg-q"} 1
`
	if err := testutil.CollectAndCompare(reg, strings.NewReader(expect), "dlc_pending_growths", "dlc_pending_runs"); err != nil {
		t.Fatalf("the restarted client's metrics: %v", err)
	}
	f.free(fillers[0])
	if err := testutil.CollectAndCompare(reg, strings.NewReader(""), "dlc_pending_growths"); err != nil {
		t.Fatalf("the growth granted: %v", err)
	}
	if cl := f.cluster(grow); cl.Replicas["cpu"] != 2 || cl.Growth != nil {
		t.Fatalf("after a restart, the stored growth is not granted: replicas %d, growth %+v", cl.Replicas["cpu"], cl.Growth)
	}
	// Refused again, then no longer wanted.
	if _, err := f.c.Clusters().Autoscale(f.ctx, grow, "cpu", 4); err != nil {
		t.Fatal(err)
	}
	if cl := f.cluster(grow); cl.Growth == nil || cl.Replicas["cpu"] != 3 {
		t.Fatalf("a growth past quota: replicas %d, growth %+v; want 3 granted and the rest waiting", cl.Replicas["cpu"], cl.Growth)
	}
	if _, err := f.c.Clusters().Autoscale(f.ctx, grow, "cpu", 1); err != nil {
		t.Fatal(err)
	}
	f.free(fillers[1])
	if cl := f.cluster(grow); cl.Growth != nil || cl.Replicas["cpu"] != 1 {
		t.Fatalf("a growth no longer wanted: replicas %d, growth %+v; want 1 and none waiting", cl.Replicas["cpu"], cl.Growth)
	}
	if err := f.c.CheckQuota(f.ctx); err != nil {
		t.Fatal(err)
	}
}

// A growth that waits past the starvation bound (WithMaxWait) and does
// not fit holds back what waits behind it, as a starving run does: a
// smaller run of its priority that came later is admitted before the
// bound (BestEffortFIFO), not after it, and the growth is granted as soon
// as the quota freed since fits it.
func TestStarvingGrowthServedWithinTheBound(t *testing.T) {
	const bound = time.Minute
	f := newQueueFixture(t, 40, dlc.WithAutoscaleHeadroom(0), dlc.WithMaxWait(bound))
	grow := f.started("grow", 1, 1, 1, 5)[0]   // 8 cores
	fillers := f.started("filler", 4, 5, 1, 1) // 32 cores: the group is full
	if _, err := f.c.Clusters().Autoscale(f.ctx, grow, "cpu", 5); err != nil {
		t.Fatal(err) // 16 cores more
	}
	asked := f.m.Clock.Now()
	early := f.submit("early", 1, 1) // 8 cores, behind the growth
	f.settle()
	f.free(fillers[0]) // 8 cores: the growth does not fit, the run does
	if f.waiting(early) {
		t.Fatal("before the bound, a smaller run behind a growth that does not fit is not admitted")
	}
	f.m.Step(bound + time.Second)
	late := f.submit("late", 1, 1)
	f.settle()
	f.free(fillers[1]) // 8 cores: the growth starves, and holds them
	if !f.waiting(late) {
		t.Fatal("past the bound, a run behind the starving growth was admitted before it")
	}
	if f.cluster(grow).Replicas["cpu"] != 1 {
		t.Fatal("the growth was granted in part")
	}
	f.free(fillers[2]) // 16 cores held now: the growth's
	cl := f.cluster(grow)
	if cl.Replicas["cpu"] != 5 || cl.Growth != nil {
		t.Fatalf("the starving growth is not served: replicas %d, growth %+v", cl.Replicas["cpu"], cl.Growth)
	}
	if !f.waiting(late) {
		t.Fatal("the run behind the growth took quota before it")
	}
	t.Logf("the growth waited %s (bound %s)", f.m.Clock.Now().Sub(asked).Round(time.Second), bound)
	f.free(fillers[3])
	if f.waiting(late) {
		t.Fatal("the run behind the growth is not admitted once it is served")
	}
	if err := f.c.CheckQuota(f.ctx); err != nil {
		t.Fatal(err)
	}
}

// Idle autoscaling clusters lend their headroom (a worker each above what
// Ray's autoscaler runs) while nothing waits; while runs wait that do not
// fit, it is given back to them (reserved but not running: zero), and
// lent again once they are served, as far as quota allows. An autoscaler
// that reaches the headroom lent asks for more: that waits in the queue,
// behind a run of a higher priority.
func TestIdleHeadroomServesTheQueue(t *testing.T) {
	f := newQueueFixture(t, 32)
	idle := f.started("idle", 3, 1, 0, 4) // a 4-core head each, and a worker of headroom
	if u := f.usage(); u.Reserved != cores(24) || u.Headroom != cores(12) {
		// 12 cores of heads, 12 of headroom, 8 free
		t.Fatalf("idle clusters reserve %v, %v of it headroom; want 24 and 12 cores", u.Reserved, u.Headroom)
	}
	first := f.submit("od", 9, 3) // 16 cores; 8 free
	f.settle()
	if f.waiting(first) {
		t.Fatal("the run waits: the idle clusters' headroom was not given back to it")
	}
	u := f.usage()
	if u.Reserved != cores(32) || u.Headroom != cores(4) {
		// 12 cores of heads, 16 of the run's, and what is left, 4, lent again
		t.Fatalf("with the run served: reserved %v, headroom %v; want 32 cores reserved, 4 of them headroom lent again", u.Reserved, u.Headroom)
	}
	var lent string
	for _, id := range idle {
		cl := f.cluster(id)
		if cl.Growth != nil {
			t.Errorf("cluster %s: headroom is stored as a growth: %+v", id, cl.Growth)
		}
		if len(cl.Yielded) == 0 {
			if lent != "" {
				t.Fatalf("clusters %s and %s have headroom again, want the one quota allows", lent, id)
			}
			lent = id
		}
	}
	if lent == "" {
		t.Fatal("no cluster has its headroom again")
	}
	// Its autoscaler takes the worker lent, and so asks for one more: the
	// group is full, so it waits in the queue.
	f.ray.autoscale(lent, "cpu", 1)
	f.settle()
	if g := f.cluster(lent).Growth; g == nil || g.Want != 2 {
		t.Fatalf("the autoscaler at its ceiling: growth %+v, want 2 workers waiting", g)
	}
	// A run at priority 9 comes after it: it goes first.
	second := f.submit("od2", 9, 3)
	f.settle()
	if u := f.usage(); !u.Headroom.IsZero() || !f.waiting(second) {
		t.Fatalf("with a run that does not fit waiting: headroom %v, it waits %v; want no headroom, waiting", u.Headroom, f.waiting(second))
	}
	if _, err := f.c.Runs().Stop(f.ctx, first); err != nil {
		t.Fatal(err)
	}
	f.settle()
	if f.waiting(second) || f.cluster(lent).Replicas["cpu"] != 1 {
		t.Fatalf("16 cores freed: the run waits %v, the growth has %d workers; want the run admitted first", f.waiting(second), f.cluster(lent).Replicas["cpu"])
	}
	if _, err := f.c.Runs().Stop(f.ctx, second); err != nil {
		t.Fatal(err)
	}
	f.settle()
	if cl := f.cluster(lent); cl.Replicas["cpu"] != 2 || cl.Growth != nil {
		t.Fatalf("the queue's run served, the growth is not: replicas %d, growth %+v", cl.Replicas["cpu"], cl.Growth)
	}
	// Nothing waits: the others lend their headroom again, a worker
	// above what each autoscaler runs (12 cores of heads, 2 workers of the
	// grown one, a worker of headroom each for the others).
	if u := f.usage(); u.Headroom != cores(12) || u.Reserved != cores(28) {
		t.Fatalf("nothing waiting: reserved %v, headroom %v; want 28 cores, 12 of them headroom (a worker of each cluster)", u.Reserved, u.Headroom)
	}
	if err := f.c.CheckQuota(f.ctx); err != nil {
		t.Fatal(err)
	}
}

// A hundred idle autoscaling clusters in a group where runs wait hold no
// headroom: reserved but not running is zero, and the waiting runs have
// what the headroom held.
func TestHundredIdleClustersHoldNoHeadroomWhileRunsWait(t *testing.T) {
	f := newQueueFixture(t, 800)
	f.started("idle", 100, 1, 0, 4) // 100 × (4-core head + 4-core headroom) = 800 cores
	if u := f.usage(); u.Headroom != cores(400) || u.Allocatable.MilliCPU != 0 {
		t.Fatalf("100 idle clusters: headroom %v, allocatable %v; want 400 cores of headroom, nothing free", u.Headroom, u.Allocatable)
	}
	var runs []string
	for i := range 60 {
		runs = append(runs, f.submit(fmt.Sprintf("od_%d", i), 9, 1)) // 8 cores each: 480 > 400
	}
	f.settle()
	waiting := 0
	for _, id := range runs {
		if f.waiting(id) {
			waiting++
		}
	}
	u := f.usage()
	t.Logf("60 runs of 8 cores beside 100 idle clusters: %d admitted, %d wait; reserved %v, headroom %v", len(runs)-waiting, waiting, u.Reserved, u.Headroom)
	if waiting != 10 || !u.Headroom.IsZero() {
		t.Fatalf("%d runs wait and %v is reserved but not running; want 10 waiting (400 cores freed for 50) and none", waiting, u.Headroom)
	}
	if err := f.c.CheckQuota(f.ctx); err != nil {
		t.Fatal(err)
	}
}
