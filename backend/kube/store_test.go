package kube_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dlc "github.com/aidlc/dlc"
	"github.com/aidlc/dlc/event"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/backend/kube/api/v1alpha1"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/dlctest/kubetest"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/group"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
	"github.com/aidlc/dlc/storage"
)

// The store satisfies the client's interface.
var (
	_ dlc.Store        = (*kube.Store)(nil)
	_ dlc.LatestReader = (*kube.Store)(nil)
	_ dlc.LatestReader = (*kube.Backend)(nil)
)

var t0 = time.Date(2026, 3, 14, 9, 26, 53, 589793238, time.UTC)

func newStore(t *testing.T) *kube.Store {
	t.Helper()
	cp := kubetest.StartControlPlane(t)
	ns := cp.NewNamespace(t)
	start := time.Now()
	s, err := kube.NewStore(t.Context(), cp.Config(), ns, kube.StoreOptions{})
	if err != nil {
		t.Fatalf("NewStore: %v", err)
	}
	t.Logf("NewStore synced in %v", time.Since(start))
	return s
}

func testEnv() cluster.Environment {
	return cluster.Environment{
		Image: "ray:2.9.3-py310",
		Head: cluster.HeadGroup{NodeGroup: cluster.NodeGroup{Name: "head", NodeSpec: "CU.S4",
			Env: map[string]string{"TZ": "Asia/Shanghai"}, Resources: map[string]float64{"head": 0.5}}},
		Workers: []cluster.WorkerGroup{{NodeGroup: cluster.NodeGroup{Name: "gpu", NodeSpec: "GU.A10",
			Labels: map[string]string{"zone": "ap-1"}}, Instances: cluster.Range(0, 4)}},
	}
}

func testConfig() job.Config {
	return job.Config{
		Name:       "训练 resnet",
		OnDemand:   &job.OnDemand{ResourcePackage: "pkg-1", ResourceGroup: "rg-1", Priority: new(7), Environment: testEnv()},
		Tags:       map[string]string{"team": "vision"},
		Package:    storage.Package{COS: "cos://code-1250000000/resnet.zip"},
		Entrypoint: "python train.py",
		Mounts:     []storage.Mount{{Type: storage.CFS, Instance: "cfs-1a2b3c4d", SubPath: "team/data", MountPath: "/data", ReadOnly: true}},
		Runtime:    job.RuntimeEnv{Pip: []string{"torch>=2.0"}, EnvVars: map[string]string{"A": "1"}},
		Advanced:   map[string]string{"num-cpus": "4"},
	}
}

// events is a log of two entries, the second folded (Count, First): the
// CRDs keep both.
func events() []event.Event {
	return []event.Event{{Time: t0, Source: "user", Actor: "alice", Action: "create"},
		{Time: t0.Add(time.Minute), Source: "system", Action: "created", Message: "Ray has it", Count: 3, First: t0.Add(time.Second)}}
}

// storeCase is one kind's documents: the value created, then the value it
// is updated to, with their labels; decode reads Data back.
type storeCase struct {
	kind, id        string
	labels, labels2 map[string]string
	v, v2           any
	decode          func([]byte) (any, error)
}

func decoder[T any]() func([]byte) (any, error) {
	return func(b []byte) (any, error) {
		v := new(T)
		err := json.Unmarshal(b, v)
		return v, err
	}
}

