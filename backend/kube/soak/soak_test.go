package soak_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ray-project/kuberay/ray-operator/controllers/ray/utils"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/backend/kube/internal/loadtest"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/dlctest/kubetest"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
)

// Environment variables of the soak (doc.go).
const (
	envDuration  = "DLC_SOAK"                 // how long; unset: the test skips
	envConfigs   = "DLC_SOAK_CONFIGS"         // job configs (default 1000)
	envClusters  = "DLC_SOAK_CLUSTERS"        // standing clusters (default 50)
	envRGs       = "DLC_SOAK_RESOURCE_GROUPS" // resource groups (default 5)
	envIdle      = "DLC_SOAK_IDLE_CLUSTERS"   // clusters that hibernate when idle (default clusters/10)
	envIdleAfter = "DLC_SOAK_IDLE_TIMEOUT"    // their idle timeout (default 20s)
	envRestart   = "DLC_SOAK_RESTART"         // a replica restarted this often (default 5m)
	envRetention = "DLC_SOAK_RETENTION"       // WithRunRetention's maxAge (default 10m)
	envPerJob    = "DLC_SOAK_RUNS_PER_JOB"    // WithRunRetention's perJob (default 5)
	envStuck     = "DLC_SOAK_STUCK"           // the bound of a transitional state (default 90s)
	envTolerance = "DLC_SOAK_TOLERANCE"       // a flat series' growth (default 0.10)
	envNoFail    = "DLC_SOAK_NOFAIL"          // a growing series does not fail the test
	envReport    = "DLC_SOAK_REPORT"          // a file to write the report to
)

// params are a soak's parameters.
type params struct {
	duration, idleAfter, restart, retention, stuck time.Duration
	configs, clusters, rgs, idle, perJob           int
	tolerance                                      float64
	noFail                                         bool
}

