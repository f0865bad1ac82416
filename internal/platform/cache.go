package platform

import (
	"reflect"
	"sync"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/internal/objects"
	"github.com/aidlc/dlc/job"
)

// derivers are the kinds the cache derives labels for, as the platform
// computes them when it writes (clusterLabels, runLabels, jobLabels,
// holdLabels), with each document decoded (and normalised, as decode
// does). The labels read back from the store are never trusted: anyone
// with edit rights can change them (status.storeLabels on Kubernetes), and
// a run whose phase label lies would wait for ever.
func derivers(configs *sharedConfigs) map[string]objects.Derive {
	return map[string]objects.Derive{
		kindCluster: deriving(clusterLabels),
		kindRun: func(d backend.Doc) (map[string]string, any, error) {
			r, err := decode[job.Run](d)
			if err != nil {
				return nil, nil, err
			}
			configs.share(r)
			return runLabels(r), r, nil
		},
		kindJob: func(d backend.Doc) (map[string]string, any, error) {
			rec, err := decode[job.Record](d)
			if err != nil {
				return nil, nil, err
			}
			configs.keep(d.ID, rec)
			return jobLabels(rec), rec, nil
		},
		kindUsage: deriving(usageLabels),
		kindHold: func(d backend.Doc) (map[string]string, any, error) {
			h, err := decode[holdDoc](d)
			if err != nil {
				return nil, nil, err
			}
			return holdLabels(h, d.ID), h, nil
		},
	}
}

// sharedConfigs lets the cache's runs share their job config's decoded
// config. Each run keeps the config revision it runs (job.Run.Config), as
// large decoded as its job config's own, and most of a config's runs run
// its current revision. What the cache decodes is read and never changed
// (fromCache hands out deep copies), so a run whose config equals its job
// config's current one, as the cache has it, takes a shallow copy of that
// one: one copy of its strings, slices and maps for the config and all
// those runs, where each run held its own (issue 43).
type sharedConfigs struct {
	mu    sync.Mutex
	byJob map[string]*job.Config // job config id → its config, in the record the cache decoded last
}

func newSharedConfigs() *sharedConfigs { return &sharedConfigs{byJob: map[string]*job.Config{}} }

// keep notes rec, job config id as the cache decoded it, for its runs to
// share its config.
func (s *sharedConfigs) keep(id string, rec *job.Record) {
	s.mu.Lock()
	s.byJob[id] = &rec.Config
	s.mu.Unlock()
}

// forget drops job config id, deleted.
func (s *sharedConfigs) forget(id string) {
	s.mu.Lock()
	delete(s.byJob, id)
	s.mu.Unlock()
}

// share has run r, decoded for the cache, take its job config's config
// when it is equal to its own.
func (s *sharedConfigs) share(r *job.Run) {
	s.mu.Lock()
	cfg := s.byJob[r.JobID]
	s.mu.Unlock()
	if cfg != nil && reflect.DeepEqual(&r.Config, cfg) {
		r.Config = *cfg
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
		if d.Kind == kindJob {
			c.configs.forget(d.ID)
		}
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
