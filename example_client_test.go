package dlc_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/dlctest"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
	"github.com/aidlc/dlc/usage"
)

// The platform on the memory backend with a fake clock: a cluster is
// started, and a job submitted to its group runs on it. A call writes
// what is wanted and returns; Settle runs the reconcilers that take it
// the rest of the way, as simulated time passes.
func ExampleClient() {
	m := dlctest.NewMemory(dlctest.MemoryOptions{})
	defer m.Close()
	c := m.Client
	ctx := dlc.WithUser(context.Background(), "alice")

	_, _ = c.ResourceGroups().Register(ctx, quota.Group{ID: "rg-1", Package: "pkg-1",
		Capacity: quota.Resources{MilliCPU: 32000, Memory: 128 * quota.GiB}})
	grp, _ := c.Groups().Create(ctx, "训练组")
	spec, _ := dlc.NewCluster("集群_1").Groups(grp.ID).Resources("pkg-1", "rg-1").
		Image("ray-2.46.0-py310-cpu").Head("head", "cu.4c16g").WorkerGroup("cpu", "cu.4c8g", 1, 4).Build()
	cl, _ := c.Clusters().Create(ctx, spec)
	m.Settle(100*time.Millisecond, 100)
	_, _ = c.Clusters().Start(ctx, cl.ID)
	m.Settle(100*time.Millisecond, 100)

	cfg, _ := dlc.NewJob("wordcount").OnGroup(grp.ID).
		COSPackage("cos://jobs-1250000000/wc.zip").Entrypoint("python main.py").Build()
	_, run, err := job.Submit(ctx, c, cfg, "")
	m.Reconcile() // the run is placed on the group's running member
	run, _ = c.Runs().Get(ctx, run.ID)
	fmt.Println(run.State, err)
	m.Settle(100*time.Millisecond, 100)
	run, _ = c.Runs().Get(ctx, run.ID)
	fmt.Println(run.State, run.ClusterID == cl.ID, run.Creator)
	u, _ := c.ResourceGroups().Get(ctx, "rg-1")
	fmt.Println(u.Reserved)
	// Output:
	// provisioning <nil>
	// succeeded true alice
	// cpu=8 memory=24Gi gpu=0
}

// An on-demand run waits, saying why, until quota frees.
func ExampleRunService_Create_onDemand() {
	m := dlctest.NewMemory(dlctest.MemoryOptions{})
	defer m.Close()
	c := m.Client
	ctx := context.Background()
	_, _ = c.ResourceGroups().Register(ctx, quota.Group{ID: "rg-1", Package: "pkg-1",
		Capacity: quota.Resources{MilliCPU: 16000, Memory: 64 * quota.GiB}})
	cfg, _ := dlc.NewJob("train").OnDemand("pkg-1", "rg-1").Priority(7).
		Image("ray-2.46.0-py310-cpu").Head("head", "cu.4c8g").WorkerGroup("w", "cu.8c16g", 1, 1).
		COSPackage("cos://jobs-1250000000/train.zip").Entrypoint("python train.py").Build()
	rec, _ := c.Jobs().Create(ctx, cfg, dlc.SaveOptions{})
	first, _ := c.Runs().Create(ctx, rec.ID, dlc.RunOptions{})
	m.Reconcile() // the resource group admits the first run
	second, _ := c.Runs().Create(ctx, rec.ID, dlc.RunOptions{})
	m.Reconcile() // the second does not fit beside it
	first, _ = c.Runs().Get(ctx, first.ID)
	second, _ = c.Runs().Get(ctx, second.ID)
	fmt.Println(first.State, "|", second.State, second.WaitReason)
	m.Settle(100*time.Millisecond, 1000)
	first, _ = c.Runs().Get(ctx, first.ID)
	second, _ = c.Runs().Get(ctx, second.ID)
	fmt.Println(first.State, second.State)
	// Output:
	// provisioning | waiting insufficient unused quota
	// succeeded succeeded
}