func readParams() (params, error) {
	p := params{idleAfter: 20 * time.Second, restart: 5 * time.Minute, retention: 10 * time.Minute,
		stuck: 90 * time.Second, tolerance: 0.10, noFail: os.Getenv(envNoFail) != ""}
	var errs []error
	num := func(name string, def, least int) int {
		s := os.Getenv(name)
		if s == "" {
			return def
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < least {
			errs = append(errs, fmt.Errorf("%s=%q: want a whole number ≥ %d", name, s, least))
			return def
		}
		return n
	}
	dur := func(name string, def, least time.Duration) time.Duration {
		s := os.Getenv(name)
		if s == "" {
			return def
		}
		d, err := time.ParseDuration(s)
		if err != nil || d < least {
			errs = append(errs, fmt.Errorf("%s=%q: want a duration ≥ %v", name, s, least))
			return def
		}
		return d
	}
	p.duration = dur(envDuration, 0, time.Minute)
	p.configs = num(envConfigs, 1000, 1)
	p.clusters = num(envClusters, 50, 1)
	p.rgs = min(num(envRGs, 5, 1), p.clusters)
	p.idle = min(num(envIdle, p.clusters/10, 0), p.clusters)
	p.idleAfter = dur(envIdleAfter, p.idleAfter, time.Second)
	p.restart = dur(envRestart, p.restart, 0)
	p.retention = dur(envRetention, p.retention, time.Minute)
	p.perJob = num(envPerJob, 5, 0)
	p.stuck = dur(envStuck, p.stuck, time.Minute)
	if s := os.Getenv(envTolerance); s != "" {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || f < 0 {
			errs = append(errs, fmt.Errorf("%s=%q: want a fraction ≥ 0", envTolerance, s))
		} else {
			p.tolerance = f
		}
	}
	return p, errors.Join(errs...)
}

// soak is one run of the soak.
type soak struct {
	t        *testing.T
	p        params
	ctx      context.Context
	cp       *kubetest.ControlPlane
	loop     *kubetest.RayLoop
	ns       string
	obs      *dlc.Client // an observer: the test's own calls, as a user's
	tr       *tracker
	replicas []*replica
	env      []string // the replicas' environment
	logDir   string
	began    time.Time // the workload's start
	rows     []row
	notes    []string
	broken   []string // invariants broken
	quotaWas map[string]bool
	restarts []time.Duration // how long each restart took, kill to first report
	startErr map[string]int
	final    tickCheck // the schedules at the end
	mu       sync.Mutex
}

// TestSoak is the soak (doc.go, docs/scale.md): without DLC_SOAK it skips.
func TestSoak(t *testing.T) {
	if os.Getenv(envDuration) == "" {
		t.Skipf("the soak runs only with %s=<duration> set (make soak); see docs/scale.md", envDuration)
	}
	p, err := readParams()
	if err != nil {
		t.Fatal(err)
	}
	// KubeRay requeues every RayCluster after each reconcile; dlctest sets
	// 1 s unless told otherwise: keep KubeRay's production default.
	if os.Getenv(utils.RAYCLUSTER_DEFAULT_REQUEUE_SECONDS_ENV) == "" {
		t.Setenv(utils.RAYCLUSTER_DEFAULT_REQUEUE_SECONDS_ENV, "300")
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	logDir, err := os.MkdirTemp("", "soak-replicas-")
	if err != nil {
		t.Fatal(err)
	}
	s := &soak{t: t, p: p, ctx: dlc.WithUser(ctx, "soak"), tr: newTracker(time.Now), logDir: logDir,
		quotaWas: map[string]bool{}, startErr: map[string]int{}}
	t.Logf("replica logs in %s", logDir)
	s.setUp()
	s.workload()
	s.run()
	s.finish()
}

func (s *soak) setUp() {
	t := s.t
	setupBegan := time.Now()
	s.cp = kubetest.StartControlPlane(t)
	s.ns = s.cp.NewNamespace(t)
	s.loop = s.cp.StartRayLoop(t, kubetest.LoopOptions{Namespaces: []string{s.ns}, Fetch: pkg.Fetch})
	proxy := httptest.NewServer(newHeadProxy(s.loop))
	t.Cleanup(proxy.Close)
	kc, err := writeKubeconfig(s.cp.Config(), s.logDir)
	if err != nil {
		t.Fatalf("kubeconfig: %v", err)
	}
	s.env = []string{envKubeconfig + "=" + kc, envNamespace + "=" + s.ns, envHeads + "=" + proxy.URL}

	be, err := kube.New(s.ctx, s.cp.Config(), kube.Options{Namespace: s.ns, Dashboard: s.loop.Dashboard,
		Render: kube.RenderOptions{WorkingDir: pkg.WorkingDir}})
	if err != nil {
		t.Fatalf("kube.New: %v", err)
	}
	t.Cleanup(be.Close)
	if _, err := be.Watch(s.ctx, s.tr.on); err != nil {
		t.Fatalf("watch: %v", err)
	}
	s.obs, err = dlc.New(dlc.WithBackend(be), dlc.WithObserver())
	if err != nil {
		t.Fatalf("dlc.New: %v", err)
	}
	t.Cleanup(func() { _ = s.obs.Close() })

	for i := range 2 {
		rp := &replica{name: fmt.Sprintf("replica-%d", i)}
		s.replicas = append(s.replicas, rp)
		t0 := time.Now()
		if err := rp.start(s.env, s.logDir); err != nil {
			t.Fatalf("starting %s: %v", rp.name, err)
		}
		t.Cleanup(func() { rp.stop(30 * time.Second) })
		wctx, cancel := context.WithTimeout(s.ctx, 2*time.Minute)
		ok := rp.reported(wctx, t0)
		cancel()
		if !ok {
			t.Fatalf("%s did not report within 2 min (its log: %s)", rp.name, s.logDir)
		}
	}
	t.Logf("set up in %v: control plane, Ray loop, 2 replica processes", time.Since(setupBegan).Round(time.Millisecond))
}

func rgID(g int) string { return fmt.Sprintf("rg-%d", g) }

// workload registers the resource groups (each with exactly its
// clusters' room), creates and starts the clusters (the first
// DLC_SOAK_IDLE_CLUSTERS with an idle timeout), waits until all run, and
// saves the job configs.
func (s *soak) workload() {
	t, p := s.t, s.p
	began := time.Now()
	per := make([]int, p.rgs)
	for i := range p.clusters {
		per[i%p.rgs]++
	}
	for g := range p.rgs {
		if _, err := s.obs.ResourceGroups().Register(s.ctx, quota.Group{ID: rgID(g), Package: "pkg-1",
			Capacity: quota.Resources{MilliCPU: int64(per[g]) * 8000, Memory: int64(per[g]) * 16 * quota.GiB}}); err != nil {
			t.Fatalf("registering %s: %v", rgID(g), err)
		}
	}
	grp, err := s.obs.Groups().Create(s.ctx, "soak")
	if err != nil {
		t.Fatalf("creating the cluster group: %v", err)
	}
	ids := make([]string, p.clusters)
	parallel(s.ctx, p.clusters, 8, func(ctx context.Context, i int) {
		b := dlc.NewCluster(fmt.Sprintf("soak_%03d", i)).Groups(grp.ID).Resources("pkg-1", rgID(i%p.rgs)).Image("ray-2.46.0-py310-cpu").
			Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1)
		if i < p.idle {
			b = b.IdleTimeout(p.idleAfter)
		}
		spec, err := b.Build()
		if err != nil {
			t.Errorf("cluster spec: %v", err)
			return
		}
		cl, err := s.obs.Clusters().Create(ctx, spec)
		if err != nil {
			t.Errorf("creating a cluster: %v", err)
			return
		}
		ids[i] = cl.ID
	})
	if t.Failed() {
		t.FailNow()
	}
	s.waitFor(fmt.Sprintf("%d clusters created", p.clusters), 5*time.Minute, func() bool {
		return s.tr.count("cluster", string(cluster.Created)) >= p.clusters
	})
	parallel(s.ctx, p.clusters, 8, func(ctx context.Context, i int) {
		if _, err := s.obs.Clusters().Start(ctx, ids[i]); err != nil {
			t.Errorf("starting %s: %v", ids[i], err)
		}
	})
	s.waitFor(fmt.Sprintf("%d clusters running", p.clusters), 10*time.Minute, func() bool {
		return s.tr.count("cluster", string(cluster.Running)) >= p.clusters
	})
	policies := []job.ConcurrencyPolicy{job.AllowConcurrent, job.ForbidConcurrent, job.ReplaceConcurrent}
	parallel(s.ctx, p.configs, 16, func(ctx context.Context, i int) {
		cfg, err := dlc.NewJob(fmt.Sprintf("soak_job_%04d", i)).OnCluster(ids[i%p.clusters]).
			COSPackage("cos://jobs-1250000000/soak.zip").Entrypoint("sh main.sh").
			Schedule("* * * * *", job.Concurrency(policies[i%len(policies)])).Build()
		if err == nil {
			_, err = s.obs.Jobs().Create(ctx, cfg, dlc.SaveOptions{})
		}
		if err != nil {
			t.Errorf("saving a job config: %v", err)
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("workload in place in %v: %d resource groups, %d clusters (%d hibernate after %v idle), %d job configs",
		time.Since(began).Round(time.Millisecond), p.rgs, p.clusters, p.idle, p.idleAfter, p.configs)
}

// waitFor waits for cond, at every change of the store, for up to limit.
func (s *soak) waitFor(what string, limit time.Duration, cond func() bool) {
	ctx, cancel := context.WithTimeout(s.ctx, limit)
	defer cancel()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-ctx.Done():
			s.t.Fatalf("%s: not within %v (clusters: %s)", what, limit, s.tr.states("cluster"))
		}
	}
}

// run runs the soak for its duration: every minute a row, every restart
// interval a replica killed and started again, and hibernated clusters
// that a run waits for started again.
func (s *soak) run() {
	s.began = time.Now()
	end := s.began.Add(s.p.duration)
	ctx, cancel := context.WithDeadline(s.ctx, end)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { s.starter(ctx) })
	minute := time.NewTicker(time.Minute)
	defer minute.Stop()
	// Kills are jittered by up to a tenth of their interval either way,
	// so that they land at every phase of the minute's ticks (at a fixed
	// phase, a kill during an idle hibernate's mark was a matter of luck).
	jitter := rand.New(rand.NewPCG(uint64(s.began.UnixNano()), 0))
	nextKill := func() time.Duration {
		spread := int64(s.p.restart / 10)
		return s.p.restart + time.Duration(jitter.Int64N(2*spread+1)-spread)
	}
	var restart <-chan time.Time
	var rt *time.Timer
	if s.p.restart > 0 {
		rt = time.NewTimer(nextKill())
		defer rt.Stop()
		restart = rt.C
	}
	prev := s.sample(nil)
	next := 0
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-minute.C:
			s.sample(&prev)
			s.t.Log(s.rows[len(s.rows)-1].line(s))
			s.writeReport(false)
		case <-restart:
			s.restart(s.replicas[next%len(s.replicas)])
			next++
			rt.Reset(nextKill())
		}
	}
}

