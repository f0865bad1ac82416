package scale_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/ray-project/kuberay/ray-operator/controllers/ray/utils"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/backend/kube/internal/loadtest"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/dlctest/kubetest"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
)

// Environment variables of the scale test (docs/scale.md).
const (
	envClusters    = "DLC_SCALE"                 // N clusters; unset: the test skips
	envRuns        = "DLC_SCALE_RUNS"            // runs (default N)
	envReplicas    = "DLC_SCALE_REPLICAS"        // clients, each on its own kube.Backend (default 2)
	envConcurrency = "DLC_SCALE_CONCURRENCY"     // concurrent user calls (default 32)
	envRGs         = "DLC_SCALE_RESOURCE_GROUPS" // resource groups the clusters are spread over (default ⌈N/100⌉)
	envMode        = "DLC_SCALE_RUN_MODE"        // cluster, group or ondemand (default cluster)
	envBare        = "DLC_SCALE_BARE"            // objects of each bare write (default N)
	envDeadline    = "DLC_SCALE_DEADLINE"        // the whole test's deadline (default 20m)
	envQPS         = "DLC_SCALE_QPS"             // each replica's client-side limit (default kube.DefaultQPS; < 0: none)
	envWorkers     = "DLC_SCALE_CLIENT_WORKERS"  // reconcile workers per client (default: the client's, 8)
	envSharing     = "DLC_SCALE_WORK_SHARING"    // dlc.WithWorkSharing's TTL; 0: every replica reconciles everything (default: the client's)
	envReport      = "DLC_SCALE_REPORT"          // a file to write the report to, besides stdout
	envHeapProfile = "DLC_SCALE_HEAP_PROFILE"    // a file prefix: heap profiles before and after each replica counted per cluster
)

// params are a run's parameters.
type params struct {
	clusters, runs, replicas, concurrency, rgs, bare, workers int
	mode                                                      string
	deadline                                                  time.Duration
	sharing                                                   time.Duration // -1: the client's default
	qps                                                       float32
	burst                                                     int
}

func (p params) qpsString() string {
	if p.qps < 0 {
		return "off"
	}
	return fmt.Sprintf("%g QPS (burst %d)", p.qps, p.burst)
}

func (p params) sharingString() string {
	switch {
	case p.sharing < 0:
		return "the client's default"
	case p.sharing == 0:
		return "off (every replica reconciles everything)"
	}
	return "TTL " + p.sharing.String()
}

func readParams() (params, error) {
	p := params{mode: "cluster", deadline: 20 * time.Minute, qps: kube.DefaultQPS, burst: kube.DefaultBurst, workers: 8, sharing: -1}
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
	p.clusters = num(envClusters, 0, 1)
	p.runs = num(envRuns, p.clusters, 0)
	p.replicas = num(envReplicas, 2, 1)
	p.concurrency = num(envConcurrency, 32, 1)
	p.rgs = num(envRGs, max(1, (p.clusters+99)/100), 1)
	p.bare = num(envBare, p.clusters, 0)
	p.workers = num(envWorkers, p.workers, 1)
	if q := os.Getenv(envQPS); q != "" {
		f, err := strconv.ParseFloat(q, 32)
		if err != nil || f == 0 {
			errs = append(errs, fmt.Errorf("%s=%q: want a number of queries a second (negative: no limit)", envQPS, q))
		} else {
			p.qps, p.burst = float32(f), max(1, int(2*f))
		}
	}
	if m := os.Getenv(envMode); m != "" {
		switch m {
		case "cluster", "group", "ondemand":
			p.mode = m
		default:
			errs = append(errs, fmt.Errorf("%s=%q: want cluster, group or ondemand", envMode, m))
		}
	}
	if d := os.Getenv(envSharing); d != "" {
		v, err := time.ParseDuration(d)
		if err != nil || v < 0 {
			errs = append(errs, fmt.Errorf("%s=%q: want a duration such as 15s, or 0 for none", envSharing, d))
		} else {
			p.sharing = v
		}
	}
	if d := os.Getenv(envDeadline); d != "" {
		v, err := time.ParseDuration(d)
		if err != nil || v <= 0 {
			errs = append(errs, fmt.Errorf("%s=%q: want a duration such as 20m", envDeadline, d))
		} else {
			p.deadline = v
		}
	}
	return p, errors.Join(errs...)
}

