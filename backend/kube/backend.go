package kube

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"k8s.io/client-go/rest"
)

// Options configure New.
type Options struct {
	// Namespace holds every object of the platform: our objects, the
	// RayClusters and RayJobs, their pods. Required.
	Namespace string
	// Render is how clusters and runs render (catalogs, volumes, Redis for
	// high availability, the URL of a job package); its Namespace is
	// replaced by Namespace. Pass the same catalogs as the client's
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
	// API server refuses to proxy to.
	Dashboard func(ctx context.Context, rc *rayv1.RayCluster) (base string, hc *http.Client, err error)
	// PollInterval is how often a job submitted to a cluster's Ray Jobs
	// API is looked at again while it runs (the API has no watch); default
	// 2 s. On-demand runs need no polling: their RayJob's status is
	// watched.
	PollInterval time.Duration
	// Store configures the store.
	Store StoreOptions
	// Logger receives what the backend does not return (a failed Event);
	// the zero value discards it.
	Logger logr.Logger
}

// Backend is the Kubernetes backend of a dlc.Client: the platform's state
// in the API server (Store) and Ray through KubeRay and the Ray Jobs API
// (Provisioner), in one namespace. Several clients, in one process or in
// many, may share one namespace: each runs its own Backend.
type Backend struct {
	*Store
	*Provisioner
}

// New starts the backend on the API server of cfg: the store's and the
// provisioner's informers on o.Namespace, which it waits to sync. The
// namespace needs our CRDs (InstallCRDs) and KubeRay's. Close the backend
// when done with it, after the client over it.
func New(ctx context.Context, cfg *rest.Config, o Options) (*Backend, error) {
	if o.Namespace == "" {
		return nil, fmt.Errorf("kube: Options.Namespace is required")
	}
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

// Close stops the backend's informers and pollers.
func (b *Backend) Close() {
	b.Provisioner.Close()
	b.Store.Close()
}