// restart kills a replica's process and starts a new one, which it waits
// to report (a bounded wait).
func (s *soak) restart(rp *replica) {
	t0 := time.Now()
	kctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	err := rp.kill(kctx)
	cancel()
	if err == nil {
		err = rp.start(s.env, s.logDir)
	}
	if err != nil {
		s.fail(fmt.Sprintf("restarting %s: %v", rp.name, err))
		return
	}
	wctx, cancel := context.WithTimeout(s.ctx, 2*time.Minute)
	defer cancel()
	if !rp.reported(wctx, t0) {
		s.fail(fmt.Sprintf("%s did not report within 2 min of its restart", rp.name))
		return
	}
	s.mu.Lock()
	s.restarts = append(s.restarts, time.Since(t0))
	s.mu.Unlock()
	s.t.Logf("restarted %s in %v", rp.name, time.Since(t0).Round(time.Millisecond))
}

// starter starts a hibernated cluster again as soon as a run waits for it,
// as its user would (there is no wake on submit).
func (s *soak) starter(ctx context.Context) {
	retry := time.NewTicker(10 * time.Second) // a start refused (still hibernating) is tried again
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.tr.wake:
		case <-retry.C:
		}
		for _, id := range s.tr.toStart() {
			if _, err := s.obs.Clusters().Start(ctx, id); err != nil && ctx.Err() == nil {
				s.mu.Lock()
				s.startErr[anonymise(err.Error())]++
				s.mu.Unlock()
			}
		}
	}
}

