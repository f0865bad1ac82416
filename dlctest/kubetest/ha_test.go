package kubetest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/ray-project/kuberay/ray-operator/controllers/ray/utils"
	utiltypes "github.com/ray-project/kuberay/ray-operator/controllers/ray/utils/types"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidlc/dlc/dlctest/kubetest"
)

// TestRayLoopHighAvailability runs a RayCluster with GCS fault tolerance
// through the Ray loop's whole life: it becomes ready with KubeRay's
// Redis-cleanup finalizer; its head pod, deleted, is replaced, the head
// stand-in goes down and comes back with its job records, the running
// job's driver lost (failed once a stop makes the new job manager);
// deleted, the cluster is gone once the Job stand-in has completed
// KubeRay's cleanup Job, and the Job goes with it.
func TestRayLoopHighAvailability(t *testing.T) {
	cp := kubetest.StartControlPlane(t)
	ns := cp.NewNamespace(t)
	loop := cp.StartRayLoop(t, kubetest.LoopOptions{Namespaces: []string{ns}})
	c := cp.Client()
	rc := &rayv1.RayCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "ha", Namespace: ns},
		Spec: rayv1.RayClusterSpec{
			HeadGroupSpec:            headGroup(),
			WorkerGroupSpecs:         []rayv1.WorkerGroupSpec{workerGroup("small", ptr.To[int32](1), ptr.To[int32](1))},
			GcsFaultToleranceOptions: &rayv1.GcsFaultToleranceOptions{RedisAddress: "redis.invalid:6379"},
		},
	}
	if err := c.Create(ctx(t), rc); err != nil {
		t.Fatalf("Create: %v", err)
	}
	var got rayv1.RayCluster
	waitFor(t, 30*time.Second, "a ready cluster with KubeRay's finalizer", func() (bool, string) {
		if err := c.Get(ctx(t), client.ObjectKeyFromObject(rc), &got); err != nil {
			return false, err.Error()
		}
		return meta.IsStatusConditionTrue(got.Status.Conditions, string(rayv1.HeadPodReady)) &&
			slices.Contains(got.Finalizers, utils.GCSFaultToleranceRedisCleanupFinalizer), fmtConds(&got)
	})
	head := loop.Head(&got)
	hc := &http.Client{Timeout: 10 * time.Second}
	body, _ := json.Marshal(utiltypes.RayJobRequest{Entrypoint: "sleep 60", SubmissionId: "long"})
	resp, err := hc.Post(head.URL+"/api/jobs/", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	jobStatus := func() (utiltypes.RayJobInfo, string) {
		resp, err := hc.Get(head.URL + "/api/jobs/long")
		if err != nil {
			return utiltypes.RayJobInfo{}, err.Error()
		}
		defer resp.Body.Close()
		var info utiltypes.RayJobInfo
		if resp.StatusCode != http.StatusOK {
			return info, resp.Status
		}
		err = json.NewDecoder(resp.Body).Decode(&info)
		return info, string(info.JobStatus) + " " + info.Message + " " + errString(err)
	}
	waitFor(t, 30*time.Second, "the job running", func() (bool, string) {
		info, s := jobStatus()
		return info.JobStatus == rayv1.JobStatusRunning, s
	})

	old := headPod(t, cp, ns, rc.Name)
	if old == nil {
		t.Fatal("no head pod")
	}
	if err := c.Delete(ctx(t), old); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "a new head pod ready and the head up again", func() (bool, string) {
		p := headPod(t, cp, ns, rc.Name)
		if p == nil || p.UID == old.UID {
			return false, "the old head pod or none"
		}
		return isReady(p) && !head.Down(), string(p.Status.Phase)
	})
	// The GCS in Redis kept the record: RUNNING until a call makes the new
	// head's job manager, whose recovery fails it.
	if info, s := jobStatus(); info.JobStatus != rayv1.JobStatusRunning {
		t.Errorf("the job whose driver was on the old head, before any job manager call: %s", s)
	}
	resp, err = hc.Post(head.URL+"/api/jobs/long/stop", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if info, s := jobStatus(); info.JobStatus != rayv1.JobStatusFailed || info.Message != kubetest.LostDriver {
		t.Errorf("the job whose driver was on the old head: %s", s)
	}
	if n := head.LostDrivers(); n != 1 {
		t.Errorf("LostDrivers() = %d, want 1", n)
	}

	if err := c.Delete(ctx(t), rc); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the RayCluster gone and its cleanup Job with it", func() (bool, string) {
		err := c.Get(ctx(t), client.ObjectKeyFromObject(rc), &got)
		var jobs batchv1.JobList
		lerr := c.List(ctx(t), &jobs, client.InNamespace(ns))
		return apierrors.IsNotFound(err) && lerr == nil && len(jobs.Items) == 0,
			fmt.Sprintf("%v; %d Jobs (%v); finalizers %s", err, len(jobs.Items), lerr, fmtFinalizers(&got))
	})
	if n := loop.RedisCleanup.Completed(); n != 1 {
		t.Errorf("Completed() = %d, want 1", n)
	}
}

func headPod(t *testing.T, cp *kubetest.ControlPlane, ns, cluster string) *corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	if err := cp.Client().List(ctx(t), &pods, client.InNamespace(ns),
		client.MatchingLabels{utils.RayClusterLabelKey: cluster, utils.RayNodeTypeLabelKey: string(rayv1.HeadNode)}); err != nil {
		t.Fatal(err)
	}
	for i := range pods.Items {
		if pods.Items[i].DeletionTimestamp == nil {
			return &pods.Items[i]
		}
	}
	return nil
}

func isReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func fmtConds(rc *rayv1.RayCluster) string {
	s := ""
	for _, c := range rc.Status.Conditions {
		s += c.Type + "=" + string(c.Status) + " "
	}
	return s + "finalizers " + fmtFinalizers(rc)
}

func fmtFinalizers(rc *rayv1.RayCluster) string {
	b, _ := json.Marshal(rc.Finalizers)
	return string(b)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
