package platform

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/internal/check"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
	"github.com/aidlc/dlc/usage"
)

// WithLogger: see dlc.WithLogger.
func WithLogger(l logr.Logger) Option { return func(o *options) { o.log = l } }

// WithMetrics: see dlc.WithMetrics.
func WithMetrics(r prometheus.Registerer) Option { return func(o *options) { o.registerer = r } }

// metrics are the client's Prometheus metrics; nil when none were asked
// for, and every method is then a no-op.
type metrics struct {
	admissionWait  *prometheus.HistogramVec
	clusterStart   *prometheus.HistogramVec
	runDuration    *prometheus.HistogramVec
	runsFinished   *prometheus.CounterVec
	reconcileErrs  *prometheus.CounterVec
	retries        *prometheus.CounterVec
	backendLatency *prometheus.HistogramVec
	backendErrs    *prometheus.CounterVec
	quotaReports   *prometheus.CounterVec
	runsDeleted    *prometheus.CounterVec
	stalled        *prometheus.CounterVec
	ticks          *prometheus.CounterVec
	runRetries     prometheus.Counter
	deadlines      prometheus.Counter
	idle           prometheus.Counter
	unreachable    *prometheus.CounterVec
	usageCPU       *prometheus.CounterVec
	usageMemory    *prometheus.CounterVec
	usageGPU       *prometheus.CounterVec
	usageNodes     *prometheus.CounterVec
}

func newMetrics(r prometheus.Registerer, c *Engine) (*metrics, error) {
	if r == nil {
		return nil, nil
	}
	m := &metrics{
		admissionWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "dlc_admission_wait_seconds",
			Help:    "Time an on-demand run waited in its resource group's queue before it was admitted.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 10)}, []string{"resource_group"}),
		clusterStart: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "dlc_cluster_start_seconds",
			Help:    "Time from a cluster's start to Ray running it.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 10)}, []string{"on_demand"}),
		runDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "dlc_run_duration_seconds",
			Help:    "Time runs ran, from their driver's start to their end, by terminal state.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 12)}, []string{"state"}),
		runsFinished: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dlc_runs_finished_total",
			Help: "Runs that ended, by terminal state."}, []string{"state"}),
		reconcileErrs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dlc_reconcile_errors_total",
			Help: "Reconcile steps that failed, by object kind."}, []string{"kind"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dlc_reconcile_retries_total",
			Help: "Reconcile steps queued again after a failure or a conflict, by object kind."}, []string{"kind"}),
		backendLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "dlc_backend_call_duration_seconds",
			Help:    "Latency of the backend's store and Ray calls, by operation.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10)}, []string{"operation"}),
		backendErrs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dlc_backend_call_errors_total",
			Help: "Backend calls that failed, by operation."}, []string{"operation"}),
		quotaReports: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dlc_quota_discrepancies_total",
			Help: "Quota discrepancies recorded on a cluster, by resource group and what was done: quota-restored (healed) or quota-restore-failed (cannot be)."},
			[]string{"resource_group", "action"}),
		runsDeleted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dlc_runs_deleted_total",
			Help: "Finished runs deleted by the retention, by why: age (finished longer ago than it) or count (beyond a job config's)."},
			[]string{"reason"}),
		stalled: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dlc_replica_stalled_total",
			Help: "Members of the work sharing that left keys of their share without a step at two periodic resyncs in a row, and that this client left out of the live members for it, by member id."},
			[]string{"replica"}),
		ticks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dlc_schedule_ticks_total",
			Help: "Ticks of job configs' schedules, by outcome: started (a run made), skipped (by the concurrency policy or the bound on unfinished runs) or missed (past the starting deadline, or overtaken by a later tick). Counted by the client that recorded them."},
			[]string{"outcome"}),
		runRetries: prometheus.NewCounter(prometheus.CounterOpts{Name: "dlc_run_retries_total",
			Help: "Failed runs retried: a next attempt made (L3)."}),
		deadlines: prometheus.NewCounter(prometheus.CounterOpts{Name: "dlc_run_deadlines_total",
			Help: "Runs failed at their deadline (L2)."}),
		idle: prometheus.NewCounter(prometheus.CounterOpts{Name: "dlc_idle_hibernations_total",
			Help: "Standing clusters hibernated for being idle past their idle timeout (L4)."}),
		unreachable: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dlc_ray_unreachable_total",
			Help: "Live runs whose job Ray could not be asked about, by outcome: noted (the run says since when, and waits) or failed (unreachable past WithRayUnreachableTimeout)."},
			[]string{"outcome"}),
	}
	m.usageCPU = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dlc_usage_cpu_core_seconds_total",
		Help: "CPU core-seconds that clusters' running pods requested, by resource group; counted by the client that recorded them (sum over replicas)."},
		[]string{"resource_group"})
	m.usageMemory = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dlc_usage_memory_gib_seconds_total",
		Help: "Memory GiB-seconds that clusters' running pods requested, by resource group; counted by the client that recorded them (sum over replicas)."},
		[]string{"resource_group"})
	m.usageGPU = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dlc_usage_gpu_seconds_total",
		Help: "GPU-seconds that clusters' running pods requested, by resource group and GPU type (a type not in the catalog is \"other\"); counted by the client that recorded them (sum over replicas)."},
		[]string{"resource_group", "gpu_type"})
	m.usageNodes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dlc_usage_node_seconds_total",
		Help: "Node-seconds of clusters' running pods, by resource group and node spec (a spec not in the catalog is \"other\"); counted by the client that recorded them (sum over replicas)."},
		[]string{"resource_group", "node_spec"})
	for _, col := range []prometheus.Collector{m.usageCPU, m.usageMemory, m.usageGPU, m.usageNodes, m.admissionWait, m.clusterStart, m.runDuration, m.runsFinished,
		m.reconcileErrs, m.retries, m.backendLatency, m.backendErrs, m.quotaReports, m.runsDeleted, m.stalled,
		m.ticks, m.runRetries, m.deadlines, m.idle, m.unreachable, stateCollector{c}} {
		if err := r.Register(col); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) admitted(rg string, wait time.Duration) {
	if m != nil {
		m.admissionWait.WithLabelValues(rgLabel(rg)).Observe(wait.Seconds())
	}
}