func storeCases() []storeCase {
	cl := &cluster.Cluster{
		ID: "cls-1a2b3c", State: cluster.Creating, Creator: "alice", CreatedAt: t0, UpdatedAt: t0, Generation: 1,
		Spec: cluster.Spec{Name: "集群 一", Groups: []string{"grp-1"}, Priority: new(3), Tags: map[string]string{"env": "dev"},
			ResourcePackage: "pkg-1", ResourceGroup: "rg-1", Environment: testEnv(),
			Mounts:   []storage.Mount{{Type: storage.COS, Instance: "data-1250000000", MountPath: "/cos"}},
			Advanced: map[string]string{"object-store-memory": "1000000000"}},
		Events: events(),
	}
	cl2 := *cl.DeepCopy()
	cl2.Spec.Name = "集群 二"
	cl2.State = cluster.Running
	cl2.Generation = 2
	cl2.Replicas = map[string]int{"gpu": 2}
	cl2.Live = &cluster.Live{ResourceGroup: "rg-1", Environment: testEnv()}
	cl2.QuotaGroup = "rg-1"
	cl2.PendingRestart = []string{"image"}
	cl2.Stopping, cl2.StoppingBy = t0.Add(time.Minute), "replica-1a2b3c" // a hibernate's mark, and who made it
	cl2.UpdatedAt = t0.Add(time.Minute)
	cl2.Spec.IdleTimeoutSeconds = 1800     // L4
	cl2.RunningSince = t0.Add(time.Minute) // L4

	g := &group.Group{ID: "grp-1", Name: "组 A", Policy: group.Random, Creator: "alice", CreatedAt: t0, UpdatedAt: t0, Events: events()[:1]}
	g2 := *g
	g2.Name = "组 B"
	g2.UpdatedAt = t0.Add(time.Hour)
	g2.Deleting = group.Deletion{Target: "grp-2", At: t0.Add(time.Hour), By: "bob", Replica: "replica-1a2b3c"} // a delete in progress (G6)
	g2.Policy, g2.Order = group.OrderedFailover, []string{"cls-9", "cls-1a2b3c"}                               // G3

	tp := &cluster.Template{Name: "模板 GPU", Description: "A10 workers", Environment: testEnv()}
	tp2 := *tp
	tp2.Description = "changed"

	rec := &job.Record{ID: "job-1", Config: testConfig(), Revision: 1, Creator: "alice", CreatedAt: t0, UpdatedAt: t0, Events: events()}
	rec2 := *rec
	rec2.Config.Entrypoint = "python train.py --epochs 3"
	rec2.Revision = 2
	rec2.Deleting = job.Deletion{At: t0.Add(time.Minute), By: "bob", Replica: "replica-1a2b3c"} // a delete in progress (J17)
	rec2.Config.Schedule = &job.Schedule{Cron: "0 2 * * *", TimeZone: "Asia/Shanghai", ConcurrencyPolicy: job.ReplaceConcurrent, StartingDeadlineSeconds: new(60)}
	rec2.Config.ActiveDeadlineSeconds, rec2.Config.BackoffLimit = 3600, 2                                                                                 // L2, L3
	rec2.ScheduleStatus = job.ScheduleStatus{Suspended: true, LastTick: t0.Add(time.Hour), LastRun: "run-1", NextTick: t0.Add(25 * time.Hour), Missed: 3} // L1

	run := &job.Run{ID: "run-1", JobID: "job-1", Revision: 1, Config: testConfig(), State: job.Waiting,
		WaitReason: job.InsufficientQuota, Message: "needs 8 CPUs", Creator: "alice", SubmittedAt: t0,
		Priority: 7, Seq: 1234567890, Demand: quota.Resources{MilliCPU: 8000, Memory: 32 << 30, GPU: 1}, Events: events()}
	run2 := *run
	run2.State, run2.WaitReason, run2.Message = job.Running, "", ""
	run2.ClusterID, run2.StartedAt, run2.Logs = "cls-od-1", t0.Add(time.Minute), "cos://logs-1250000000/dlc/run-1"
	run2.Placement = "least-loaded: 2 active runs, fewest of 4 running members"
	run2.Attempt, run2.PreviousAttempt, run2.NextAttempt, run2.Final, run2.Tick = 2, "run-0", "run-3", true, t0 // L1, L3

	acc := &quota.Account{Group: quota.Group{ID: "rg-1", Package: "pkg-1", Capacity: quota.Resources{MilliCPU: 64000, Memory: 256 << 30, GPU: 8}}}
	acc2 := *acc
	acc2.Sum, acc2.Seq, acc2.Settled = quota.Resources{MilliCPU: 4000, Memory: 16 << 30}, 1, "41"
	acc2.Pending = map[string]quota.Hold{"cls-1a2b3c": {Resources: quota.Resources{MilliCPU: 4000, Memory: 16 << 30}, Since: t0, Generation: 2, Seq: 1}}

	type claim struct {
		Owner string    `json:"owner"`
		At    time.Time `json:"at"`
	}
	return []storeCase{
		{kind: "cluster", id: cl.ID, labels: map[string]string{"state": "creating", "group.grp-1": "1"},
			labels2: map[string]string{"state": "running", "quota": "rg-1", "group.grp-1": "1"}, v: cl, v2: &cl2, decode: decoder[cluster.Cluster]()},
		{kind: "group", id: g.ID, v: g, v2: &g2, decode: decoder[group.Group]()},
		{kind: "template", id: "模板 GPU", labels: map[string]string{"creator": "alice"}, labels2: map[string]string{"creator": "bob", "名字": "值 x"},
			v: tp, v2: &tp2, decode: decoder[cluster.Template]()},
		{kind: "job", id: rec.ID, labels: map[string]string{"creator": "alice"}, labels2: map[string]string{"creator": "alice"},
			v: rec, v2: &rec2, decode: decoder[job.Record]()},
		{kind: "run", id: run.ID, labels: map[string]string{"job": "job-1", "state": "waiting", "phase": "pending", "target": "rg.rg-1", "priority": "7"},
			labels2: map[string]string{"job": "job-1", "state": "running", "phase": "active", "target": "rg.rg-1", "priority": "7", "on": "cls-od-1"},
			v:       run, v2: &run2, decode: decoder[job.Run]()},
		{kind: "resourcegroup", id: acc.ID, v: acc, v2: &acc2, decode: decoder[quota.Account]()},
		{kind: "name", id: "cluster:集群 一", v: &claim{Owner: "cls-1a2b3c", At: t0}, v2: &claim{Owner: "cls-9", At: t0.Add(time.Hour)},
			decode: decoder[claim]()},
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func checkDoc(t *testing.T, c storeCase, d backend.Doc, version string, labels map[string]string, want any) {
	t.Helper()
	if d.Kind != c.kind || d.ID != c.id || d.Version != version {
		t.Errorf("got %s/%s@%s, want %s/%s@%s", d.Kind, d.ID, d.Version, c.kind, c.id, version)
	}
	if len(labels) == 0 {
		labels = nil
	}
	if !reflect.DeepEqual(d.Labels, labels) {
		t.Errorf("labels = %v, want %v", d.Labels, labels)
	}
	got, err := c.decode(d.Data)
	if err != nil {
		t.Fatalf("decoding %s: %v", d.Data, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("data decodes to\n%+v\nwant\n%+v\n(data %s)", got, want, d.Data)
	}
}

func TestStoreKinds(t *testing.T) {
	s := newStore(t)
	for _, c := range storeCases() {
		t.Run(c.kind, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			d := backend.Doc{Kind: c.kind, ID: c.id, Labels: c.labels, Data: mustJSON(t, c.v)}
			start := time.Now()
			v1, err := s.Create(ctx, d)
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			t.Logf("create (and read back in the cache) took %v", time.Since(start))
			got, err := s.Get(ctx, c.kind, c.id)
			if err != nil {
				t.Fatalf("Get after Create: %v", err)
			}
			checkDoc(t, c, got, v1, c.labels, c.v)

			var ce *errs.ConflictError
			if _, err := s.Create(ctx, d); !errors.As(err, &ce) {
				t.Errorf("Create of an existing id: %v, want a *ConflictError", err)
			}

			d2 := backend.Doc{Kind: c.kind, ID: c.id, Version: v1, Labels: c.labels2, Data: mustJSON(t, c.v2)}
			v2, err := s.Update(ctx, d2)
			if err != nil {
				t.Fatalf("Update: %v", err)
			}
			if v2 == v1 {
				t.Errorf("Update kept version %s", v1)
			}
			if got, err = s.Get(ctx, c.kind, c.id); err != nil {
				t.Fatalf("Get after Update: %v", err)
			}
			checkDoc(t, c, got, v2, c.labels2, c.v2)

			if _, err := s.Update(ctx, d2); !errors.Is(err, errs.ErrConflict) {
				t.Errorf("stale Update: %v, want ErrConflict", err)
			}
			if err := s.Delete(ctx, c.kind, c.id, v1); !errors.Is(err, errs.ErrConflict) {
				t.Errorf("stale Delete: %v, want ErrConflict", err)
			}

			for k, v := range c.labels2 {
				l, err := s.List(ctx, c.kind, map[string]string{k: v})
				if err != nil || len(l) != 1 || l[0].ID != c.id {
					t.Errorf("List(%s=%s) = %v, %v; want %s", k, v, l, err, c.id)
				}
				if l, err := s.List(ctx, c.kind, map[string]string{k: v + "-not"}); err != nil || len(l) != 0 {
					t.Errorf("List(%s=%s-not) = %v, %v; want none", k, v, l, err)
				}
			}
			if l, err := s.List(ctx, c.kind, nil); err != nil || len(l) != 1 {
				t.Errorf("List(all) = %v, %v; want 1", l, err)
			}

			if _, err := s.Get(ctx, c.kind, c.id+"-missing"); !errors.Is(err, errs.ErrNotFound) {
				t.Errorf("Get of a missing id: %v, want ErrNotFound", err)
			}
			miss := d2
			miss.ID, miss.Version = c.id+"-missing", v2
			if _, err := s.Update(ctx, miss); !errors.Is(err, errs.ErrNotFound) {
				t.Errorf("Update of a missing id: %v, want ErrNotFound", err)
			}

			if err := s.Delete(ctx, c.kind, c.id, v2); err != nil {
				t.Fatalf("Delete: %v", err)
			}
			if _, err := s.Get(ctx, c.kind, c.id); !errors.Is(err, errs.ErrNotFound) {
				t.Errorf("Get after Delete: %v, want ErrNotFound", err)
			}
			if err := s.Delete(ctx, c.kind, c.id, ""); !errors.Is(err, errs.ErrNotFound) {
				t.Errorf("Delete of a deleted id: %v, want ErrNotFound", err)
			}
		})
	}
}

// TestStoreRefusesUnknownFields: a domain field the CRD has no place for
// is an error, not silently pruned by the API server.
func TestStoreRefusesUnknownFields(t *testing.T) {
	s := newStore(t)
	for _, data := range []string{`{"id":"grp-x","name":"x","colour":"red"}`, `[1]`} {
		_, err := s.Create(t.Context(), backend.Doc{Kind: "group", ID: "grp-x", Data: []byte(data)})
		if !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("Create(%s): %v, want ErrInvalid", data, err)
		}
	}
	_, err := s.Create(t.Context(), backend.Doc{Kind: "cluster", ID: "c", Data: []byte(`{"spec":{"name":"x","colour":"red"}}`)})
	if !errors.Is(err, errs.ErrInvalid) {
		t.Errorf("Create of a cluster with an unknown spec field: %v, want ErrInvalid", err)
	}
}

func TestStoreWatch(t *testing.T) {
	s := newStore(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	data := func(name string) []byte {
		return mustJSON(t, &group.Group{ID: "ignored", Name: name, Policy: group.Random, CreatedAt: t0, UpdatedAt: t0})
	}
	va, err := s.Create(ctx, backend.Doc{Kind: "group", ID: "grp-a", Data: data("A")})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu  sync.Mutex
		got []backend.Change
	)
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	snap, err := s.Watch(wctx, func(c backend.Change) {
		mu.Lock()
		got = append(got, c)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(snap) != 1 || snap[0].ID != "grp-a" || snap[0].Version != va {
		t.Fatalf("snapshot = %+v, want grp-a@%s", snap, va)
	}
	vb1, err := s.Create(ctx, backend.Doc{Kind: "group", ID: "grp-b", Labels: map[string]string{"n": "1"}, Data: data("B")})
	if err != nil {
		t.Fatal(err)
	}
	vb2, err := s.Update(ctx, backend.Doc{Kind: "group", ID: "grp-b", Version: vb1, Labels: map[string]string{"n": "2"}, Data: data("B2")})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "group", "grp-b", vb2); err != nil {
		t.Fatal(err)
	}
	// Every write waits for the cache, which tells the watchers first. A
	// create or update with a status is two API writes, so a watcher may
	// also see the state between them (the spec alone).
	mu.Lock()
	defer mu.Unlock()
	var seen []string
	for i, c := range got {
		if c.Doc.ID != "grp-b" {
			t.Errorf("change %d is of %s", i, c.Doc.ID)
		}
		if i > 0 && !c.Deleted {
			if cmp, err := resourceversion.CompareResourceVersion(c.Doc.Version, got[i-1].Doc.Version); err != nil || cmp <= 0 {
				t.Errorf("change %d at version %s after %s (%v)", i, c.Doc.Version, got[i-1].Doc.Version, err)
			}
		}
		switch {
		case c.Deleted:
			seen = append(seen, "deleted")
		case c.Doc.Version == vb1 && c.Doc.Labels["n"] == "1":
			seen = append(seen, "created")
		case c.Doc.Version == vb2 && c.Doc.Labels["n"] == "2":
			seen = append(seen, "updated")
		}
	}
	if want := []string{"created", "updated", "deleted"}; !reflect.DeepEqual(seen, want) || !got[len(got)-1].Deleted {
		t.Errorf("changes %v (%d in all), want %v, the delete last", seen, len(got), want)
	}
	t.Logf("%d changes for 3 writes", len(got))
}

// TestStoreObjects checks what the store writes on the API server: names,
// the id and labels annotations, the labels for kubectl, and the domain
// fields in spec and status.
func TestStoreObjects(t *testing.T) {
	cp := kubetest.StartControlPlane(t)
	ns := cp.NewNamespace(t)
	s, err := kube.NewStore(t.Context(), cp.Config(), ns, kube.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cases := storeCases()
	var clusterDoc, rgDoc backend.Doc
	for _, i := range []int{0, 2, 6} { // cluster, template, name claim
		c := cases[i]
		d := backend.Doc{Kind: c.kind, ID: c.id, Labels: c.labels2, Data: mustJSON(t, c.v2)}
		v, err := s.Create(ctx, d)
		if err != nil {
			t.Fatalf("Create %s: %v", c.kind, err)
		}
		if i == 0 {
			d.Version = v
			clusterDoc = d
		}
	}
	rg := cases[5]
	rgDoc = backend.Doc{Kind: rg.kind, ID: rg.id, Data: mustJSON(t, rg.v2)}
	v, err := s.Create(ctx, rgDoc)
	if err != nil {
		t.Fatal(err)
	}
	rgDoc.Version = v
	// A create is one write: the status rides in an annotation, read as
	// the status, until the first update writes the status subresource.
	var fresh v1alpha1.ComputeCluster
	if err := cp.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: "cls-1a2b3c"}, &fresh); err != nil {
		t.Fatal(err)
	}
	if fresh.Status.State != "" || !strings.Contains(fresh.Annotations[kube.StoreKeyInitialStatus], `"state":"running"`) {
		t.Errorf("after create: status %+v, initial-status annotation %q", fresh.Status, fresh.Annotations[kube.StoreKeyInitialStatus])
	}
	if got, err := s.Get(ctx, "cluster", clusterDoc.ID); err != nil || !strings.Contains(string(got.Data), `"state":"running"`) {
		t.Fatalf("Get after create: %s %v", got.Data, err)
	}
	for _, d := range []backend.Doc{clusterDoc, rgDoc} {
		if _, err := s.Update(ctx, d); err != nil {
			t.Fatalf("Update %s: %v", d.Kind, err)
		}
	}

	var cc v1alpha1.ComputeCluster
	if err := cp.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: "cls-1a2b3c"}, &cc); err != nil {
		t.Fatalf("the cluster is not named by its id: %v", err)
	}
	if cc.Spec.Name != "集群 二" || cc.Spec.Creator != "alice" || cc.Spec.ResourceGroup != "rg-1" || cc.Status.State != "running" ||
		cc.Status.Generation != 2 || len(cc.Status.Events) != 2 || cc.Status.Live == nil || cc.Status.Replicas["gpu"] != 2 {
		t.Errorf("cluster spec %+v status %+v", cc.Spec, cc.Status)
	}
	// A kind with a status keeps the store's labels in it, so that a change
	// of state is one write.
	if cc.Status.StoreLabels["state"] != "running" || cc.Status.StoreLabels["group.grp-1"] != "1" || cc.Annotations[kube.StoreKeyID] != "cls-1a2b3c" {
		t.Errorf("cluster store labels %v annotations %v", cc.Status.StoreLabels, cc.Annotations)
	}

	var tl v1alpha1.ClusterTemplateList
	if err := cp.Client().List(ctx, &tl, client.InNamespace(ns)); err != nil || len(tl.Items) != 1 {
		t.Fatalf("templates: %v, %v", tl.Items, err)
	}
	tp := tl.Items[0]
	if tp.Name == "模板 GPU" || tp.Annotations[kube.StoreKeyID] != "模板 GPU" || tp.Spec.Description != "changed" {
		t.Errorf("template %s annotations %v spec %+v", tp.Name, tp.Annotations, tp.Spec)
	}
	// The status keeps every pair, those that are no valid Kubernetes
	// label included; until its first update it is the initial status.
	var initial v1alpha1.ClusterTemplateStatus
	if err := json.Unmarshal([]byte(tp.Annotations[kube.StoreKeyInitialStatus]), &initial); err != nil {
		t.Fatalf("template initial status: %v", err)
	}
	if initial.StoreLabels["名字"] != "值 x" || initial.StoreLabels["creator"] != "bob" || tp.Annotations[kube.StoreKeyLabels] != "" || len(tp.Labels) != 0 {
		t.Errorf("template store labels %v annotations %v labels %v", initial.StoreLabels, tp.Annotations, tp.Labels)
	}

	var r v1alpha1.ResourceGroup
	if err := cp.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: "rg-1"}, &r); err != nil {
		t.Fatal(err)
	}
	if r.Spec.Capacity.GPU != 8 || len(r.Status.Pending) != 1 || r.Status.Reserved.MilliCPU != 4000 {
		t.Errorf("resource group spec %+v status %+v", r.Spec, r.Status)
	}

	var claims v1alpha1.StoreEntryList
	if err := cp.Client().List(ctx, &claims, client.InNamespace(ns), client.MatchingLabels{kube.StoreKeyKind: "name"}); err != nil || len(claims.Items) != 1 {
		t.Fatalf("claims: %v, %v", claims.Items, err)
	}
	if se := claims.Items[0]; se.Annotations[kube.StoreKeyID] != "cluster:集群 一" || !json.Valid([]byte(se.Data)) {
		t.Errorf("claim %s annotations %v data %v", se.Name, se.Annotations, se.Data)
	}
}