// harness is one run of the scale test.
type harness struct {
	t       *testing.T
	p       params
	r       *report
	cp      *kubetest.ControlPlane
	loop    *kubetest.RayLoop
	ns      string
	ctx     context.Context // bounded by the deadline, the user set
	clients []*dlc.Client
	regs    []*prometheus.Registry
	store   *counter // the replicas' store and Ray calls
	api     *counter // their requests to the API server
	tr      *tracker
	errMu   sync.Mutex
	errSeen map[string]int
	// replicaBase is what a new replica adds to the heap over an empty
	// namespace: the mean of baseSamples measures.
	replicaBase int64
	baseSamples int
}

// TestScale is the scale test: N clusters created and started through R
// replicas, then N runs, on an envtest control plane with Ray in the loop;
// it prints a report of each phase (see the package doc and docs/scale.md).
// Without DLC_SCALE it skips.
func TestScale(t *testing.T) {
	if os.Getenv(envClusters) == "" {
		t.Skipf("the scale test runs only with %s=<clusters> set (make scale); see docs/scale.md", envClusters)
	}
	p, err := readParams()
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv(envHeapProfile) != "" {
		// Every 4 KiB allocated sampled, not every 512 KiB: a replica's
		// profile then tells its kinds of objects apart.
		runtime.MemProfileRate = 4096
	}
	// KubeRay requeues every RayCluster after each reconcile; dlctest sets
	// 1 s, as KubeRay's own tests do, unless told otherwise. At N clusters
	// that is N reconciles a second for its one worker: keep KubeRay's
	// production default (300 s) instead.
	if os.Getenv(utils.RAYCLUSTER_DEFAULT_REQUEUE_SECONDS_ENV) == "" {
		t.Setenv(utils.RAYCLUSTER_DEFAULT_REQUEUE_SECONDS_ENV, "300")
	}
	began := time.Now()
	deadline := began.Add(p.deadline)
	r := &report{p: p, began: began}
	if d, ok := t.Deadline(); ok && d.Add(-2*time.Minute).Before(deadline) {
		deadline = d.Add(-2 * time.Minute)
		r.notes = append(r.notes, fmt.Sprintf("the deadline was cut to %v by go test's -timeout", deadline.Sub(began).Round(time.Second)))
	}
	ctx, cancel := context.WithDeadline(t.Context(), deadline)
	defer cancel()
	h := &harness{t: t, p: p, r: r, ctx: dlc.WithUser(ctx, "scale"), store: newCounter(), api: newCounter(),
		tr: newTracker(), errSeen: map[string]int{}}
	defer h.finish()

	h.setUp()
	r.setup = time.Since(began)
	t.Logf("set up in %v: control plane, Ray loop, %d replicas", r.setup.Round(time.Millisecond), p.replicas)

	h.bareWrites()
	h.heapOfProcess("the process, before the clusters")
	// The first replica started also fills what the process keeps for good
	// (client-go's transport cache, …); the base is the mean of the next
	// two, which differ by up to a MiB.
	h.heapOfNewReplica("one more replica started over an empty namespace (the first, not counted)", -1, "")
	h.heapOfNewReplica("one more replica started over an empty namespace (base, 1 of 2)", 0, "")
	h.heapOfNewReplica("one more replica started over an empty namespace (base, 2 of 2)", 0, "")
	ids := h.clusters()
	if len(ids) == 0 {
		return
	}
	h.heapOfNewReplica(fmt.Sprintf("one more replica started over %d running clusters", len(ids)), len(ids), "cluster, less the base")
	h.runs(ids)
	h.heapOfProcess("the process, at the end")
	h.heapOfNewReplica(fmt.Sprintf("one more replica started over %d clusters, their job configs and %d runs", len(ids), p.runs),
		len(ids), "cluster with its job config and runs, less the base")
}

