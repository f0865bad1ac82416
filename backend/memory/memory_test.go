package memory_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/backend/memory"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/job"
)

func TestStoreVersions(t *testing.T) {
	ctx := context.Background()
	s := memory.NewStore(memory.StoreHooks{})
	cases := []struct {
		name    string
		doc     backend.Doc
		wantV   int64
		wantErr error
	}{
		{"create", backend.Doc{Kind: "k", ID: "a", Data: []byte("1")}, 1, nil},
		{"create again conflicts", backend.Doc{Kind: "k", ID: "a", Data: []byte("x")}, 0, errs.ErrConflict},
		{"update current", backend.Doc{Kind: "k", ID: "a", Version: 1, Data: []byte("2")}, 2, nil},
		{"stale update conflicts", backend.Doc{Kind: "k", ID: "a", Version: 1, Data: []byte("x")}, 0, errs.ErrConflict},
		{"update missing", backend.Doc{Kind: "k", ID: "b", Version: 3}, 0, errs.ErrNotFound},
	}
	for _, tc := range cases {
		v, err := s.Put(ctx, tc.doc)
		if v != tc.wantV || !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
			t.Fatalf("%s: v=%d err=%v", tc.name, v, err)
		}
	}
	d, err := s.Get(ctx, "k", "a")
	if err != nil || string(d.Data) != "2" || d.Version != 2 {
		t.Fatalf("get: %+v %v", d, err)
	}
	d.Data[0] = 'z' // copies out: the store is unchanged
	if d2, _ := s.Get(ctx, "k", "a"); string(d2.Data) != "2" {
		t.Fatal("a caller's change reached the store")
	}
	if err := s.Delete(ctx, "k", "a", 1); !errors.Is(err, errs.ErrConflict) {
		t.Fatalf("stale delete: %v", err)
	}
	if err := s.Delete(ctx, "k", "a", 2); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "k", "a"); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("get deleted: %v", err)
	}
}

func TestFakeClockOrder(t *testing.T) {
	clk := backend.NewFakeClock(time.Unix(0, 0))
	var got []int
	clk.AfterFunc(2*time.Second, func() { got = append(got, 2) })
	clk.AfterFunc(time.Second, func() {
		got = append(got, 1)
		clk.AfterFunc(500*time.Millisecond, func() { got = append(got, 15) })
	})
	stop := clk.AfterFunc(time.Second, func() { got = append(got, 99) })
	clk.AfterFunc(0, func() { got = append(got, 0) })
	if len(got) != 0 {
		t.Fatal("AfterFunc ran before Advance")
	}
	stop()
	clk.Advance(3 * time.Second)
	if len(got) != 4 || got[0] != 0 || got[1] != 1 || got[2] != 15 || got[3] != 2 || clk.Pending() != 0 {
		t.Fatalf("order %v", got)
	}
	if !clk.Now().Equal(time.Unix(3, 0)) {
		t.Fatalf("now %v", clk.Now())
	}
}

type recorder struct {
	mu       sync.Mutex
	clusters []cluster.Observation
	runs     []job.Observation
}

func (r *recorder) ClusterObserved(_ string, o cluster.Observation) {
	r.mu.Lock()
	r.clusters = append(r.clusters, o)
	r.mu.Unlock()
}
func (r *recorder) RunObserved(_ string, o job.Observation) {
	r.mu.Lock()
	r.runs = append(r.runs, o)
	r.mu.Unlock()
}

// The simulated Ray follows the cluster's state after the delays, with
// pods per node group (two heads with HA), and runs jobs to the outcome
// the hook decides.
func TestRaySimulation(t *testing.T) {
	ctx := context.Background()
	clk := backend.NewFakeClock(time.Unix(0, 0))
	ray := memory.NewRay(memory.RayOptions{Clock: clk, Hooks: memory.RayHooks{
		RunOutcome: func(r *job.Run) memory.Outcome {
			return memory.Outcome{Fail: true, Logs: []string{"boom"}, Duration: time.Second}
		}}})
	rec := &recorder{}
	ray.Watch(rec)
	cl := &cluster.Cluster{ID: "c1", State: cluster.Starting, Replicas: map[string]int{"w": 3}}
	cl.Spec.Head = cluster.HeadGroup{NodeGroup: cluster.NodeGroup{Name: "head", NodeSpec: "cu.4c16g"}, HighAvailability: true}
	cl.Spec.AddWorkerGroup("w", "cu.4c8g", 1, 5)
	if err := ray.ApplyCluster(ctx, cl); err != nil {
		t.Fatal(err)
	}
	run := &job.Run{ID: "r1"}
	if err := ray.SubmitRun(ctx, run, cl); !errors.Is(err, errs.ErrState) {
		t.Fatalf("submit before running: %v", err)
	}
	clk.Advance(time.Second)
	if len(rec.clusters) != 1 || rec.clusters[0].State != cluster.Running || len(rec.clusters[0].Pods) != 5 {
		t.Fatalf("observed %+v", rec.clusters)
	}
	if ray.Dashboard(ctx, "c1") == "" {
		t.Fatal("no dashboard while running")
	}
	cl.State, cl.Replicas["w"] = cluster.Running, 1
	_ = ray.ApplyCluster(ctx, cl)
	if pods, _ := ray.Pods(ctx, "c1"); len(pods) != 3 {
		t.Fatalf("after scale-down %d pods", len(pods))
	}
	if err := ray.SubmitRun(ctx, run, cl); err != nil {
		t.Fatal(err)
	}
	_ = ray.SubmitRun(ctx, run, cl) // the same submission id never starts twice
	clk.Advance(5 * time.Second)
	if len(rec.runs) != 2 || rec.runs[0].State != job.Running || rec.runs[1].State != job.Failed {
		t.Fatalf("runs observed %+v", rec.runs)
	}
	logs, _ := ray.Logs(ctx, "r1")
	if len(logs) != 2 || logs[0] != "boom" {
		t.Fatalf("logs %q", logs)
	}
	_ = ray.DeleteCluster(ctx, "c1")
	clk.Advance(time.Second)
	if last := rec.clusters[len(rec.clusters)-1]; last.State != "" {
		t.Fatalf("delete observed %+v", last)
	}
}