// TestStoreUpdateParts: an update of the status alone, of the spec alone,
// and of nothing, each checked against the version.
func TestStoreUpdateParts(t *testing.T) {
	s := newStore(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	g := &group.Group{ID: "grp-1", Name: "A", Policy: group.Random, Creator: "alice", CreatedAt: t0, UpdatedAt: t0}
	put := func(version string, g *group.Group) (string, error) {
		return s.Update(ctx, backend.Doc{Kind: "group", ID: g.ID, Version: version, Data: mustJSON(t, g)})
	}
	v, err := s.Create(ctx, backend.Doc{Kind: "group", ID: g.ID, Data: mustJSON(t, g)})
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		name   string
		change func(*group.Group)
	}{
		{"status", func(g *group.Group) { g.UpdatedAt = t0.Add(time.Hour); g.Events = events() }},
		{"spec", func(g *group.Group) { g.Name = "B" }},
		{"nothing", func(*group.Group) {}},
	} {
		step.change(g)
		nv, err := put(v, g)
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		d, err := s.Get(ctx, "group", g.ID)
		if err != nil || d.Version != nv {
			t.Fatalf("%s: Get = %+v, %v; want version %s", step.name, d, err, nv)
		}
		var got group.Group
		if err := json.Unmarshal(d.Data, &got); err != nil || !reflect.DeepEqual(&got, g) {
			t.Errorf("%s: got %+v, want %+v", step.name, got, g)
		}
		if step.name != "nothing" {
			if nv == v {
				t.Errorf("%s: version unchanged", step.name)
			}
			if _, err := put(v, g); !errors.Is(err, errs.ErrConflict) {
				t.Errorf("%s: a write at the old version: %v, want ErrConflict", step.name, err)
			}
		}
		v = nv
	}
	if _, err := put("1", g); !errors.Is(err, errs.ErrConflict) {
		t.Errorf("an unchanged document at a stale version: %v, want ErrConflict", err)
	}
	if _, err := put("", g); !errors.Is(err, errs.ErrConflict) {
		t.Errorf("an update without a version: %v, want ErrConflict", err)
	}
}

