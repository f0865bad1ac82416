package memory_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
	var versions []string // every version the store handed out, in order
	last := func() string {
		if len(versions) == 0 {
			return ""
		}
		return versions[len(versions)-1]
	}
	cases := []struct {
		name    string
		write   func() (string, error)
		wantErr error // nil: succeeds with a new version
	}{
		{"create", func() (string, error) { return s.Create(ctx, backend.Doc{Kind: "k", ID: "a", Data: []byte("1")}) }, nil},
		{"create again conflicts", func() (string, error) { return s.Create(ctx, backend.Doc{Kind: "k", ID: "a", Data: []byte("x")}) }, errs.ErrConflict},
		{"update current", func() (string, error) {
			return s.Update(ctx, backend.Doc{Kind: "k", ID: "a", Version: last(), Data: []byte("2")})
		}, nil},
		{"stale update conflicts", func() (string, error) {
			return s.Update(ctx, backend.Doc{Kind: "k", ID: "a", Version: versions[0], Data: []byte("x")})
		}, errs.ErrConflict},
		{"update missing", func() (string, error) { return s.Update(ctx, backend.Doc{Kind: "k", ID: "b", Version: last()}) }, errs.ErrNotFound},
	}
	for _, tc := range cases {
		v, err := tc.write()
		if tc.wantErr != nil {
			if !errors.Is(err, tc.wantErr) || v != "" {
				t.Fatalf("%s: v=%q err=%v, want %v", tc.name, v, err, tc.wantErr)
			}
			continue
		}
		if err != nil || v == "" {
			t.Fatalf("%s: v=%q err=%v", tc.name, v, err)
		}
		for _, old := range versions {
			if v == old {
				t.Fatalf("%s: version %q handed out again", tc.name, v)
			}
		}
		versions = append(versions, v)
	}
	d, err := s.Get(ctx, "k", "a")
	if err != nil || string(d.Data) != "2" || d.Version != versions[1] {
		t.Fatalf("get: %+v %v", d, err)
	}
	d.Data[0] = 'z' // copies out: the store is unchanged
	if d2, _ := s.Get(ctx, "k", "a"); string(d2.Data) != "2" {
		t.Fatal("a caller's change reached the store")
	}
	if err := s.Delete(ctx, "k", "a", versions[0]); !errors.Is(err, errs.ErrConflict) {
		t.Fatalf("stale delete: %v", err)
	}
	if err := s.Delete(ctx, "k", "a", versions[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "k", "a"); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("get deleted: %v", err)
	}
	if err := s.Delete(ctx, "k", "a", ""); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("delete deleted: %v", err)
	}
}

// List selects by labels; Watch returns the snapshot and then every
// change, in order, until its context ends.
func TestStoreListWatch(t *testing.T) {
	ctx := context.Background()
	s := memory.NewStore(memory.StoreHooks{})
	mk := func(id, phase string) backend.Doc {
		return backend.Doc{Kind: "run", ID: id, Labels: map[string]string{"phase": phase}, Data: []byte("{}")}
	}
	for _, d := range []backend.Doc{mk("r2", "pending"), mk("r1", "pending"), mk("r3", "done")} {
		if _, err := s.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		sel  map[string]string
		want string
	}{
		{nil, "r1,r2,r3"},
		{map[string]string{"phase": "pending"}, "r1,r2"},
		{map[string]string{"phase": "done"}, "r3"},
		{map[string]string{"phase": "pending", "other": "x"}, ""},
	}
	for _, tc := range cases {
		docs, err := s.List(ctx, "run", tc.sel)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		for i, d := range docs {
			if i > 0 {
				got += ","
			}
			got += d.ID
		}
		if got != tc.want {
			t.Errorf("List(%v) = %s, want %s", tc.sel, got, tc.want)
		}
	}
	wctx, cancel := context.WithCancel(ctx)
	var mu sync.Mutex
	var seen []string
	snap, err := s.Watch(wctx, func(ch backend.Change) {
		mu.Lock()
		seen = append(seen, fmt.Sprintf("%s:%v", ch.Doc.ID, ch.Deleted))
		mu.Unlock()
	})
	if err != nil || len(snap) != 3 {
		t.Fatalf("snapshot: %d docs, %v", len(snap), err)
	}
	v, _ := s.Create(ctx, mk("r4", "pending"))
	_, _ = s.Update(ctx, backend.Doc{Kind: "run", ID: "r4", Version: v, Data: []byte("{}")})
	_ = s.Delete(ctx, "run", "r1", "")
	cancel()
	time.Sleep(10 * time.Millisecond) // the watch is removed after its context ends
	_, _ = s.Create(ctx, mk("r5", "pending"))
	mu.Lock()
	defer mu.Unlock()
	if got := fmt.Sprint(seen); got != "[r4:false r4:false r1:true]" {
		t.Fatalf("watched %s", got)
	}
}

