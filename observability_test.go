package dlc_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/dlctest"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
)

// lines is a logr sink that keeps every line it is given.
type lines struct {
	mu  sync.Mutex
	all []string
}

func (l *lines) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		l.all = append(l.all, args)
		l.mu.Unlock()
	}, funcr.Options{Verbosity: 1})
}

func (l *lines) with(msg string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, s := range l.all {
		if strings.Contains(s, `"msg"="`+msg+`"`) {
			out = append(out, s)
		}
	}
	return out
}

// A scripted story — runs queued, admitted, finished, a failing Ray call
// retried — read back through the metrics and the log lines.
func TestMetricsAndLogs(t *testing.T) {
	reg := prometheus.NewRegistry()
	var log lines
	var failOnce sync.Once
	const secret = "AKIDsecretsecretsecret"
	m := dlctest.NewMemory(dlctest.MemoryOptions{
		Ray: memory.RayHooks{
			Call: func(_ context.Context, call, _ string) error {
				var err error
				if call == memory.CallApplyCluster {
					failOnce.Do(func() { err = errors.New("injected: the API server is throttling") })
				}
				return err
			},
			RunOutcome: func(r *job.Run) memory.Outcome {
				if r.Config.Runtime.EnvVars["FAIL"] == "1" {
					return memory.Outcome{Fail: true, Message: "exit code 1"}
				}
				return memory.Outcome{}
			},
		},
		Options: []dlc.Option{dlc.WithMetrics(reg), dlc.WithLogger(log.logger())},
	})
	defer m.Close()
	c := m.Client
	ctx := dlc.WithUser(context.Background(), "alice")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err := c.ResourceGroups().Register(ctx, quota.Group{ID: "rg-m", Package: "pkg-1", Capacity: quota.Resources{MilliCPU: 8000, Memory: 32 * quota.GiB}})
	must(err)
	save := func(name string, prio int, fail bool) *job.Record {
		b := dlc.NewJob(name).OnDemand("pkg-1", "rg-m").Priority(prio).Image("ray-2.46.0-py310-cpu").
			Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1).
			COSPackage("cos://jobs-1250000000/train.zip").Entrypoint("python train.py --key " + secret)
		if fail {
			b.Env("FAIL", "1")
		}
		cfg, err := b.Build()
		must(err)
		rec, err := c.Jobs().Create(ctx, cfg, dlc.SaveOptions{})
		must(err)
		return rec
	}
	ok, bad := save("ok", 7, false), save("bad", 3, true)
	var ids []string
	for _, rec := range []*job.Record{ok, ok, bad} {
		r, err := c.Runs().Create(ctx, rec.ID, dlc.RunOptions{})
		must(err)
		ids = append(ids, r.ID)
		m.Reconcile()
	}
	// One admitted (8 cores fit one run), two waiting: priorities 7 and 3.
	expect := `
# HELP dlc_pending_runs On-demand runs waiting in a resource group's queue, by priority.
# TYPE dlc_pending_runs gauge
dlc_pending_runs{priority="3",resource_group="rg-m"} 1
dlc_pending_runs{priority="7",resource_group="rg-m"} 1
`
	if err := testutil.CollectAndCompare(reg, strings.NewReader(expect), "dlc_pending_runs"); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(reg2gauge(t, reg, "dlc_quota_reserved", "rg-m", "cpu")); got != 8 {
		t.Fatalf("reserved cpu %v, want 8", got)
	}
	m.Clock.Advance(90 * time.Second) // the first run goes on; the other two wait on
	expect = `
# HELP dlc_oldest_pending_seconds How long the longest-waiting on-demand run of a resource group has waited for quota.
# TYPE dlc_oldest_pending_seconds gauge
dlc_oldest_pending_seconds{resource_group="rg-m"} 90
`
	if err := testutil.CollectAndCompare(reg, strings.NewReader(expect), "dlc_oldest_pending_seconds"); err != nil {
		t.Fatal(err)
	}
	m.Settle(10*time.Millisecond, 10000)
	for _, id := range ids {
		if r, _ := c.Runs().Get(ctx, id); !r.State.Terminal() {
			t.Fatalf("run %s is %s", id, r.State)
		}
	}
	expect = `
# HELP dlc_runs_finished_total Runs that ended, by terminal state.
# TYPE dlc_runs_finished_total counter
dlc_runs_finished_total{state="failed"} 1
dlc_runs_finished_total{state="succeeded"} 2
`
	if err := testutil.CollectAndCompare(reg, strings.NewReader(expect), "dlc_runs_finished_total"); err != nil {
		t.Fatal(err)
	}
	if err := testutil.CollectAndCompare(reg, strings.NewReader(""), "dlc_pending_runs"); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	mfs, err := reg.Gather()
	must(err)
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			labels := ""
			for _, l := range mt.GetLabel() {
				labels += l.GetName() + "=" + l.GetValue() + ","
			}
			switch {
			case mt.GetHistogram() != nil:
				counts[mf.GetName()+"{"+labels+"}"] = int(mt.GetHistogram().GetSampleCount())
			case mt.GetCounter() != nil:
				counts[mf.GetName()+"{"+labels+"}"] = int(mt.GetCounter().GetValue())
			}
		}
	}
	for k, want := range map[string]int{
		"dlc_admission_wait_seconds{resource_group=rg-m,}":            3,
		"dlc_cluster_start_seconds{on_demand=true,}":                  3,
		"dlc_run_duration_seconds{state=succeeded,}":                  2,
		"dlc_reconcile_errors_total{kind=cluster,}":                   1,
		"dlc_backend_call_errors_total{operation=ray_apply_cluster,}": 1,
	} {
		if got := counts[k]; got != want {
			t.Errorf("%s = %d, want %d", k, got, want)
		}
	}
	// Each of the 3 on-demand clusters is applied once, and the failed call once more.
	if got := counts["dlc_backend_call_duration_seconds{operation=ray_apply_cluster,}"]; got != 4 {
		t.Errorf("ray_apply_cluster timed %d times, want 4", got)
	}
	if counts["dlc_reconcile_retries_total{kind=cluster,}"] < 1 {
		t.Errorf("no retry counted: %v", counts)
	}
	// The log: one line per state change with its keys, the failed step
	// as an error, no secret and no URL.
	runLines := log.with("run state changed")
	if len(runLines) < 3*4 {
		t.Fatalf("%d run lines", len(runLines))
	}
	for _, l := range runLines {
		for _, k := range []string{`"run"=`, `"job"=`, `"state"=`, `"resourceGroup"="rg-m"`} {
			if !strings.Contains(l, k) {
				t.Fatalf("run line without %s: %s", k, l)
			}
		}
	}
	if failed := slices.IndexFunc(runLines, func(l string) bool {
		return strings.Contains(l, `"state"="failed"`) && strings.Contains(l, `"reason"="exit code 1"`)
	}); failed < 0 {
		t.Fatal("no line says the run failed and why")
	}
	for _, l := range log.with("cluster state changed") {
		for _, k := range []string{`"cluster"=`, `"state"=`, `"from"=`} {
			if !strings.Contains(l, k) {
				t.Fatalf("cluster line without %s: %s", k, l)
			}
		}
	}
	stepErrs := log.with("reconcile step failed")
	if len(stepErrs) != 1 || !strings.Contains(stepErrs[0], `"error"="ray ApplyCluster`) || !strings.Contains(stepErrs[0], `"cluster"=`) {
		t.Fatalf("failed-step lines: %q", stepErrs)
	}
	if len(log.with("run admitted")) != 3 {
		t.Fatalf("admission lines: %d", len(log.with("run admitted")))
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	for _, l := range log.all {
		if strings.Contains(l, secret) || strings.Contains(l, "cos://") || strings.Contains(l, "http") {
			t.Fatalf("a log line leaks: %s", l)
		}
	}
}