func (m *metrics) clusterStarted(temporary bool, took time.Duration) {
	if m != nil {
		od := "false"
		if temporary {
			od = "true"
		}
		m.clusterStart.WithLabelValues(od).Observe(took.Seconds())
	}
}

func (m *metrics) runEnded(r *job.Run) {
	if m == nil {
		return
	}
	m.runsFinished.WithLabelValues(string(r.State)).Inc()
	if !r.StartedAt.IsZero() {
		m.runDuration.WithLabelValues(string(r.State)).Observe(r.FinishedAt.Sub(r.StartedAt).Seconds())
	}
}

// ticksRecorded counts the ticks a schedule's step recorded.
func (m *metrics) ticksRecorded(started, skipped, missed int) {
	if m == nil {
		return
	}
	for outcome, n := range map[string]int{"started": started, "skipped": skipped, "missed": missed} {
		if n > 0 {
			m.ticks.WithLabelValues(outcome).Add(float64(n))
		}
	}
}

// runRetried counts a failed run's next attempt made.
func (m *metrics) runRetried() {
	if m != nil {
		m.runRetries.Inc()
	}
}

// deadlineFailed counts a run failed at its deadline.
func (m *metrics) deadlineFailed() {
	if m != nil {
		m.deadlines.Inc()
	}
}

// idleHibernated counts a standing cluster hibernated for being idle.
func (m *metrics) idleHibernated() {
	if m != nil {
		m.idle.Inc()
	}
}

// rayUnreachable counts a live run found with Ray unreachable: noted, or
// failed for it.
func (m *metrics) rayUnreachable(outcome string) {
	if m != nil {
		m.unreachable.WithLabelValues(outcome).Inc()
	}
}

