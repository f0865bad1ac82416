package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/dlctest/kubetest"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
)

// workerWatch counts, from every pod event of a namespace, the worker pods
// each cluster has at once (from creation to deletion, pending or not),
// and the most it ever had.
type workerWatch struct {
	mu   sync.Mutex
	pods map[string]map[string]bool // cluster id → pod names
	most map[string]int
}

func watchWorkers(t *testing.T, w *world, ns string) *workerWatch {
	t.Helper()
	cs, err := kubernetes.NewForConfig(w.cp.Config())
	if err != nil {
		t.Fatal(err)
	}
	ww := &workerWatch{pods: map[string]map[string]bool{}, most: map[string]int{}}
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	inf := f.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { ww.saw(obj, true) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			ww.saw(obj, false)
		},
	}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	f.Start(stop)
	f.WaitForCacheSync(stop)
	return ww
}

func (ww *workerWatch) saw(obj any, exists bool) {
	p, ok := obj.(*corev1.Pod)
	if !ok || p.Labels["ray.io/node-type"] != "worker" {
		return
	}
	id := p.Labels[kube.KeyClusterID]
	ww.mu.Lock()
	defer ww.mu.Unlock()
	if ww.pods[id] == nil {
		ww.pods[id] = map[string]bool{}
	}
	if exists {
		ww.pods[id][p.Name] = true
	} else {
		delete(ww.pods[id], p.Name)
	}
	ww.most[id] = max(ww.most[id], len(ww.pods[id]))
}

// now returns how many worker pods cluster id has, and the most it had
// since the last call (which starts the count again from now).
func (ww *workerWatch) now(id string) (n, most int) {
	ww.mu.Lock()
	defer ww.mu.Unlock()
	n, most = len(ww.pods[id]), ww.most[id]
	ww.most[id] = n
	return n, most
}

// Ray's autoscaler inside quota on Kubernetes (C14; issue 20). A resource
// group of 20 cores; a running cluster (or an on-demand run's cluster) of a
// 4-core head and 4-core workers in [1, 10]; another cluster of 8 cores.
// The autoscaler (the dlctest stand-in, acting on the RayCluster as Ray's
// does) asks for 10 workers: Kubernetes runs at most 2 (what the 20 cores
// leave: 8 + 4 + 2×4) at every moment, and the cluster records the
// refusal with its reason. The other cluster hibernates: it grows to 4
// workers, never more. The autoscaler asks for 1: the removed workers'
// quota comes back (one worker of room is kept, for the autoscaler to ask
// for more). A watcher of the store checks every version of the resource
// group: never reserved beyond capacity.
func TestAutoscalerWithinQuota(t *testing.T) {
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		a := newAutoscaleScene(t)
		auto := a.start("auto", 1, 10)
		a.within(auto.ID)
	})
	t.Run("on-demand", func(t *testing.T) {
		t.Parallel()
		a := newAutoscaleScene(t)
		r := a.submit("autoscaling", 5, 1, 10)
		var err error
		waitFor(t, "the run running", func() (bool, string) {
			if r, err = a.c.Runs().Get(a.ctx, r.ID); err != nil {
				return false, err.Error()
			}
			return r.State == job.Running, string(r.State) + " " + r.Message
		})
		a.within(r.ClusterID)
		if _, err := a.c.Runs().Stop(a.ctx, r.ID); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "its quota released", func() (bool, string) {
			u, err := a.c.ResourceGroups().Get(a.ctx, "rg-20")
			if err != nil {
				return false, err.Error()
			}
			return u.Reserved.IsZero(), u.Reserved.String()
		})
	})
}

// autoscaleScene is TestAutoscalerWithinQuota's world: a namespace, a
// client, the autoscaler stand-in, the watchers, the resource group of 20
// cores and a cluster group.
type autoscaleScene struct {
	t       *testing.T
	w       *world
	ns      string
	c       *dlc.Client
	ctx     context.Context
	as      *kubetest.Autoscaler
	workers *workerWatch
	grp     string

	mu       sync.Mutex
	versions int
	over     string
}

