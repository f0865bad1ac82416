package platform

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/internal/objects"
)

// access is typed access to the stored objects: reads through the cache
// (decoded once per version, shared or copied), reads past it, and
// writes. It is what every part of the engine reads and writes with; it
// holds no state of its own but the coalesced reads past the cache.
type access struct {
	store     backend.Store   // the backend, instrumented when metrics are on
	backend   backend.Backend // the backend as given: its optional interfaces (LatestReader, LatestLister)
	cache     *objects.Cache
	reads     latestReads   // concurrent reads past the cache, coalesced
	readBound time.Duration // bounds a coalesced read past the cache
	// bind tells a decoded object where what it refers to is (an
	// account: its settled holds, in the cache); awaitBound waits until
	// the cache has that (the ledger's).
	bind       func(v any)
	awaitBound func(ctx context.Context, v any) error
}

// decode reads a document's content into a new T, with the fields the
// platform derives from others derived again (see normalise).
func decode[T any](d backend.Doc) (*T, error) {
	v := new(T)
	if err := json.Unmarshal(d.Data, v); err != nil {
		return nil, fmt.Errorf("%s %q: corrupt document: %w", d.Kind, d.ID, err)
	}
	normalise(v)
	return v, nil
}

// cached returns a copy of kind/id from the cache. The cache decodes each
// version once, as an informer keeps typed objects; every caller gets a
// deep copy of its own. A miss is not taken for "gone": the cache may not
// have seen a write another replica (or this one, on another kind's
// watch) made a moment ago, so the store itself is asked before the
// answer is a typed not-found, unless the watch saw the document deleted.
func cached[T any](ctx context.Context, c *access, kind, id string) (*T, string, error) {
	v, version, err := fromCache[T](c, kind, id)
	if errs.IsNotFound(err) && !c.cache.Deleted(kind, id) {
		return fresh[T](ctx, c, kind, id)
	}
	if err == nil {
		err = c.awaitBound(ctx, v)
	}
	return v, version, err
}

// fromCache returns a copy of kind/id from the cache only, or a typed
// not-found: for what walks the cache itself (metrics, queues), where a
// miss is a document deleted meanwhile.
func fromCache[T any](c *access, kind, id string) (*T, string, error) {
	d, ok := c.cache.Get(kind, id)
	if !ok {
		return nil, "", errs.NotFound(kind, id)
	}
	v, shared, err := sharedObject[T](c, d)
	if err != nil || !shared {
		return v, d.Version, err
	}
	return deepCopy(v), d.Version, nil
}

// sharedObject returns the cache's decoded form of document d, shared with
// the cache (shared: not to be changed), or, when the cache has moved on
// from d's version, d decoded afresh (not shared).
func sharedObject[T any](c *access, d backend.Doc) (v *T, shared bool, err error) {
	obj, ok, err := c.cache.Object(d.Kind, d.ID, d.Version, func(d backend.Doc) (any, error) {
		return decodeBound[T](c, d)
	})
	if err != nil {
		return nil, false, err
	}
	if v, isT := obj.(*T); ok && isT {
		return v, true, nil
	}
	v, err = decodeBound[T](c, d) // changed meanwhile: this version, decoded
	return v, false, err
}

// decodeBound is decode, with the object told where what it refers to is
// (bind: an account, its settled holds in the cache).
func decodeBound[T any](c *access, d backend.Doc) (*T, error) {
	v, err := decode[T](d)
	if err == nil {
		c.bind(v)
	}
	return v, err
}

// deepCopy copies a stored object so that the caller shares nothing with
// the cache.
func deepCopy[T any](v *T) *T {
	if x, ok := any(v).(interface{ DeepCopy() *T }); ok {
		return x.DeepCopy()
	}
	data, _ := json.Marshal(v)
	out := new(T)
	_ = json.Unmarshal(data, out)
	return out
}

// fresh reads kind/id from the store itself, at its newest version where
// the store can (LatestReader): after a conflict, and before a missing
// object or reservation is taken for gone, when the cache may be behind.
// The cache is left to the watch: a read may race a newer change and must
// not put an older version back.
func fresh[T any](ctx context.Context, c *access, kind, id string) (*T, string, error) {
	d, err := c.latest(ctx, kind, id)
	if err != nil {
		return nil, "", err
	}
	v, err := decodeBound[T](c, d)
	if err == nil {
		err = c.awaitBound(ctx, v)
	}
	return v, d.Version, err
}

// get reads kind/id as a T (from the cache, or the store on a miss) and
// its version; a not-found names it as what.
func get[T any](ctx context.Context, c *access, kind, what, id string) (*T, string, error) {
	v, version, err := cached[T](ctx, c, kind, id)
	if err != nil {
		return nil, "", notFoundAs(err, what, id)
	}
	return v, version, nil
}

// list returns copies of the cached objects of kind that sel selects, by
// id; versioned (when not nil) is given each with its version.
func list[T any](c *access, kind string, sel map[string]string, versioned func(*T, string)) ([]*T, error) {
	objs, versions, err := cachedObjects[T](c, kind, sel)
	if err != nil {
		return nil, err
	}
	for i, v := range objs {
		objs[i] = deepCopy(v)
		if versioned != nil {
			versioned(objs[i], versions[i])
		}
	}
	return objs, nil
}