// quotaReported counts a quota discrepancy recorded on a cluster.
func (m *metrics) quotaReported(rg, action string) {
	if m == nil {
		return
	}
	m.quotaReports.WithLabelValues(rg, action).Inc()
}

// runDeleted counts a finished run the retention deleted, and why.
func (m *metrics) runDeleted(why string) {
	if m != nil {
		m.runsDeleted.WithLabelValues(why).Inc()
	}
}

// replicaStalled counts a member left out of the live ones for leaving
// its share undone. A member id that is not a DNS label (a document
// forged in the store) is counted as "invalid", so that no input makes a
// label value long or of another alphabet.
func (m *metrics) replicaStalled(id string) {
	if m != nil {
		m.stalled.WithLabelValues(rgLabel(id)).Inc()
	}
}

// Failed counts a failed reconcile step of kind (runner.Metrics).
func (m *metrics) Failed(kind string) {
	if m != nil {
		m.reconcileErrs.WithLabelValues(kind).Inc()
	}
}

// Retried counts a reconcile step of kind queued again (runner.Metrics).
func (m *metrics) Retried(kind string) {
	if m != nil {
		m.retries.WithLabelValues(kind).Inc()
	}
}

func (m *metrics) call(op string, start time.Time, err error) {
	if m == nil {
		return
	}
	m.backendLatency.WithLabelValues(op).Observe(time.Since(start).Seconds())
	if err != nil {
		m.backendErrs.WithLabelValues(op).Inc()
	}
}

// stateCollector reports, at each scrape, what the client's cache holds
// of the stored state: pending runs by resource group and priority, and
// each resource group's capacity and reservations. Every replica reports
// the same, read from the same store.
type stateCollector struct{ c *Engine }

var (
	pendingDesc = prometheus.NewDesc("dlc_pending_runs",
		"On-demand runs waiting in a resource group's queue, by priority.", []string{"resource_group", "priority"}, nil)
	growthsDesc = prometheus.NewDesc("dlc_pending_growths",
		"Clusters' growths waiting in a resource group's queue, by the cluster's priority.", []string{"resource_group", "priority"}, nil)
	reservedDesc = prometheus.NewDesc("dlc_quota_reserved",
		"What a resource group has reserved, by resource (cpu in cores, memory in bytes, gpu).", []string{"resource_group", "resource"}, nil)
	oldestDesc = prometheus.NewDesc("dlc_oldest_pending_seconds",
		"How long the longest-waiting on-demand run of a resource group has waited for quota.", []string{"resource_group"}, nil)
	capacityDesc = prometheus.NewDesc("dlc_quota_capacity",
		"A resource group's capacity, by resource (cpu in cores, memory in bytes, gpu).", []string{"resource_group", "resource"}, nil)
)

// Describe implements prometheus.Collector.
func (s stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- pendingDesc
	ch <- growthsDesc
	ch <- oldestDesc
	ch <- reservedDesc
	ch <- capacityDesc
}

