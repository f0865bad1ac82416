package kube

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/go-logr/logr"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/aidlc/dlc/errs"
)

// Options configure New.
type Options struct {
	// Namespace holds the platform's own objects (the store), and the
	// RayClusters and RayJobs, with their pods, of every resource group
	// that GroupNamespaces does not map. Required.
	Namespace string
	// GroupNamespaces maps a resource group's id to the namespace its
	// RayClusters, RayJobs, pods, Services and NetworkPolicy live in: the
	// Kubernetes boundary between resource groups (docs/security.md's Security
	// model), where a group's dlc-env-* Secrets and Redis credentials are,
	// and where the backend keeps a ResourceQuota equal to the group's
	// capacity (GroupQuotaName). A namespace is one group's: two groups
	// mapped to one namespace, or a group mapped to Namespace, are
	// ErrInvalid. Each namespace needs
	// the Ray side of the backend's rights (config/rbac/group) and its
	// labels (Pod Security, dlc.aidlc.io/ray-admission), an administrator's
	// step as the CRDs are. The map is fixed when the backend starts (its
	// informers watch these namespaces): a new group's namespace takes a
	// restart of the replicas. A RayCluster in another namespace than the
	// store's has no owner reference to its ComputeCluster (owner
	// references do not cross namespaces); the delete deletes it.
	GroupNamespaces map[string]string
	// Render is how clusters and runs render (catalogs, volumes, Redis for
	// high availability, the URL of a job package); its Namespace is
	// replaced by Namespace, or the resource group's (GroupNamespaces). Pass the same catalogs as the client's
	// dlc.WithCatalogs.
	Render RenderOptions
	// FieldManager names the backend in server-side apply and in
	// metadata.managedFields (default "dlc").
	FieldManager string
	// Dashboard returns how to reach a RayCluster's dashboard (the Ray
	// Jobs REST API): its base URL and the HTTP client to use. Nil means
	// the API server's service proxy to the head service (ServiceProxyURL,
	// with an HTTP client made from the rest.Config), which needs the
	// services/proxy permission and a head service the API server can
	// reach. Tests point it at a Ray head stand-in on loopback, which the
	// API server refuses to proxy to. Whatever client it returns, no
	// redirect from a head is followed, and every call has HeadTimeout.
	// rc is the backend's cached RayCluster, which keeps only what the
	// backend reads of one (see slimRayCluster): its name, namespace, uid,
	// its head's service name and addresses (status.head), the head
	// container's image; not its pod templates, labels or endpoints.
	Dashboard func(ctx context.Context, rc *rayv1.RayCluster) (base string, hc *http.Client, err error)
	// PollInterval is how often a job submitted to a cluster's Ray Jobs
	// API is looked at again while it runs (the API has no watch); default
	// 2 s. On-demand runs need no polling: their RayJob's status is
	// watched.
	PollInterval time.Duration
	// HeadTimeout bounds each call to a Ray head's Jobs API, from
	// connecting to the last byte of the answer (default
	// DefaultHeadTimeout, 10 s). A head runs the user's image and may never
	// answer; calls to heads are also isolated from each other (HeadGuard):
	// one at a time per head, and none for HeadBackoff after one timed out.
	HeadTimeout time.Duration
	// HeadBackoff is how long calls to a head fail at once after a call to
	// it timed out, doubling with each timeout in a row (default
	// DefaultHeadBackoff, 15 s).
	HeadBackoff time.Duration
	// LogTimeout bounds a call that reads a run's logs from its head
	// (default DefaultLogTimeout, a minute: Ray answers a log whole). Log
	// reads have a guard of their own, apart from the control calls: a
	// slow or large log never opens the breaker of Submit, Status, Stop.
	LogTimeout time.Duration
	// RayTokens reads a cluster's Ray token (Ray's token authentication,
	// cluster.Spec.RayToken) from the Secret key its RayCluster names; nil
	// means SecretTokens on the backend's own client, which needs "get" on
	// Secrets in the namespace (config/rbac's optional Role
	// dlc-backend-ray-tokens). The token is sent as X-Ray-Authorization.
	RayTokens func(ctx context.Context, namespace string, ref corev1.SecretKeySelector) (string, error)
	// NetworkPolicy, when set, has the backend keep a NetworkPolicy per
	// resource group (RenderNetworkPolicy), so that Ray pods admit
	// connections only from their own resource group's Ray pods and the
	// peers it names; it needs create and patch on networkpolicies (the
	// backend's Role grants them). Nil keeps none: Ray pods of every
	// resource group can reach each other.
	NetworkPolicy *NetworkPolicyOptions
	// Store configures the store.
	Store StoreOptions
	// Logger receives what the backend does not return (a failed Event);
	// the zero value discards it.
	Logger logr.Logger
	// QPS and Burst are the client-side rate limit of the backend's calls
	// to the API server. 0 means the rest.Config's, or DefaultQPS and
	// DefaultBurst when it leaves QPS at 0 (as rest.InClusterConfig does);
	// a negative QPS turns the client-side limit off (the API server's
	// priority and fairness still applies).
	QPS   float32
	Burst int
}

