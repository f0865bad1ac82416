// Command kube tells the quickstart's story on the Kubernetes backend,
// against the cluster in KUBECONFIG: the platform's state in our CRDs on
// its API server, Ray through KubeRay. It registers a resource group,
// creates a cluster group and a cluster, starts it and lists its pods,
// runs a job on the cluster through the Ray Jobs API and prints its logs,
// runs an on-demand job (a RayJob) and waits until its cluster is
// released, then deletes the cluster (the resource group and the cluster
// group stay for the next run).
//
// The cluster needs KubeRay (its operator and CRDs) and, in the
// namespace, our CRDs and the backend's RBAC: `kubectl apply -k config`
// (config/kustomization.yaml names the namespace), or -install-crds with
// an administrator's credentials. The job package is the -package object in
// COS (its key ends in .zip), which Ray fetches by a presigned HTTPS URL
// (kube.COSWorkingDir: Ray knows no cos://), signed with the COS
// credentials in TENCENTCLOUD_SECRET_ID and TENCENTCLOUD_SECRET_KEY.
//
//	go run ./examples/kube -namespace dlc-system -region ap-guangzhou -package cos://jobs-1250000000/wordcount.zip
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/group"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
	"github.com/aidlc/dlc/storage"
)

// options are the example's flags, and what a test sets besides.
type options struct {
	Namespace   string
	InstallCRDs bool
	Package     string // the job package's cos:// URI
	// COS and Logs: with both, runs' whole logs are kept in COS under
	// Logs (dlc.WithCOS, dlc.WithLogsLocation) and read from there once
	// their clusters are gone.
	COS        *storage.COSClient
	Logs       string
	Entrypoint string
	// WorkingDir is kube.RenderOptions.WorkingDir: how Ray fetches the
	// package.
	WorkingDir func(kube.PackageUse) (string, error)
	Timeout    time.Duration
	// Dashboard and PollInterval are kube.Options'; nil and 0 mean its
	// defaults (the API server's service proxy, 2 s).
	Dashboard    func(ctx context.Context, rc *rayv1.RayCluster) (string, *http.Client, error)
	PollInterval time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.Namespace, "namespace", "dlc-system", "the namespace of the platform's objects and Ray's")
	flag.BoolVar(&o.InstallCRDs, "install-crds", false, "install or update dlc's CRDs first (needs an administrator)")
	flag.StringVar(&o.Package, "package", "cos://jobs-1250000000/wordcount.zip", "the job package (a ZIP in COS)")
	flag.StringVar(&o.Entrypoint, "entrypoint", "python main.py", "the job's entrypoint")
	flag.DurationVar(&o.Timeout, "timeout", 15*time.Minute, "how long the whole story may take")
	region := flag.String("region", "ap-guangzhou", "the COS region of the package's bucket")
	flag.StringVar(&o.Logs, "logs", "", "where runs' whole logs are kept in COS, e.g. cos://logs-1250000000/dlc (\"\": their tails only)")
	flag.Parse()
	cos, err := storage.NewCOSClient(storage.COSOptions{Region: *region}) // credentials from the environment
	if err != nil {
		fmt.Fprintln(os.Stderr, "kube:", err)
		os.Exit(1)
	}
	o.WorkingDir = kube.COSWorkingDir(cos, storage.WorkingDirOptions{})
	o.COS = cos
	rules := clientcmd.NewDefaultClientConfigLoadingRules() // $KUBECONFIG, else ~/.kube/config
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err == nil {
		err = run(context.Background(), cfg, o, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kube:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg *rest.Config, o options, out io.Writer) error {
	ctx, cancel := context.WithTimeout(dlc.WithUser(ctx, "alice"), o.Timeout)
	defer cancel()
	if o.InstallCRDs {
		if err := kube.InstallCRDs(ctx, cfg); err != nil {
			return err
		}
		fmt.Fprintln(out, "== dlc's CRDs installed")
	}
	be, err := kube.New(ctx, cfg, kube.Options{Namespace: o.Namespace, Dashboard: o.Dashboard, PollInterval: o.PollInterval,
		Render: kube.RenderOptions{WorkingDir: o.WorkingDir}})
	if err != nil {
		return err
	}
	defer be.Close()
	c, err := dlc.New(dlc.WithBackend(be), dlc.WithCOS(o.COS), dlc.WithLogsLocation(o.Logs))
	if err != nil {
		return err
	}
	defer c.Close()
	w := &waiter{c: c, out: out}
	suffix := time.Now().UTC().Format("150405")

	fmt.Fprintf(out, "== namespace %s: a resource group of 24 cores and a cluster group\n", o.Namespace)
	if _, err := c.ResourceGroups().Register(ctx, quota.Group{ID: "rg-example", Package: "pkg-1",
		Capacity: quota.Resources{MilliCPU: 24000, Memory: 96 * quota.GiB}}); err != nil && !errors.Is(err, dlc.ErrConflict) {
		return err // a conflict: registered by an earlier run
	}
	grp, err := exampleGroup(ctx, c)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  group %s (%s), policy %s\n", grp.Name, grp.ID, grp.Policy)

	fmt.Fprintln(out, "\n== a cluster: created (a suspended RayCluster), then started")
	spec, err := dlc.NewCluster("示例集群_"+suffix).Groups(grp.ID).Resources("pkg-1", "rg-example").
		Image("ray-2.46.0-py310-cpu").Head("head", "cu.4c16g").
		WorkerGroup("cpu", "cu.4c8g", 1, 2, cluster.Env("OMP_NUM_THREADS", "4")).Build()
	if err != nil {
		return err
	}
	cl, err := c.Clusters().Create(ctx, spec)
	if err != nil {
		return err
	}
	defer func() {
		dctx := context.WithoutCancel(ctx)
		if err := c.Clusters().Delete(dctx, cl.ID, dlc.DeleteOptions{}); err != nil {
			fmt.Fprintf(out, "  deleting cluster %s: %v\n", cl.ID, err)
			return
		}
		if err := w.gone(dctx, cl.ID, 2*time.Minute); err != nil {
			fmt.Fprintf(out, "  cluster %s: %v\n", cl.ID, err)
		}
	}()
	if err := w.cluster(ctx, cl.ID, cluster.Created); err != nil {
		return err
	}
	if _, err := c.Clusters().Start(ctx, cl.ID); err != nil {
		return err
	}
	if err := w.cluster(ctx, cl.ID, cluster.Running); err != nil {
		return err
	}
	d, err := c.Clusters().Details(ctx, cl.ID)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  reserving %s, dashboard %s\n", d.Resources, d.Dashboard)
	for _, p := range d.Pods {
		fmt.Fprintf(out, "  pod %s: %s %s, IP %s\n", p.Name, p.Role, p.Status, p.IP)
	}

	fmt.Fprintln(out, "\n== a job on the cluster, through its Ray Jobs API")
	onCluster, err := dlc.NewJob("wordcount").OnCluster(cl.ID).COSPackage(o.Package).Entrypoint(o.Entrypoint).Build()
	if err != nil {
		return err
	}
	_, r, err := job.Submit(ctx, c, onCluster, "")
	if err != nil {
		return err
	}
	if r, err = w.run(ctx, r.ID); err != nil {
		return err
	}
	if lines, err := c.Runs().Logs(ctx, r.ID); err == nil {
		for _, l := range lines {
			fmt.Fprintf(out, "  | %s\n", l)
		}
	} else {
		fmt.Fprintf(out, "  logs: %v\n", err)
	}

	fmt.Fprintln(out, "\n== an on-demand job: a RayJob on a cluster of its own, admitted in the resource group")
	od, err := dlc.NewJob("wordcount-od").OnDemand("pkg-1", "rg-example").Priority(7).
		Image("ray-2.46.0-py310-cpu").Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1).
		COSPackage(o.Package).Entrypoint(o.Entrypoint).Build()
	if err != nil {
		return err
	}
	_, r, err = job.Submit(ctx, c, od, "")
	if err != nil {
		return err
	}
	if r, err = w.run(ctx, r.ID); err != nil {
		return err
	}
	if r.ClusterID != "" {
		if err := w.gone(ctx, r.ClusterID, 5*time.Minute); err != nil {
			return err
		}
		fmt.Fprintf(out, "  its cluster %s is released\n", r.ClusterID)
	}
	if r, err = c.Runs().Get(ctx, r.ID); err != nil { // as it is once its cluster is gone
		return err
	}
	if !r.LogsArchived.IsZero() {
		lines, err := c.Runs().Logs(ctx, r.ID)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "  its whole log, from %s:\n", r.Logs)
		for _, l := range lines {
			fmt.Fprintf(out, "  || %s\n", l)
		}
	}
	u, err := c.ResourceGroups().Get(ctx, "rg-example")
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\n  rg-example reserves %s of %s (the running cluster only)\n", u.Reserved, u.Capacity)
	return nil
}