// setUp starts the control plane, the Ray loop on a namespace of its own,
// the replicas on it, the watch the phases wait on, the resource groups and
// the cluster group.
func (h *harness) setUp() {
	t := h.t
	h.cp = kubetest.StartControlPlane(t)
	h.ns = h.cp.NewNamespace(t)
	h.loop = h.cp.StartRayLoop(t, kubetest.LoopOptions{Namespaces: []string{h.ns}, Fetch: pkg.Fetch})
	for range h.p.replicas {
		be := h.backend(h.api)
		reg := prometheus.NewRegistry()
		opts := []dlc.Option{dlc.WithBackend(countingBackend{Backend: be, c: h.store}), dlc.WithMetrics(reg), dlc.WithWorkers(h.p.workers)}
		if h.p.sharing >= 0 {
			opts = append(opts, dlc.WithWorkSharing(h.p.sharing))
		}
		c, err := dlc.New(opts...)
		if err != nil {
			t.Fatalf("dlc.New: %v", err)
		}
		t.Cleanup(func() { _ = c.Close() })
		h.clients, h.regs = append(h.clients, c), append(h.regs, reg)
		if len(h.clients) == 1 {
			if _, err := be.Watch(h.ctx, h.tr.on); err != nil {
				t.Fatalf("watch: %v", err)
			}
		}
	}
	// Room for every cluster and every run's on-demand cluster (a cu.4c8g
	// head and one cu.4c8g worker each), spread over the resource groups.
	per := (h.p.clusters+h.p.runs)/h.p.rgs + 1
	for g := range h.p.rgs {
		if _, err := h.clients[0].ResourceGroups().Register(h.ctx, quota.Group{ID: rgID(g), Package: "pkg-1",
			Capacity: quota.Resources{MilliCPU: int64(per) * 8000, Memory: int64(per) * 16 * quota.GiB}}); err != nil {
			t.Fatalf("registering %s: %v", rgID(g), err)
		}
	}
	if _, err := h.clients[0].Groups().Create(h.ctx, "scale"); err != nil {
		t.Fatalf("creating the cluster group: %v", err)
	}
}

func rgID(g int) string { return fmt.Sprintf("rg-%d", g) }

// backend starts a kube.Backend on the namespace as a replica runs it: the
// client-side limit of the parameters, its requests counted by api (nil:
// not counted). The test's end closes it.
func (h *harness) backend(api *counter) *kube.Backend {
	be := h.newBackend(api)
	h.t.Cleanup(be.Close)
	return be
}

// newBackend starts a kube.Backend as backend does, for the caller to close.
func (h *harness) newBackend(api *counter) *kube.Backend {
	cfg := h.cp.Config()
	if api != nil {
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &apiCounter{next: rt, c: api} })
	}
	be, err := kube.New(h.ctx, cfg, kube.Options{Namespace: h.ns, Dashboard: h.loop.Dashboard, QPS: h.p.qps, Burst: h.p.burst,
		Render: kube.RenderOptions{WorkingDir: pkg.WorkingDir}})
	if err != nil {
		h.t.Fatalf("kube.New: %v", err)
	}
	return be
}