// cachedObjects returns the cache's decoded objects of kind under sel, by
// id, with their versions: shared with the cache, not to be changed (one
// the cache moved on from since it was selected is decoded at the version
// selected).
func cachedObjects[T any](c *access, kind string, sel map[string]string) ([]*T, []string, error) {
	docs := c.cache.SelectDocs(kind, sel)
	objs := make([]*T, 0, len(docs))
	versions := make([]string, 0, len(docs))
	for _, d := range docs {
		v, _, err := sharedObject[T](c, d)
		if err != nil {
			return nil, nil, err
		}
		objs, versions = append(objs, v), append(versions, d.Version)
	}
	return objs, versions, nil
}

// exists says whether kind/id is stored: from the cache, or, on a miss,
// from the store itself (see cached).
func (c *access) exists(ctx context.Context, kind, id string) (bool, error) {
	if _, ok := c.cache.Get(kind, id); ok {
		return true, nil
	}
	if c.cache.Deleted(kind, id) {
		return false, nil
	}
	_, err := c.store.Get(ctx, kind, id)
	switch {
	case err == nil:
		return true, nil
	case errs.IsNotFound(err):
		return false, nil
	}
	return false, err
}

// latest reads kind/id past the store's cache where the store can.
// Concurrent reads of one document share a read that began after each of
// them was asked for (latestReads).
func (c *access) latest(ctx context.Context, kind, id string) (backend.Doc, error) {
	lr, ok := c.backend.(backend.LatestReader)
	if !ok {
		return c.store.Get(ctx, kind, id)
	}
	return c.reads.get(ctx, kind, id, c.readBound, func(ctx context.Context) (backend.Doc, error) {
		t := time.Now()
		d, err := lr.GetLatest(ctx, kind, id)
		if in, ok := c.store.(instrumented); ok {
			in.done("store_get_latest", t, ignoreNotFound(err))
		}
		return d, err
	})
}

// listLatest returns the documents of kind (a cluster or a run: a kind
// whose labels the platform derives) that sel selects, by id, as the
// store has them now: past its cache where the store can (LatestLister),
// else its List. For a decision that must know every such document: a
// delete refused while a dependent exists, which the cache may not show
// yet. Each document's labels are derived from its content, as the
// cache's are, and selected on again.
func (c *access) listLatest(ctx context.Context, kind string, sel map[string]string) ([]backend.Doc, error) {
	var docs []backend.Doc
	var err error
	if ll, ok := c.backend.(backend.LatestLister); ok {
		t := time.Now()
		docs, err = ll.ListLatest(ctx, kind, sel)
		if in, ok := c.store.(instrumented); ok {
			in.done("store_list_latest", t, err)
		}
	} else {
		docs, err = c.store.List(ctx, kind, sel)
	}
	if err != nil {
		return nil, err
	}
	out := docs[:0]
	for _, d := range docs {
		if d, _ = c.cache.Derived(d); backend.Matches(d.Labels, sel) {
			out = append(out, d)
		}
	}
	return out, nil
}

func encode(kind, id, version string, labels map[string]string, v any) (backend.Doc, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return backend.Doc{}, err
	}
	return backend.Doc{Kind: kind, ID: id, Version: version, Labels: labels, Data: data}, nil
}

// create stores a new object and returns its version.
func (c *access) create(ctx context.Context, kind, id string, labels map[string]string, v any) (string, error) {
	d, err := encode(kind, id, "", labels, v)
	if err != nil {
		return "", err
	}
	version, err := c.store.Create(ctx, d)
	if err == nil {
		noteWrite(ctx, kind, id, version)
	}
	return version, err
}

// createThen stores a new object and calls then once it is stored, and
// returns its version when both the create and then are done; then is not
// called when the create fails. Where the store waits for its own cache
// apart (backend.AwaitingCreator), then runs while the cache catches up,
// so that a read that needs only the object stored (a fence's) costs no
// wait of its own.
func (c *access) createThen(ctx context.Context, kind, id string, labels map[string]string, v any, then func()) (string, error) {
	ac, ok := c.backend.(backend.AwaitingCreator)
	if !ok {
		version, err := c.create(ctx, kind, id, labels, v)
		if err == nil {
			then()
		}
		return version, err
	}
	d, err := encode(kind, id, "", labels, v)
	if err != nil {
		return "", err
	}
	t := time.Now()
	version, await, err := ac.CreateStored(ctx, d)
	var done chan struct{}
	if err == nil {
		done = make(chan struct{})
		go func() { defer close(done); then() }()
		await(ctx)
	}
	if in, ok := c.store.(instrumented); ok {
		in.done("store_create", t, err) // the create and its wait, as Create's
	}
	if err != nil {
		return "", err
	}
	<-done
	noteWrite(ctx, kind, id, version)
	return version, nil
}

// update stores v over version and returns the new version.
func (c *access) update(ctx context.Context, kind, id, version string, labels map[string]string, v any) (string, error) {
	d, err := encode(kind, id, version, labels, v)
	if err != nil {
		return "", err
	}
	version, err = c.store.Update(ctx, d)
	if err == nil {
		noteWrite(ctx, kind, id, version)
	}
	return version, err
}

// notFoundAs turns a store's not-found into the kind's.
func notFoundAs(err error, kind, id string) error {
	if errs.IsNotFound(err) {
		return errs.NotFound(kind, id)
	}
	return err
}
