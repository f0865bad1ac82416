package e2e_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	rayutils "github.com/ray-project/kuberay/ray-operator/controllers/ray/utils"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
	"github.com/aidlc/dlc/storage"
)

// A plan of a cluster with a highly available head, GPU workers that
// autoscale and storage mounts returns the RayCluster KubeRay's
// validation accepts and that a real create then applies, field for
// field.
func TestPlanMatchesApply(t *testing.T) {
	s := newScene(t, kube.Options{Render: kube.RenderOptions{RedisAddress: "redis-ha.dlc-system.svc:6379",
		VolumeResolver: kube.PVCResolver{Claims: map[string]string{"weights-1250000000": "cos-weights"}}}})
	if _, err := s.c.ResourceGroups().Register(s.ctx, quota.Group{ID: "rg-gpu", Package: "pkg-1",
		Capacity: quota.Resources{MilliCPU: 96000, Memory: 512 * quota.GiB, GPU: 8}}); err != nil {
		t.Fatal(err)
	}
	spec, err := dlc.NewCluster("计划_GPU").Groups(s.grp.ID).Resources("pkg-1", "rg-gpu").
		Image("ccr.ccs.tencentyun.com/team-a/ray-llm:2.46.0-cu121").
		Head("head", "cu.8c32g").HighAvailability(true).
		WorkerGroup("a10", "gu.20c80g.2xa10", 1, 2, cluster.Label("gpu-type", "A10")).
		Mount(storage.Mount{Type: storage.CFS, Instance: "cfs-1a2b3c4d", SubPath: "team/data", MountPath: "/data"}).
		Mount(storage.Mount{Type: storage.COS, Instance: "weights-1250000000", MountPath: "/weights", ReadOnly: true}).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.c.Clusters().PlanCreate(s.ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Manifests) != 1 || p.Manifests[0].Kind != "RayCluster" {
		t.Fatalf("manifests %+v", p.Manifests)
	}
	planned := p.Manifests[0].Object.(*rayv1.RayCluster)
	if err := rayutils.ValidateRayClusterSpec(&planned.Spec, planned.Annotations); err != nil {
		t.Fatalf("KubeRay refuses the plan: %v", err)
	}
	if q := p.Quota; q.Needs.GPU != 2 || q.Needs.MilliCPU != 2*8000+20000 || !q.Fits {
		t.Fatalf("the start would reserve %s (fits %v), want the head twice and one A10 worker", q.Needs, q.Fits)
	}
	cl, err := s.c.Clusters().Create(s.ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	s.clusterState(cl.ID, cluster.Created)
	var applied rayv1.RayCluster
	if err := s.w.cp.Client().Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: planned.Name}, &applied); err == nil {
		t.Fatalf("the plan's name %s exists", planned.Name)
	}
	var list rayv1.RayClusterList
	if err := s.w.cp.Client().List(s.ctx, &list, client.InNamespace(s.ns), client.MatchingLabels{kube.KeyClusterID: cl.ID}); err != nil || len(list.Items) != 1 {
		t.Fatalf("the applied RayCluster: %v, %d", err, len(list.Items))
	}
	applied = list.Items[0]
	// The API server fills what KubeRay's CRD defaults and the SDK leaves
	// out: an autoscaling group's replicas (KubeRay starts it at its
	// minimum), 0.
	sent := planned.Spec.DeepCopy()
	for i := range sent.WorkerGroupSpecs {
		if sent.WorkerGroupSpecs[i].Replicas == nil {
			sent.WorkerGroupSpecs[i].Replicas = new(int32(0))
		}
	}
	// The planned cluster's id is "cls-planned": the real one's in its place.
	want := strings.ReplaceAll(mustJSONString(t, sent), "cls-planned", cl.ID)
	if got := mustJSONString(t, applied.Spec); got != want {
		t.Fatalf("applied spec differs from the plan:\napplied %s\nplanned %s", got, want)
	}
	for k, v := range planned.Labels {
		if applied.Labels[k] != strings.ReplaceAll(v, "cls-planned", cl.ID) {
			t.Errorf("label %s = %q, planned %q", k, applied.Labels[k], v)
		}
	}
	for k, v := range planned.Annotations {
		if applied.Annotations[k] != strings.ReplaceAll(v, "cls-planned", cl.ID) {
			t.Errorf("annotation %s = %q, planned %q", k, applied.Annotations[k], v)
		}
	}
}

// A plan of an on-demand run is its RayJob, as KubeRay validates it, with
// no presigned URL in it; of a run on a cluster, the Ray Jobs API request.
func TestPlanRunOnKube(t *testing.T) {
	s := newScene(t, kube.Options{})
	cl := s.cluster("计划_集群", false)
	for _, tc := range []struct {
		name, kind string
		b          *job.Builder
	}{
		{"on demand", "RayJob", dlc.NewJob("od").OnDemand("pkg-1", "rg").Image("ray-2.46.0-py310-cpu").
			Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 3).ActiveDeadline(time.Hour)},
		{"on a cluster", "", dlc.NewJob("on-cluster").OnCluster(cl.ID)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := tc.b.COSPackage("cos://jobs-1250000000/a.zip").Entrypoint("python main.py").Build()
			if err != nil {
				t.Fatal(err)
			}
			rec, err := s.c.Jobs().Create(s.ctx, cfg, dlc.SaveOptions{})
			if err != nil {
				t.Fatal(err)
			}
			p, err := s.c.Jobs().PlanRun(s.ctx, rec.ID)
			if err != nil {
				t.Fatal(err)
			}
			switch tc.kind {
			case "RayJob":
				rj, ok := p.Manifests[0].Object.(*rayv1.RayJob)
				if !ok || rayutils.ValidateRayJobSpec(rj) != nil || *rj.Spec.ActiveDeadlineSeconds != 3601 || !p.Quota.Fits || p.Position != 0 {
					t.Fatalf("plan %+v", p)
				}
				// A plan is shown to users: no live presigned URL in it, a
				// placeholder where its signature will be.
				if env := rj.Spec.RuntimeEnvYAML; strings.Contains(env, "q-signature") || strings.Contains(env, "q-sign-time") ||
					!strings.Contains(env, kube.PlanSignature) || !strings.Contains(env, "/a.zip?") {
					t.Fatalf("the plan's runtime env: %s", env)
				}
			default:
				// The cluster is created, not running: the run would wait.
				if len(p.Manifests) != 0 || len(p.Notes) != 1 || !strings.Contains(p.Notes[0], "would wait") || p.Quota != nil {
					t.Fatalf("plan %+v", p)
				}
			}
			if runs, _ := s.c.Runs().List(s.ctx, dlc.RunListOptions{JobID: rec.ID}); len(runs) != 0 {
				t.Fatalf("a plan made %d runs", len(runs))
			}
		})
	}
}

func mustJSONString(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
