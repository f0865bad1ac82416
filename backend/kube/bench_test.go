package kube_test

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/backend/kube/api/v1alpha1"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/dlctest/kubetest"
	"github.com/aidlc/dlc/quota"
)

// BenchmarkOnDemandAdmissions measures how many on-demand runs per second
// two clients, each on a store of its own on one namespace (two replicas
// of a service), admit into one resource group with room for all of them,
// against the API server's own create rates measured first in the same
// run, once it is quiet, by as many callers in the same pattern
// (bare-creates/s, and the ratio admissions/bare-create: ConfigMaps the size
// of a name claim; bare-run-creates/s and admissions/bare-run-create: Runs
// as the store writes a submitted one, the one object a submission cannot
// do without), until an informer on the namespace's ResourceGroups (the
// measuring apparatus alone: not a third store, which would decode, and
// have the API server send it, every object of every kind) sees every
// run's reservation in the group: in bursts
// ("batch": a batch submitted at once, then waited for) and as a steady
// stream ("stream": as many callers as a batch, each submitting its next
// run as soon as its last create returns). Ray is
// the simulated one, with clusters that never come up, so that what is
// measured is the admission (the scheduler's compare-and-swap on the
// resource group) and not Ray. It also reports the API server's requests
// (its apiserver_request_total) per admitted run while the runs were
// admitted, by all clients: writes (POST, PUT, PATCH, DELETE) and reads
// (GET, LIST); the admissions' work that follows them in the background
// (the runs' clusters made, the reservations settled) is counted as far
// as it happened within the window; and the CPU time the test process,
// the API server and etcd used meanwhile per admitted run
// (cpu-ms/admission, test-cpu-ms/admission), beside the three's per bare
// Run create (bare-run-cpu-ms/create): they share the machine's cores,
// so once those are busy the rates follow these costs. The stream also
// times until every run is placed (its cluster made, its placement and
// its reservation's document written: the stores' last write), and
// reports placed/s, placed/bare-run-create, api-writes/placed and
// cpu-ms/placed beside the store writes a run before and after its
// admission. A third case
// ("drain") times the admission alone: a backlog of runs waits in a
// resource group without room, and the time counted is from the group's
// capacity raised until every run of the backlog is admitted.
func BenchmarkOnDemandAdmissions(b *testing.B) {
	const batch = 100
	cp := kubetest.StartControlPlane(b)
	ns := cp.NewNamespace(b)
	ctx := dlc.WithUser(b.Context(), "bench")
	never := memory.Delays{Create: time.Hour, Start: time.Hour, Hibernate: time.Hour, Delete: time.Hour,
		Submit: time.Hour, Run: time.Hour}
	// Unthrottled, as the bare client is: what is compared is the work a
	// run costs, not a client-side limit.
	unlimited := cp.Config()
	unlimited.QPS, unlimited.Burst = -1, 0
	store := func() *kube.Store {
		st, err := kube.NewStore(b.Context(), unlimited, ns, kube.StoreOptions{NoEvents: true})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(st.Close)
		return st
	}
	var clients [2]*dlc.Client
	writes := newWriteLog() // both clients' store writes
	for i := range clients {
		c, err := dlc.New(dlc.WithBackend(logged{hybrid{store(), memory.NewRay(memory.RayOptions{Delays: &never})}, writes}),
			dlc.WithRetries(20, time.Millisecond, 100*time.Millisecond),
			// The two share the work from the start (the default probation
			// would have both do a newcomer's share for ten minutes).
			dlc.WithMemberProbation(0))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = c.Close() })
		clients[i] = c
	}
	if _, err := clients[0].ResourceGroups().Register(ctx, quota.Group{ID: "rg", Package: "pkg-1",
		Capacity: quota.Resources{MilliCPU: 1 << 40, Memory: 1 << 50}}); err != nil {
		b.Fatal(err)
	}
	od, err := dlc.NewJob("admitted").OnDemand("pkg-1", "rg").Priority(5).Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1).COSPackage("cos://jobs-1250000000/train.zip").Entrypoint("python train.py").Build()
	if err != nil {
		b.Fatal(err)
	}
	rec, err := clients[0].Jobs().Create(ctx, od, dlc.SaveOptions{})
	if err != nil {
		b.Fatal(err)
	}

	var awaitIn func(b *testing.B, rg string, admitted int)
	var (
		mu      sync.Mutex
		holders = map[string]int{} // admitted runs by resource group
		changed = make(chan struct{}, 1)
	)
	// The observer: an informer on the namespace's ResourceGroups alone
	// (the measuring apparatus, not a replica: a store of its own would
	// decode, and have the API server send it, every object of every kind).
	observer, err := crcache.New(cp.Config(), crcache.Options{Scheme: cp.Scheme(),
		DefaultNamespaces: map[string]crcache.Config{ns: {}}})
	if err != nil {
		b.Fatal(err)
	}
	rgInformer, err := observer.GetInformer(ctx, &v1alpha1.ResourceGroup{})
	if err != nil {
		b.Fatal(err)
	}
	observe := func(obj any) {
		rg, ok := obj.(*v1alpha1.ResourceGroup)
		if !ok {
			return
		}
		mu.Lock()
		holders[rg.Name] = int(rg.Status.Reserved.MilliCPU / 8000) // 8 cores a run: a cu.4c8g head and worker
		mu.Unlock()
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	if _, err := rgInformer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: observe,
		UpdateFunc: func(_, obj any) { observe(obj) }}); err != nil {
		b.Fatal(err)
	}
	observed := make(chan struct{})
	go func() { defer close(observed); _ = observer.Start(ctx) }()
	b.Cleanup(func() { <-observed }) // ctx ends before the cleanups run
	if !observer.WaitForCacheSync(ctx) {
		b.Fatal("the observer's informer did not sync")
	}

	// The API server's own write rates in the same run (bareRates): by a
	// plain controller-runtime client without a client-side limit, in a
	// namespace no store watches.
	bareNS := cp.NewNamespace(b)
	bareCfg := cp.Config()
	bareCfg.QPS, bareCfg.Burst = -1, 0
	bare, err := client.New(bareCfg, client.Options{Scheme: cp.Scheme()})
	if err != nil {
		b.Fatal(err)
	}
	requests := apiRequests(b, cp.Config())
	// One run submitted and admitted first: the Run the bare Run creates
	// copy, as the store's create sent it.
	if _, err := clients[0].Runs().Create(ctx, rec.ID, dlc.RunOptions{}); err != nil {
		b.Fatal(err)
	}
	var runs v1alpha1.RunList
	if err := bare.List(ctx, &runs, client.InNamespace(ns)); err != nil || len(runs.Items) != 1 {
		b.Fatalf("the first run as stored: %v (%d runs)", err, len(runs.Items))
	}
	proto := runs.Items[0]
	// The store's create sends the first status both in the object and in
	// an annotation (the API server keeps the annotation only).
	proto.Status = v1alpha1.RunStatus{}
	if err := json.Unmarshal([]byte(proto.Annotations[kube.StoreKeyInitialStatus]), &proto.Status); err != nil {
		b.Fatalf("the first run's initial status: %v", err)
	}
	// awaitQuiet waits until the API server has served fewer than 5
	// writes in the last second (the runs admitted so far placed, their
	// clusters made), for at most 2 minutes.
	awaitQuiet := func(b *testing.B) {
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		var last [4]float64 // the writes served at each of the last 4 ticks
		deadline := time.Now().Add(2 * time.Minute)
		for i := 0; ; i++ {
			w := requests().writes
			served := w - last[i%len(last)] // in the last second, from the fifth tick on
			if i >= len(last) && served < 5 {
				return
			}
			last[i%len(last)] = w
			if time.Now().After(deadline) {
				b.Logf("the API server still served %.0f writes a second after 2 minutes; the baseline measured beside them", served)
				return
			}
			select {
			case <-tick.C:
			case <-ctx.Done():
				b.Fatal(context.Cause(ctx))
			}
		}
	}
	made := 0 // bare objects made so far: their names' numbers
	// bareRates measures the baseline once the API server is quiet (the
	// work earlier admissions brought about done): n batches' worth of
	// ConfigMaps the size of a name claim, then as many copies of proto,
	// by as many callers as a batch, in waves of a batch or, with
	// !waves, each caller creating its next as soon as its last returns.
	bareRates := func(b *testing.B, n int, waves bool) baseline {
		awaitQuiet(b)
		rate := func(create func(i int) error) (float64, kubetest.CPU) {
			total, first := n*batch, made
			made += total
			cpu := cpuSince()
			start := time.Now()
			if waves {
				for w := range n {
					inParallel(b, batch, func(i int) error { return create(first + w*batch + i) })
				}
			} else {
				inStream(b, batch, total, func(i int) error { return create(first + i) })
			}
			return float64(total) / time.Since(start).Seconds(), cpuPer(cpu(), total)
		}
		var out baseline
		out.configMaps, _ = rate(func(i int) error {
			name := fmt.Sprintf("bare-%06d", i)
			return bare.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: bareNS, Name: name},
				Data: map[string]string{"owner": "cls-" + name}})
		})
		out.runs, out.runCPU = rate(func(i int) error {
			r := proto.DeepCopy() // maps of its own: a create decodes its answer into them
			r.ObjectMeta = metav1.ObjectMeta{Namespace: bareNS, Name: fmt.Sprintf("bare-run-%06d", i),
				Labels: r.Labels, Annotations: r.Annotations}
			return bare.Create(ctx, r)
		})
		return out
	}
	admitted := 1
	// awaitAdmitted waits until the watch has seen every run created so
	// far in "rg" admitted.
	awaitAdmitted := func(b *testing.B) { awaitIn(b, "rg", admitted) }
	awaitIn = func(b *testing.B, rg string, admitted int) {
		deadline := time.After(2 * time.Minute)
		for {
			mu.Lock()
			n := holders[rg]
			mu.Unlock()
			if n >= admitted {
				return
			}
			select {
			case <-changed:
			case <-deadline:
				st := store()
				d, _ := st.Get(ctx, "resourcegroup", rg)
				var acc quota.Account
				_ = json.Unmarshal(d.Data, &acc)
				runs, _ := st.List(ctx, "run", nil)
				states := map[string]int{}
				for _, r := range runs {
					states[r.Labels["state"]+"/"+r.Labels["phase"]]++
				}
				holds, _ := st.List(ctx, "hold", nil)
				b.Fatalf("%d of %d runs admitted after 2 minutes: account seq %d, %d pending, sum %v; %d hold docs; runs %v", n, admitted, acc.Seq, len(acc.Pending), acc.Sum, len(holds), states)
			case <-ctx.Done():
				b.Fatal(context.Cause(ctx))
			}
		}
	}
	awaitAdmitted(b)
	create := func(i int) error {
		_, err := clients[i%2].Runs().Create(ctx, rec.ID, dlc.RunOptions{})
		return err
	}
	// report reports runs admitted in took, with the API requests served
	// meanwhile (used).
	report := func(b *testing.B, runs int, took time.Duration, bare baseline, used apiCounts, cpu kubetest.CPU) {
		b.ReportMetric(used.writes/float64(runs), "api-writes/admission")
		b.ReportMetric(used.reads/float64(runs), "api-reads/admission")
		b.ReportMetric(float64(runs)/took.Seconds(), "admissions/s")
		b.ReportMetric(bare.configMaps, "bare-creates/s")
		b.ReportMetric(float64(runs)/took.Seconds()/bare.configMaps, "admissions/bare-create")
		b.ReportMetric(bare.runs, "bare-run-creates/s")
		b.ReportMetric(float64(runs)/took.Seconds()/bare.runs, "admissions/bare-run-create")
		b.Logf("API writes per admission: %s", perRun(used.byWrite, runs))
		if cpu.Known() {
			cpu = cpuPer(cpu, runs)
			b.ReportMetric(ms(cpu.Total()), "cpu-ms/admission")
			b.ReportMetric(ms(cpu.Self), "test-cpu-ms/admission")
			b.ReportMetric(ms(bare.runCPU.Total()), "bare-run-cpu-ms/create")
			b.Logf("CPU per admission: %s; per bare Run create: %s", cpuString(cpu), cpuString(bare.runCPU))
		}
	}

	// batch: each iteration submits a batch through both clients at once
	// and waits until every run of it is admitted: the latency of a burst.
	b.Run("batch", func(b *testing.B) {
		bare := bareRates(b, b.N, true)
		before, cpu := requests(), cpuSince()
		var took time.Duration
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			start := time.Now()
			inParallel(b, batch, create)
			admitted += batch
			awaitAdmitted(b)
			took += time.Since(start)
		}
		used := cpu() // before the scrape of /metrics: the window is took's
		b.StopTimer()
		report(b, b.N*batch, took, bare, requests().minus(before), used)
	})
	// stream: b.N batches' worth of runs submitted by as many callers as a
	// batch, each submitting its next run as soon as its last create
	// returns, until every run is admitted: the rate a steady stream of
	// submissions is admitted at. The work an admission brings about (the
	// run's cluster made, the run placed, its reservation's document
	// written) follows it, and a short stream is admitted before most of
	// that is done; so the stream also reports its rate until the stores'
	// last write (writes), every run placed ("placed/s"): the rate a stream
	// can keep up, its runs' clusters then waiting on Ray.
	b.Run("stream", func(b *testing.B) {
		bare := bareRates(b, b.N, false)
		before, cpu := requests(), cpuSince()
		writesBefore := writes.counts()
		total := b.N * batch
		b.ReportAllocs()
		b.ResetTimer()
		start := time.Now()
		inStream(b, batch, total, create)
		admitted += total
		awaitAdmitted(b)
		took := time.Since(start)
		used := cpu() // before the scrape of /metrics: the window is took's
		writesAdmitted := writes.counts()
		// A scrape inside the longer window below: one request, tens of
		// milliseconds of the API server's against seconds.
		usedAPI := requests().minus(before)
		// Bounded by the stream's size: 2,000 runs were placed 12–15 s
		// after they were admitted.
		last := writes.awaitStill(b, 2*time.Second, max(2*time.Minute, time.Duration(total)*20*time.Millisecond))
		// Read once (a reading walks /proc: milliseconds, which polling
		// would add to the window): the CPU until the last write and in
		// the 2 s after it, when the clients only poll the simulated Ray;
		// those 2 s are taken out as what the next 2 s cost.
		usedAll := cpu()
		b.StopTimer()
		select { // what the still 2 s cost, read as the next 2 s cost
		case <-time.After(2 * time.Second):
		case <-ctx.Done():
			b.Fatal(context.Cause(ctx))
		}
		idle := cpu().Sub(usedAll)
		if now := writes.lastWrite(); now.After(last) {
			b.Fatalf("a store wrote %s after the 2 s still that ended the stream: its work was not done", now.Sub(last))
		}
		writesNow := writes.counts()
		after, placedNow := countsSince(writesNow, writesAdmitted), countsSince(writesNow, writesBefore)
		if placedNow["create cluster"] != total || placedNow["update run"] < total {
			b.Fatalf("%d clusters made and %d run writes for %d runs: not every run placed (%s)", placedNow["create cluster"], placedNow["update run"], total, perRun(placedNow, total))
		}
		report(b, total, took, bare, usedAPI, used)
		toPlaced := max(last.Sub(start), took) // the last write may be seen before the admission is
		// With the 4 s still after the last write: its membership renewals, ~0.01 a run.
		b.ReportMetric(requests().minus(before).writes/float64(total), "api-writes/placed")
		b.ReportMetric(float64(total)/toPlaced.Seconds(), "placed/s")
		b.ReportMetric(float64(total)/toPlaced.Seconds()/bare.runs, "placed/bare-run-create")
		b.Logf("store writes per run until admitted (%s): %s; after, until the last (%s later): %s", took.Round(time.Millisecond),
			perRun(countsSince(writesAdmitted, writesBefore), total), (toPlaced - took).Round(time.Millisecond), perRun(after, total))
		if usedAll.Known() {
			placedCPU := cpuPer(usedAll.Sub(idle), total) // the still 2 s taken out
			b.ReportMetric(ms(placedCPU.Total()), "cpu-ms/placed")
			b.Logf("CPU per run until the last write: %s (the 2 s still after it, as the next 2 s: %s in all)", cpuString(placedCPU), cpuString(idle))
		}
	})
	// drain: each iteration queues a backlog of runs, submitted through
	// both clients, in a resource group of its own whose capacity is
	// none, waits until both clients' queues have every one of them, and
	// then times from the group's capacity raised until every run of the
	// backlog is admitted: how fast a backlog is admitted once there is
	// room. The work the earlier iterations' admissions brought about
	// (their clusters made, their runs placed, their holds settled) goes
	// on meanwhile, as it would on a busy platform.
	drained := 0 // resource groups made by drain so far, in every run of it
	b.Run("drain", func(b *testing.B) {
		const backlog = quota.MaxPending / 2 // one pass admits it, no hold's document written first
		bare := bareRates(b, b.N, true)
		var took time.Duration
		var used apiCounts
		var cpu kubetest.CPU
		b.ReportAllocs()
		b.StopTimer()
		for range b.N {
			i := drained
			drained++
			rg := fmt.Sprintf("drain-%d", i)
			one := quota.Resources{MilliCPU: 8000, Memory: 16 << 30}
			if _, err := clients[0].ResourceGroups().Register(ctx, quota.Group{ID: rg, Package: "pkg-1", Capacity: one}); err != nil {
				b.Fatal(err)
			}
			cfg := *od.DeepCopy()
			cfg.Name, cfg.OnDemand.ResourceGroup = "drained-"+strconv.Itoa(i), rg
			rec, err := clients[0].Jobs().Create(ctx, &cfg, dlc.SaveOptions{}) // it fits the group: saved
			if err != nil {
				b.Fatal(err)
			}
			if _, err := clients[0].ResourceGroups().Register(ctx, quota.Group{ID: rg, Package: "pkg-1"}); err != nil {
				b.Fatal(err)
			}
			inStream(b, batch, backlog, func(j int) error {
				_, err := clients[j%2].Runs().Create(ctx, rec.ID, dlc.RunOptions{})
				return err
			})
			for _, c := range clients {
				awaitQueued(b, c, rg, backlog)
			}
			before, cpuHere := requests(), cpuSince()
			b.StartTimer()
			start := time.Now()
			if _, err := clients[0].ResourceGroups().Register(ctx, quota.Group{ID: rg, Package: "pkg-1",
				Capacity: quota.Resources{MilliCPU: 1 << 40, Memory: 1 << 50}}); err != nil {
				b.Fatal(err)
			}
			awaitIn(b, rg, backlog)
			took += time.Since(start)
			b.StopTimer()
			cpu = cpu.Add(cpuHere())
			d := requests().minus(before)
			used.writes += d.writes
			used.reads += d.reads
			if used.byWrite == nil {
				used.byWrite = map[string]float64{}
			}
			for k, v := range d.byWrite {
				used.byWrite[k] += v
			}
		}
		report(b, b.N*backlog, took, bare, used, cpu)
	})
}