// Why a run waits, and where it is in its resource group's queue.
func ExampleRunService_Pending() {
	m := dlctest.NewMemory(dlctest.MemoryOptions{})
	defer m.Close()
	c := m.Client
	ctx := context.Background()
	_, _ = c.ResourceGroups().Register(ctx, quota.Group{ID: "rg-1", Package: "pkg-1",
		Capacity: quota.Resources{MilliCPU: 12000, Memory: 48 * quota.GiB}})
	submit := func(name string, priority int) string {
		cfg, _ := dlc.NewJob(name).OnDemand("pkg-1", "rg-1").Priority(priority).
			Image("ray-2.46.0-py310-cpu").Head("head", "cu.4c8g").WorkerGroup("w", "cu.4c8g", 1, 1).
			COSPackage("cos://jobs-1250000000/train.zip").Entrypoint("python train.py").Build()
		rec, _ := c.Jobs().Create(ctx, cfg, dlc.SaveOptions{})
		r, _ := c.Runs().Create(ctx, rec.ID, dlc.RunOptions{})
		m.Reconcile()
		return r.ID
	}
	submit("first", 5) // takes 8 of the 12 cores
	low := submit("low", 2)
	high := submit("high", 8)
	for _, id := range []string{high, low} {
		p, _ := c.Runs().Pending(ctx, id)
		fmt.Println(p.Position, p.Ahead, p.Reason, "|", p.Lacks)
	}
	// Output:
	// 1 0 insufficient unused quota | needs cpu=8 memory=16Gi gpu=0; allocatable cpu=4 memory=32Gi gpu=0
	// 2 1 insufficient unused quota | needs cpu=8 memory=16Gi gpu=0; allocatable cpu=4 memory=32Gi gpu=0
}

// Finished runs are deleted when their retention ends: here a day after
// they finished, and beyond the newest 2 of a job config at once.
func ExampleWithRunRetention() {
	m := dlctest.NewMemory(dlctest.MemoryOptions{Options: []dlc.Option{dlc.WithRunRetention(24*time.Hour, 2)}})
	defer m.Close()
	c := m.Client
	ctx := context.Background()
	_, _ = c.ResourceGroups().Register(ctx, quota.Group{ID: "rg-1", Package: "pkg-1",
		Capacity: quota.Resources{MilliCPU: 16000, Memory: 64 * quota.GiB}})
	cfg, _ := dlc.NewJob("nightly").OnDemand("pkg-1", "rg-1").
		Image("ray-2.46.0-py310-cpu").Head("head", "cu.4c8g").WorkerGroup("w", "cu.4c8g", 1, 1).
		COSPackage("cos://jobs-1250000000/etl.zip").Entrypoint("python etl.py").Build()
	rec, _ := c.Jobs().Create(ctx, cfg, dlc.SaveOptions{})
	var ids []string
	for range 3 {
		r, _ := c.Runs().Create(ctx, rec.ID, dlc.RunOptions{})
		m.Settle(100*time.Millisecond, 1000) // it runs and finishes
		ids = append(ids, r.ID)
	}
	for i, id := range ids {
		if r, err := c.Runs().Get(ctx, id); err != nil {
			fmt.Println("run", i+1, "deleted:", errors.Is(err, dlc.ErrNotFound))
		} else {
			fmt.Println("run", i+1, r.State)
		}
	}
	m.Clock.Advance(24 * time.Hour)
	m.Reconcile()
	runs, _ := c.Runs().List(ctx, dlc.RunListOptions{JobID: rec.ID})
	fmt.Println(len(runs), "runs a day later")
	// Output:
	// run 1 deleted: true
	// run 2 succeeded
	// run 3 succeeded
	// 0 runs a day later
}

