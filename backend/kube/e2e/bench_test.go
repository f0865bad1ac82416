package e2e_test

import (
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/backend/kube/api/v1alpha1"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/quota"
)

func benchSpec(b *testing.B, name, groupID string) *cluster.Spec {
	b.Helper()
	spec, err := dlc.NewCluster(name).Groups(groupID).Resources("pkg-1", "rg").Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 3).Build()
	if err != nil {
		b.Fatal(err)
	}
	return spec
}

// BenchmarkClusterCreate measures, on one control plane in one run (with
// KubeRay's reconcilers in the loop), the creation of a cluster:
//
//   - bare: a controller-runtime Create of the rendered RayCluster (owner
//     set): the baseline;
//   - bare-quiet: the same, each Create after KubeRay has seen the last
//     one's RayCluster (waited for with the timer stopped);
//   - ssa: a bare server-side apply of the same object, as a field
//     manager: what the API server charges for apply;
//   - apply: the Provisioner's ApplyCluster of the same cluster: the
//     cache looked up, the cluster rendered, its owner read, a server-side
//     apply, and the wait until its own cache shows the write;
//   - sdk: Clusters().Create on a dlc.Client over kube.New, until it
//     returns (the name claimed and the ComputeCluster created, each
//     waited for in the cache; the reconciler applies the RayCluster
//     after);
//   - sdk-quiet: the same, each Create after the last one's cluster reads
//     created (waited for with the timer stopped): the latency of a
//     create on a control plane that is not busy with the creates before
//     it (on a machine of 2 cores the reconciler's and KubeRay's work for
//     each cluster, 3 more writes, slows the next create's calls: sdk
//     measures that too; bare-quiet is its baseline);
//   - sdk-until-created: the same, until the cluster reads created, which
//     takes KubeRay's reconcile of the new RayCluster too;
//   - pair: bare-quiet and sdk-quiet in turn, one of each per iteration
//     (which goes first alternates), and their ratio: the comparison of
//     the two on the same plane.
//
// Each sub-benchmark begins on a settled control plane: every RayCluster
// made before it observed by KubeRay, every cluster made before it
// created. bare and sdk also report what a create costs in CPU, all of
// its work done (measured from the first create until the last one's
// cluster is settled): cpu-ms/op of this process (the SDK, its
// reconcilers, KubeRay's reconcilers, the kubelet stand-in) and
// server-cpu-ms/op of the API server and etcd (see kubetest.CPUNow). On a machine
// of few cores, a create issued while the last ones' work goes on waits
// for that CPU: what bare and sdk measure beside their quiet twins.
//
// The notes of issues 10 and 21 give the ratios to bare.
func BenchmarkClusterCreate(b *testing.B) {
	w := getWorld(b)
	cp := w.cp
	ns := cp.NewNamespace(b)
	ctx := b.Context()
	be := w.backend(b, kube.Options{Namespace: ns})
	bare, err := client.New(cp.Config(), client.Options{Scheme: cp.Scheme()})
	if err != nil {
		b.Fatal(err)
	}
	var seq atomic.Int64
	// owned returns a new cluster, created, and its ComputeCluster
	// written through the store (so that the Provisioner's cache has it).
	owned := func(b *testing.B) (*cluster.Cluster, *v1alpha1.ComputeCluster) {
		n := seq.Add(1)
		id := fmt.Sprintf("cls-bench-%d", n)
		now := time.Now().UTC().Truncate(time.Second)
		cl := &cluster.Cluster{ID: id, Spec: *benchSpec(b, fmt.Sprintf("bench_%d", n), "grp-bench"), State: cluster.Created, Generation: 1,
			Creator: "bench", CreatedAt: now, UpdatedAt: now}
		data, err := json.Marshal(cl)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := be.Store.Create(ctx, backend.Doc{Kind: "cluster", ID: id, Data: data}); err != nil {
			b.Fatal(err)
		}
		var cc v1alpha1.ComputeCluster
		if err := bare.Get(ctx, client.ObjectKey{Namespace: ns, Name: id}, &cc); err != nil {
			b.Fatal(err)
		}
		return cl, &cc
	}

	// rendered returns a new cluster's RayCluster, rendered, its owner set.
	rendered := func(b *testing.B) *rayv1.RayCluster {
		cl, cc := owned(b)
		rc, err := kube.RenderRayCluster(cl, kube.RenderOptions{Namespace: ns})
		if err != nil {
			b.Fatal(err)
		}
		if err := kube.SetOwner(rc, cc, v1alpha1.GroupVersion.WithKind("ComputeCluster")); err != nil {
			b.Fatal(err)
		}
		return rc
	}

	// observed reports whether KubeRay has seen rc's generation.
	observed := func(b *testing.B, rc *rayv1.RayCluster) bool {
		if err := bare.Get(ctx, client.ObjectKeyFromObject(rc), rc); err != nil {
			b.Fatal(err)
		}
		return rc.Status.ObservedGeneration >= rc.Generation
	}
	var made []*rayv1.RayCluster // every bare RayCluster, to settle on
	bareSettled := func(b *testing.B) bool {
		for len(made) > 0 && observed(b, made[0]) {
			made = made[1:]
		}
		return len(made) == 0
	}
	for _, sub := range []struct {
		name  string
		quiet bool // wait, with the timer stopped, until KubeRay has seen it
	}{{"bare", false}, {"bare-quiet", true}} {
		b.Run(sub.name, func(b *testing.B) {
			b.ReportAllocs()
			b.StopTimer()
			rcs := make([]*rayv1.RayCluster, b.N)
			for i := range rcs {
				rcs[i] = rendered(b)
			}
			settle(b, bareSettled)
			cost := startCost(b, !sub.quiet)
			for _, rc := range rcs {
				b.StartTimer()
				if err := bare.Create(ctx, rc); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				made = append(made, rc)
				for sub.quiet && !observed(b, rc) {
					time.Sleep(time.Millisecond)
				}
			}
			settle(b, bareSettled)
			cost.report()
		})
	}
	b.Run("ssa", func(b *testing.B) {
		b.ReportAllocs()
		b.StopTimer()
		rcs := make([]*rayv1.RayCluster, b.N)
		us := make([]*unstructured.Unstructured, b.N)
		for i := range rcs {
			rcs[i] = rendered(b)
			m, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(rcs[i])
			us[i] = &unstructured.Unstructured{Object: m}
			unstructured.RemoveNestedField(us[i].Object, "status")
			unstructured.RemoveNestedField(us[i].Object, "metadata", "creationTimestamp")
		}
		settle(b, bareSettled)
		for i, u := range us {
			b.StartTimer()
			if err := bare.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("x"), client.ForceOwnership); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			made = append(made, rcs[i])
		}
	})
	b.Run("apply", func(b *testing.B) {
		b.ReportAllocs()
		b.StopTimer()
		cls := make([]*cluster.Cluster, b.N)
		for i := range cls {
			cls[i], _ = owned(b)
		}
		settle(b, bareSettled)
		for _, cl := range cls {
			b.StartTimer()
			if err := be.ApplyCluster(ctx, cl); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			rc, err := kube.RenderRayCluster(cl, kube.RenderOptions{Namespace: ns})
			if err != nil {
				b.Fatal(err)
			}
			made = append(made, rc)
		}
	})
	c, err := dlc.New(dlc.WithBackend(be))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	uctx := dlc.WithUser(ctx, "bench")
	if _, err := c.ResourceGroups().Register(uctx, quota.Group{ID: "rg", Package: "pkg-1",
		Capacity: quota.Resources{MilliCPU: 64000, Memory: 256 * quota.GiB}}); err != nil {
		b.Fatal(err)
	}
	grp, err := c.Groups().Create(uctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	var ids []string // every cluster the SDK made, to settle on
	created := func(b *testing.B, id string) {
		if _, err := c.Clusters().Wait(uctx, id, cluster.InState(cluster.Created)); err != nil {
			b.Fatal(err)
		}
	}
	sdkSettled := func(b *testing.B) bool {
		for _, id := range ids {
			created(b, id)
		}
		ids = nil
		return bareSettled(b)
	}
	// pair times, on one settled control plane, a bare create and the
	// SDK's create in turn (which goes first alternates), each after the
	// last one's work is done (the RayCluster observed, the cluster
	// created), so that both meet the same plane, however many objects
	// the sub-benchmarks before made:
	// ns/op is the SDK's, bare-ms/op the bare create's, sdk/bare the
	// ratio of their sums.
	b.Run("pair", func(b *testing.B) {
		b.ReportAllocs()
		b.StopTimer()
		rcs := make([]*rayv1.RayCluster, b.N)
		specs := make([]*cluster.Spec, b.N)
		for i := range rcs {
			rcs[i] = rendered(b)
			specs[i] = benchSpec(b, fmt.Sprintf("sdk_%d", seq.Add(1)), grp.ID)
		}
		settle(b, sdkSettled)
		var bareTook time.Duration
		bareOne := func(i int) {
			start := time.Now()
			if err := bare.Create(ctx, rcs[i]); err != nil {
				b.Fatal(err)
			}
			bareTook += time.Since(start)
			for !observed(b, rcs[i]) {
				time.Sleep(time.Millisecond)
			}
		}
		sdkOne := func(i int) {
			b.StartTimer()
			cl, err := c.Clusters().Create(uctx, specs[i])
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			created(b, cl.ID)
		}
		for i := range b.N {
			// Which goes first alternates: each meets the tail of the
			// other's work (KubeRay's reconcile after its status write)
			// as often.
			if i%2 == 0 {
				bareOne(i)
				sdkOne(i)
			} else {
				sdkOne(i)
				bareOne(i)
			}
		}
		b.ReportMetric(float64(bareTook)/float64(time.Millisecond)/float64(b.N), "bare-ms/op")
		b.ReportMetric(float64(b.Elapsed())/float64(bareTook), "sdk/bare")
	})
	for _, sub := range []struct {
		name  string
		ready bool // wait until the cluster reads created
		timed bool // with the timer running
	}{{"sdk", false, false}, {"sdk-quiet", true, false}, {"sdk-until-created", true, true}} {
		b.Run(sub.name, func(b *testing.B) {
			b.ReportAllocs()
			b.StopTimer()
			specs := make([]*cluster.Spec, b.N)
			for i := range specs {
				specs[i] = benchSpec(b, fmt.Sprintf("sdk_%d", seq.Add(1)), grp.ID)
			}
			settle(b, sdkSettled)
			cost := startCost(b, !sub.ready)
			for _, spec := range specs {
				b.StartTimer()
				cl, err := c.Clusters().Create(uctx, spec)
				if err != nil {
					b.Fatal(err)
				}
				if !sub.timed {
					b.StopTimer()
				}
				if sub.ready {
					created(b, cl.ID)
				} else {
					ids = append(ids, cl.ID)
				}
				b.StopTimer()
			}
			settle(b, sdkSettled)
			cost.report()
		})
	}
}
