package platform

import (
	"sort"
	"sync"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/job"
)

// cache is the client's copy of the store, kept by the store's watch as an
// informer keeps its cache: reads come from it, decisions go to the store
// with the version read, and a conflict sends the caller back to the
// store. Documents are indexed by each label pair, so the waiting runs of
// a cluster or a resource group are found without listing every run.
type cache struct {
	mu   sync.RWMutex
	docs map[string]map[string]backend.Doc         // kind → id → doc
	objs map[string]map[string]any                 // kind → id → the doc decoded, once per version
	idx  map[string]map[string]map[string]struct{} // kind → "key=value" → ids

	// gone holds "kind/id" of the documents the watch saw deleted, the
	// newest maxGone of them (goneQ in order), so that a miss on one of
	// them needs no read of the store to be believed.
	gone  map[string]struct{}
	goneQ []string
}

// maxGone bounds how many deletions the cache remembers.
const maxGone = 4096

func newCache() *cache {
	return &cache{docs: map[string]map[string]backend.Doc{}, objs: map[string]map[string]any{},
		idx: map[string]map[string]map[string]struct{}{}, gone: map[string]struct{}{}}
}

func pair(k, v string) string { return k + "=" + v }

// put keeps d, with obj its decoded form (nil: decoded when first asked).
func (c *cache) put(d backend.Doc, obj any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	byID := c.docs[d.Kind]
	if byID == nil {
		byID = map[string]backend.Doc{}
		c.docs[d.Kind] = byID
	}
	if old, ok := byID[d.ID]; ok {
		c.unindex(old)
	}
	byID[d.ID] = d
	delete(c.objs[d.Kind], d.ID)
	delete(c.gone, d.Kind+"/"+d.ID)
	if obj != nil {
		if c.objs[d.Kind] == nil {
			c.objs[d.Kind] = map[string]any{}
		}
		c.objs[d.Kind][d.ID] = obj
	}
	idx := c.idx[d.Kind]
	if idx == nil {
		idx = map[string]map[string]struct{}{}
		c.idx[d.Kind] = idx
	}
	for k, v := range d.Labels {
		p := pair(k, v)
		if idx[p] == nil {
			idx[p] = map[string]struct{}{}
		}
		idx[p][d.ID] = struct{}{}
	}
}

func (c *cache) unindex(d backend.Doc) {
	idx := c.idx[d.Kind]
	for k, v := range d.Labels {
		p := pair(k, v)
		delete(idx[p], d.ID)
		if len(idx[p]) == 0 {
			delete(idx, p)
		}
	}
}

func (c *cache) remove(kind, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.docs[kind][id]; ok {
		c.unindex(old)
		delete(c.docs[kind], id)
		delete(c.objs[kind], id)
	}
	key := kind + "/" + id
	if _, ok := c.gone[key]; !ok {
		c.gone[key] = struct{}{}
		c.goneQ = append(c.goneQ, key)
		if len(c.goneQ) > maxGone {
			delete(c.gone, c.goneQ[0])
			c.goneQ = c.goneQ[1:]
		}
	}
}

// deleted reports whether the watch saw kind/id deleted (and not stored
// again since), among the newest deletions the cache remembers.
func (c *cache) deleted(kind, id string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	_, ok := c.gone[kind+"/"+id]
	return ok
}

// seed keeps obj as the decoded form of kind/id at version, if the cache
// has that version.
func (c *cache) seed(kind, id, version string, obj any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur, ok := c.docs[kind][id]; ok && cur.Version == version {
		if c.objs[kind] == nil {
			c.objs[kind] = map[string]any{}
		}
		c.objs[kind][id] = obj
	}
}