// Hooks intercept writes and reads: a write may fail before or after the
// real write, a read may fail.
func TestStoreHooks(t *testing.T) {
	ctx := context.Background()
	injected := errors.New("injected")
	s := memory.NewStore(memory.StoreHooks{
		Write: func(ctx context.Context, w memory.Write, next func(context.Context) (string, error)) (string, error) {
			switch w.Doc.ID {
			case "refused":
				return "", injected
			case "lost-reply":
				_, _ = next(ctx)
				return "", injected
			}
			return next(ctx)
		},
		Read: func(ctx context.Context, kind, id string) error {
			if id == "unreadable" {
				return injected
			}
			return nil
		},
	})
	cases := []struct {
		id     string
		stored bool
	}{{"refused", false}, {"lost-reply", true}, {"plain", true}}
	for _, tc := range cases {
		_, err := s.Create(ctx, backend.Doc{Kind: "k", ID: tc.id})
		if (tc.id == "plain") != (err == nil) {
			t.Errorf("create %s: %v", tc.id, err)
		}
		_, gerr := s.Get(ctx, "k", tc.id)
		if tc.stored != (gerr == nil) {
			t.Errorf("%s: stored %v, get %v", tc.id, tc.stored, gerr)
		}
	}
	if _, err := s.Get(ctx, "k", "unreadable"); !errors.Is(err, injected) {
		t.Fatalf("read hook: %v", err)
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

// recorder keeps what Ray's Observe reported, as "kind/id".
type recorder struct {
	mu   sync.Mutex
	seen []string
}

func (r *recorder) observe(kind, id string) {
	r.mu.Lock()
	r.seen = append(r.seen, kind+"/"+id)
	r.mu.Unlock()
}

func (r *recorder) count(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, k := range r.seen {
		if k == key {
			n++
		}
	}
	return n
}

func (r *recorder) last() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.seen) == 0 {
		return ""
	}
	return r.seen[len(r.seen)-1]
}