// logged is a backend whose store writes are counted in a writeLog. It
// overrides the four methods that write — CreateStored too, which the
// client's run creates use (backend.AwaitingCreator) —; reads and Ray's
// calls pass through. Update, Create and Delete end once the store's own
// cache has the write, CreateStored when the API server has answered.
type logged struct {
	hybrid
	log *writeLog
}

// Create is the store's Create, logged.
func (l logged) Create(ctx context.Context, d backend.Doc) (string, error) {
	v, err := l.hybrid.Create(ctx, d)
	l.log.wrote("create", d.Kind, err)
	return v, err
}

// CreateStored is the store's CreateStored, logged.
func (l logged) CreateStored(ctx context.Context, d backend.Doc) (string, func(context.Context), error) {
	v, await, err := l.hybrid.CreateStored(ctx, d)
	l.log.wrote("create", d.Kind, err)
	return v, await, err
}

// Update is the store's Update, logged.
func (l logged) Update(ctx context.Context, d backend.Doc) (string, error) {
	v, err := l.hybrid.Update(ctx, d)
	l.log.wrote("update", d.Kind, err)
	return v, err
}

// Delete is the store's Delete, logged.
func (l logged) Delete(ctx context.Context, kind, id, version string) error {
	err := l.hybrid.Delete(ctx, kind, id, version)
	l.log.wrote("delete", kind, err)
	return err
}

