package dlctest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
	ray "github.com/ray-project/kuberay/ray-operator/controllers/ray"
	"github.com/ray-project/kuberay/ray-operator/controllers/ray/utils"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
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
	// them. (KubeRay's reconcilers log through controller-runtime's global
	// logger, sigs.k8s.io/controller-runtime/pkg/log.SetLogger.)
	Logger logr.Logger
}

// KubeRay is KubeRay's operator running in-process against a control plane:
// its RayCluster reconciler, the one in
// github.com/ray-project/kuberay/ray-operator/controllers/ray, on a
// controller-runtime manager with metrics, health probes, webhooks and
// leader election off. It creates the head and worker pods and the head
// service of each RayCluster and keeps its status; pair it with a
// [Kubelet], since no pod runs on a control plane without one.
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
//	cp := dlctest.StartControlPlane(t)
//	ns := cp.NewNamespace(t)
//	cp.StartKubeRay(t, dlctest.KubeRayOptions{Namespaces: []string{ns}})
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
	// NewReconciler registers a field index, which must happen before the
	// manager starts.
	if err := ray.NewReconciler(ctx, mgr, ray.RayClusterReconcilerOptions{}).SetupWithManager(mgr, 1); err != nil {
		cancel()
		return nil, fmt.Errorf("setting up the RayCluster reconciler: %w", err)
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