// bareWrites measures the API server's own write rate in the same run: M
// ConfigMaps (the size of a name claim, which is a StoreEntry), then M RayClusters rendered as the
// SDK renders a cluster, created with a plain controller-runtime client
// without a client-side limit, by as many goroutines as the SDK's calls,
// in a namespace no controller watches.
func (h *harness) bareWrites() {
	if h.p.bare == 0 {
		return
	}
	ns := h.cp.NewNamespace(h.t)
	cfg := h.cp.Config()
	cfg.QPS, cfg.Burst = -1, 0
	c, err := client.New(cfg, client.Options{Scheme: h.cp.Scheme()})
	if err != nil {
		h.t.Fatalf("a bare client: %v", err)
	}
	spec, err := clusterSpec("bare", "grp-bare", rgID(0))
	if err != nil {
		h.t.Fatalf("a cluster spec: %v", err)
	}
	for _, x := range []struct {
		what string
		obj  func(i int) (client.Object, error)
	}{
		{"ConfigMap", func(i int) (client.Object, error) {
			return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bare-%06d", i), Namespace: ns},
				Data: map[string]string{"owner": fmt.Sprintf("cls-bare-%06d", i)}}, nil
		}},
		{"RayCluster", func(i int) (client.Object, error) {
			now := time.Now().UTC().Truncate(time.Second)
			cl := &cluster.Cluster{ID: fmt.Sprintf("cls-bare-%06d", i), Spec: *spec, State: cluster.Created, Generation: 1,
				Creator: "scale", CreatedAt: now, UpdatedAt: now}
			return kube.RenderRayCluster(cl, kube.RenderOptions{Namespace: ns})
		}},
	} {
		if h.ctx.Err() != nil {
			return
		}
		var failed atomic.Int64
		took := parallel(h.ctx, h.p.bare, h.p.concurrency, func(ctx context.Context, i int) {
			obj, err := x.obj(i)
			if err == nil {
				err = c.Create(ctx, obj)
			}
			if err != nil {
				failed.Add(1)
				h.noteErr("bare "+x.what, err)
			}
		})
		b := bare{what: x.what, n: h.p.bare - int(failed.Load()), errs: int(failed.Load()), took: took}
		h.r.bare = append(h.r.bare, b)
		h.t.Logf("bare: %d %ss created in %v (%.1f/s), %d failed", b.n, x.what, took.Round(time.Millisecond), b.rate(), b.errs)
	}
}

// clusterSpec is the clusters' spec: a cu.4c8g head and one cu.4c8g
// worker.
func clusterSpec(name, grp, rg string) (*cluster.Spec, error) {
	return dlc.NewCluster(name).Groups(grp).Resources("pkg-1", rg).Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1).Build()
}

// clusters creates N clusters through the replicas in turn, waits until
// all are created, starts them (each through another replica than the one
// that created it, as behind a load balancer) and waits until all run. It
// returns the ids of the clusters that were started.
func (h *harness) clusters() []string {
	grp := h.groupID()
	n := h.p.clusters
	ids := make([]string, n)
	h.phase("clusters: create", "Clusters().Create", n, func(ctx context.Context, i int) error {
		spec, err := clusterSpec(fmt.Sprintf("scale_%06d", i), grp, rgID(i%h.p.rgs))
		if err != nil {
			return err
		}
		cl, err := h.client(i).Clusters().Create(ctx, spec)
		if err == nil {
			ids[i] = cl.ID
		}
		return err
	}, "all created", func(ok int) (bool, string) {
		return h.tr.count("cluster", string(cluster.Created)) >= ok, h.tr.states("cluster")
	}, func() string { return h.tr.states("cluster") })

	created := compact(ids)
	started := make([]string, len(created))
	h.phase("clusters: start", "Clusters().Start", len(created), func(ctx context.Context, i int) error {
		_, err := h.client(i+1).Clusters().Start(ctx, created[i])
		if err == nil {
			started[i] = created[i]
		}
		return err
	}, "all running", func(ok int) (bool, string) {
		return h.tr.count("cluster", string(cluster.Running)) >= ok, h.tr.states("cluster")
	}, func() string { return h.tr.states("cluster") })
	return compact(started)
}