// reg2gauge finds the gauge of name with the resource group and resource.
func reg2gauge(t *testing.T, reg *prometheus.Registry, name, rg, res string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, mt := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range mt.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["resource_group"] == rg && l["resource"] == res {
				g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "x"})
				g.Set(mt.GetGauge().GetValue())
				return g
			}
		}
	}
	t.Fatalf("no %s{%s,%s}", name, rg, res)
	return nil
}

// Five runs of mixed priorities in one resource group report positions
// 1–5 in admission order, the same from two clients on one store, and
// move up as runs are admitted; a run on a cluster says which cluster it
// waits for and in what state.
func TestPendingPositions(t *testing.T) {
	f := newFixture(t, dlctest.MemoryOptions{})
	other := f.m.NewClient()
	blocker := f.runningCluster("blocker") // 8 of the group's 32 cores
	// Take the rest with a cluster, so nothing on demand fits.
	spec, err := dlc.NewCluster("rest").Groups(f.grp).Resources("pkg-1", "rg-1").Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.16c64g").WorkerGroup("cpu", "cu.8c32g", 1, 1).Build()
	f.must(err)
	rest, err := f.c.Clusters().Create(f.ctx, spec)
	f.must(err)
	f.settle()
	_, err = f.c.Clusters().Start(f.ctx, rest.ID)
	f.must(err)
	f.settle()
	var want []string // admission order
	byPrio := map[int][]string{}
	for i, p := range []int{3, 9, 5, 9, 1} {
		rec := f.job(dlc.NewJob(fmt.Sprintf("od-%d", i)).OnDemand("pkg-1", "rg-1").Priority(p).Image("ray-2.46.0-py310-cpu").
			Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1))
		r := f.start(rec.ID)
		byPrio[p] = append(byPrio[p], r.ID)
	}
	for _, p := range []int{9, 5, 3, 1} {
		want = append(want, byPrio[p]...)
	}
	check := func(c *dlc.Client, want []string) {
		t.Helper()
		list, err := c.ResourceGroups().Pending(f.ctx, "rg-1")
		f.must(err)
		var got []string
		for i, p := range list {
			got = append(got, p.RunID)
			if p.Position != i+1 || p.Ahead != i || p.Reason != job.InsufficientQuota ||
				!strings.HasPrefix(p.Lacks, "needs cpu=8 memory=16Gi gpu=0; allocatable cpu=0") {
				t.Fatalf("entry %d: %+v", i, p)
			}
			one, err := c.Runs().Pending(f.ctx, p.RunID)
			f.must(err)
			if one.Position != i+1 || one.ResourceGroup != "rg-1" {
				t.Fatalf("run %s alone: position %d, want %d", p.RunID, one.Position, i+1)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("admission order %v, want %v", got, want)
		}
	}
	check(f.c, want)
	check(other, want)
	// The blocker goes: 8 cores free, the head of the queue is admitted
	// and everyone behind moves up.
	f.must(f.c.Clusters().Delete(f.ctx, blocker.ID, dlc.DeleteOptions{}))
	f.m.Settle(10*time.Millisecond, 30) // long enough to free and admit, not to finish the run
	r := f.run(want[0])
	if r.State == job.Waiting || r.State == job.Queued {
		t.Fatalf("the head of the queue is still %s", r.State)
	}
	check(f.c, want[1:])
	check(other, want[1:])
	if _, err := f.c.Runs().Pending(f.ctx, want[0]); !errors.Is(err, dlc.ErrState) {
		t.Fatalf("pending of a run that is %s: %v", r.State, err)
	}
	// A run on a cluster that is not running says which, and its state.
	cl, err := f.c.Clusters().Create(f.ctx, f.spec("idle", 1, 1))
	f.must(err)
	rec := f.job(dlc.NewJob("on-idle").OnCluster(cl.ID))
	run := f.start(rec.ID)
	p, err := other.Runs().Pending(f.ctx, run.ID)
	f.must(err)
	if p.Reason != job.ClusterNotRunning || len(p.Clusters) != 1 || p.Clusters[0].ID != cl.ID || p.Clusters[0].State != string(cluster.Creating) {
		t.Fatalf("cluster-mode pending: %+v", p)
	}
}