// exampleGroup returns the example's cluster group, created by its first
// run: a group is deleted only by moving its clusters into another (G6).
func exampleGroup(ctx context.Context, c *dlc.Client) (*group.Group, error) {
	const name = "示例组"
	groups, err := c.Groups().List(ctx)
	if err != nil {
		return nil, err
	}
	for _, g := range groups {
		if g.Name == name {
			return g, nil
		}
	}
	return c.Groups().Create(ctx, name)
}

// waiter prints states as they change while it waits for them.
type waiter struct {
	c   *dlc.Client
	out io.Writer
}

func (w *waiter) cluster(ctx context.Context, id string, want cluster.State) error {
	last := cluster.State("")
	_, err := w.c.Clusters().Wait(ctx, id, func(cl *cluster.Cluster) (bool, error) {
		if cl.State != last {
			fmt.Fprintf(w.out, "  cluster %s: %s %s\n", cl.Spec.Name, cl.State, cl.Reason)
			last = cl.State
		}
		if cl.State == cluster.Abnormal && want != cluster.Abnormal {
			return false, fmt.Errorf("cluster %s is abnormal: %s", id, cl.Reason)
		}
		return cl.State == want, nil
	})
	return err
}

func (w *waiter) run(ctx context.Context, id string) (*job.Run, error) {
	last := ""
	r, err := w.c.Runs().Wait(ctx, id, func(r *job.Run) (bool, error) {
		now := string(r.State)
		if r.WaitReason != "" {
			now += " (" + string(r.WaitReason) + ")"
		}
		if now != last {
			fmt.Fprintf(w.out, "  run %s of %s: %s\n", r.ID, r.Config.Name, now)
			last = now
		}
		return job.Ended(r)
	})
	if err == nil && r.State != job.Succeeded {
		err = fmt.Errorf("run %s %s: %s", r.ID, r.State, strings.TrimSpace(r.Message))
	}
	return r, err
}

// gone waits until cluster id no longer exists.
func (w *waiter) gone(ctx context.Context, id string, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	_, err := w.c.Clusters().Wait(ctx, id, func(*cluster.Cluster) (bool, error) { return false, nil })
	if errors.Is(err, dlc.ErrNotFound) {
		return nil
	}
	return fmt.Errorf("cluster %s still there: %w", id, err)
}