func (h *harness) groupID() string {
	gs, err := h.clients[0].Groups().List(h.ctx)
	if err != nil || len(gs) != 1 {
		h.t.Fatalf("the cluster group: %v, %d groups", err, len(gs))
	}
	return gs[0].ID
}

func (h *harness) client(i int) *dlc.Client { return h.clients[i%len(h.clients)] }

// runs saves the job configs the runs are made of (one per cluster for
// runs on a cluster; one on the cluster group; one on-demand config per
// resource group), makes DLC_SCALE_RUNS runs of them through the replicas
// in turn and waits until all have ended.
func (h *harness) runs(clusters []string) {
	if h.p.runs == 0 {
		return
	}
	if h.ctx.Err() != nil {
		for _, name := range []string{"job configs: save", "runs"} {
			h.r.phases = append(h.r.phases, &phase{name: name, skipped: "the deadline passed"})
		}
		return
	}
	grp := h.groupID()
	var builders []*job.Builder
	switch h.p.mode {
	case "cluster":
		for i, id := range clusters {
			builders = append(builders, dlc.NewJob(fmt.Sprintf("scale_job_%06d", i)).OnCluster(id))
		}
	case "group":
		builders = append(builders, dlc.NewJob("scale_job_group").OnGroup(grp))
	case "ondemand":
		for g := range h.p.rgs {
			builders = append(builders, dlc.NewJob(fmt.Sprintf("scale_job_%d", g)).OnDemand("pkg-1", rgID(g)).Priority(5).
				Image("ray-2.46.0-py310-cpu").Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1))
		}
	}
	if len(builders) == 0 {
		h.r.notes = append(h.r.notes, "no runs: no cluster runs")
		return
	}
	jobs := make([]string, len(builders))
	h.phase("job configs: save", "Jobs().Save", len(builders), func(ctx context.Context, i int) error {
		cfg, err := builders[i].COSPackage("cos://jobs-1250000000/scale.zip").Entrypoint("sh main.sh").Build()
		if err != nil {
			return err
		}
		rec, err := h.client(i).Jobs().Create(ctx, cfg, dlc.SaveOptions{})
		if err == nil {
			jobs[i] = rec.ID
		}
		return err
	}, "", nil, func() string { return "" })
	jobs = compact(jobs)
	if len(jobs) == 0 {
		return
	}
	until := "all ended"
	if h.p.mode == "ondemand" {
		until = "all ended, their clusters deleted"
	}
	ph := h.phase("runs", "Runs().Create", h.p.runs, func(ctx context.Context, i int) error {
		_, err := h.client(i+1).Runs().Create(ctx, jobs[i%len(jobs)], dlc.RunOptions{})
		return err
	}, until, func(ok int) (bool, string) {
		od := h.tr.onDemandClusters()
		return h.tr.terminalRuns() >= ok && (h.p.mode != "ondemand" || od == 0),
			fmt.Sprintf("%s; %d on-demand clusters", h.tr.states("run"), od)
	}, func() string { return h.tr.states("run") })
	h.r.runs = ph.state
}