// object returns the decoded form of kind/id at version, made by dec
// the first time it is asked for; ok is false when the cache holds
// another version (or none).
func (c *cache) object(kind, id, version string, dec func(backend.Doc) (any, error)) (any, bool, error) {
	c.mu.RLock()
	d, ok := c.docs[kind][id]
	obj, have := c.objs[kind][id]
	c.mu.RUnlock()
	if !ok || d.Version != version {
		return nil, false, nil
	}
	if have {
		return obj, true, nil
	}
	obj, err := dec(d)
	if err != nil {
		return nil, false, err
	}
	c.mu.Lock()
	if cur, ok := c.docs[kind][id]; ok && cur.Version == version {
		if c.objs[kind] == nil {
			c.objs[kind] = map[string]any{}
		}
		c.objs[kind][id] = obj
	}
	c.mu.Unlock()
	return obj, true, nil
}

func (c *cache) get(kind, id string) (backend.Doc, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	d, ok := c.docs[kind][id]
	return d, ok
}

// selectDocs returns the documents of kind whose labels hold every pair
// of sel (every document of the kind for an empty sel), by id. It looks
// only at the documents of the rarest pair.
// cacheSource is the cache as the views read it.
type cacheSource struct{ c *cache }

func (s cacheSource) SelectDocs(kind string, sel map[string]string) []backend.Doc {
	return s.c.selectDocs(kind, sel)
}

func (c *cache) selectDocs(kind string, sel map[string]string) []backend.Doc {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []backend.Doc
	if len(sel) == 0 {
		for _, d := range c.docs[kind] {
			out = append(out, d)
		}
	} else {
		var smallest map[string]struct{}
		first := true
		for k, v := range sel {
			s := c.idx[kind][pair(k, v)]
			if first || len(s) < len(smallest) {
				smallest, first = s, false
			}
		}
	next:
		for id := range smallest {
			d := c.docs[kind][id]
			for k, v := range sel {
				if d.Labels[k] != v {
					continue next
				}
			}
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// derived returns d with the labels the platform derives from its
// content, as it computes them when it writes (clusterLabels, runLabels),
// and d decoded (and normalised, as decode does). The labels read back from the store are never trusted:
// anyone with edit rights can change them (status.storeLabels on
// Kubernetes), and a run whose phase label lies would wait for ever. A
// document that does not decode keeps no labels (obj is nil): it is in
// no index, and a read of it reports the corrupt document.
func derived(d backend.Doc) (backend.Doc, any) {
	var obj any
	switch d.Kind {
	case kindCluster:
		cl, err := decode[cluster.Cluster](d)
		if err != nil {
			d.Labels = nil
			return d, nil
		}
		d.Labels, obj = clusterLabels(cl), cl
	case kindRun:
		r, err := decode[job.Run](d)
		if err != nil {
			d.Labels = nil
			return d, nil
		}
		d.Labels, obj = runLabels(r), r
	case kindJob:
		rec, err := decode[job.Record](d)
		if err != nil {
			d.Labels = nil
			return d, nil
		}
		d.Labels, obj = jobLabels(rec), rec
	case kindHold:
		h, err := decode[holdDoc](d)
		if err != nil {
			d.Labels = nil
			return d, nil
		}
		d.Labels, obj = holdLabels(h, d.ID), h
	default:
		d.Labels = nil // no other kind is looked up by label
	}
	return d, obj
}

// observed takes a document the store reported (its snapshot or its
// watch) into the cache, the queues and the index of finished runs, with
// its labels derived, and returns it so, with its decoded form as the
// cache keeps it (nil for a deleted document or a kind not decoded here),
// which the caller must not change.
func (c *Engine) observed(d backend.Doc, deleted bool) (backend.Doc, any) {
	var obj any
	if deleted {
		c.cache.remove(d.Kind, d.ID)
		d.Labels = nil
	} else {
		d, obj = derived(d)
		c.cache.put(d, obj)
	}
	if d.Kind == kindHold {
		c.holdVersions.saw(d.Version)
	}
	c.queues.observe(d, deleted)
	c.finished.observe(d, obj)
	c.order.observe(d, obj)
	c.observeRunEnd(d, obj) // and the index of each cluster's runs (runLoad)
	return d, obj
}

// cachedState returns the state label of kind/id as the cache has it, or "".
func (c *Engine) cachedState(kind, id string) string {
	d, _ := c.cache.get(kind, id)
	return d.Labels[labelState]
}