// Collect implements prometheus.Collector.
func (s stateCollector) Collect(ch chan<- prometheus.Metric) {
	for key, n := range s.c.queues.counts() {
		if !check.IsID(key.rg) {
			continue // a run that names no valid group cannot be queued: not a label value
		}
		desc := pendingDesc
		if key.growth {
			desc = growthsDesc
		}
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, float64(n), key.rg, itoa(key.priority))
	}
	now := s.c.clock.Now()
	for _, d := range s.c.cache.SelectDocs(kindResourceGroup, nil) {
		a, _, err := fromCache[quota.Account](s.c.acc, kindResourceGroup, d.ID)
		if err != nil || !check.IsID(a.ID) {
			continue // registered groups have valid ids: this one was written by someone else
		}
		var oldest time.Time
		for _, it := range s.c.queues.order(a.ID, s.c.queueItem) {
			if isGrowthEntry(it.RunID) {
				continue // a cluster's growth, not a run
			}
			if _, held := a.Hold(odClusterID(it.RunID)); !held && (oldest.IsZero() || it.Enqueued.Before(oldest)) {
				oldest = it.Enqueued
			}
		}
		if !oldest.IsZero() {
			ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, now.Sub(oldest).Seconds(), a.ID)
		}
		for _, x := range []struct {
			desc *prometheus.Desc
			r    quota.Resources
		}{{reservedDesc, a.Reserved()}, {capacityDesc, a.Capacity}} {
			ch <- prometheus.MustNewConstMetric(x.desc, prometheus.GaugeValue, float64(x.r.MilliCPU)/1000, a.ID, "cpu")
			ch <- prometheus.MustNewConstMetric(x.desc, prometheus.GaugeValue, float64(x.r.Memory), a.ID, "memory")
			ch <- prometheus.MustNewConstMetric(x.desc, prometheus.GaugeValue, float64(x.r.GPU), a.ID, "gpu")
		}
	}
}

// rgLabel returns a resource group id as a label value: the id, which
// Register checks is a DNS label (at most 63 characters of [a-z0-9-]), or
// "invalid" for one that is not (a foreign write to the store), so that no
// input makes a label value long or of another alphabet.
func rgLabel(id string) string {
	if check.IsID(id) {
		return id
	}
	return "invalid"
}

func itoa(n int) string {
	if n >= 0 && n < 10 {
		return string(rune('0' + n))
	}
	return "other"
}

// logClusterChange writes one line for a cluster that moved from one
// state to another.
func (c *Engine) logClusterChange(from cluster.State, cl *cluster.Cluster) {
	if from == cl.State {
		return
	}
	kv := []any{"cluster", cl.ID, "state", string(cl.State), "from", string(from)}
	if cl.Reason != "" {
		kv = append(kv, "reason", cl.Reason)
	}
	if cl.QuotaGroup != "" {
		kv = append(kv, "resourceGroup", cl.QuotaGroup)
	}
	c.o.log.Info("cluster state changed", kv...)
	if from == cluster.Starting && cl.State == cluster.Running {
		c.metrics.clusterStarted(cl.Temporary, c.clock.Now().Sub(c.startedAt(cl)))
	}
}

// startedAt is when the cluster's current start was asked for: the time
// of the last start entry in its log.
func (c *Engine) startedAt(cl *cluster.Cluster) time.Time {
	for i := len(cl.Events) - 1; i >= 0; i-- {
		if e := cl.Events[i]; e.Action == "start" || e.Action == "create" {
			return e.Time
		}
	}
	return cl.CreatedAt
}

// logRunChange writes one line for a run that moved from one state to
// another, and counts an ended one.
func (c *Engine) logRunChange(from job.RunState, r *job.Run) {
	if from == r.State {
		return
	}
	kv := []any{"run", r.ID, "job", r.JobID, "state", string(r.State), "from", string(from)}
	if r.WaitReason != "" {
		kv = append(kv, "reason", string(r.WaitReason))
	} else if r.Message != "" && r.State.Terminal() {
		kv = append(kv, "reason", r.Message)
	}
	if od := r.Config.OnDemand; od != nil {
		kv = append(kv, "resourceGroup", od.ResourceGroup)
	}
	if r.ClusterID != "" {
		kv = append(kv, "cluster", r.ClusterID)
	}
	c.o.log.Info("run state changed", kv...)
	if r.State.Terminal() {
		c.metrics.runEnded(r)
	}
}

// instrumented times and counts every call of a backend.
type instrumented struct {
	backend.Backend
	m   *metrics
	log logr.Logger
}

func (b instrumented) done(op string, start time.Time, err error) {
	b.m.call(op, start, err)
	if err != nil {
		b.log.V(1).Info("backend call failed", "operation", op, "error", err)
	}
}