// An update at a version older than the one the store's cache has is a
// conflict, as the API server would say, without asking it.
func TestStoreStaleUpdateMakesNoCall(t *testing.T) {
	cp := kubetest.StartControlPlane(t)
	ns := cp.NewNamespace(t)
	var puts atomic.Int64
	cfg := cp.Config()
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return countingTransport{rt, &puts, func(r *http.Request) bool { return r.Method == http.MethodPut }}
	})
	s, err := kube.NewStore(t.Context(), cfg, ns, kube.StoreOptions{NoEvents: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	ctx := t.Context()
	g := &group.Group{ID: "grp-1", Name: "A", Policy: group.Random, Creator: "alice", CreatedAt: t0, UpdatedAt: t0}
	put := func(version string) (string, error) {
		return s.Update(ctx, backend.Doc{Kind: "group", ID: g.ID, Version: version, Data: mustJSON(t, g)})
	}
	v1, err := s.Create(ctx, backend.Doc{Kind: "group", ID: g.ID, Data: mustJSON(t, g)})
	if err != nil {
		t.Fatal(err)
	}
	g.Name = "B"
	v2, err := put(v1) // the store's cache has v2 once Update returns
	if err != nil {
		t.Fatal(err)
	}
	before := puts.Load()
	g.Name = "C"
	if _, err := put(v1); !errors.Is(err, errs.ErrConflict) {
		t.Fatalf("an update at %s with %s cached: %v, want ErrConflict", v1, v2, err)
	}
	if n := puts.Load() - before; n != 0 {
		t.Errorf("the stale update made %d PUTs, want none", n)
	}
	if _, err := put(v2); err != nil {
		t.Errorf("an update at the cached version %s: %v", v2, err)
	}
}

// TestStoreReplicas: two stores on one namespace, as two replicas of a
// service, add reservations to one resource group concurrently, each
// retrying on conflict: none is lost, and each store reads them all.
func TestStoreReplicas(t *testing.T) {
	cp := kubetest.StartControlPlane(t)
	ns := cp.NewNamespace(t)
	var stores [2]*kube.Store
	for i := range stores {
		s, err := kube.NewStore(t.Context(), cp.Config(), ns, kube.StoreOptions{})
		if err != nil {
			t.Fatal(err)
		}
		stores[i] = s
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	acc := &quota.Account{Group: quota.Group{ID: "rg-1", Package: "pkg-1", Capacity: quota.Resources{MilliCPU: 64000}}}
	if _, err := stores[0].Create(ctx, backend.Doc{Kind: "resourcegroup", ID: acc.ID, Data: mustJSON(t, acc)}); err != nil {
		t.Fatal(err)
	}
	// The other replica's cache may not have it yet, but a Get by id
	// finds it all the same: a miss asks the API server.
	if _, err := stores[1].Get(ctx, "resourcegroup", acc.ID); err != nil {
		t.Fatalf("the other store, at once: %v", err)
	}
	if _, err := stores[1].Get(ctx, "resourcegroup", "rg-none"); !errs.IsNotFound(err) {
		t.Fatalf("Get of what is not there: %v, want not found", err)
	}
	const holders = 8
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		conflicts int
	)
	for i := range holders {
		wg.Go(func() {
			s := stores[i%2]
			holder := "run-" + string(rune('a'+i))
			for {
				d, err := s.Get(ctx, "resourcegroup", acc.ID)
				if err != nil {
					t.Errorf("%s: Get: %v", holder, err)
					return
				}
				var a quota.Account
				if err := json.Unmarshal(d.Data, &a); err != nil {
					t.Error(err)
					return
				}
				if a.Pending == nil {
					a.Pending = map[string]quota.Hold{}
				}
				a.Pending[holder] = quota.Hold{Resources: quota.Resources{MilliCPU: 1000}, Since: t0}
				d.Data = mustJSON(t, &a)
				_, err = s.Update(ctx, d)
				if err == nil {
					return
				}
				if !errors.Is(err, errs.ErrConflict) {
					t.Errorf("%s: Update: %v", holder, err)
					return
				}
				mu.Lock()
				conflicts++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.Logf("%d conflicts retried", conflicts)
	for i, s := range stores {
		// The other replica's last write may still be on its way to this
		// cache: wait for it.
		deadline := time.Now().Add(10 * time.Second)
		for {
			d, err := s.Get(ctx, "resourcegroup", acc.ID)
			if err != nil {
				t.Fatal(err)
			}
			var a quota.Account
			if err := json.Unmarshal(d.Data, &a); err != nil {
				t.Fatal(err)
			}
			if len(a.Pending) == holders {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("store %d: %d holders %v, want %d", i, len(a.Pending), a.Pending, holders)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// TestStoreInflatedHolders (issue 18, item 6): holds that someone else
// inflated to 2^62 milli-CPU each are written and read back, and the
// resource group stays writable: the sum saturates instead of wrapping
// negative, which the CRD refuses.
func TestStoreInflatedHolders(t *testing.T) {
	s := newStore(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	a := &quota.Account{Group: quota.Group{ID: "rg-huge", Package: "pkg-1", Capacity: quota.Cores(8)}}
	v, err := s.Create(ctx, backend.Doc{Kind: "resourcegroup", ID: a.ID, Data: mustJSON(t, a)})
	if err != nil {
		t.Fatal(err)
	}
	huge := quota.Resources{MilliCPU: 1 << 62}
	if _, err := a.Set("cls-a", quota.Cores(1), t0); err != nil {
		t.Fatal(err)
	}
	a.Pending = map[string]quota.Hold{"cls-a": {Resources: huge, Since: t0, Seq: 1}, "cls-b": {Resources: huge, Since: t0, Seq: 2}}
	a.Sum = huge.Add(huge).Add(huge) // saturates
	if v, err = s.Update(ctx, backend.Doc{Kind: "resourcegroup", ID: a.ID, Version: v, Data: mustJSON(t, a)}); err != nil {
		t.Fatalf("writing two holds of 2^62 milli-CPU: %v", err)
	}
	a.Release("cls-a")
	if _, err = s.Update(ctx, backend.Doc{Kind: "resourcegroup", ID: a.ID, Version: v, Data: mustJSON(t, a)}); err != nil {
		t.Fatalf("releasing one of them: %v", err)
	}
	d, err := s.Get(ctx, "resourcegroup", a.ID)
	if err != nil {
		t.Fatal(err)
	}
	var got quota.Account
	if err := json.Unmarshal(d.Data, &got); err != nil || len(got.Pending) != 2 || got.Held("cls-a") != (quota.Resources{}) || got.Held("cls-b") != huge {
		t.Fatalf("read back %+v, %v", got, err)
	}
}
