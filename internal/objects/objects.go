// Package objects is a client's copy of the store, kept by the store's
// watch as an informer keeps its cache: each document with the labels the
// platform derives from its content (never those read back, which anyone
// with write access could have changed), indexed by each label pair, and
// decoded once per version. The kinds looked up by label register how
// their labels are derived (Derive); a kind not registered keeps no
// labels.
package objects

import (
	"sort"
	"sync"

	"github.com/aidlc/dlc/backend"
)

// Derive decodes a document of one kind and returns the labels the
// platform derives from its content, and the document decoded; an error
// means the document does not decode (it is then in no index, and a read
// of it reports the corrupt document).
type Derive func(d backend.Doc) (labels map[string]string, obj any, err error)

// Cache is a client's copy of the store, kept by the store's watch as an
// informer keeps its cache: reads come from it, decisions go to the store
// with the version read, and a conflict sends the caller back to the
// store. Documents are indexed by each label pair, so the waiting runs of
// a cluster or a resource group are found without listing every run.
type Cache struct {
	derive map[string]Derive // kind → how its labels are derived; read only

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

// New returns an empty cache of the kinds derive registers.
func New(derive map[string]Derive) *Cache {
	return &Cache{derive: derive, docs: map[string]map[string]backend.Doc{}, objs: map[string]map[string]any{},
		idx: map[string]map[string]map[string]struct{}{}, gone: map[string]struct{}{}}
}

func pair(k, v string) string { return k + "=" + v }

// Put keeps d, with obj its decoded form (nil: decoded when first asked).
func (c *Cache) Put(d backend.Doc, obj any) {
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

func (c *Cache) unindex(d backend.Doc) {
	idx := c.idx[d.Kind]
	for k, v := range d.Labels {
		p := pair(k, v)
		delete(idx[p], d.ID)
		if len(idx[p]) == 0 {
			delete(idx, p)
		}
	}
}

// Remove forgets kind/id, deleted from the store, and remembers that it
// was (Deleted).
func (c *Cache) Remove(kind, id string) {
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

// Deleted reports whether the watch saw kind/id deleted (and not stored
// again since), among the newest deletions the cache remembers.
func (c *Cache) Deleted(kind, id string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	_, ok := c.gone[kind+"/"+id]
	return ok
}

// Seed keeps obj as the decoded form of kind/id at version, if the cache
// has that version.
func (c *Cache) Seed(kind, id, version string, obj any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur, ok := c.docs[kind][id]; ok && cur.Version == version {
		if c.objs[kind] == nil {
			c.objs[kind] = map[string]any{}
		}
		c.objs[kind][id] = obj
	}
}

// Object returns the decoded form of kind/id at version, made by dec
// the first time it is asked for; ok is false when the cache holds
// another version (or none).
func (c *Cache) Object(kind, id, version string, dec func(backend.Doc) (any, error)) (any, bool, error) {
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

// Get returns kind/id as the cache has it.
func (c *Cache) Get(kind, id string) (backend.Doc, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	d, ok := c.docs[kind][id]
	return d, ok
}

// SelectDocs returns the documents of kind whose labels hold every pair
// of sel (every document of the kind for an empty sel), by id. It looks
// only at the documents of the rarest pair.
func (c *Cache) SelectDocs(kind string, sel map[string]string) []backend.Doc {
	out := c.Selected(kind, sel)
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Selected is SelectDocs in no order, for a caller that walks every
// document it selects and needs no order: on a large selection the sort
// is much of SelectDocs's cost.
func (c *Cache) Selected(kind string, sel map[string]string) []backend.Doc {
	c.mu.RLock()
	defer c.mu.RUnlock()
	docs := c.docs[kind]
	if len(sel) == 0 {
		out := make([]backend.Doc, 0, len(docs))
		for _, d := range docs {
			out = append(out, d)
		}
		return out
	}
	var smallest map[string]struct{}
	first := true
	for k, v := range sel {
		s := c.idx[kind][pair(k, v)]
		if first || len(s) < len(smallest) {
			smallest, first = s, false
		}
	}
	out := make([]backend.Doc, 0, len(smallest))
next:
	for id := range smallest {
		d := docs[id]
		for k, v := range sel {
			if d.Labels[k] != v {
				continue next
			}
		}
		out = append(out, d)
	}
	return out
}

// Derived returns d with the labels the platform derives from its
// content, as it computes them when it writes, and d decoded (nil for a
// kind not registered, or a document that does not decode: it keeps no
// labels then).
func (c *Cache) Derived(d backend.Doc) (backend.Doc, any) {
	f, ok := c.derive[d.Kind]
	if !ok {
		d.Labels = nil // no other kind is looked up by label
		return d, nil
	}
	labels, obj, err := f(d)
	if err != nil {
		d.Labels = nil
		return d, nil
	}
	d.Labels = labels
	return d, obj
}