func (b instrumented) Get(ctx context.Context, kind, id string) (backend.Doc, error) {
	t := time.Now()
	d, err := b.Backend.Get(ctx, kind, id)
	b.done("store_get", t, ignoreNotFound(err))
	return d, err
}

func (b instrumented) List(ctx context.Context, kind string, sel map[string]string) ([]backend.Doc, error) {
	t := time.Now()
	d, err := b.Backend.List(ctx, kind, sel)
	b.done("store_list", t, err)
	return d, err
}

func (b instrumented) Create(ctx context.Context, d backend.Doc) (string, error) {
	t := time.Now()
	v, err := b.Backend.Create(ctx, d)
	b.done("store_create", t, err)
	return v, err
}

func (b instrumented) Update(ctx context.Context, d backend.Doc) (string, error) {
	t := time.Now()
	v, err := b.Backend.Update(ctx, d)
	b.done("store_update", t, err)
	return v, err
}

func (b instrumented) Delete(ctx context.Context, kind, id, version string) error {
	t := time.Now()
	err := b.Backend.Delete(ctx, kind, id, version)
	b.done("store_delete", t, ignoreNotFound(err))
	return err
}

func (b instrumented) ApplyCluster(ctx context.Context, cl *cluster.Cluster) error {
	t := time.Now()
	err := b.Backend.ApplyCluster(ctx, cl)
	b.done("ray_apply_cluster", t, err)
	return err
}

func (b instrumented) DeleteCluster(ctx context.Context, id string) error {
	t := time.Now()
	err := b.Backend.DeleteCluster(ctx, id)
	b.done("ray_delete_cluster", t, err)
	return err
}

func (b instrumented) ClusterStatus(ctx context.Context, id string) (cluster.Observation, error) {
	t := time.Now()
	o, err := b.Backend.ClusterStatus(ctx, id)
	b.done("ray_cluster_status", t, ignoreNotFound(err))
	return o, err
}

func (b instrumented) SubmitRun(ctx context.Context, r *job.Run, cl *cluster.Cluster) error {
	t := time.Now()
	err := b.Backend.SubmitRun(ctx, r, cl)
	b.done("ray_submit_run", t, err)
	return err
}

func (b instrumented) StopRun(ctx context.Context, id string) error {
	t := time.Now()
	err := b.Backend.StopRun(ctx, id)
	b.done("ray_stop_run", t, err)
	return err
}

func (b instrumented) RunStatus(ctx context.Context, id string) (job.Observation, error) {
	t := time.Now()
	o, err := b.Backend.RunStatus(ctx, id)
	b.done("ray_run_status", t, ignoreNotFound(err))
	return o, err
}

// ignoreNotFound: a missing object is an answer, not a failed call.
func ignoreNotFound(err error) error {
	if errs.IsNotFound(err) {
		return nil
	}
	return err
}

// metered counts d of nodes running for a, as the meter recorded it:
// labelled by resource group, and by node spec and GPU type as far as
// the catalog knows them (a pod's own labels could name anything).
func (m *metrics) metered(a usage.Attribution, nodes []usage.Node, d time.Duration, cat quota.Catalog) {
	if m == nil || d <= 0 {
		return
	}
	rg := rgLabel(a.ResourceGroup)
	for _, n := range nodes {
		secs := d.Seconds() * float64(n.Count)
		spec, gpu := "other", "other"
		if s, ok := cat.Lookup(n.NodeSpec); ok {
			spec = s.Name
			if s.GPUType == n.GPUType {
				gpu = s.GPUType
			}
		}
		m.usageNodes.WithLabelValues(rg, spec).Add(secs)
		m.usageCPU.WithLabelValues(rg).Add(secs * float64(n.Each.MilliCPU) / 1000)
		m.usageMemory.WithLabelValues(rg).Add(secs * float64(n.Each.Memory) / float64(quota.GiB))
		if n.Each.GPU > 0 {
			m.usageGPU.WithLabelValues(rg, gpu).Add(secs * float64(n.Each.GPU))
		}
	}
}
