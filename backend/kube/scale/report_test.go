package scale_test

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aidlc/dlc/backend/kube/internal/loadtest"
)

// KubeRay's own scale test (clusterloader2, its benchmark/perf-tests):
// 10,000 RayClusters created in 88.8 s, all ready in 1,515 s. The figures
// of a run are set beside these, scaled linearly to its N.
const (
	anchorClusters = 10000
	anchorCreated  = 88.8   // seconds
	anchorReady    = 1515.0 // seconds
)

// phase is one timed step of the test.
type phase struct {
	name    string
	ops     int           // calls that succeeded
	errs    int           // calls that failed
	calls   time.Duration // from the first call until the last returned
	until   string        // the condition waited for after the calls ("" for none)
	took    time.Duration // from the first call until the condition held
	reached bool          // the condition held (or there was none)
	skipped string        // why the phase did not run
	store   counts        // the replicas' store and Ray calls during the phase
	api     counts        // their requests to the API server
	rec     counts        // their reconcile errors and retries
	state   string        // where things were at the end of the phase
}

// latencies keeps the duration of each call of an operation.
type latencies struct {
	mu sync.Mutex
	d  map[string][]time.Duration
}

func (l *latencies) add(op string, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.d == nil {
		l.d = map[string][]time.Duration{}
	}
	l.d[op] = append(l.d[op], d)
}

// quantile returns the q-quantile (nearest rank) of sorted ds.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(ds)))) - 1
	return ds[max(0, min(i, len(ds)-1))]
}

// bare is one measure of the API server's own write rate.
type bare struct {
	what string
	n    int
	errs int
	took time.Duration
}

func (b bare) rate() float64 { return perSecond(b.n, b.took) }

// report is everything a run prints.
type report struct {
	p        params
	began    time.Time
	setup    time.Duration
	bare     []bare
	phases   []*phase
	lat      latencies
	heap     []heapFigure
	sizes    [][]string
	runs     string   // runs by state
	failures []string // why runs did not succeed
	abnormal []string // why clusters were abnormal
	notes    []string
}

type heapFigure struct {
	what   string
	bytes  int64
	detail string
	per    string
}

func (r *report) phase(name string) *phase {
	for _, ph := range r.phases {
		if ph.name == name {
			return ph
		}
	}
	return nil
}

// bareRate returns the rate of the bare write of what (0: not measured).
func (r *report) bareRate(what string) float64 {
	for _, b := range r.bare {
		if b.what == what && b.errs == 0 {
			return b.rate()
		}
	}
	return 0
}