// writeLog counts store writes by operation and kind, and keeps the time
// the last successful one ended, but for membership renewals (kind
// "replica": every few seconds whatever the load).
type writeLog struct {
	base time.Time    // the log's start, with the monotonic clock's reading
	last atomic.Int64 // the latest end of a write, nanoseconds since base
	mu   sync.Mutex
	n    map[string]int // by operation and kind ("update run")
}

// newWriteLog returns an empty log.
func newWriteLog() *writeLog { return &writeLog{base: time.Now(), n: map[string]int{}} }

// wrote counts a write of op ("create", "update", "delete") on a
// document of kind, a failed one apart ("update run failed").
func (l *writeLog) wrote(op, kind string, err error) {
	key := op + " " + kind
	if err != nil {
		key += " failed"
	}
	l.mu.Lock()
	l.n[key]++
	l.mu.Unlock()
	if err != nil || kind == "replica" {
		return
	}
	// The latest end, whichever of two concurrent writes stores first.
	end := int64(time.Since(l.base))
	for {
		cur := l.last.Load()
		if end <= cur || l.last.CompareAndSwap(cur, end) {
			return
		}
	}
}

// lastWrite returns when the latest write the log keeps the time of
// ended (base, if none has).
func (l *writeLog) lastWrite() time.Time { return l.base.Add(time.Duration(l.last.Load())) }