// phase makes n calls of op on the replicas, by as many goroutines as the
// parameters say, then waits until cond (given how many calls succeeded)
// holds, and records it all.
func (h *harness) phase(name, op string, n int, call func(ctx context.Context, i int) error,
	until string, cond func(ok int) (bool, string), state func() string) *phase {
	ph := &phase{name: name, until: until}
	h.r.phases = append(h.r.phases, ph)
	if h.ctx.Err() != nil {
		ph.skipped = "the deadline passed"
		return ph
	}
	store0, api0, rec0 := h.store.snapshot(), h.api.snapshot(), reconcileCounts(h.regs)
	var ok, failed atomic.Int64
	began := time.Now()
	ph.calls = parallel(h.ctx, n, h.p.concurrency, func(ctx context.Context, i int) {
		t0 := time.Now()
		if err := call(ctx, i); err != nil {
			failed.Add(1)
			h.noteErr(op, err)
			return
		}
		h.r.lat.add(op, time.Since(t0))
		ok.Add(1)
	})
	ph.ops = int(ok.Load())
	ph.errs = n - ph.ops // failed, or not made before the deadline
	ph.reached, ph.took = true, ph.calls
	if cond != nil {
		_, ph.reached = h.tr.wait(h.ctx, h.t.Logf, until, func() (bool, string) { return cond(ph.ops) }, h.rayLag)
		ph.took = time.Since(began)
	}
	ph.state = state()
	// The counts include the background work that follows the condition
	// (an on-demand run's reservation released after its cluster went):
	// they are taken once the store has been quiet for 2 s.
	if ph.reached && !h.tr.quiet(h.ctx, 2*time.Second, time.Minute) {
		h.r.notes = append(h.r.notes, name+": the store did not stay quiet for 2 s within a minute after the condition; its counts stop there")
	}
	ph.store, ph.api, ph.rec = h.store.snapshot().sub(store0), h.api.snapshot().sub(api0), reconcileCounts(h.regs).sub(rec0)
	h.t.Logf("%s: %d ok, %d failed; calls returned in %v; %s after %v (reached: %v); %s; %s",
		name, ph.ops, ph.errs, ph.calls.Round(time.Millisecond), orNone(until), ph.took.Round(time.Millisecond), ph.reached, ph.state, h.rayLag())
	return ph
}

// rayLag says where KubeRay stands on the namespace's RayClusters (a list
// of them, made only when a wait logs its progress): how many it has not
// caught up with (status.observedGeneration behind metadata.generation),
// how many run unsuspended without a ready head, and how many pods there
// are and are ready. It reads KubeRay's own cache, uncopied: listing
// 10,000 RayClusters and their pods from the API server every 15 s took a
// sixth of the test process's CPU, and the API server's.
func (h *harness) rayLag() string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // also once the deadline has passed
	defer cancel()
	c := h.loop.KubeRay.Manager.GetClient()
	var l rayv1.RayClusterList
	if err := c.List(ctx, &l, client.InNamespace(h.ns), client.UnsafeDisableDeepCopy); err != nil {
		return "RayClusters: " + err.Error()
	}
	behind, noHead := 0, 0
	for _, rc := range l.Items {
		if rc.Status.ObservedGeneration < rc.Generation {
			behind++
		}
		if (rc.Spec.Suspend == nil || !*rc.Spec.Suspend) && !meta.IsStatusConditionTrue(rc.Status.Conditions, string(rayv1.HeadPodReady)) {
			noHead++
		}
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(h.ns), client.UnsafeDisableDeepCopy); err != nil {
		return "pods: " + err.Error()
	}
	ready := 0
	for _, p := range pods.Items {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}
	return fmt.Sprintf("%d RayClusters, KubeRay behind on %d, %d unsuspended without a ready head; %d pods, %d ready",
		len(l.Items), behind, noHead, len(pods.Items), ready)
}

// noteErr keeps the first few distinct errors of each operation for the
// report.
func (h *harness) noteErr(op string, err error) {
	h.errMu.Lock()
	defer h.errMu.Unlock()
	key := op + ": " + anonymise(err.Error())
	h.errSeen[key]++
	if h.errSeen[key] == 1 && len(h.errSeen) <= 20 {
		h.t.Logf("%s failed: %v", op, err)
	}
}

// anonymise leaves out of an error's text what names one object or one
// connection (loadtest.Anonymiser).
var anonymise = loadtest.NewAnonymiser("scale").Anonymise

// heapOfProcess records the process's heap.
func (h *harness) heapOfProcess(what string) {
	h.r.heap = append(h.r.heap, heapFigure{what: what, bytes: int64(heapNow()), detail: "—", per: "—"})
}