// The simulated Ray follows the cluster's desired state after the
// delays, with pods per node group (two heads with HA), and runs jobs to
// the outcome the hook decides. It says what changed through Observe; the
// state is read with ClusterStatus and RunStatus.
func TestRaySimulation(t *testing.T) {
	ctx := context.Background()
	clk := backend.NewFakeClock(time.Unix(0, 0))
	ray := memory.NewRay(memory.RayOptions{Clock: clk, Hooks: memory.RayHooks{
		RunOutcome: func(r *job.Run) memory.Outcome {
			return memory.Outcome{Fail: true, Logs: []string{"boom"}, Duration: time.Second}
		}}})
	rec := &recorder{}
	ray.Observe(ctx, rec.observe)
	cl := &cluster.Cluster{ID: "c1", State: cluster.Starting, Generation: 1, Replicas: map[string]int{"w": 3}}
	cl.Spec.Head = cluster.HeadGroup{NodeGroup: cluster.NodeGroup{Name: "head", NodeSpec: "cu.4c16g"}, HighAvailability: true}
	cl.Spec.AddWorkerGroup("w", "cu.4c8g", 1, 5)
	if _, err := ray.ClusterStatus(ctx, "c1"); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("status before apply: %v", err)
	}
	if err := ray.ApplyCluster(ctx, cl); err != nil {
		t.Fatal(err)
	}
	run := &job.Run{ID: "r1"}
	if err := ray.SubmitRun(ctx, run, cl); !errors.Is(err, errs.ErrState) {
		t.Fatalf("submit before running: %v", err)
	}
	clk.Advance(time.Second)
	obs, err := ray.ClusterStatus(ctx, "c1")
	if rec.count("cluster/c1") != 1 || err != nil || obs.Phase != cluster.PhaseReady || obs.Generation != 1 || len(obs.Pods) != 5 {
		t.Fatalf("observed %v: %+v %v", rec.seen, obs, err)
	}
	if dash, err := ray.Dashboard(ctx, "c1"); dash == "" || err != nil {
		t.Fatalf("no dashboard while running: %q %v", dash, err)
	}
	// Applying the same generation again changes nothing; a new one is
	// followed at once on a running cluster.
	cl.State, cl.Replicas["w"] = cluster.Running, 1
	_ = ray.ApplyCluster(ctx, cl)
	if pods, _ := ray.Pods(ctx, "c1"); len(pods) != 5 {
		t.Fatalf("re-applying generation 1 changed the pods to %d", len(pods))
	}
	cl.Generation = 2
	_ = ray.ApplyCluster(ctx, cl)
	// The two workers removed terminate for Delays.Terminate, then go; the
	// group waits for them before it takes another size (as KubeRay's scale
	// expectations make it), and a worker added then takes a name no pod
	// of its group has.
	terminating := func(pods []cluster.Pod) (n int) {
		for _, p := range pods {
			if p.Status == "Terminating" {
				n++
			}
		}
		return n
	}
	if pods, _ := ray.Pods(ctx, "c1"); len(pods) != 5 || terminating(pods) != 2 {
		t.Fatalf("after scale-down %d pods, %d terminating; want 5, 2", len(pods), terminating(pods))
	}
	cl.Generation, cl.Replicas["w"] = 3, 2
	_ = ray.ApplyCluster(ctx, cl)
	if pods, _ := ray.Pods(ctx, "c1"); len(pods) != 5 || terminating(pods) != 2 {
		t.Fatalf("scaled up while two terminate: %d pods, %d terminating; want the group to wait", len(pods), terminating(pods))
	}
	clk.Advance(memory.DefaultDelays.Terminate)
	pods, _ := ray.Pods(ctx, "c1")
	names := map[string]bool{}
	for _, p := range pods {
		names[p.Name] = true
	}
	if len(pods) != 4 || terminating(pods) != 0 || len(names) != 4 {
		t.Fatalf("once the two are gone, the group at its size of 2: %+v", pods)
	}
	cl.Generation, cl.Replicas["w"] = 4, 1
	_ = ray.ApplyCluster(ctx, cl)
	clk.Advance(memory.DefaultDelays.Terminate)
	if pods, _ := ray.Pods(ctx, "c1"); len(pods) != 3 || terminating(pods) != 0 {
		t.Fatalf("after the termination grace %d pods, %d terminating; want 3, 0", len(pods), terminating(pods))
	}
	if obs, _ := ray.ClusterStatus(ctx, "c1"); obs.Generation != 4 || obs.Phase != cluster.PhaseReady {
		t.Fatalf("after scale-down %+v", obs)
	}
	if _, err := ray.RunStatus(ctx, "r1"); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("status of an unsubmitted run: %v", err)
	}
	if err := ray.SubmitRun(ctx, run, cl); err != nil {
		t.Fatal(err)
	}
	_ = ray.SubmitRun(ctx, run, cl) // the same submission id never starts twice
	if o, _ := ray.RunStatus(ctx, "r1"); o.State != job.Provisioning {
		t.Fatalf("right after submit: %+v", o)
	}
	clk.Advance(100 * time.Millisecond)
	if o, _ := ray.RunStatus(ctx, "r1"); o.State != job.Running {
		t.Fatalf("after the submit delay: %+v", o)
	}
	clk.Advance(5 * time.Second)
	if o, _ := ray.RunStatus(ctx, "r1"); rec.count("run/r1") != 2 || o.State != job.Failed || o.Message == "" {
		t.Fatalf("runs observed %v, status %+v", rec.seen, o)
	}
	logs, _ := ray.Logs(ctx, "r1")
	if len(logs) != 2 || logs[0] != "boom" {
		t.Fatalf("logs %q", logs)
	}
	_ = ray.DeleteCluster(ctx, "c1")
	clk.Advance(time.Second)
	if _, err := ray.ClusterStatus(ctx, "c1"); !errors.Is(err, errs.ErrNotFound) || rec.last() != "cluster/c1" {
		t.Fatalf("delete observed %v: %v", rec.seen, err)
	}
	// Ray keeps a finished run's record and logs until it is told to
	// forget them (a run deleted by its retention), once or more.
	if logs, _ := ray.Logs(ctx, "r1"); len(logs) != 2 {
		t.Fatalf("logs after the cluster went: %q", logs)
	}
	var _ backend.RunForgetter = (*memory.Backend)(nil)
	for range 2 {
		if err := ray.ForgetRun(ctx, "r1"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ray.RunStatus(ctx, "r1"); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("status of a forgotten run: %v", err)
	}
	if logs, err := ray.Logs(ctx, "r1"); logs != nil || err != nil {
		t.Fatalf("logs of a forgotten run: %q %v", logs, err)
	}
	if err := ray.ForgetRun(ctx, "never-submitted"); err != nil {
		t.Fatalf("forgetting an unknown run: %v", err)
	}
}