// BenchmarkRunLifecycleObserved: one group-mode run from Create to
// succeeded, with logging (an enabled sink that drops lines) and metrics
// on, against the same with both off, in one run: compare the two.
func BenchmarkRunLifecycleObserved(b *testing.B) {
	for _, tc := range []struct {
		name          string
		metrics, logs bool
		sink          logr.LogSink // nil: funcr, formatting every line
	}{{"off", false, false, nil}, {"metrics", true, false, nil}, {"logs", false, true, nil}, {"both", true, true, nil},
		{"both, a sink that formats nothing", true, true, nopSink{}}} {
		b.Run(tc.name, func(b *testing.B) {
			var opts []dlc.Option
			if tc.metrics {
				opts = append(opts, dlc.WithMetrics(prometheus.NewRegistry()))
			}
			switch {
			case tc.logs && tc.sink != nil:
				opts = append(opts, dlc.WithLogger(logr.New(tc.sink)))
			case tc.logs:
				opts = append(opts, dlc.WithLogger(funcr.New(func(string, string) {}, funcr.Options{Verbosity: 1})))
			}
			m := dlctest.NewMemory(dlctest.MemoryOptions{Options: opts})
			defer m.Close()
			lifecycleBench(b, m)
		})
	}
}

// nopSink is enabled at every level and drops every line unformatted: what
// the SDK itself spends on logging, without a sink's formatting.
type nopSink struct{}

func (nopSink) Init(logr.RuntimeInfo)            {}
func (nopSink) Enabled(int) bool                 { return true }
func (nopSink) Info(int, string, ...any)         {}
func (nopSink) Error(error, string, ...any)      {}
func (s nopSink) WithValues(...any) logr.LogSink { return s }
func (s nopSink) WithName(string) logr.LogSink   { return s }