// DefaultQPS and DefaultBurst are the client-side rate limit of the
// backend's API server clients when neither Options nor the rest.Config
// set one. client-go's own default (5 queries a second, bursts of 10)
// throttles a platform service to a few clusters a second; the API
// server's priority and fairness, not a small client limit, protects it.
const (
	DefaultQPS   = 200
	DefaultBurst = 400
)

// limitConfig returns a copy of cfg with the rate limit the backend's
// clients use: qps and burst when qps is not 0, else cfg's own when it
// sets QPS or a RateLimiter, else DefaultQPS and DefaultBurst.
func limitConfig(cfg *rest.Config, qps float32, burst int) *rest.Config {
	c := rest.CopyConfig(cfg)
	switch {
	case qps != 0:
		c.QPS, c.Burst, c.RateLimiter = qps, burst, nil
	case c.QPS == 0 && c.RateLimiter == nil:
		c.QPS, c.Burst = DefaultQPS, DefaultBurst
	}
	if c.QPS > 0 && c.Burst <= 0 {
		c.Burst = max(int(c.QPS), 1)
	}
	return c
}

// DefaultAPITimeout bounds each call the backend makes to the API server
// (a read, a write, an apply, an Event), unless the rest.Config passed to
// New or NewStore has a Timeout of its own. The watches (the store's
// reflectors, the provisioner's informers) are long-running by design and
// are not bounded; a reconcile step is bounded
// as a whole by the client (dlc.WithReconcileTimeout).
const DefaultAPITimeout = 30 * time.Second

// callConfig returns a copy of cfg for clients that make calls, not
// watches: with a Timeout (DefaultAPITimeout unless cfg has one), which
// bounds each call from connecting to the last byte of the answer.
func callConfig(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	if c.Timeout <= 0 {
		c.Timeout = DefaultAPITimeout
	}
	return c
}

// Backend is the Kubernetes backend of a dlc.Client: the platform's state
// in the API server (Store) and Ray through KubeRay and the Ray Jobs API
// (Provisioner), in one namespace. Several clients, in one process or in
// many, may share one namespace: each runs its own Backend.
type Backend struct {
	*Store
	*Provisioner
}

// New starts the backend on the API server of cfg: the store's reflectors
// on o.Namespace and the provisioner's informers on it and
// o.GroupNamespaces', which it waits to sync. The namespace needs our CRDs (InstallCRDs) and
// KubeRay's. Close the backend when done with it, after the client over
// it. A namespace that is not a valid name is ErrInvalid, before any call.
func New(ctx context.Context, cfg *rest.Config, o Options) (*Backend, error) {
	if o.Namespace == "" {
		return nil, fmt.Errorf("%w: kube: Options.Namespace is required", errs.ErrInvalid)
	}
	owner := map[string]string{} // namespace → the resource group mapped to it
	for _, rg := range slices.Sorted(maps.Keys(o.GroupNamespaces)) {
		ns := o.GroupNamespaces[rg]
		switch {
		case len(validation.IsDNS1123Label(ns)) > 0:
			return nil, fmt.Errorf("%w: kube: Options.GroupNamespaces: resource group %q: %q is not a namespace name", errs.ErrInvalid, rg, ns)
		case ns == o.Namespace:
			return nil, fmt.Errorf("%w: kube: Options.GroupNamespaces: resource group %q: %q is the backend's own namespace, which unmapped groups share: leave the group out of the map", errs.ErrInvalid, rg, ns)
		case owner[ns] != "":
			return nil, fmt.Errorf("%w: kube: Options.GroupNamespaces: resource groups %q and %q share namespace %q, whose ResourceQuota is one group's capacity", errs.ErrInvalid, owner[ns], rg, ns)
		}
		owner[ns] = rg
	}
	cfg = limitConfig(cfg, o.QPS, o.Burst)
	st, err := NewStore(ctx, cfg, o.Namespace, o.Store)
	if err != nil {
		return nil, err
	}
	p, err := newProvisioner(ctx, cfg, st, o)
	if err != nil {
		st.Close()
		return nil, err
	}
	return &Backend{Store: st, Provisioner: p}, nil
}

// Namespace returns the namespace the backend keeps its objects and
// Ray's in.
func (b *Backend) Namespace() string { return b.Provisioner.namespace }

// Close stops the backend's reflectors, informers and pollers and waits until they
// have stopped (at most 10 s each), so that nothing of it runs after.
func (b *Backend) Close() {
	b.Provisioner.Close()
	b.Store.Close()
}

// closeWait bounds how long a Close waits for what it stopped to end.
const closeWait = 10 * time.Second

// startCache starts c on a context of its own, derived from ctx, and
// returns that context and the function that stops c: it cancels the
// context and waits until c's informers have stopped, so that a closed
// store or provisioner leaves nothing running that holds what it cached
// (10,000 clusters are hundreds of MiB). The wait is bounded (closeWait):
// a Close called from one of the informers' own handlers must not wait
// for itself.
func startCache(ctx context.Context, c ctrlcache.Cache) (context.Context, func()) {
	run, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Start(run) }()
	return run, func() { cancel(); awaitStopped(done) }
}

// awaitStopped waits until done is closed, at most closeWait.
func awaitStopped(done <-chan struct{}) {
	t := time.NewTimer(closeWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}