// counts returns the writes counted so far.
func (l *writeLog) counts() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.n)
}

// awaitStill waits until no write has ended for still (polling the log,
// no API call), for at most bound, and returns the time the last one
// ended.
func (l *writeLog) awaitStill(b *testing.B, still, bound time.Duration) time.Time {
	b.Helper()
	const poll = 20 * time.Millisecond
	deadline := time.Now().Add(bound)
	for {
		last := l.lastWrite()
		if time.Since(last) >= still {
			return last
		}
		if time.Now().After(deadline) {
			b.Fatalf("the stores still wrote after %s: %v", bound, l.counts())
		}
		select {
		case <-time.After(poll):
		case <-b.Context().Done():
			b.Fatal(context.Cause(b.Context()))
		}
	}
}

// countsSince returns the counts in now that grew since before, each by
// how much.
func countsSince[V int | float64](now, before map[string]V) map[string]V {
	out := map[string]V{}
	for k, v := range now {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// perRun returns counts per run, the most first, as "POST runs 1.00, PUT
// resourcegroups 0.12", or "none".
func perRun[V int | float64](counts map[string]V, runs int) string {
	keys := slices.SortedFunc(maps.Keys(counts), func(x, y string) int {
		return cmp.Or(cmp.Compare(counts[y], counts[x]), strings.Compare(x, y))
	})
	if len(keys) == 0 {
		return "none"
	}
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %.2f", k, float64(counts[k])/float64(runs))
	}
	return strings.Join(parts, ", ")
}

// baseline is the API server's own create rates in a benchmark's run, by
// a plain client without a client-side limit, in a namespace no store
// watches: of ConfigMaps the size of a name claim, and of Runs as the
// store writes a submitted one.
type baseline struct {
	configMaps, runs float64
	runCPU           kubetest.CPU // per bare Run create
}

// cpuPer is c divided among n objects.
func cpuPer(c kubetest.CPU, n int) kubetest.CPU {
	d := time.Duration(n)
	return kubetest.CPU{Self: c.Self / d, APIServer: c.APIServer / d, Etcd: c.Etcd / d}
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// cpuString says c whole and by process, in milliseconds: this test
// process's (the two clients with their stores, the simulated Ray, the
// observer, the callers and the Go runtime's collector), the API
// server's and etcd's. All three share the machine's cores, so that what
// a submission costs them together bounds the rate once the cores are
// busy.
func cpuString(c kubetest.CPU) string {
	return fmt.Sprintf("%.2f ms (test process %.2f, API server %.2f, etcd %.2f)", ms(c.Total()), ms(c.Self), ms(c.APIServer), ms(c.Etcd))
}

// cpuSince returns a function that returns the CPU time used since
// cpuSince was called (kubetest.CPUNow: all zero where there is no /proc,
// and then not reported).
func cpuSince() func() kubetest.CPU {
	start := kubetest.CPUNow()
	return func() kubetest.CPU { return kubetest.CPUNow().Sub(start) }
}

// awaitQueued waits until client c's queue of resource group rg has n
// runs waiting.
func awaitQueued(b *testing.B, c *dlc.Client, rg string, n int) {
	b.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		p, err := c.ResourceGroups().Pending(b.Context(), rg)
		if err != nil {
			b.Fatal(err)
		}
		if len(p) >= n {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d runs queued in %s after 2 minutes", len(p), n, rg)
		}
		select {
		case <-time.After(50 * time.Millisecond): // a poll of the client's own cache, no API call
		case <-b.Context().Done():
			b.Fatal(context.Cause(b.Context()))
		}
	}
}

// inParallel calls f(0) … f(n-1) at once, each in a goroutine of its own,
// and fails b with the first error any returned, once all have.
func inParallel(b *testing.B, n int, f func(i int) error) {
	b.Helper()
	var wg sync.WaitGroup
	errc := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			if err := f(i); err != nil {
				errc <- err
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		b.Fatal(err)
	}
}

// inStream calls f(0) … f(total-1), each once, from callers goroutines,
// each calling its next as soon as its last returns, and fails b with the
// first error any returned, once all have stopped.
func inStream(b *testing.B, callers, total int, f func(i int) error) {
	b.Helper()
	var next atomic.Int64
	inParallel(b, callers, func(int) error {
		for i := int(next.Add(1)) - 1; i < total; i = int(next.Add(1)) - 1 {
			if err := f(i); err != nil {
				return err
			}
		}
		return nil
	})
}

// apiCounts are the API server's requests served so far.
type apiCounts struct {
	writes, reads float64
	// byWrite is the writes by verb and resource ("POST runs").
	byWrite map[string]float64
}

// minus returns the requests served since before.
func (a apiCounts) minus(before apiCounts) apiCounts {
	return apiCounts{writes: a.writes - before.writes, reads: a.reads - before.reads, byWrite: countsSince(a.byWrite, before.byWrite)}
}

// apiRequests returns a function that reads the API server's
// apiserver_request_total from its /metrics, summed by kind of verb.
func apiRequests(b *testing.B, cfg *rest.Config) func() apiCounts {
	b.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return func() apiCounts {
		resp, err := hc.Get(strings.TrimSuffix(cfg.Host, "/") + "/metrics")
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		out := apiCounts{byWrite: map[string]float64{}}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, "apiserver_request_total{") {
				continue
			}
			i := strings.LastIndexByte(line, ' ')
			v, err := strconv.ParseFloat(line[i+1:], 64)
			if err != nil {
				continue
			}
			switch {
			case strings.Contains(line, `verb="POST"`), strings.Contains(line, `verb="PUT"`),
				strings.Contains(line, `verb="PATCH"`), strings.Contains(line, `verb="DELETE"`):
				out.writes += v
				key := label(line, "verb") + " " + label(line, "resource")
				if sub := label(line, "subresource"); sub != "" {
					key += "/" + sub
				}
				if code := label(line, "code"); !strings.HasPrefix(code, "2") {
					key += " " + code
				}
				out.byWrite[key] += v
			case strings.Contains(line, `verb="GET"`), strings.Contains(line, `verb="LIST"`):
				out.reads += v
			}
		}
		if err := sc.Err(); err != nil {
			b.Fatal(err)
		}
		return out
	}
}