// Waiting for a cluster and a run with no poll loop, on a client with its
// reconcilers running (the memory backend's Ray takes a few hundred
// milliseconds of real time). The condition sees each state as the
// client's cache does, so it can also report progress.
func ExampleClusterService_Wait() {
	c, _ := dlc.New()
	defer c.Close()
	ctx, cancel := context.WithTimeout(dlc.WithUser(context.Background(), "alice"), time.Minute)
	defer cancel()
	_, _ = c.ResourceGroups().Register(ctx, quota.Group{ID: "rg-1", Package: "pkg-1",
		Capacity: quota.Resources{MilliCPU: 32000, Memory: 128 * quota.GiB}})
	grp, _ := c.Groups().Create(ctx, "训练组")
	spec, _ := dlc.NewCluster("集群_1").Groups(grp.ID).Resources("pkg-1", "rg-1").
		Image("ray-2.46.0-py310-cpu").Head("head", "cu.4c16g").WorkerGroup("cpu", "cu.4c8g", 1, 4).Build()
	cl, _ := c.Clusters().Create(ctx, spec)
	cl, err := c.Clusters().Wait(ctx, cl.ID, cluster.InState(cluster.Created))
	fmt.Println(cl.State, err)
	_, _ = c.Clusters().Start(ctx, cl.ID)
	cl, err = c.Clusters().Wait(ctx, cl.ID, cluster.InState(cluster.Running))
	fmt.Println(cl.State, err)

	cfg, _ := dlc.NewJob("wordcount").OnGroup(grp.ID).
		COSPackage("cos://jobs-1250000000/wc.zip").Entrypoint("python main.py").Build()
	_, run, _ := job.Submit(ctx, c, cfg, "")
	run, err = c.Runs().Wait(ctx, run.ID, job.Ended)
	fmt.Println(run.State, err)

	// A wait that cannot be met ends with the caller's context, saying
	// what it last saw.
	short, stop := context.WithTimeout(ctx, 10*time.Millisecond)
	defer stop()
	_, err = c.Clusters().Wait(short, cl.ID, cluster.InState(cluster.Hibernated))
	fmt.Println(errors.Is(err, context.DeadlineExceeded))
	// Output:
	// created <nil>
	// running <nil>
	// succeeded <nil>
	// true
}

// The README's first program, line for line (TestReadmeSnippets checks
// that the README's block is this function's body): a resource group, a
// cluster group and a cluster, started, a job submitted to the group and
// waited for, the cluster deleted.
func Example_readme() {
	ctx := context.Background()
	// snippet main
	c, err := dlc.New()
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx = dlc.WithUser(ctx, "alice")                      // the creator of what she creates, the actor in operation logs
	capacity, _ := quota.ParseResources("64", "256Gi", 8) // Kubernetes quantities; or quota.Resources{MilliCPU: 64000, …}
	c.ResourceGroups().Register(ctx, quota.Group{ID: "rg-1", Package: "pkg-1", Capacity: capacity})
	grp, _ := c.Groups().Create(ctx, "训练组") // G5; clusters need one (C2)
	spec, _ := dlc.NewCluster("集群_1").Groups(grp.ID).Resources("pkg-1", "rg-1").Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c16g").WorkerGroup("cpu", "cu.4c8g", 1, 4).Build() // every problem at once, or a spec
	cl, _ := c.Clusters().Create(ctx, spec)                                 // creating → created
	cl, _ = c.Clusters().Wait(ctx, cl.ID, cluster.InState(cluster.Created)) // Start needs it created
	c.Clusters().Start(ctx, cl.ID)                                          // reserves head (×2 with HA) + min workers, or ErrQuota
	cfg, _ := dlc.NewJob("wordcount").OnGroup(grp.ID).COSPackage("cos://jobs-1250000000/wc.zip").Entrypoint("python main.py").Build()
	rec, run, _ := job.Submit(ctx, c, cfg, "req-42")                // Jobs().Create (J12) + Runs().Create (J14), idempotent under "req-42"
	run, _ = c.Runs().Wait(ctx, run.ID, job.Ended)                  // queued → waiting(reason) → provisioning → running → succeeded/failed/stopped
	c.Clusters().Delete(ctx, cl.ID, dlc.DeleteOptions{Force: true}) // stops its runs, with the reason
	// end snippet main
	fmt.Println(err, rec.Config.Name, run.State, run.ClusterID == cl.ID)
	// Output: <nil> wordcount succeeded true
}

