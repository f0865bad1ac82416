package e2e_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/dlctest/kubetest"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/job"
)

// takeovers is how many times TestHighAvailability kills the head.
const takeovers = 3

// An HA cluster's whole life on the Ray loop: created with GCS fault
// tolerance (the backend's Redis) and KubeRay's Redis-cleanup finalizer,
// started, a run on it; then its head pod is deleted, several times: the
// cluster stays running while KubeRay starts a new head, the run whose
// driver was on the old head fails (Ray's job manager's word for it), and
// a run submitted at the kill succeeds on the new head (the takeover,
// measured and logged); then hibernated and deleted, until the cluster,
// its RayCluster (KubeRay's finalizer cleared once the Job stand-in
// completed the cleanup Job) and that Job are gone.
func TestHighAvailability(t *testing.T) {
	s := newScene(t, kube.Options{Render: kube.RenderOptions{RedisAddress: "redis.invalid:6379"}})
	spec, err := dlc.NewCluster("高可用").Groups(s.grp.ID).Resources("pkg-1", "rg").Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c8g").HighAvailability(true).WorkerGroup("cpu", "cu.4c8g", 1, 1).Build()
	if err != nil {
		t.Fatal(err)
	}
	cl := s.started(spec)
	rcs := s.rayClusters(cl.ID)
	if len(rcs) != 1 || rcs[0].Spec.GcsFaultToleranceOptions == nil ||
		!slices.Contains(rcs[0].Finalizers, "ray.io/gcs-ft-redis-cleanup-finalizer") {
		t.Fatalf("the RayCluster of an HA cluster: %d, %+v", len(rcs), rcs)
	}
	rc := rcs[0]
	head := s.w.loop.Head(&rc)
	// A run on the healthy cluster, for comparison with the runs submitted
	// at a kill.
	submitted := time.Now()
	if r := s.ended(s.c, s.run(dlc.NewJob("ha-first").OnCluster(cl.ID).
		COSPackage("cos://jobs-1250000000/wc.zip").Entrypoint("python main.py")).ID); r.State != job.Succeeded {
		t.Fatalf("a run on the HA cluster: %s: %s", r.State, r.Message)
	}
	healthy := time.Since(submitted)

	var toReady, toStart, toRun []time.Duration
	for i := range takeovers {
		// A run whose driver is on the head as it goes.
		long := s.run(dlc.NewJob(fmt.Sprintf("ha-long-%d", i)).OnCluster(cl.ID).
			COSPackage("cos://jobs-1250000000/wc.zip").Entrypoint("sleep 300"))
		waitFor(t, "the long run running", func() (bool, string) {
			cur, err := s.c.Runs().Get(s.ctx, long.ID)
			return err == nil && cur.State == job.Running, fmt.Sprint(cur.State, err)
		})
		old := s.headPod(cl.ID)
		if old == nil {
			t.Fatal("no head pod")
		}
		killed := time.Now()
		if err := s.w.cp.Client().Delete(s.ctx, old); err != nil {
			t.Fatal(err)
		}
		next := s.run(dlc.NewJob(fmt.Sprintf("ha-after-%d", i)).OnCluster(cl.ID).
			COSPackage("cos://jobs-1250000000/wc.zip").Entrypoint("python main.py"))
		var ready, ran time.Duration
		waitFor(t, "a new head ready and the run submitted at the kill succeeded", func() (bool, string) {
			cur, err := s.c.Clusters().Get(s.ctx, cl.ID)
			if err != nil || cur.State != cluster.Running {
				t.Fatalf("during the takeover the cluster is %v (%s), want running all along: %v", cur.State, cur.Reason, err)
			}
			if p := s.headPod(cl.ID); ready == 0 && p != nil && p.UID != old.UID && podReady(p) {
				ready = time.Since(killed)
			}
			r, err := s.c.Runs().Get(s.ctx, next.ID)
			if err != nil {
				return false, err.Error()
			}
			if r.State.Terminal() && ran == 0 {
				ran = time.Since(killed)
				if r.State != job.Succeeded {
					t.Fatalf("the run submitted at the kill: %s: %s", r.State, r.Message)
				}
				// When the new head started it (the head's clock, this machine's).
				toStart = append(toStart, r.StartedAt.Sub(killed))
			}
			return ready > 0 && ran > 0, fmt.Sprintf("new head ready after %v; run %s", ready, r.State)
		})
		toReady, toRun = append(toReady, ready), append(toRun, ran)
		if r := s.ended(s.c, long.ID); r.State != job.Failed || !strings.Contains(r.Message, kubetest.LostDriver) {
			t.Errorf("the run whose driver was on the old head: %s: %q", r.State, r.Message)
		}
	}
	if n := head.LostDrivers(); n != takeovers {
		t.Errorf("the head stand-in lost %d drivers, want %d", n, takeovers)
	}
	if ids := head.Jobs(); len(ids) != 1+2*takeovers {
		t.Errorf("the head has the records of %d jobs after %d restarts, want %d: %v", len(ids), takeovers, 1+2*takeovers, ids)
	}
	t.Logf("takeover on the stand-in loop, %d head kills (min/median/max): head pod deleted → new head pod ready %s; "+
		"→ a run submitted at the kill started on the new head %s; → it succeeded %s (a run on the healthy cluster: %v)",
		takeovers, spread(toReady), spread(toStart), spread(toRun), healthy.Round(time.Millisecond))

	if _, err := s.c.Clusters().Hibernate(s.ctx, cl.ID, dlc.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.clusterState(cl.ID, cluster.Hibernated)
	waitFor(t, "the pods gone and the quota released", func() (bool, string) {
		d, err := s.c.Clusters().Details(s.ctx, cl.ID)
		return err == nil && len(d.Pods) == 0 && s.reserved().IsZero(), fmt.Sprint(len(d.Pods), " pods, reserving ", s.reserved(), err)
	})

	completed := s.w.loop.RedisCleanup.Completed()
	if err := s.c.Clusters().Delete(s.ctx, cl.ID, dlc.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	took := waitFor(t, "the cluster, its RayCluster and the cleanup Job gone", func() (bool, string) {
		_, err := s.c.Clusters().Get(s.ctx, cl.ID)
		var got rayv1.RayCluster
		rerr := s.w.cp.Client().Get(s.ctx, client.ObjectKeyFromObject(&rc), &got)
		var jobs batchv1.JobList
		jerr := s.w.cp.Client().List(s.ctx, &jobs, client.InNamespace(s.ns))
		return errs.IsNotFound(err) && apierrors.IsNotFound(rerr) && jerr == nil && len(jobs.Items) == 0,
			fmt.Sprintf("cluster: %v; RayCluster: %v, finalizers %v; %d Jobs %v", err, rerr, got.Finalizers, len(jobs.Items), jerr)
	})
	if n := s.w.loop.RedisCleanup.Completed() - completed; n != 1 {
		t.Errorf("the Job stand-in completed %d cleanup Jobs for the delete, want 1", n)
	}
	t.Logf("deleted (Redis cleanup Job completed, finalizer cleared) in %v", took.Round(time.Millisecond))
	if !s.reserved().IsZero() {
		t.Errorf("after the delete the group reserves %s", s.reserved())
	}
	s.noWarnings()
}

// headPod is cluster id's head pod that is not being deleted, or nil.
func (s *scene) headPod(id string) *corev1.Pod {
	s.t.Helper()
	var pods corev1.PodList
	if err := s.w.cp.Client().List(s.ctx, &pods, client.InNamespace(s.ns),
		client.MatchingLabels{kube.KeyClusterID: id, "ray.io/node-type": "head"}); err != nil {
		s.t.Fatal(err)
	}
	for i := range pods.Items {
		if pods.Items[i].DeletionTimestamp == nil {
			return &pods.Items[i]
		}
	}
	return nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// spread is "min/median/max" of ds, to the millisecond.
func spread(ds []time.Duration) string {
	ds = slices.Clone(ds)
	slices.Sort(ds)
	if len(ds) == 0 {
		return "-"
	}
	r := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	return fmt.Sprintf("%v/%v/%v", r(ds[0]), r(ds[len(ds)/2]), r(ds[len(ds)-1]))
}
