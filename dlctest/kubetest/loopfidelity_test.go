package kubetest_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/ray-project/kuberay/ray-operator/controllers/ray/utils"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidlc/dlc/dlctest/kubetest"
)

// TestRayLoopWorkersAuthAndRestart runs a RayCluster without GCS fault
// tolerance whose head has token authentication (its token in a Secret)
// at Ray 2.52: the head refuses a request without the token; a job runs
// on the head pod's IP; a worker pod that replaces a deleted one is a node
// joining, which downloads the running job's working_dir; a new head pod
// is a new GCS that knows no job.
func TestRayLoopWorkersAuthAndRestart(t *testing.T) {
	cp := kubetest.StartControlPlane(t)
	ns := cp.NewNamespace(t)
	var fetches atomic.Int32
	pkg := zipFiles(t, map[string]string{"main.sh": "echo up; sleep 60\n"})
	loop := cp.StartRayLoop(t, kubetest.LoopOptions{Namespaces: []string{ns}, RayVersion: kubetest.RayVersion252,
		Fetch: func(context.Context, string) (io.ReadCloser, error) {
			fetches.Add(1)
			return io.NopCloser(bytes.NewReader(pkg)), nil
		}})
	c := cp.Client()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ray-token", Namespace: ns}, Data: map[string][]byte{"token": []byte("s3cret")}}
	if err := c.Create(ctx(t), sec); err != nil {
		t.Fatal(err)
	}
	hg := headGroup()
	hg.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "RAY_AUTH_MODE", Value: "token"},
		{Name: "RAY_AUTH_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "ray-token"}, Key: "token"}}}}
	rc := &rayv1.RayCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "auth", Namespace: ns},
		Spec: rayv1.RayClusterSpec{HeadGroupSpec: hg,
			WorkerGroupSpecs: []rayv1.WorkerGroupSpec{workerGroup("small", ptr.To[int32](1), ptr.To[int32](1))}},
	}
	if err := c.Create(ctx(t), rc); err != nil {
		t.Fatal(err)
	}
	var got rayv1.RayCluster
	waitFor(t, 30*time.Second, "a ready cluster", func() (bool, string) {
		if err := c.Get(ctx(t), client.ObjectKeyFromObject(rc), &got); err != nil {
			return false, err.Error()
		}
		return meta.IsStatusConditionTrue(got.Status.Conditions, string(rayv1.HeadPodReady)), fmtConds(&got)
	})
	head := loop.Head(&got)
	hc := &http.Client{Timeout: 10 * time.Second}
	call := func(method, path, body, token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, head.URL+path, strings.NewReader(body))
		if token != "" {
			req.Header.Set("X-Ray-Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(data)
	}
	if code, body := call("GET", "/api/jobs/x", "", ""); code != http.StatusUnauthorized {
		t.Errorf("without a token: %d %s", code, body)
	}
	if code, body := call("POST", "/api/jobs/", `{"entrypoint": "sh main.sh", "submission_id": "job", "runtime_env": {"working_dir": "https://store/pkg.zip"}}`, "s3cret"); code != 200 {
		t.Fatalf("submit: %d %s", code, body)
	}
	hp := headPod(t, cp, ns, rc.Name)
	var details map[string]any
	waitFor(t, 30*time.Second, "the job running", func() (bool, string) {
		_, body := call("GET", "/api/jobs/job", "", "s3cret")
		details = nil
		_ = json.Unmarshal([]byte(body), &details)
		return details["status"] == "RUNNING", body
	})
	if want := "http://" + hp.Status.PodIP + ":52365"; details["driver_agent_http_address"] != want {
		t.Errorf("driver_agent_http_address %v, want %s", details["driver_agent_http_address"], want)
	}
	if n := fetches.Load(); n != 1 {
		t.Errorf("%d downloads on the head, want 1", n)
	}

	// A worker pod replaced: a node joins, and downloads the package.
	var pods corev1.PodList
	if err := c.List(ctx(t), &pods, client.InNamespace(ns), client.MatchingLabels{utils.RayNodeTypeLabelKey: string(rayv1.WorkerNode)}); err != nil || len(pods.Items) != 1 {
		t.Fatalf("worker pods: %d, %v", len(pods.Items), err)
	}
	if err := c.Delete(ctx(t), &pods.Items[0]); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the new worker node's download", func() (bool, string) {
		return fetches.Load() == 2, ""
	})

	// A new head pod without GCS fault tolerance: a new GCS, no jobs.
	if err := c.Delete(ctx(t), hp); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "a new head pod and the head up", func() (bool, string) {
		p := headPod(t, cp, ns, rc.Name)
		return p != nil && p.UID != hp.UID && isReady(p) && !head.Down(), ""
	})
	if code, body := call("GET", "/api/jobs/job", "", "s3cret"); code != http.StatusNotFound || body != "Job job does not exist" {
		t.Errorf("the job after a head restart without fault tolerance: %d %s", code, body)
	}
	if head.LostDrivers() != 1 {
		t.Errorf("LostDrivers() = %d", head.LostDrivers())
	}
}

func zipFiles(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, body := range files {
		w, err := zw.Create(name)
		if err == nil {
			_, err = io.WriteString(w, body)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
