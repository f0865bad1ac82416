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
	"sigs.k8s.io/controller-runtime/pkg/client"
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
	// RayVersion is the Ray every head stand-in behaves as (see
	// [RayHeadOptions]); empty means each head behaves as the Ray of its
	// RayCluster's head image, as a real cluster does: an image tag that
	// starts with 2.41, 2.46 or 2.52 (the built-in images are tagged
	// <ray version>-<python>…) is that version, any other
	// [RayVersion246].
	RayVersion string
}

// RayLoop closes the loop from a RayCluster to a running job on a control
// plane that has no kubelet and no Ray: KubeRay's own RayCluster and RayJob
// reconcilers ([KubeRay]), a [Kubelet] stand-in that runs the pods they
// make, a [RedisCleanupJobs] stand-in that completes KubeRay's Redis-cleanup
// Jobs (so that a RayCluster with GCS fault tolerance can be deleted),
// kube-controller-manager's real ResourceQuota controller and garbage
// collector ([ControlPlane.StartControllers]: a deleted RayCluster's pods
// go after it, and a namespace's ResourceQuota is enforced), and
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
// supervisors and drivers of its running jobs are lost (their processes
// killed). When a new head pod runs and is ready, the head is up again, on
// that pod's IP, as a new Ray head:
//
//   - with GCS fault tolerance (spec.gcsFaultToleranceOptions, or the
//     ray.io/ft-enabled annotation), the GCS in Redis still has every job
//     record: a lost job still reads RUNNING until the first submit, stop,
//     delete or logs call makes the new head's job manager, whose recovery
//     fails it with [LostDriver];
//   - without, the new GCS knows no job: every id is 404.
//
// Each worker pod of the RayCluster that becomes running and ready is a
// node joining the cluster: the loop calls [RayHead.NodeJoined] with its
// pod IP, which downloads the working_dir of each running job on it.
//
// A RayCluster whose head container (the first) has RAY_AUTH_MODE=token
// and RAY_AUTH_TOKEN (a value, or valueFrom.secretKeyRef, read from the
// control plane) has a head with token authentication at
// [RayVersion252]; an older Ray ignores them, as a real one does.
type RayLoop struct {
	KubeRay      *KubeRay
	Kubelet      *Kubelet
	RedisCleanup *RedisCleanupJobs
	// Controllers are kube-controller-manager's ResourceQuota controller
	// and garbage collector, cluster-wide ([ControlPlane.StartControllers]).
	Controllers *Controllers

	t        TestingT
	fetch    func(ctx context.Context, url string) (io.ReadCloser, error)
	version  string
	client   client.Client
	http     *http.Client
	srv      *httptest.Server // every head's, under /heads/<uid>
	mu       sync.Mutex
	heads    map[types.UID]*RayHead   // by RayCluster UID
	headPods map[types.UID]headPodRun // by RayCluster UID
	ft       map[types.UID]bool       // by RayCluster UID: GCS fault tolerance
	workers  map[types.UID]bool       // worker pods seen running and ready
}

// headPodRun is the head pod a RayCluster's head stand-in follows.
type headPodRun struct {
	pod  types.UID // the last head pod seen running and ready
	ip   string    // its pod IP
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
	if _, ok := parseRayVersion(o.RayVersion); !ok {
		t.Fatalf("dlctest: ray loop: unknown RayVersion %q (want %q, %q or %q)", o.RayVersion, RayVersion241, RayVersion246, RayVersion252)
		return nil
	}
	l := &RayLoop{t: t, fetch: o.Fetch, version: o.RayVersion, client: cp.Client(),
		heads: map[types.UID]*RayHead{}, headPods: map[types.UID]headPodRun{}, ft: map[types.UID]bool{}, workers: map[types.UID]bool{},
		http: &http.Client{Timeout: 10 * time.Second, Transport: tr}}
	l.srv = httptest.NewServer(http.HandlerFunc(l.serveHead))
	t.Cleanup(l.srv.Close) // after every head's Close: cleanups run last first
	t.Cleanup(tr.CloseIdleConnections)
	l.KubeRay = cp.StartKubeRay(t, KubeRayOptions{Namespaces: o.Namespaces, Logger: o.Logger,
		Dashboard: func(rc *rayv1.RayCluster) string { return l.Head(rc).URL }})
	k, err := startKubelet(cp, o.Namespaces, l.rayPod)
	if err != nil {
		t.Fatalf("dlctest: kubelet: %v", err)
		return nil
	}
	t.Cleanup(k.stop)
	l.Kubelet = k
	l.RedisCleanup = cp.StartRedisCleanupJobs(t, o.Namespaces...)
	l.Controllers = cp.StartControllers(t)
	return l
}