// Call is called before every Ray call; its error fails the call, which
// changes nothing.
func TestRayCallHook(t *testing.T) {
	ctx := context.Background()
	clk := backend.NewFakeClock(time.Unix(0, 0))
	injected := errors.New("injected")
	fail := map[string]bool{}
	ray := memory.NewRay(memory.RayOptions{Clock: clk, Hooks: memory.RayHooks{
		Call: func(ctx context.Context, call, id string) error {
			if fail[call] {
				return injected
			}
			return nil
		}}})
	cl := &cluster.Cluster{ID: "c1", State: cluster.Creating, Generation: 1}
	cl.Spec.Head = cluster.HeadGroup{NodeGroup: cluster.NodeGroup{Name: "head", NodeSpec: "cu.4c16g"}}
	cases := []struct {
		call string
		do   func() error
	}{
		{memory.CallApplyCluster, func() error { return ray.ApplyCluster(ctx, cl) }},
		{memory.CallClusterStatus, func() error { _, err := ray.ClusterStatus(ctx, "c1"); return err }},
		{memory.CallDeleteCluster, func() error { return ray.DeleteCluster(ctx, "c1") }},
		{memory.CallSubmitRun, func() error { return ray.SubmitRun(ctx, &job.Run{ID: "r1"}, cl) }},
		{memory.CallStopRun, func() error { return ray.StopRun(ctx, "r1") }},
		{memory.CallRunStatus, func() error { _, err := ray.RunStatus(ctx, "r1"); return err }},
		{memory.CallPods, func() error { _, err := ray.Pods(ctx, "c1"); return err }},
		{memory.CallLogs, func() error { _, err := ray.Logs(ctx, "r1"); return err }},
		{memory.CallDashboard, func() error { _, err := ray.Dashboard(ctx, "c1"); return err }},
		{memory.CallForgetRun, func() error { return ray.ForgetRun(ctx, "r1") }},
	}
	for _, tc := range cases {
		fail[tc.call] = true
		if err := tc.do(); !errors.Is(err, injected) {
			t.Errorf("%s with a failing hook: %v", tc.call, err)
		}
		fail[tc.call] = false
	}
	clk.Advance(time.Second)
	if _, err := ray.ClusterStatus(ctx, "c1"); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("a failed ApplyCluster made a cluster: %v", err)
	}
}

