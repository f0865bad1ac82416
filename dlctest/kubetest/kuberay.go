package kubetest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	ray "github.com/ray-project/kuberay/ray-operator/controllers/ray"
	"github.com/ray-project/kuberay/ray-operator/controllers/ray/utils"
	"github.com/ray-project/kuberay/ray-operator/controllers/ray/utils/dashboardclient"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// KubeRayRequeue is how often KubeRay's RayCluster reconciler looks at a
// cluster again while it waits (its ray.DefaultRequeueDuration, 2 s in
// production) once [ControlPlane.StartKubeRay] has run in the process.
const KubeRayRequeue = 200 * time.Millisecond

// KubeRayOptions configure the KubeRay operator [ControlPlane.StartKubeRay]
// runs.
type KubeRayOptions struct {
	// Namespaces limits the operator to the objects in these namespaces;
	// none means all namespaces. Tests that share a control plane should
	// each pass their own, so that one test's operator does not reconcile
	// another's clusters.
	Namespaces []string
	// Logger receives the manager's own logs; the zero value discards
	// them. KubeRay's reconcilers log through controller-runtime's global
	// logger (sigs.k8s.io/controller-runtime/pkg/log): the first
	// StartKubeRay of a process sets it to Logger, or to discard, so that
	// a test is not told after 30 seconds that it was never set (with a
	// stack trace). A test binary that wants its own calls log.SetLogger
	// after that.
	Logger logr.Logger
	// Dashboard, when set, also runs KubeRay's RayJob reconciler, whose
	// dashboard client for a RayCluster talks to the URL Dashboard returns
	// for it, typically a [RayHead]'s URL (one per cluster, or one for all).
	// It must be on loopback: KubeRay's own address for a dashboard (the
	// head service's) leads nowhere on a control plane without pods.
	// Submit RayJobs in HTTPMode (spec.submissionMode): the default,
	// K8sJobMode, runs the submitter as a Kubernetes Job, which no
	// controller runs here.
	Dashboard func(rc *rayv1.RayCluster) string
}

// dashboards is a utils.ClientProvider whose dashboard clients talk to the
// URL KubeRayOptions.Dashboard picks.
type dashboards struct {
	url func(rc *rayv1.RayCluster) string
}

func (d dashboards) GetDashboardClient(manager.Manager) func(*rayv1.RayCluster, string) (dashboardclient.RayDashboardClientInterface, error) {
	return func(rc *rayv1.RayCluster, _ string) (dashboardclient.RayDashboardClientInterface, error) {
		url := d.url(rc)
		if url == "" {
			return nil, fmt.Errorf("dlctest: no dashboard for RayCluster %s/%s", rc.Namespace, rc.Name)
		}
		c := &dashboardclient.RayDashboardClient{}
		c.InitClient(&http.Client{Timeout: 5 * time.Second}, strings.TrimSuffix(url, "/"))
		return c, nil
	}
}

func (d dashboards) GetHttpProxyClient(manager.Manager) func(string, string, string, int) utils.RayHttpProxyClientInterface {
	return func(string, string, string, int) utils.RayHttpProxyClientInterface {
		return &utils.FakeRayHttpProxyClient{}
	}
}

// KubeRay is KubeRay's operator running in-process against a control plane:
// its RayCluster reconciler (and, with [KubeRayOptions].Dashboard, its
// RayJob reconciler), from
// github.com/ray-project/kuberay/ray-operator/controllers/ray, on a
// controller-runtime manager with metrics, health probes, webhooks and
// leader election off. It creates the head and worker pods and the head
// service of each RayCluster and keeps its status; pair it with a
// [Kubelet], since no pod runs on a control plane without one. Its client
// reads a RayCluster's pods and Services from an index by cluster, not by
// scanning the namespace, so that thousands of clusters in one namespace
// cost what KubeRay's own scale tests, spread over 100 namespaces, pay.
type KubeRay struct {
	// Manager is the manager the reconciler runs on; it has started. Use its
	// client (cached) or its event recorder; do not add controllers to it.
	Manager manager.Manager

	cancel context.CancelFunc
	done   chan error
}

// kubeRayGlobals lowers KubeRay's package-level requeue settings once per
// process, before any reconciler reads them.
var kubeRayGlobals sync.Once

// StartKubeRay starts KubeRay's RayCluster reconciler ([KubeRay]) against
// the control plane and stops it when t's test ends.
//
// KubeRay's requeue period is a process-wide setting: the first call sets
// ray.DefaultRequeueDuration to [KubeRayRequeue] and, unless it is set
// already, $RAYCLUSTER_DEFAULT_REQUEUE_SECONDS_ENV to 1 (as KubeRay's own
// tests do), for the rest of the process.
//
//	cp := kubetest.StartControlPlane(t)
//	ns := cp.NewNamespace(t)
//	cp.StartKubeRay(t, kubetest.KubeRayOptions{Namespaces: []string{ns}})
//	cp.StartKubelet(t, ns)
//	// create a RayCluster in ns: its pods appear, run, and it becomes ready
func (cp *ControlPlane) StartKubeRay(t TestingT, o KubeRayOptions) *KubeRay {
	t.Helper()
	k, err := startKubeRay(cp, o)
	if err != nil {
		t.Fatalf("dlctest: KubeRay: %v", err)
		return nil
	}
	t.Cleanup(func() {
		if err := k.stop(); err != nil {
			t.Logf("dlctest: stopping KubeRay: %v", err)
		}
	})
	return k
}