// rayPod follows an event of a RayCluster's head or worker pod (gone:
// deleted).
func (l *RayLoop) rayPod(pod *corev1.Pod, gone bool) {
	owner := metav1.GetControllerOf(pod)
	if owner == nil || owner.Kind != "RayCluster" {
		return
	}
	up := !gone && pod.DeletionTimestamp == nil && rayutils.IsRunningAndReady(pod)
	if rayv1.RayNodeType(pod.Labels[rayutils.RayNodeTypeLabelKey]) == rayv1.WorkerNode {
		l.workerPod(owner.UID, pod, up)
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	run, h := l.headPods[owner.UID], l.heads[owner.UID]
	switch {
	case up && run.pod != pod.UID:
		if h != nil && run.pod != "" && !run.down {
			l.headGoesDown(owner.UID, h) // the old pod's end went unseen: its drivers are gone all the same
		}
		l.headPods[owner.UID] = headPodRun{pod: pod.UID, ip: pod.Status.PodIP}
		if h != nil {
			h.goUp(pod.Status.PodIP)
		}
	case !up && run.pod == pod.UID && !run.down:
		l.headPods[owner.UID] = headPodRun{pod: pod.UID, ip: run.ip, down: true}
		if h != nil {
			l.headGoesDown(owner.UID, h)
		}
	}
}

// headGoesDown takes h down with its pod; without GCS fault tolerance its
// job records go too. l.mu is held.
func (l *RayLoop) headGoesDown(uid types.UID, h *RayHead) {
	h.goDown()
	if !l.ft[uid] {
		h.forget()
	}
}

// workerPod follows a worker pod: one that runs and is ready for the
// first time is a node joining its cluster.
func (l *RayLoop) workerPod(cluster types.UID, pod *corev1.Pod, up bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !up {
		delete(l.workers, pod.UID)
		return
	}
	if l.workers[pod.UID] {
		return
	}
	l.workers[pod.UID] = true
	if h, ip := l.heads[cluster], pod.Status.PodIP; h != nil && ip != "" {
		go h.NodeJoined(ip) // it downloads: not on the informer's goroutine
	}
}

// Head returns the head stand-in of a RayCluster (by its UID), starting it
// on first use: a RayCluster made again under the same name has a new head
// that knows none of the old one's jobs, as a new Ray cluster would.
func (l *RayLoop) Head(rc *rayv1.RayCluster) *RayHead {
	ft := rayutils.IsGCSFaultToleranceEnabled(&rc.Spec, rc.Annotations)
	l.mu.Lock()
	h := l.heads[rc.UID]
	if h != nil {
		l.ft[rc.UID] = ft
		l.mu.Unlock()
		return h
	}
	l.mu.Unlock()
	token := l.authToken(rc) // reads a Secret: not under l.mu
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ft[rc.UID] = ft
	if h := l.heads[rc.UID]; h != nil {
		return h
	}
	version := l.version
	if version == "" {
		version = imageRayVersion(rc)
	}
	o := RayHeadOptions{Fetch: l.fetch, RayVersion: version, NodeIP: l.headPods[rc.UID].ip}
	if v, _ := parseRayVersion(version); v >= ver252 {
		o.AuthToken = token
	}
	h = newRayHead(l.t, o)
	h.URL = l.srv.URL + "/heads/" + string(rc.UID)
	if l.headPods[rc.UID].down {
		h.goDown()
	}
	l.heads[rc.UID] = h
	return h
}

// imageRayVersion is the Ray version a RayCluster's head image runs, by
// its tag (ccr.ccs.tencentyun.com/aidlc/ray:2.52.0-py311 runs 2.52), or ""
// when the tag names none the stand-in plays.
func imageRayVersion(rc *rayv1.RayCluster) string {
	cs := rc.Spec.HeadGroupSpec.Template.Spec.Containers
	if len(cs) == 0 {
		return ""
	}
	img := cs[0].Image
	if i := strings.LastIndexByte(img, '@'); i >= 0 {
		img = img[:i]
	}
	i := strings.LastIndexByte(img, ':')
	if i < 0 || strings.Contains(img[i:], "/") {
		return ""
	}
	tag := img[i+1:]
	for _, v := range []string{RayVersion241, RayVersion246, RayVersion252} {
		if strings.HasPrefix(tag, v+".") || tag == v {
			return v
		}
	}
	return ""
}

// authToken is the token a RayCluster's head authenticates with: its Ray
// container's RAY_AUTH_TOKEN when RAY_AUTH_MODE is token, "" when not.
// Cite: python/ray/_private/authentication/authentication_utils.py
// is_token_auth_enabled and authentication_constants (RAY_AUTH_MODE,
// RAY_AUTH_TOKEN; fact 39). A token that cannot be read (its Secret is
// missing) is one no request can match, as a head pod that cannot start
// answers none.
func (l *RayLoop) authToken(rc *rayv1.RayCluster) string {
	cs := rc.Spec.HeadGroupSpec.Template.Spec.Containers
	if len(cs) == 0 {
		return ""
	}
	var mode string
	var tok *corev1.EnvVar
	for i, e := range cs[0].Env {
		switch e.Name {
		case "RAY_AUTH_MODE":
			mode = e.Value
		case "RAY_AUTH_TOKEN":
			tok = &cs[0].Env[i]
		}
	}
	if !strings.EqualFold(mode, "token") || tok == nil {
		return ""
	}
	if tok.ValueFrom == nil || tok.ValueFrom.SecretKeyRef == nil {
		return tok.Value
	}
	ref := tok.ValueFrom.SecretKeyRef
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var sec corev1.Secret
	if err := l.client.Get(ctx, types.NamespacedName{Namespace: rc.Namespace, Name: ref.Name}, &sec); err == nil {
		if v, ok := sec.Data[ref.Key]; ok {
			return string(v)
		}
	} else {
		l.t.Logf("dlctest: ray loop: the auth token of RayCluster %s/%s: %v", rc.Namespace, rc.Name, err)
	}
	return "dlctest-unreadable-token-" + newNodeID()
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