// heapOfNewReplica starts one more replica (a kube.Backend and a client
// over it, its caches synced; without reconcile workers, so that it takes
// no share of the work from the others and writes nothing), once the store
// has been quiet for a while,
// and records what it added to the heap (the smaller of two readings, the
// second once the store has been quiet a while longer: the heap is the
// whole process's); less what a replica adds over an empty namespace
// (h.replicaBase), divided by per, it is what a replica of a service
// holds per stored cluster. What closing it freed is shown beside, as a
// check: it is the less sure figure, since a closed replica's goroutines
// may still hold its caches for a moment (a close that took over 5 s is
// said). per 0 makes it a sample of the base, per -1 only a row of the
// report.
func (h *harness) heapOfNewReplica(what string, per int, unit string) {
	if h.ctx.Err() != nil {
		return
	}
	if !h.tr.quiet(h.ctx, 2*time.Second, 30*time.Second) {
		h.r.notes = append(h.r.notes, "the store did not stay quiet for 2 s before: "+what)
	}
	before := heapNow()
	profile := os.Getenv(envHeapProfile)
	if per > 0 && profile != "" {
		h.writeHeapProfile(fmt.Sprintf("%s.%d.before.pprof", profile, len(h.r.heap)))
	}
	be := h.newBackend(nil) // not held by a cleanup, so that closing it frees it
	c, err := dlc.New(dlc.WithBackend(be), dlc.WithWorkers(0))
	if err != nil {
		be.Close()
		h.t.Fatalf("dlc.New: %v", err)
	}
	first := heapNow()
	if per > 0 && profile != "" {
		h.writeHeapProfile(fmt.Sprintf("%s.%d.after.pprof", profile, len(h.r.heap)))
	}
	// The heap is the process's: KubeRay's and the stand-ins' caches, in
	// this process too, keep whole objects, and one of them listing again
	// holds a second copy for a moment (a 10,000-cluster run once read
	// 1,323.7 MiB here where the same code reads 203 MiB). So it is read
	// again once the store has been quiet a while longer, the replica
	// still open, and the smaller reading counts; readings that disagree
	// by more than a quarter are shown, and with DLC_SCALE_HEAP_PROFILE
	// the second one's heap and goroutines are written too.
	if !h.tr.quiet(h.ctx, 5*time.Second, 30*time.Second) {
		h.r.notes = append(h.r.notes, "the store did not stay quiet for 5 s after: "+what)
	}
	second := heapNow()
	after := min(first, second)
	lo, hi := int64(min(first, second))-int64(before), int64(max(first, second))-int64(before)
	disagree := hi > lo*5/4+1<<20
	if disagree && profile != "" {
		h.writeHeapProfile(fmt.Sprintf("%s.%d.again.pprof", profile, len(h.r.heap)))
		h.writeGoroutines(fmt.Sprintf("%s.%d.again.goroutines", profile, len(h.r.heap)))
	}
	closing := time.Now()
	_ = c.Close()
	be.Close()
	closeTook := time.Since(closing)
	closed := heapNow()
	added, freed := int64(after)-int64(before), int64(after)-int64(closed)
	d := added
	f := heapFigure{what: what, bytes: d, per: "—",
		detail: fmt.Sprintf("added %s, freed %s at its close", mib(added), mib(freed))}
	if disagree {
		f.detail += fmt.Sprintf(" (read %s, then %s once quiet)", mib(int64(first)-int64(before)), mib(int64(second)-int64(before)))
	}
	if closeTook > 5*time.Second {
		f.detail += fmt.Sprintf(" (its close took %v)", closeTook.Round(100*time.Millisecond))
	}
	switch {
	case per == 0:
		h.replicaBase, h.baseSamples = (h.replicaBase*int64(h.baseSamples)+d)/int64(h.baseSamples+1), h.baseSamples+1
	case per > 0:
		f.per = fmt.Sprintf("%.1f KiB per %s", float64(d-h.replicaBase)/float64(per)/1024, unit)
	}
	h.r.heap = append(h.r.heap, f)
	h.t.Logf("heap: %s: %s (%s; %s)", what, mib(d), f.detail, f.per)
}