func (s *soak) fail(msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.broken = append(s.broken, msg)
	s.t.Error(msg)
}

// sample takes a row; prev is the last one's counters (nil: the first,
// which only sets them).
func (s *soak) sample(prev *counters) counters {
	now := time.Now()
	c := counters{at: now, tot: s.tr.totals()}
	for _, rp := range s.replicas {
		heap, w, cf := rp.figures()
		c.heaps = append(c.heaps, heap)
		c.writes += w
		c.conflicts += cf
	}
	if prev == nil {
		return c
	}
	r := row{elapsed: now.Sub(s.began), heaps: c.heaps, stored: s.tr.stored(), testHeap: heapNow(),
		writesPerS: float64(c.writes-prev.writes) / now.Sub(prev.at).Seconds(),
		conflicts:  c.conflicts - prev.conflicts,
		made:       c.tot.made - prev.tot.made, succeeded: c.tot.succeeded - prev.tot.succeeded,
		failed: c.tot.failed - prev.tot.failed, stopped: c.tot.stopped - prev.tot.stopped,
		deleted: c.tot.deleted - prev.tot.deleted, hibernations: c.tot.hibernations - prev.tot.hibernations, clusters: s.tr.states("cluster")}
	r.pods, r.events = s.kubeCounts()
	r.ticks = s.tr.ticksNow(time.Minute)
	for _, tw := range r.ticks.twice {
		if !slices.Contains(s.broken, tw) {
			s.fail(tw)
		}
	}
	r.over, r.audit = s.quotaNow()
	for _, o := range r.over {
		s.fail(o)
	}
	r.stuck, r.abnormal = s.tr.stuckNow(s.p.stuck)
	for _, x := range append(slices.Clone(r.stuck), r.abnormal...) {
		s.fail(fmt.Sprintf("at %v: %s", r.elapsed.Round(time.Second), x))
	}
	s.rows = append(s.rows, r)
	*prev = c
	return c
}

// counters are the running counts a row is the difference of.
type counters struct {
	at                time.Time
	tot               totals
	heaps             []uint64
	writes, conflicts int64
}