// TestReady: a readiness probe's answer. A client that is open, has its
// snapshot, its workers and a store that answers is ready; one whose
// store does not answer, or that is closed, is not (ErrUnavailable,
// saying why).
func TestReady(t *testing.T) {
	var down atomic.Bool // the store refuses every read
	be := memory.New(memory.Options{Store: memory.StoreHooks{Read: func(ctx context.Context, kind, id string) error {
		if down.Load() {
			return errors.New("connection refused")
		}
		return nil
	}}})
	open := func(t *testing.T, opts ...dlc.Option) *dlc.Client {
		c, err := dlc.New(append([]dlc.Option{dlc.WithBackend(be)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, tc := range []struct {
		name    string
		workers int
		prepare func(c *dlc.Client)
		want    string // "" : ready; else in the error
	}{
		{"open, with workers", 8, nil, ""},
		{"open, no workers (Reconcile runs the steps)", 0, nil, ""},
		{"the store does not answer", 8, func(*dlc.Client) { down.Store(true) }, "connection refused"},
		{"closed", 8, func(c *dlc.Client) { _ = c.Close() }, "closed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			down.Store(false)
			c := open(t, dlc.WithWorkers(tc.workers))
			defer c.Close()
			if tc.prepare != nil {
				tc.prepare(c)
			}
			err := c.Ready(t.Context())
			down.Store(false)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("not ready: %v", err)
				}
				return
			}
			if !errors.Is(err, dlc.ErrUnavailable) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Ready: %v, want ErrUnavailable saying %q", err, tc.want)
			}
		})
	}
}

// TestLifecycleMetrics: the counters of the lifecycle automation match
// what the store records. Ticks started are the schedule's runs, ticks
// skipped the config's missed count; a run failed at its deadline, a
// failing run's retries and an idle hibernation are each counted once.
func TestLifecycleMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	o := lasting(90*time.Second, func(r *job.Run) bool { return strings.HasPrefix(r.Config.Name, "failing") })
	o.Options = []dlc.Option{dlc.WithMetrics(reg)}
	f := newFixture(t, o)
	count := func(name string, labels ...string) int {
		t.Helper()
		mfs, err := reg.Gather()
		f.must(err)
		n := 0.0
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			for _, m := range mf.GetMetric() {
				match := true
				for i := 0; i+1 < len(labels); i += 2 {
					if !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == labels[i] && l.GetValue() == labels[i+1] }) {
						match = false
					}
				}
				if match {
					n += m.GetCounter().GetValue()
				}
			}
		}
		return int(n)
	}
	cl := f.runningClusterWith(f.spec("c1", 1, 1), 5*time.Minute)
	sched := f.job(dlc.NewJob("scheduled").OnCluster(cl.ID).Schedule("* * * * *", job.Concurrency(job.ForbidConcurrent)))
	f.m.Step(4 * time.Minute)
	rec, err := f.c.Jobs().Get(f.ctx, sched.ID)
	f.must(err)
	runs := len(runsOf(t, f.c, sched.ID))
	if got := count("dlc_schedule_ticks_total", "outcome", "started"); got != runs || runs == 0 {
		t.Errorf("ticks started: %d counted, %d runs made", got, runs)
	}
	if got := count("dlc_schedule_ticks_total", "outcome", "skipped") + count("dlc_schedule_ticks_total", "outcome", "missed"); got != rec.ScheduleStatus.Missed || got == 0 {
		t.Errorf("ticks skipped or missed: %d counted, %d recorded", got, rec.ScheduleStatus.Missed)
	}
	_, err = f.c.Jobs().SuspendSchedule(f.ctx, sched.ID)
	f.must(err)

	deadline := f.job(dlc.NewJob("deadline").OnCluster(cl.ID).ActiveDeadline(time.Minute))
	failing := f.job(dlc.NewJob("failing").OnCluster(cl.ID).Retries(2))
	d := f.start(deadline.ID)
	f.start(failing.ID)
	f.m.Step(30 * time.Minute) // the deadline, the attempts, then the cluster idle past its timeout
	if d = f.run(d.ID); !strings.Contains(d.Message, "deadline exceeded") {
		t.Fatalf("the deadline run: %s %q", d.State, d.Message)
	}
	if got := count("dlc_run_deadlines_total"); got != 1 {
		t.Errorf("deadlines: %d counted, want 1", got)
	}
	if got, attempts := count("dlc_run_retries_total"), len(runsOf(t, f.c, failing.ID)); got != attempts-1 || attempts != 3 {
		t.Errorf("retries: %d counted, %d attempts made (want 3)", got, attempts)
	}
	if s := f.clusterState(cl.ID); s != cluster.Hibernated {
		t.Fatalf("idle past its timeout, the cluster is %s", s)
	}
	if got := count("dlc_idle_hibernations_total"); got != 1 {
		t.Errorf("idle hibernations: %d counted, want 1", got)
	}
}