// label returns the value of a metric line's label name, or "".
func label(line, name string) string {
	_, rest, ok := strings.Cut(line, name+`="`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

// BenchmarkResourceGroupWrite measures what the API server charges for the
// compare-and-swap every reservation is: a status update of a
// ResourceGroup with 300 reservation changes pending (what an admission
// pass found under load), against the same update with none, in the same
// run (pending-300/pending-0). Each iteration is one update of each.
func BenchmarkResourceGroupWrite(b *testing.B) {
	const pending = 300
	cp := kubetest.StartControlPlane(b)
	ns := cp.NewNamespace(b)
	c, err := client.New(cp.Config(), client.Options{Scheme: cp.Scheme()})
	if err != nil {
		b.Fatal(err)
	}
	groups := make([]*v1alpha1.ResourceGroup, 2)
	for i, n := range []int{0, pending} {
		rg := &v1alpha1.ResourceGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("rg-%d", n)},
			Spec: v1alpha1.ResourceGroupSpec{Package: "pkg-1", Capacity: v1alpha1.Resources{MilliCPU: 1 << 40, Memory: 1 << 50}}}
		if err := c.Create(b.Context(), rg); err != nil {
			b.Fatal(err)
		}
		rg.Status.Pending = map[string]v1alpha1.Hold{}
		for j := range n {
			h := quota.Hold{Resources: quota.Resources{MilliCPU: 8000, Memory: 16 << 30}, Since: time.Now(), Generation: 1, Seq: int64(j + 1)}
			rg.Status.Pending[fmt.Sprintf("od-run-%020d", j)] = v1alpha1.Hold(h.Encode())
		}
		groups[i] = rg
	}
	var took [2]time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		for g, rg := range groups {
			rg.Status.Seq = int64(i + 1)
			start := time.Now()
			if err := c.Status().Update(b.Context(), rg); err != nil {
				b.Fatal(err)
			}
			took[g] += time.Since(start)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(took[0].Microseconds())/1000/float64(b.N), "ms/write-pending-0")
	b.ReportMetric(float64(took[1].Microseconds())/1000/float64(b.N), "ms/write-pending-300")
	b.ReportMetric(float64(took[1])/float64(took[0]), "pending-300/pending-0")
}