// quotaNow checks every resource group's reservations against its
// capacity, and runs CheckQuota: a problem it reports at two checks in a
// row breaks the invariant.
func (s *soak) quotaNow() (over []string, audit int) {
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	us, err := s.obs.ResourceGroups().List(ctx)
	if err != nil {
		s.notes = append(s.notes, "listing the resource groups: "+err.Error())
	}
	for _, u := range us {
		if !u.Reserved.Fits(u.Capacity) {
			over = append(over, fmt.Sprintf("resource group %s: %s reserved over its capacity %s", u.ID, u.Reserved, u.Capacity))
		}
	}
	now := map[string]bool{}
	if err := s.obs.CheckQuota(ctx); err != nil {
		for _, p := range strings.Split(strings.TrimPrefix(err.Error(), "quota: "), "; ") {
			now[p] = true
			audit++
			if s.quotaWas[p] {
				over = append(over, "CheckQuota at two checks in a row: "+p)
			} else {
				// One check's finding may be a write seen half-way; it is
				// logged, so that a note can say what it was.
				s.t.Logf("minute %.0f: CheckQuota found (an invariant broken only if found again at the next check): %s",
					time.Since(s.began).Minutes(), p)
			}
		}
	}
	s.quotaWas = now
	return over, audit
}

// kubeCounts counts the namespace's pods and events.
func (s *soak) kubeCounts() (pods, events int) {
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	var pl corev1.PodList
	if err := s.cp.Client().List(ctx, &pl, client.InNamespace(s.ns)); err == nil {
		pods = len(pl.Items)
	}
	// Events are many (the API server keeps them an hour): counted from a
	// list of one, which says how many remain.
	var el corev1.EventList
	if err := s.cp.Client().List(ctx, &el, client.InNamespace(s.ns), client.Limit(1)); err == nil {
		events = len(el.Items)
		if el.RemainingItemCount != nil {
			events += int(*el.RemainingItemCount)
		}
	}
	return pods, events
}

// eventSources says who wrote the namespace's Kubernetes events, and
// why, most first: a note of the report.
func (s *soak) eventSources() string {
	ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
	defer cancel()
	var el corev1.EventList
	if err := s.cp.Client().List(ctx, &el, client.InNamespace(s.ns)); err != nil {
		return err.Error()
	}
	by := map[string]int{}
	for _, e := range el.Items {
		who := cmp.Or(e.ReportingController, e.Source.Component, "?")
		by[who+" "+e.InvolvedObject.Kind+" "+e.Reason]++
	}
	keys := slices.Collect(maps.Keys(by))
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(by[b]-by[a], strings.Compare(a, b)) })
	var parts []string
	for i, k := range keys {
		if i == 8 {
			break
		}
		parts = append(parts, fmt.Sprintf("%s %d", k, by[k]))
	}
	return fmt.Sprintf("%d events: %s", len(el.Items), strings.Join(parts, ", "))
}

// finish waits (bounded) for the watch to account for every handled
// tick, takes the last row, prints the report and fails the test on a
// broken invariant or a growing series.
func (s *soak) finish() {
	t := s.t
	ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
	defer cancel()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var c tickCheck
	for {
		c = s.tr.ticksNow(time.Minute)
		if c.unaccounted == 0 {
			break
		}
		select {
		case <-tick.C:
			continue
		case <-ctx.Done():
		}
		break
	}
	if c.unaccounted != 0 {
		s.fail(fmt.Sprintf("at the end, %d ticks handled neither made a run nor were counted missed", c.unaccounted))
	}
	s.final = c
	s.notes = append(s.notes, "Kubernetes events in the namespace at the end, by who wrote them, the object's kind and the reason: "+s.eventSources())
	grew := s.writeReport(true)
	if len(grew) > 0 {
		msg := "growing: " + strings.Join(grew, "; ")
		if s.p.noFail {
			t.Log(msg + " (DLC_SOAK_NOFAIL set)")
		} else {
			t.Error(msg)
		}
	}
}

func heapNow() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// parallel calls f(ctx, i) for every i in [0, n) on workers goroutines.
func parallel(ctx context.Context, n, workers int, f func(ctx context.Context, i int)) {
	var mu sync.Mutex
	next := 0
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for ctx.Err() == nil {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= n {
					return
				}
				f(ctx, i)
			}
		})
	}
	wg.Wait()
}

// pkg is the job package the runs run: main.sh prints a few lines, kept as
// the run's log tail.
var pkg = loadtest.NewPackage("soak", "echo soak run starts\necho working on $RANDOM\necho soak run ok\n")