// String renders the report as Markdown tables, to paste into an issue.
func (r *report) String() string {
	var b strings.Builder
	p := r.p
	fmt.Fprintf(&b, "\n## dlc scale test: %d clusters, %d runs (%s), %d replicas\n\n", p.clusters, p.runs, p.mode, p.replicas)
	fmt.Fprintf(&b, "%d concurrent callers, %d resource group(s), client-side limit %s per replica, %d reconcile workers per client, work sharing %s; "+
		"envtest (kube-apiserver + etcd) with KubeRay's reconcilers, the kubelet stand-in and a Ray head stand-in per cluster; "+
		"%s, GOMAXPROCS %d, %d CPUs; started %s, set-up %v, deadline %v.\n",
		p.concurrency, p.rgs, p.qpsString(), p.workers, p.sharingString(), runtime.Version(), runtime.GOMAXPROCS(0), runtime.NumCPU(),
		r.began.UTC().Format(time.RFC3339), r.setup.Round(time.Millisecond), p.deadline)

	if r.setup == 0 {
		b.WriteString("\nThe set-up did not finish: no figures.\n")
		return b.String()
	}

	if len(r.bare) > 0 {
		b.WriteString("\n### The API server's bare write rate (a plain controller-runtime client, no client-side limit, same concurrency)\n\n")
		rows := [][]string{}
		for _, x := range r.bare {
			rows = append(rows, []string{x.what, fmt.Sprint(x.n), fmt.Sprint(x.errs), secs(x.took), fmt.Sprintf("%.1f", x.rate())})
		}
		b.WriteString(loadtest.Table([]string{"create", "objects", "errors", "took", "per second"}, rows))
	}

	b.WriteString("\n### Clusters, beside KubeRay's clusterloader2 run (10,000 RayClusters: created in 88.8 s, all ready in 1,515 s) scaled to N\n\n")
	scale := float64(p.clusters) / anchorClusters
	rows := [][]string{}
	if ph := r.phase("clusters: create"); ph != nil {
		rows = append(rows, []string{"all created¹",
			r.until(ph), secs(time.Duration(anchorCreated * scale * float64(time.Second))), fmt.Sprintf("%.1f", anchorClusters/anchorCreated)})
	}
	if ph := r.phase("clusters: start"); ph != nil {
		rows = append(rows, []string{"all running after Start²", r.until(ph),
			secs(time.Duration(anchorReady * scale * float64(time.Second))), fmt.Sprintf("%.1f", anchorClusters/anchorReady)})
	}
	if len(rows) > 0 {
		b.WriteString(loadtest.Table([]string{"", "dlc (this run)", "clusterloader2 scaled to N", "clusterloader2 per second"}, rows))
		b.WriteString("\n¹ dlc: every cluster in state created (its ComputeCluster written, its RayCluster applied suspended and seen by KubeRay); " +
			"clusterloader2: the RayClusters created. ² dlc: every cluster running (quota reserved, RayCluster unsuspended, head pod ready); " +
			"clusterloader2: every RayCluster ready, on real nodes.\n")
	}
	fmt.Fprintf(&b, "\nClusters abnormal at the end: %s. Ever abnormal: %s.\n", r.endAbnormal(), r.everAbnormal())
	for _, why := range r.abnormal {
		fmt.Fprintf(&b, "- %s\n", why)
	}

	b.WriteString("\n### Phases (per op: divided by the phase's successful calls; every replica's calls, background steps included, until the store was quiet for 2 s after the condition)\n\n")
	rows = rows[:0]
	for _, ph := range r.phases {
		if ph.skipped != "" {
			rows = append(rows, []string{ph.name, "—", "—", "—", "skipped: " + ph.skipped, "—", "—", "—", "—", "—", "—", "—", "—"})
			continue
		}
		rows = append(rows, []string{ph.name, fmt.Sprint(ph.ops), fmt.Sprint(ph.errs), secs(ph.calls), r.until(ph), r.vsBare(ph),
			ratio(ph.store.sum(isStoreWrite), ph.ops), ratio(ph.store.sum(isConflict), ph.ops),
			ratio(ph.store.sum(isStoreRead), ph.ops),
			ratio(ph.api.sum(func(k string) bool { return isAPIWrite(k) && !isAPIEvent(k) }), ph.ops),
			ratio(ph.api.sum(isAPIConflict), ph.ops), ratio(ph.api.sum(isAPIEvent), ph.ops),
			ratio(ph.rec.sum(func(k string) bool { return strings.HasPrefix(k, "retries ") }), ph.ops)})
	}
	b.WriteString(loadtest.Table([]string{"phase", "ok", "failed or not made", "calls returned", "condition held", "rate ÷ bare rate", "store writes/op",
		"store conflicts/op", "store reads/op", "API writes/op", "API 409/op", "Events/op", "reconcile retries/op"}, rows))

	b.WriteString("\n### Store and API calls per op, by kind (every replica)\n\n")
	rows = rows[:0]
	for _, ph := range r.phases {
		if ph.skipped != "" {
			continue
		}
		rows = append(rows, []string{ph.name,
			ph.store.per(ph.ops, func(k string) bool { return isStoreWrite(k) || isConflict(k) || isCallError(k) }),
			ph.store.per(ph.ops, func(k string) bool { return isStoreRead(k) && !isConflict(k) && !isCallError(k) }),
			ph.store.per(ph.ops, isRayWrite),
			ph.api.per(ph.ops, func(k string) bool { return isAPIWrite(k) || isAPIFailure(k) }),
			ph.rec.per(ph.ops, func(string) bool { return true })})
	}
	b.WriteString(loadtest.Table([]string{"phase", "store writes (conflict, error: failed so)", "store reads (-latest: past the cache)", "Ray writes", "API writes (status if refused)", "reconcile"}, rows))

	b.WriteString("\n### Latency of the user's calls\n\n")
	rows = rows[:0]
	r.lat.mu.Lock()
	for _, op := range []string{"Clusters().Create", "Clusters().Start", "Jobs().Save", "Runs().Create"} {
		ds := slices.Clone(r.lat.d[op])
		if len(ds) == 0 {
			continue
		}
		slices.Sort(ds)
		rows = append(rows, []string{op, fmt.Sprint(len(ds)), ms(quantile(ds, 0.5)), ms(quantile(ds, 0.9)), ms(quantile(ds, 0.99)), ms(ds[len(ds)-1])})
	}
	r.lat.mu.Unlock()
	fmt.Fprintf(&b, "At %d clusters, %d concurrent callers over %d replicas.\n\n", p.clusters, p.concurrency, p.replicas)
	b.WriteString(loadtest.Table([]string{"call", "calls", "p50", "p90", "p99", "max"}, rows))

	fmt.Fprintf(&b, "\n### Runs\n\nBy state: %s.\n", orNone(r.runs))
	for _, why := range r.failures {
		fmt.Fprintf(&b, "- %s\n", why)
	}

	if len(r.heap) > 0 {
		b.WriteString("\n### Heap (runtime.ReadMemStats after GC)\n\n")
		rows = rows[:0]
		for _, h := range r.heap {
			rows = append(rows, []string{h.what, mib(h.bytes), orNone(h.detail), h.per})
		}
		b.WriteString(loadtest.Table([]string{"", "heap", "how", "per object"}, rows))
	}
	if len(r.sizes) > 0 {
		b.WriteString("\n### Stored documents (JSON bytes, as the watch delivers them)\n\n")
		b.WriteString(loadtest.Table([]string{"kind", "stored now", "mean", "largest version seen"}, r.sizes))
	}
	if len(r.notes) > 0 {
		b.WriteString("\n### Notes\n\n")
		for _, n := range r.notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	return b.String()
}

// until renders how long a phase took until its condition held, and its
// rate, or where it stood when it gave up.
func (r *report) until(ph *phase) string {
	switch {
	case ph.skipped != "":
		return "skipped"
	case ph.until == "":
		return fmt.Sprintf("%s (%.1f/s)", secs(ph.calls), perSecond(ph.ops, ph.calls))
	case !ph.reached:
		return fmt.Sprintf("not reached (%s) after %s: %s", ph.until, secs(ph.took), ph.state)
	default:
		return fmt.Sprintf("%s: %s (%.1f/s)", ph.until, secs(ph.took), perSecond(ph.ops, ph.took))
	}
}

// vsBare is a phase's rate as a fraction of the bare write rate of the
// object it makes.
func (r *report) vsBare(ph *phase) string {
	if !ph.reached {
		return "—"
	}
	what := "RayCluster"
	if !strings.HasPrefix(ph.name, "clusters:") {
		what = "ConfigMap"
	}
	br := r.bareRate(what)
	d := ph.took
	if ph.until == "" {
		d = ph.calls
	}
	if br == 0 || d <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.3f of %s", perSecond(ph.ops, d)/br, what)
}

func (r *report) endAbnormal() string {
	if ph := r.phase("clusters: start"); ph != nil && ph.skipped == "" {
		return fmt.Sprint(countIn(ph.state, "abnormal"))
	}
	return "—"
}

func (r *report) everAbnormal() string {
	return fmt.Sprint(len(r.abnormal))
}

// countIn reads "state n" out of a stateList.
func countIn(list, state string) int {
	for part := range strings.SplitSeq(list, ", ") {
		var n int
		if s, ok := strings.CutPrefix(part, state+" "); ok {
			if _, err := fmt.Sscan(s, &n); err == nil {
				return n
			}
		}
	}
	return 0
}

func perSecond(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

func ratio(n int64, ops int) string {
	if ops <= 0 {
		return fmt.Sprint(n)
	}
	return fmt.Sprintf("%.2f", float64(n)/float64(ops))
}

func secs(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

func ms(d time.Duration) string {
	if d >= time.Second {
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