// Scheduled batch work (L1) with a deadline (L2) and retries (L3): a
// nightly job at 02:00 Shanghai time, on the fake clock of the memory
// fixture, which starts at 2026-01-01 00:00 UTC (08:00 in Shanghai).
func ExampleJobService_NextTicks() {
	m := dlctest.NewMemory(dlctest.MemoryOptions{})
	defer m.Close()
	c := m.Client
	ctx := dlc.WithUser(context.Background(), "alice")
	_, _ = c.ResourceGroups().Register(ctx, quota.Group{ID: "rg-1", Package: "pkg-1",
		Capacity: quota.Resources{MilliCPU: 32000, Memory: 128 * quota.GiB}})
	grp, _ := c.Groups().Create(ctx, "批处理")
	spec, _ := dlc.NewCluster("etl").Groups(grp.ID).Resources("pkg-1", "rg-1").
		Image("ray-2.46.0-py310-cpu").Head("head", "cu.4c16g").WorkerGroup("cpu", "cu.4c8g", 1, 4).Build()
	cl, _ := c.Clusters().Create(ctx, spec)
	m.Settle(100*time.Millisecond, 100)
	_, _ = c.Clusters().Start(ctx, cl.ID)
	m.Settle(100*time.Millisecond, 100)

	// snippet schedule
	nightly := []func(*job.Schedule){
		job.InZone("Asia/Shanghai"),            // read the expression in Shanghai time
		job.Concurrency(job.ForbidConcurrent),  // skip a tick while the last run is still going
		job.StartingDeadline(10 * time.Minute), // a tick missed by longer is skipped, and recorded
	}
	cfg, err := dlc.NewJob("nightly-etl").OnCluster(cl.ID).
		COSPackage("cos://jobs-1250000000/etl.zip").Entrypoint("python etl.py").
		Schedule("0 2 * * *", nightly...). // 02:00 every day
		ActiveDeadline(2 * time.Hour).     // stopped and failed if not done in two hours
		Retries(2).                        // a failed run is run again up to twice, after a backoff
		Build()
	if err != nil {
		log.Fatal(err)
	}
	rec, _ := c.Jobs().Create(ctx, cfg, dlc.SaveOptions{})
	next, _ := c.Jobs().NextTicks(ctx, rec.ID, 2)
	// end snippet schedule
	for _, t := range next {
		fmt.Println(t.Format(time.RFC3339))
	}
	m.Step(48 * time.Hour)
	runs, _ := c.Runs().List(ctx, dlc.RunListOptions{JobID: rec.ID})
	for _, r := range runs {
		fmt.Println(r.Tick.Format(time.RFC3339), r.State)
	}
	// Output:
	// 2026-01-02T02:00:00+08:00
	// 2026-01-03T02:00:00+08:00
	// 2026-01-01T18:00:00Z succeeded
	// 2026-01-02T18:00:00Z succeeded
}