// Pods is told of every change of a cluster's pods, in order, with the
// cluster as applied: made at a start, resized, emptied at a suspend and
// at a delete.
func TestRayPodsHook(t *testing.T) {
	ctx := context.Background()
	clk := backend.NewFakeClock(time.Unix(0, 0))
	var seen []string
	ray := memory.NewRay(memory.RayOptions{Clock: clk, Hooks: memory.RayHooks{
		Pods: func(c *cluster.Cluster, pods []cluster.Pod) {
			seen = append(seen, fmt.Sprintf("%s@%d:%d", c.ID, c.Generation, len(pods)))
		}}})
	cl := &cluster.Cluster{ID: "c1", State: cluster.Starting, Generation: 1, Replicas: map[string]int{"w": 2}}
	cl.Spec.Head = cluster.HeadGroup{NodeGroup: cluster.NodeGroup{Name: "head", NodeSpec: "cu.4c16g"}}
	cl.Spec.AddWorkerGroup("w", "cu.4c8g", 1, 5)
	step := func(state cluster.State, gen int64, workers int) {
		cl.State, cl.Generation, cl.Replicas["w"] = state, gen, workers
		if err := ray.ApplyCluster(ctx, cl); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Second)
	}
	step(cluster.Starting, 1, 2)
	step(cluster.Running, 2, 4)
	step(cluster.Hibernating, 3, 4)
	_ = ray.DeleteCluster(ctx, "c1")
	clk.Advance(time.Second)
	if want := []string{"c1@1:3", "c1@2:5", "c1@3:0", "c1@3:0"}; !slices.Equal(seen, want) {
		t.Fatalf("pods hook saw %v, want %v", seen, want)
	}
}

// A submit is fenced on the cluster's generation: a caller whose cluster
// is older than what Ray follows (another client has hibernated it since)
// gets a conflict, and Ray starts nothing. RestartHead forgets the jobs.
func TestRaySubmitFencedOnGeneration(t *testing.T) {
	ctx := context.Background()
	clk := backend.NewFakeClock(time.Unix(0, 0))
	ray := memory.NewRay(memory.RayOptions{Clock: clk})
	cl := &cluster.Cluster{ID: "c1", State: cluster.Starting, Generation: 1}
	cl.Spec.Head = cluster.HeadGroup{NodeGroup: cluster.NodeGroup{Name: "head", NodeSpec: "cu.4c16g"}}
	if err := ray.ApplyCluster(ctx, cl); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	stale := cl.DeepCopy()
	cl.State, cl.Generation = cluster.Hibernating, 2
	if err := ray.ApplyCluster(ctx, cl); err != nil {
		t.Fatal(err)
	}
	if err := ray.SubmitRun(ctx, &job.Run{ID: "r1"}, stale); !errors.Is(err, errs.ErrConflict) {
		t.Fatalf("submit on generation 1 of a cluster Ray follows at 2: %v, want a conflict", err)
	}
	if _, err := ray.RunStatus(ctx, "r1"); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("Ray has the refused job: %v", err)
	}
	cl.State, cl.Generation = cluster.Starting, 3
	_ = ray.ApplyCluster(ctx, cl)
	clk.Advance(time.Second)
	if err := ray.SubmitRun(ctx, &job.Run{ID: "r2"}, cl); err != nil {
		t.Fatal(err)
	}
	ray.RestartHead("c1")
	if _, err := ray.RunStatus(ctx, "r2"); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("a job of a restarted head: %v, want not found", err)
	}
}

