package dlctest

import (
	"context"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
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
// make, and a [RayHead] stand-in per RayCluster that serves its dashboard's
// Jobs API and runs each job's entrypoint as a local process. Both the
// operator (for RayJobs) and the SDK ([RayLoop.Dashboard], for
// kube.Options.Dashboard) reach a cluster's head stand-in.
type RayLoop struct {
	KubeRay *KubeRay
	Kubelet *Kubelet

	t     TestingT
	fetch func(ctx context.Context, url string) (io.ReadCloser, error)
	http  *http.Client
	mu    sync.Mutex
	heads map[types.UID]*RayHead
}

// StartRayLoop starts KubeRay's reconcilers, the kubelet stand-in and the
// head stand-ins on the control plane; they stop when t's test ends.
//
//	cp := dlctest.StartControlPlane(t)
//	ns := cp.NewNamespace(t)
//	loop := cp.StartRayLoop(t, dlctest.LoopOptions{Namespaces: []string{ns}})
//	be, err := kube.New(ctx, cp.Config(), kube.Options{Namespace: ns, Dashboard: loop.Dashboard})
func (cp *ControlPlane) StartRayLoop(t TestingT, o LoopOptions) *RayLoop {
	t.Helper()
	l := &RayLoop{t: t, fetch: o.Fetch, heads: map[types.UID]*RayHead{}, http: &http.Client{Timeout: 10 * time.Second}}
	l.KubeRay = cp.StartKubeRay(t, KubeRayOptions{Namespaces: o.Namespaces, Logger: o.Logger,
		Dashboard: func(rc *rayv1.RayCluster) string { return l.Head(rc).URL }})
	l.Kubelet = cp.StartKubelet(t, o.Namespaces...)
	return l
}

// Head returns the head stand-in of a RayCluster (by its UID), starting it
// on first use: a RayCluster made again under the same name has a new head
// that knows none of the old one's jobs, as a new Ray cluster would.
func (l *RayLoop) Head(rc *rayv1.RayCluster) *RayHead {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.heads[rc.UID]
	if h == nil {
		h = NewRayHead(l.t, RayHeadOptions{Fetch: l.fetch})
		l.heads[rc.UID] = h
	}
	return h
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