// writeHeapProfile writes the heap profile as of the last collection
// (heapNow's) to file: two of them, before and after a replica starts,
// say where its bytes go (go tool pprof -sample_index=inuse_space
// -diff_base BEFORE AFTER).
func (h *harness) writeHeapProfile(file string) { h.writeProfile("heap", file, 0) }

// writeGoroutines writes every goroutine's stack to file.
func (h *harness) writeGoroutines(file string) { h.writeProfile("goroutine", file, 1) }

// writeProfile writes runtime/pprof's profile name to file.
func (h *harness) writeProfile(name, file string, debug int) {
	f, err := os.Create(file)
	if err != nil {
		h.t.Errorf("%s profile: %v", name, err)
		return
	}
	defer f.Close()
	if err := pprof.Lookup(name).WriteTo(f, debug); err != nil {
		h.t.Errorf("%s profile: %v", name, err)
	}
}

func heapNow() uint64 {
	runtime.GC()
	runtime.GC() // what sync.Pools kept goes at the second
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// finish prints the report (also when the test failed or ran out of time)
// and fails the test on what must not happen at any scale: a call that
// failed, a phase that did not finish, a cluster abnormal at the end, a run
// that did not succeed.
func (h *harness) finish() {
	r := h.r
	_, r.abnormal = h.tr.abnormalEver()
	n, why := h.tr.notSucceeded()
	r.failures = why
	r.sizes = h.tr.sizes()
	h.errMu.Lock()
	kinds := slices.Collect(maps.Keys(h.errSeen))
	slices.SortFunc(kinds, func(a, b string) int { return cmp.Or(h.errSeen[b]-h.errSeen[a], strings.Compare(a, b)) })
	for i, k := range kinds {
		if i == 10 {
			r.notes = append(r.notes, fmt.Sprintf("… and %d more kinds of failed calls", len(kinds)-i))
			break
		}
		r.notes = append(r.notes, fmt.Sprintf("%d× %s", h.errSeen[k], k))
	}
	h.errMu.Unlock()
	r.notes = append(r.notes, fmt.Sprintf("head stand-ins started: %d; the watch saw %d changes", h.loopHeads(), h.tr.changes))
	out := r.String()
	fmt.Println(out)
	if path := os.Getenv(envReport); path != "" {
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			h.t.Errorf("writing the report to %s: %v", path, err)
		}
	}
	for _, ph := range r.phases {
		switch {
		case ph.skipped != "":
			h.t.Errorf("%s: skipped: %s", ph.name, ph.skipped)
		case ph.errs > 0:
			h.t.Errorf("%s: %d calls failed", ph.name, ph.errs)
		case !ph.reached:
			h.t.Errorf("%s: %s not reached: %s", ph.name, ph.until, ph.state)
		}
	}
	if a := r.endAbnormal(); a != "0" && a != "—" {
		h.t.Errorf("%s clusters abnormal at the end", a)
	}
	if n > 0 {
		h.t.Errorf("%d runs did not succeed: %s", n, strings.Join(why, "; "))
	}
}

func (h *harness) loopHeads() int {
	if h.loop == nil {
		return 0
	}
	return h.loop.Heads()
}

// parallel calls f(ctx, i) for every i in [0, n) on workers goroutines,
// until ctx ends, and returns how long until every call returned.
func parallel(ctx context.Context, n, workers int, f func(ctx context.Context, i int)) time.Duration {
	began := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				f(ctx, i)
			}
		})
	}
	wg.Wait()
	return time.Since(began)
}

// compact returns ids without the empty ones.
func compact(ids []string) []string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if id != "" {
			out = append(out, id)
		}
	}
	return out
}

// pkg is the job package the runs run: main.sh prints a line.
var pkg = loadtest.NewPackage("scale", "echo scale run ok\n")