func startKubeRay(cp *ControlPlane, o KubeRayOptions) (*KubeRay, error) {
	kubeRayGlobals.Do(func() {
		global := o.Logger
		if global.GetSink() == nil {
			global = logr.Discard()
		}
		ctrllog.SetLogger(global)
		ray.DefaultRequeueDuration = KubeRayRequeue
		if os.Getenv(utils.RAYCLUSTER_DEFAULT_REQUEUE_SECONDS_ENV) == "" {
			_ = os.Setenv(utils.RAYCLUSTER_DEFAULT_REQUEUE_SECONDS_ENV, "1")
		}
	})
	logger := o.Logger
	if logger.GetSink() == nil {
		logger = logr.Discard()
	}
	mo := manager.Options{
		Scheme:                 cp.scheme,
		Logger:                 logger,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		LeaderElection:         false,
		// Several managers run in one test binary; their controllers share
		// names.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		NewClient: func(c *rest.Config, o client.Options) (client.Client, error) {
			cl, err := client.New(c, o)
			return byCluster{cl}, err
		},
	}
	if len(o.Namespaces) > 0 {
		mo.Cache.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range o.Namespaces {
			mo.Cache.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	mgr, err := manager.New(cp.Config(), mo)
	if err != nil {
		return nil, fmt.Errorf("creating a manager: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	for _, obj := range []client.Object{&corev1.Pod{}, &corev1.Service{}} {
		if err := mgr.GetFieldIndexer().IndexField(ctx, obj, byClusterIndex, clusterLabel); err != nil {
			cancel()
			return nil, fmt.Errorf("indexing %T by RayCluster: %w", obj, err)
		}
	}
	// NewReconciler registers a field index, which must happen before the
	// manager starts.
	if err := ray.NewReconciler(ctx, mgr, ray.RayClusterReconcilerOptions{}).SetupWithManager(mgr, 1); err != nil {
		cancel()
		return nil, fmt.Errorf("setting up the RayCluster reconciler: %w", err)
	}
	if o.Dashboard != nil {
		r := ray.NewRayJobReconciler(ctx, mgr, ray.RayJobReconcilerOptions{}, dashboards{url: o.Dashboard})
		if err := r.SetupWithManager(mgr, 1); err != nil {
			cancel()
			return nil, fmt.Errorf("setting up the RayJob reconciler: %w", err)
		}
	}
	k := &KubeRay{Manager: mgr, cancel: cancel, done: make(chan error, 1)}
	go func() { k.done <- mgr.Start(ctx) }()
	syncCtx, syncCancel := context.WithTimeout(ctx, 30*time.Second)
	defer syncCancel()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		return nil, errors.Join(errors.New("the manager's cache did not sync"), k.stop())
	}
	return k, nil
}

func (k *KubeRay) stop() error {
	k.cancel()
	return <-k.done
}

// byClusterIndex indexes the operator's cached pods and Services by their
// RayCluster (the ray.io/cluster label).
const byClusterIndex = "dlctest.ray.io/cluster"

func clusterLabel(o client.Object) []string {
	if v, ok := o.GetLabels()[utils.RayClusterLabelKey]; ok {
		return []string{v}
	}
	return nil
}

// byCluster is the operator's client. Every list of pods or Services KubeRay
// makes selects one RayCluster's by label, and controller-runtime's cache
// answers a label selector by scanning the namespace: O(N) per list, several
// lists per reconcile, with N clusters in one namespace. byCluster reads
// them from byClusterIndex instead; the label selector still filters what the
// index returns, so the answer is the same. KubeRay's own clusterloader2 runs
// spread their clusters over 10 or 100 namespaces; without the index, 10,000
// clusters in one namespace bound a test by the operator's CPU.
type byCluster struct{ client.Client }

// List reads a list that selects one RayCluster's pods or Services by label
// from the index; any other list as the client would.
func (c byCluster) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	switch list.(type) {
	case *corev1.PodList, *corev1.ServiceList:
		lo := (&client.ListOptions{}).ApplyOptions(opts)
		if lo.FieldSelector == nil && lo.LabelSelector != nil {
			if name, ok := lo.LabelSelector.RequiresExactMatch(utils.RayClusterLabelKey); ok {
				opts = append(opts[:len(opts):len(opts)], client.MatchingFields{byClusterIndex: name})
			}
		}
	}
	return c.Client.List(ctx, list, opts...)
}

// KubeRaySelfHealing tells KubeRay's transient warnings, which its next
// reconcile heals, from those about what it was given: on a loaded API
// server its informer cache lags its own writes, so it tries to create a
// Service or pod it has already made ("already exists"), or writes over a
// version that has moved on (a conflict). Anything else (an invalid spec,
// a refusal) is about the objects, and a test should fail on it.
func KubeRaySelfHealing(reason, message string) bool {
	switch {
	case strings.HasPrefix(reason, "FailedToCreate") && strings.Contains(message, "already exists"):
		return true
	case strings.Contains(message, "the object has been modified; please apply your changes to the latest version"):
		return true
	}
	return false
}
