package memory

import (
	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/quota"
)

// Options configure a memory backend. The zero Options are a real clock,
// DefaultDelays, the default catalog, and no hooks.
type Options struct {
	Clock     backend.Clock
	Delays    *Delays
	Ray       RayHooks
	Store     StoreHooks
	NodeSpecs quota.Catalog
}

// Backend is the store and the simulated Ray together: what dlc.New uses
// by default. Several clients may share one Backend, as replicas of a
// service share one API server.
type Backend struct {
	*Store
	*Ray
}

// New returns a memory backend.
func New(o Options) *Backend {
	return &Backend{
		Store: NewStore(o.Store),
		Ray:   NewRay(RayOptions{Clock: o.Clock, Delays: o.Delays, Hooks: o.Ray, Catalog: o.NodeSpecs}),
	}
}