// FailCluster and RecoverCluster play a running cluster failing on Ray's
// side and Ray bringing it back, at the generation it follows; neither
// touches a cluster that is not in the state they act on.
func TestRayFailAndRecoverCluster(t *testing.T) {
	ctx := context.Background()
	clk := backend.NewFakeClock(time.Unix(0, 0))
	ray := memory.NewRay(memory.RayOptions{Clock: clk, Delays: &memory.Delays{Start: time.Second, Submit: time.Second, Run: time.Hour}})
	rec := &recorder{}
	ray.Observe(ctx, rec.observe)
	cl := &cluster.Cluster{ID: "c1", State: cluster.Starting, Generation: 3, Replicas: map[string]int{"w": 1}}
	cl.Spec.Head = cluster.HeadGroup{NodeGroup: cluster.NodeGroup{Name: "head", NodeSpec: "cu.4c16g"}}
	cl.Spec.AddWorkerGroup("w", "cu.4c8g", 1, 1)
	ray.FailCluster("c1", "never applied")
	ray.RecoverCluster("c1")
	if _, err := ray.ClusterStatus(ctx, "c1"); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("an unknown cluster: %v", err)
	}
	_ = ray.ApplyCluster(ctx, cl)
	ray.FailCluster("c1", "still starting") // not ready: left as it is
	clk.Advance(time.Second)
	if err := ray.SubmitRun(ctx, &job.Run{ID: "r1"}, cl); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	ray.RecoverCluster("c1") // not failed: left as it is
	before := rec.count("cluster/c1")
	ray.FailCluster("c1", "head lost")
	obs, _ := ray.ClusterStatus(ctx, "c1")
	if obs.Phase != cluster.PhaseFailed || obs.Generation != 3 || obs.Reason != "head lost" || len(obs.Pods) != 0 || rec.count("cluster/c1") != before+1 {
		t.Fatalf("failed: %+v, told %d times", obs, rec.count("cluster/c1")-before)
	}
	if o, _ := ray.RunStatus(ctx, "r1"); o.State != job.Failed || rec.count("run/r1") == 0 {
		t.Fatalf("its job: %+v", o)
	}
	ray.RecoverCluster("c1")
	obs, _ = ray.ClusterStatus(ctx, "c1")
	if obs.Phase != cluster.PhaseReady || obs.Generation != 3 || len(obs.Pods) != 2 || rec.count("cluster/c1") != before+2 {
		t.Fatalf("recovered: %+v", obs)
	}
}

// A group that waits for its terminating workers takes its size when they
// are gone only while the cluster still runs: a hibernate or a delete
// applied meanwhile makes no new pods.
func TestRayTerminatingGroupStops(t *testing.T) {
	for _, stop := range []string{"hibernate", "delete"} {
		t.Run(stop, func(t *testing.T) {
			ctx := context.Background()
			clk := backend.NewFakeClock(time.Unix(0, 0))
			d := memory.DefaultDelays
			d.Terminate, d.Hibernate, d.Delete = 10*time.Millisecond, time.Second, time.Second // the workers go first
			ray := memory.NewRay(memory.RayOptions{Clock: clk, Delays: &d})
			cl := &cluster.Cluster{ID: "c1", State: cluster.Starting, Generation: 1, Replicas: map[string]int{"w": 5}}
			cl.Spec.Head = cluster.HeadGroup{NodeGroup: cluster.NodeGroup{Name: "head", NodeSpec: "cu.4c16g"}}
			cl.Spec.AddWorkerGroup("w", "cu.4c8g", 1, 5)
			apply := func(gen int64, st cluster.State, w int) {
				cl.Generation, cl.State, cl.Replicas["w"] = gen, st, w
				if err := ray.ApplyCluster(ctx, cl); err != nil {
					t.Fatal(err)
				}
			}
			apply(1, cluster.Starting, 5)
			clk.Advance(time.Second)
			started := clk.Now()
			apply(2, cluster.Running, 1) // 4 terminate
			apply(3, cluster.Running, 3) // waits for them
			if stop == "hibernate" {
				apply(4, cluster.Hibernating, 3)
			} else if err := ray.DeleteCluster(ctx, "c1"); err != nil {
				t.Fatal(err)
			}
			clk.Advance(d.Terminate)
			pods, _ := ray.Pods(ctx, "c1")
			if len(pods) != 2 { // the head and the one worker kept
				t.Fatalf("a %s cluster's pods once its terminating workers went: %+v", stop, pods)
			}
			for _, p := range pods {
				if p.CreatedAt.After(started) {
					t.Fatalf("a %s cluster got a new pod %s once its terminating workers went: %+v", stop, p.Name, pods)
				}
			}
		})
	}
}
