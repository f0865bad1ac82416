package kubetest

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	rayutils "github.com/ray-project/kuberay/ray-operator/controllers/ray/utils"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// LoopOptions configure [ControlPlane.StartRayLoop].
type LoopOptions struct {
	// Namespaces limits the operator and the kubelet stand-in to these
	// namespaces; none means all, which only one loop per control plane
	// may have.
	Namespaces []string
	// Fetch gets a job's working_dir by URL for every head stand-in (see
	// [RayHeadOptions]); nil means an HTTP GET.
	Fetch func(ctx context.Context, url string) (io.ReadCloser, error)
	// Logger receives the operator manager's logs; the zero value discards
	// them.
	Logger logr.Logger
}

// RayLoop closes the loop from a RayCluster to a running job on a control
// plane that has no kubelet and no Ray: KubeRay's own RayCluster and RayJob
// reconcilers ([KubeRay]), a [Kubelet] stand-in that runs the pods they
// make, a [RedisCleanupJobs] stand-in that completes KubeRay's Redis-cleanup
// Jobs (so that a RayCluster with GCS fault tolerance can be deleted), and
// a [RayHead] stand-in per RayCluster that serves its dashboard's Jobs API
// and runs each job's entrypoint as a local process. The heads share one
// loopback listener, each under a path of its own (/heads/<RayCluster
// UID>), so that a test of 10,000 clusters needs no 10,000 sockets. Both the operator (for
// RayJobs) and the SDK ([RayLoop.Dashboard], for kube.Options.Dashboard)
// reach a cluster's head stand-in.
//
// A head stand-in follows its RayCluster's head pod, as the kubelet
// stand-in sees it: once the head pod that ran is deleted or fails, the
// head is down ([RayHead.Down]: every request is answered 503, as the API
// server's service proxy answers for a service with no ready pod) and the
// drivers of its running jobs are lost (their processes killed; each job
// ends FAILED with [LostDriver]); when a new head pod runs and is ready, the
// head is up again with the job records it had, as a restarted head with
// GCS fault tolerance finds them in Redis. (Without fault tolerance a real
// new head would have forgotten them; the stand-in keeps them either way.)
type RayLoop struct {
	KubeRay      *KubeRay
	Kubelet      *Kubelet
	RedisCleanup *RedisCleanupJobs

	t        TestingT
	fetch    func(ctx context.Context, url string) (io.ReadCloser, error)
	http     *http.Client
	srv      *httptest.Server // every head's, under /heads/<uid>
	mu       sync.Mutex
	heads    map[types.UID]*RayHead   // by RayCluster UID
	headPods map[types.UID]headPodRun // by RayCluster UID
}

// headPodRun is the head pod a RayCluster's head stand-in follows.
type headPodRun struct {
	pod  types.UID // the last head pod seen running and ready
	down bool      // that pod is gone or not running, and no other runs yet
}

// StartRayLoop starts KubeRay's reconcilers, the kubelet stand-in and the
// head stand-ins on the control plane; they stop when t's test ends.
//
//	cp := kubetest.StartControlPlane(t)
//	ns := cp.NewNamespace(t)
//	loop := cp.StartRayLoop(t, kubetest.LoopOptions{Namespaces: []string{ns}})
//	be, err := kube.New(ctx, cp.Config(), kube.Options{Namespace: ns, Dashboard: loop.Dashboard})
func (cp *ControlPlane) StartRayLoop(t TestingT, o LoopOptions) *RayLoop {
	t.Helper()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64 // every head is on one host: keep the connections of the SDK's concurrent calls
	l := &RayLoop{t: t, fetch: o.Fetch, heads: map[types.UID]*RayHead{}, headPods: map[types.UID]headPodRun{},
		http: &http.Client{Timeout: 10 * time.Second, Transport: tr}}
	l.srv = httptest.NewServer(http.HandlerFunc(l.serveHead))
	t.Cleanup(l.srv.Close) // after every head's Close: cleanups run last first
	t.Cleanup(tr.CloseIdleConnections)
	l.KubeRay = cp.StartKubeRay(t, KubeRayOptions{Namespaces: o.Namespaces, Logger: o.Logger,
		Dashboard: func(rc *rayv1.RayCluster) string { return l.Head(rc).URL }})
	k, err := startKubelet(cp, o.Namespaces, l.headPod)
	if err != nil {
		t.Fatalf("dlctest: kubelet: %v", err)
		return nil
	}
	t.Cleanup(k.stop)
	l.Kubelet = k
	l.RedisCleanup = cp.StartRedisCleanupJobs(t, o.Namespaces...)
	return l
}

// headPod follows an event of a RayCluster's head pod (gone: deleted):
// the head goes down when the pod that ran stops running, and comes up
// when a pod runs and is ready again.
func (l *RayLoop) headPod(pod *corev1.Pod, gone bool) {
	owner := metav1.GetControllerOf(pod)
	if owner == nil || owner.Kind != "RayCluster" {
		return
	}
	up := !gone && pod.DeletionTimestamp == nil && rayutils.IsRunningAndReady(pod)
	l.mu.Lock()
	defer l.mu.Unlock()
	run, h := l.headPods[owner.UID], l.heads[owner.UID]
	switch {
	case up && run.pod != pod.UID:
		if h != nil && run.pod != "" && !run.down {
			h.goDown() // the old pod's end went unseen: its drivers are gone all the same
		}
		l.headPods[owner.UID] = headPodRun{pod: pod.UID}
		if h != nil {
			h.goUp()
		}
	case !up && run.pod == pod.UID && !run.down:
		l.headPods[owner.UID] = headPodRun{pod: pod.UID, down: true}
		if h != nil {
			h.goDown()
		}
	}
}

// Head returns the head stand-in of a RayCluster (by its UID), starting it
// on first use: a RayCluster made again under the same name has a new head
// that knows none of the old one's jobs, as a new Ray cluster would.
func (l *RayLoop) Head(rc *rayv1.RayCluster) *RayHead {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.heads[rc.UID]
	if h == nil {
		h = newRayHead(l.t, RayHeadOptions{Fetch: l.fetch})
		h.URL = l.srv.URL + "/heads/" + string(rc.UID)
		if l.headPods[rc.UID].down {
			h.goDown()
		}
		l.heads[rc.UID] = h
	}
	return h
}

// serveHead routes /heads/<uid>/... to that RayCluster's head; a head not
// started is not found, as a service of no cluster.
func (l *RayLoop) serveHead(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/heads/")
	uid, _, _ := strings.Cut(rest, "/")
	l.mu.Lock()
	h := l.heads[types.UID(uid)]
	l.mu.Unlock()
	if !ok || h == nil {
		http.NotFound(w, r)
		return
	}
	http.StripPrefix("/heads/"+uid, h.handler).ServeHTTP(w, r)
}

// Heads returns how many head stand-ins have started.
func (l *RayLoop) Heads() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.heads)
}

// Dashboard is a kube.Options.Dashboard: the base URL of rc's head
// stand-in and a plain HTTP client.
func (l *RayLoop) Dashboard(_ context.Context, rc *rayv1.RayCluster) (string, *http.Client, error) {
	return l.Head(rc).URL, l.http, nil
}
