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
//     takes KubeRay's reconcile of the new RayCluster too.
//
// The note of issue 10 gives the ratios to bare.
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

	for _, sub := range []struct {
		name  string
		quiet bool // wait, with the timer stopped, until KubeRay has seen it
	}{{"bare", false}, {"bare-quiet", true}} {
		b.Run(sub.name, func(b *testing.B) {
			b.ReportAllocs()
			b.StopTimer()
			for range b.N {
				rc := rendered(b)
				b.StartTimer()
				if err := bare.Create(ctx, rc); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				for sub.quiet && rc.Status.ObservedGeneration < rc.Generation {
					time.Sleep(200 * time.Microsecond)
					if err := bare.Get(ctx, client.ObjectKeyFromObject(rc), rc); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
	b.Run("ssa", func(b *testing.B) {
		b.ReportAllocs()
		b.StopTimer()
		for range b.N {
			rc := rendered(b)
			m, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(rc)
			u := &unstructured.Unstructured{Object: m}
			unstructured.RemoveNestedField(u.Object, "status")
			unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
			b.StartTimer()
			if err := bare.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("x"), client.ForceOwnership); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
		}
	})
	b.Run("apply", func(b *testing.B) {
		b.ReportAllocs()
		b.StopTimer()
		for range b.N {
			cl, _ := owned(b)
			b.StartTimer()
			if err := be.ApplyCluster(ctx, cl); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
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
	for _, sub := range []struct {
		name  string
		ready bool // wait until the cluster reads created
		timed bool // with the timer running
	}{{"sdk", false, false}, {"sdk-quiet", true, false}, {"sdk-until-created", true, true}} {
		b.Run(sub.name, func(b *testing.B) {
			b.ReportAllocs()
			b.StopTimer()
			for range b.N {
				spec := benchSpec(b, fmt.Sprintf("sdk_%d", seq.Add(1)), grp.ID)
				b.StartTimer()
				cl, err := c.Clusters().Create(uctx, spec)
				if err != nil {
					b.Fatal(err)
				}
				if !sub.timed {
					b.StopTimer()
				}
				for sub.ready && cl.State != cluster.Created {
					time.Sleep(200 * time.Microsecond)
					if cl, err = c.Clusters().Get(uctx, cl.ID); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
			}
		})
	}
}