func newAutoscaleScene(t *testing.T, more ...dlc.Option) *autoscaleScene {
	w := getWorld(t)
	a := &autoscaleScene{t: t, w: w, ns: w.cp.NewNamespace(t), ctx: dlc.WithUser(t.Context(), "autoscale")}
	be := w.backend(t, kube.Options{Namespace: a.ns})
	a.c = newClient(t, be, append([]dlc.Option{dlc.WithRepairGrace(2 * time.Second)}, more...)...)
	a.as = w.cp.StartAutoscaler(t)
	a.workers = watchWorkers(t, w, a.ns)
	if _, err := w.backend(t, kube.Options{Namespace: a.ns}).Watch(a.ctx, func(ch backend.Change) {
		if ch.Doc.Kind != "resourcegroup" || ch.Deleted {
			return
		}
		var acc quota.Account
		err := json.Unmarshal(ch.Doc.Data, &acc)
		a.mu.Lock()
		defer a.mu.Unlock()
		a.versions++
		if err != nil {
			a.over = err.Error()
		} else if r := acc.Reserved(); !r.Fits(acc.Capacity) && a.over == "" {
			a.over = fmt.Sprintf("version %s reserves %s of %s", ch.Doc.Version, r, acc.Capacity)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.c.ResourceGroups().Register(a.ctx, quota.Group{ID: "rg-20", Package: "pkg-1",
		Capacity: quota.Resources{MilliCPU: 20000, Memory: 80 * quota.GiB}}); err != nil {
		t.Fatal(err)
	}
	grp, err := a.c.Groups().Create(a.ctx, "autoscaling")
	if err != nil {
		t.Fatal(err)
	}
	a.grp = grp.ID
	return a
}

// start creates and starts a cluster of a cu.4c8g head and cu.4c8g
// workers in [lo, hi] in rg-20, and waits until it runs.
func (a *autoscaleScene) start(name string, lo, hi int) *cluster.Cluster {
	t := a.t
	spec, err := dlc.NewCluster(name).Groups(a.grp).Resources("pkg-1", "rg-20").Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", lo, hi).Build()
	if err != nil {
		t.Fatal(err)
	}
	return a.run(spec)
}

// run creates and starts a cluster of spec, and waits until it runs.
func (a *autoscaleScene) run(spec *cluster.Spec) *cluster.Cluster {
	t := a.t
	t.Helper()
	cl, err := a.c.Clusters().Create(a.ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, spec.Name+" created", func() (bool, string) { s := state(t, a.c, cl.ID); return s == cluster.Created, string(s) })
	if _, err := a.c.Clusters().Start(a.ctx, cl.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, spec.Name+" running", func() (bool, string) { s := state(t, a.c, cl.ID); return s == cluster.Running, string(s) })
	return cl
}

// submit saves an on-demand job in rg-20 at priority prio, of a cu.4c8g
// head and cu.4c8g workers in [lo, hi] that sleep, and starts a run of it.
func (a *autoscaleScene) submit(name string, prio, lo, hi int) *job.Run {
	t := a.t
	t.Helper()
	cfg, err := dlc.NewJob(name).OnDemand("pkg-1", "rg-20").Priority(prio).Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", lo, hi).
		COSPackage("cos://jobs-1250000000/train.zip").Entrypoint("sleep 600").Build()
	if err != nil {
		t.Fatal(err)
	}
	rec, err := a.c.Jobs().Create(a.ctx, cfg, dlc.SaveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := a.c.Runs().Create(a.ctx, rec.ID, dlc.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// within runs the story on the running autoscaling cluster id.
func (a *autoscaleScene) within(id string) {
	t := a.t
	other := a.start("other", 1, 1)

	// settled waits until id runs n workers and holds head + held workers,
	// checking that Kubernetes never ran more than atMost of them.
	settled := func(what string, n, held, atMost int) {
		t.Helper()
		waitFor(t, what, func() (bool, string) {
			now, most := a.workers.now(id)
			if most > atMost {
				t.Fatalf("%s: Kubernetes ran %d workers of the cluster at once, its quota covers %d", what, most, atMost)
			}
			u, err := a.c.ResourceGroups().Get(a.ctx, "rg-20")
			if err != nil {
				return false, err.Error()
			}
			h := u.Holders[id]
			return now == n && h.MilliCPU == int64(4000+4000*held), fmt.Sprintf("%d workers, holding %s", now, h)
		})
	}
	lastRefusal := func() string {
		d, err := a.c.Clusters().Details(a.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		last := ""
		for _, e := range d.Events {
			if e.Action == "autoscale-refused" {
				last = e.Message
			}
		}
		return last
	}

	a.as.Demand(a.ns, id, "cpu", 10)
	settled("the autoscaler at the quota's limit", 2, 2, 2)
	waitFor(t, "the refusal recorded", func() (bool, string) {
		last := lastRefusal()
		return strings.Contains(last, "refused for quota: resource group rg-20 can allocate"), last
	})
	t.Logf("recorded: %s", lastRefusal())

	if _, err := a.c.Clusters().Hibernate(a.ctx, other.ID, dlc.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	settled("grown into the freed quota", 4, 4, 4)

	a.as.Demand(a.ns, id, "cpu", 1)
	settled("scaled down", 1, 2, 4)
	waitFor(t, "the removed workers' quota released", func() (bool, string) {
		u, err := a.c.ResourceGroups().Get(a.ctx, "rg-20")
		if err != nil {
			return false, err.Error()
		}
		return u.Reserved.MilliCPU == 12000, u.Reserved.String()
	})
	a.clean()
}

// clean checks that CheckQuota finds nothing and that the watcher of the
// store saw no version of the resource group over capacity.
func (a *autoscaleScene) clean() {
	t := a.t
	t.Helper()
	if err := a.c.CheckQuota(a.ctx); err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.over != "" {
		t.Fatalf("the resource group: %s", a.over)
	}
	t.Logf("%d versions of the resource group watched, none over capacity", a.versions)
}

func state(t *testing.T, c *dlc.Client, id string) cluster.State {
	t.Helper()
	cl, err := c.Clusters().Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return cl.State
}
