package platform

import (
	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/internal/objects"
)

// derivers are the kinds the cache derives labels for, as the platform
// computes them when it writes (clusterLabels, runLabels, jobLabels,
// holdLabels), with each document decoded (and normalised, as decode
// does). The labels read back from the store are never trusted: anyone
// with edit rights can change them (status.storeLabels on Kubernetes), and
// a run whose phase label lies would wait for ever.
func derivers() map[string]objects.Derive {
	return map[string]objects.Derive{
		kindCluster: deriving(clusterLabels),
		kindRun:     deriving(runLabels),
		kindJob:     deriving(jobLabels),
		kindUsage:   deriving(usageLabels),
		kindHold: func(d backend.Doc) (map[string]string, any, error) {
			h, err := decode[holdDoc](d)
			if err != nil {
				return nil, nil, err
			}
			return holdLabels(h, d.ID), h, nil
		},
	}
}

// deriving is the Derive of a kind decoded as T whose labels labels
// computes.
func deriving[T any](labels func(*T) map[string]string) objects.Derive {
	return func(d backend.Doc) (map[string]string, any, error) {
		v, err := decode[T](d)
		if err != nil {
			return nil, nil, err
		}
		return labels(v), v, nil
	}
}

// observed takes a document the store reported (its snapshot or its
// watch) into the cache, the queues and the index of finished runs, with
// its labels derived, and returns it so, with its decoded form as the
// cache keeps it (nil for a deleted document or a kind not decoded here),
// which the caller must not change.
func (c *Engine) observed(d backend.Doc, deleted bool) (backend.Doc, any) {
	var obj any
	if deleted {
		c.cache.Remove(d.Kind, d.ID)
		d.Labels = nil
	} else {
		d, obj = c.cache.Derived(d)
		c.cache.Put(d, obj)
	}
	if d.Kind == kindHold {
		c.ledger.holdVersions.saw(d.Version)
	}
	if rg := c.queues.observe(d, deleted); rg != "" {
		c.enqueue(kindResourceGroup + "/" + rg) // what waits there changed
	}
	c.finished.observe(d, obj)
	c.order.observe(d, obj)
	c.observeRunEnd(d, obj) // and the index of each cluster's runs (runLoad)
	return d, obj
}

// cachedState returns the state label of kind/id as the cache has it, or "".
func (c *Engine) cachedState(kind, id string) string {
	d, _ := c.cache.Get(kind, id)
	return d.Labels[labelState]
}