// Will it fit? A plan of an on-demand run in a resource group that one
// run already fills says what it lacks and where it would wait, and
// writes nothing.
func ExampleJobService_PlanRun() {
	m := dlctest.NewMemory(dlctest.MemoryOptions{})
	defer m.Close()
	c := m.Client
	ctx := dlc.WithUser(context.Background(), "alice")
	_, _ = c.ResourceGroups().Register(ctx, quota.Group{ID: "rg-1", Package: "pkg-1",
		Capacity: quota.Resources{MilliCPU: 16000, Memory: 64 * quota.GiB}})
	cfg, _ := dlc.NewJob("train").OnDemand("pkg-1", "rg-1").Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 2, 4).
		COSPackage("cos://jobs-1250000000/train.zip").Entrypoint("python train.py").Build()
	rec, _ := c.Jobs().Create(ctx, cfg, dlc.SaveOptions{})
	_, _ = c.Runs().Create(ctx, rec.ID, dlc.RunOptions{}) // admitted: 12 of 16 cores
	m.Reconcile()

	// snippet plan
	p, err := c.Jobs().PlanRun(ctx, rec.ID) // writes nothing
	if err != nil {
		log.Fatal(err) // every problem, as Validate says them
	}
	fmt.Println(p.Quota.Fits, p.Quota.Lacks)
	fmt.Println("reserved", p.Quota.ReservedBefore, "→", p.Quota.ReservedAfter, "of", p.Quota.Capacity)
	fmt.Println("would wait at position", p.Position)
	// end snippet plan

	// Output:
	// false needs cpu=12 memory=24Gi gpu=0; allocatable cpu=4 memory=40Gi gpu=0
	// reserved cpu=12 memory=24Gi gpu=0 → cpu=24 memory=48Gi gpu=0 of cpu=16 memory=64Gi gpu=0
	// would wait at position 1
}

// Metering: what a team's clusters ran, by tag, priced per node-spec hour
// (docs/metering.md). On the memory fixture's fake clock a cluster of a
// cu.4c16g head and one cu.4c8g worker (8 cores) runs for two hours
// (its pods come up 150 ms after the start, and go 50 ms after the
// hibernate: what is billed is what ran), then hibernates: billing stops.
func ExampleClient_Usage() {
	m := dlctest.NewMemory(dlctest.MemoryOptions{})
	defer m.Close()
	client := m.Client
	ctx := dlc.WithUser(context.Background(), "alice")
	_, _ = client.ResourceGroups().Register(ctx, quota.Group{ID: "rg-1", Package: "pkg-1",
		Capacity: quota.Resources{MilliCPU: 32000, Memory: 128 * quota.GiB}})
	grp, _ := client.Groups().Create(ctx, "计费")
	spec, _ := dlc.NewCluster("nlp").Groups(grp.ID).Resources("pkg-1", "rg-1").Tag("team", "nlp").
		Image("ray-2.46.0-py310-cpu").Head("head", "cu.4c16g").WorkerGroup("cpu", "cu.4c8g", 1, 4).Build()
	cl, _ := client.Clusters().Create(ctx, spec)
	m.Settle(100*time.Millisecond, 100)
	_, _ = client.Clusters().Start(ctx, cl.ID)
	m.Step(2*time.Hour + 100*time.Millisecond)
	_, _ = client.Clusters().Hibernate(ctx, cl.ID, dlc.HibernateOptions{})
	m.Step(5 * time.Hour)
	monthStart, monthEnd := dlctest.Epoch, dlctest.Epoch.AddDate(0, 1, 0)

	// snippet usage
	rep, err := client.Usage(ctx, usage.Query{
		From: monthStart, To: monthEnd,
		GroupBy: usage.TagKey("team"), // or usage.ByResourceGroup, ByResourcePackage, ByCreator, ByCluster, ByJob
		Filter:  usage.Filter{ResourcePackage: "pkg-1"},
		Prices: &usage.PriceList{Currency: "CNY", NodeHour: map[string]float64{"cu.4c8g": 1.2, "cu.4c16g": 2},
			Packages: map[string]map[string]float64{"pkg-discount": {"cu.4c8g": 0.9}}},
	})
	// rep.Rows: per tag value ("" for untagged), NodeHours by node spec, CPUCoreHours,
	// MemoryGiBHours, GPUHours by GPU type, Amount; rep.Total; rep.Unpriced.
	err = rep.WriteCSV(os.Stdout) // or encoding/json
	// end snippet usage
	fmt.Println(err)
	// Output:
	// tag:team,cpu_core_hours,memory_gib_hours,node_hours:cu.4c16g,node_hours:cu.4c8g,amount,currency,records
	// nlp,16,48,2,2,6.4,CNY,1
	// total,16,48,2,2,6.4,CNY,1
	// <nil>
}
