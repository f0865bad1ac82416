// Command quickstart tells the SDK's whole story on the embedded in-memory
// backend, with no Kubernetes cluster: it validates specs (and shows every
// problem of a broken one), registers a resource group, creates a cluster
// group and a cluster, starts it, runs a job on the group, and queues two
// on-demand runs behind quota, the second admitted when the first frees it.
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, cancel := context.WithTimeout(dlc.WithUser(context.Background(), "alice"), 30*time.Second)
	defer cancel()
	c, err := dlc.New() // the memory backend, the real clock
	if err != nil {
		return err
	}
	defer c.Close()

	fmt.Println("== every problem of a broken cluster spec, at once")
	_, err = dlc.NewCluster("bad name!").Priority(12).Image("ray-9.9").
		Head("Head", "cu.1c1g").WorkerGroup("cpu", "cu.8c32g", 4, 2).Advanced("num-cpus", "64").Build()
	for _, fe := range dlc.Fields(err) {
		fmt.Printf("  %-30s [%s] %s\n", fe.Path, fe.Rule, fe.Detail)
	}

	fmt.Println("\n== a resource group of 24 cores and a cluster group")
	if _, err := c.ResourceGroups().Register(ctx, quota.Group{ID: "rg-1", Package: "pkg-1",
		Capacity: quota.Resources{MilliCPU: 24000, Memory: 96 * quota.GiB}}); err != nil {
		return err
	}
	grp, err := c.Groups().Create(ctx, "训练组")
	if err != nil {
		return err
	}
	fmt.Printf("  group %s (%s), policy %s\n", grp.Name, grp.ID, grp.Policy)

	fmt.Println("\n== a cluster: created, then started")
	spec, err := dlc.NewCluster("训练集群_01").Groups(grp.ID).Resources("pkg-1", "rg-1").
		Image("ray-2.46.0-py310-cpu").Head("head", "cu.4c16g").
		WorkerGroup("cpu", "cu.4c8g", 1, 4, cluster.Env("OMP_NUM_THREADS", "4")).Build()
	if err != nil {
		return err
	}
	y, _ := spec.MarshalYAML()
	fmt.Printf("%s", indent(string(y)))
	cl, err := c.Clusters().Create(ctx, spec)
	if err != nil {
		return err
	}
	if err := waitCluster(ctx, c, cl.ID, cluster.Created); err != nil {
		return err
	}
	if _, err := c.Clusters().Start(ctx, cl.ID); err != nil {
		return err
	}
	if err := waitCluster(ctx, c, cl.ID, cluster.Running); err != nil {
		return err
	}
	d, err := c.Clusters().Details(ctx, cl.ID)
	if err != nil {
		return err
	}
	fmt.Printf("  %d pods, reserving %s, dashboard %s\n", len(d.Pods), d.Resources, d.Dashboard)

	fmt.Println("\n== a job on the cluster group")
	cfg, err := dlc.NewJob("wordcount").OnGroup(grp.ID).
		COSPackage("cos://jobs-1250000000/wordcount.zip").Entrypoint("python main.py").Build()
	if err != nil {
		return err
	}
	_, r, err := job.Submit(ctx, c, cfg, "")
	if err != nil {
		return err
	}
	if _, err = waitRun(ctx, c, r.ID); err != nil {
		return err
	}

	fmt.Println("\n== two on-demand runs of 12 cores each: 16 cores are left, so one waits for quota")
	od, err := dlc.NewJob("train-resnet").OnDemand("pkg-1", "rg-1").Priority(7).
		Image("ray-2.46.0-py310-cpu").Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.8c16g", 1, 2).
		COSPackage("cos://jobs-1250000000/resnet.zip").Entrypoint("python train.py --epochs 1").Build()
	if err != nil {
		return err
	}
	rec, first, err := job.Submit(ctx, c, od, "")
	if err != nil {
		return err
	}
	second, err := c.Runs().Create(ctx, rec.ID, dlc.RunOptions{})
	if err != nil {
		return err
	}
	// Both wait for the resource group's admission; the second for quota.
	if err := waitWaiting(ctx, c, second.ID); err != nil {
		return err
	}
	if first, err = c.Runs().Get(ctx, first.ID); err != nil {
		return err
	}
	second, err = c.Runs().Get(ctx, second.ID)
	if err != nil {
		return err
	}
	fmt.Printf("  %s: %s\n  %s: %s (%s)\n", first.ID, first.State, second.ID, second.State, second.WaitReason)
	if p, err := c.Runs().Pending(ctx, second.ID); err == nil {
		fmt.Printf("  %s is number %d in rg-1's queue: %s\n", second.ID, p.Position, p.Lacks)
	}
	for _, id := range []string{first.ID, second.ID} {
		if _, err := waitRun(ctx, c, id); err != nil {
			return err
		}
	}

	// The on-demand clusters are released after their runs end: each is
	// deleted, which ends a wait on it with ErrNotFound.
	for _, r := range []*job.Run{first, second} {
		if r, err = c.Runs().Get(ctx, r.ID); err != nil {
			return err
		}
		if _, err := c.Clusters().Wait(ctx, r.ClusterID, func(*cluster.Cluster) (bool, error) { return false, nil }); !errors.Is(err, dlc.ErrNotFound) {
			return fmt.Errorf("the on-demand cluster of run %s: %v", r.ID, err)
		}
	}

	fmt.Println("\n== the job list")
	jobs, err := c.Jobs().List(ctx)
	if err != nil {
		return err
	}
	for _, j := range jobs {
		fmt.Printf("  %-14s %-9s %-8s running=%d priority=%d creator=%s\n", j.Name, j.Mode, j.Resource, j.Running, j.Priority, j.Creator)
	}
	u, err := c.ResourceGroups().Get(ctx, "rg-1")
	if err != nil {
		return err
	}
	fmt.Printf("\n  rg-1 reserves %s of %s (the running cluster only)\n", u.Reserved, u.Capacity)
	return nil
}

// waitCluster prints the cluster's state as it changes until it is want.
func waitCluster(ctx context.Context, c *dlc.Client, id string, want cluster.State) error {
	last := cluster.State("")
	_, err := c.Clusters().Wait(ctx, id, func(cl *cluster.Cluster) (bool, error) {
		if cl.State != last {
			fmt.Printf("  cluster %s: %s\n", cl.Spec.Name, cl.State)
			last = cl.State
		}
		return cl.State == want, nil
	})
	return err
}

// waitRun prints the run's state, and why it waits, as it changes until it ends.
func waitRun(ctx context.Context, c *dlc.Client, id string) (*job.Run, error) {
	last := ""
	return c.Runs().Wait(ctx, id, func(r *job.Run) (bool, error) {
		now := string(r.State)
		if r.WaitReason != "" {
			now += " (" + string(r.WaitReason) + ")"
		}
		if now != last {
			fmt.Printf("  run %s of %s: %s\n", r.ID, r.Config.Name, now)
			last = now
		}
		return job.Ended(r)
	})
}

// waitWaiting waits until the run waits for quota or is on its way.
func waitWaiting(ctx context.Context, c *dlc.Client, id string) error {
	_, err := c.Runs().Wait(ctx, id, func(r *job.Run) (bool, error) { return r.State != job.Queued, nil })
	return err
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n    ") + "\n"
}
