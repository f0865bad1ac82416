// Package memory is the SDK's embedded default backend: an in-process
// store of versioned documents and a simulated Ray that provisions
// clusters and runs jobs on an injectable clock. It is a real, complete
// implementation of the interfaces package dlc uses, so other repos' tests
// can script what Ray does (delays, failures, log lines) without a
// Kubernetes cluster.
//
// What it does not model: Kubernetes scheduling and images, Ray's own
// task scheduling inside a cluster, and persistence across processes.
// For tests against a real API server with the KubeRay CRDs, use
// dlctest.StartControlPlane.
package memory

import (
	"context"
	"sort"
	"sync"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/errs"
)

// StoreHooks intercept store calls, as controller-runtime's interceptor
// does for its fake client: a nil hook passes through; a hook gets the
// call's arguments and next, the real implementation, and may fail
// instead, call next, or change what it returns.
type StoreHooks struct {
	Put    func(ctx context.Context, d backend.Doc, next func(context.Context, backend.Doc) (int64, error)) (int64, error)
	Delete func(ctx context.Context, kind, id string, version int64, next func(context.Context, string, string, int64) error) error
}

// Store keeps documents in memory with optimistic concurrency: a Put or
// Delete whose version is not the current one is a conflict. It is safe
// for concurrent use and copies every document in and out.
type Store struct {
	mu     sync.RWMutex
	docs   map[string]map[string]backend.Doc
	events map[string][]cluster.Event
	hooks  StoreHooks
}

// NewStore returns an empty store with the given hooks.
func NewStore(h StoreHooks) *Store {
	return &Store{docs: map[string]map[string]backend.Doc{}, events: map[string][]cluster.Event{}, hooks: h}
}

// Get returns the document kind/id, or an error that is errors.Is ErrNotFound.
func (s *Store) Get(_ context.Context, kind, id string) (backend.Doc, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	d, ok := s.docs[kind][id]
	if !ok {
		return backend.Doc{}, errs.NotFound(kind, id)
	}
	return copyDoc(d), nil
}

// List returns every document of a kind, by id.
func (s *Store) List(_ context.Context, kind string) ([]backend.Doc, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]backend.Doc, 0, len(s.docs[kind]))
	for _, d := range s.docs[kind] {
		out = append(out, copyDoc(d))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Put creates (Version 0) or replaces (Version = the current one) a
// document and returns its new version.
func (s *Store) Put(ctx context.Context, d backend.Doc) (int64, error) {
	if s.hooks.Put != nil {
		return s.hooks.Put(ctx, d, s.put)
	}
	return s.put(ctx, d)
}

func (s *Store) put(ctx context.Context, d backend.Doc) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	byID := s.docs[d.Kind]
	if byID == nil {
		byID = map[string]backend.Doc{}
		s.docs[d.Kind] = byID
	}
	cur, exists := byID[d.ID]
	switch {
	case d.Version == 0 && exists:
		return 0, errs.Conflict(d.Kind, d.ID, "already exists")
	case d.Version != 0 && !exists:
		return 0, errs.NotFound(d.Kind, d.ID)
	case d.Version != 0 && d.Version != cur.Version:
		return 0, errs.Conflict(d.Kind, d.ID, "stale version: the object changed since it was read")
	}
	d = copyDoc(d)
	d.Version = cur.Version + 1
	byID[d.ID] = d
	return d.Version, nil
}

// Delete removes kind/id if version is the current one (0: any version).
func (s *Store) Delete(ctx context.Context, kind, id string, version int64) error {
	if s.hooks.Delete != nil {
		return s.hooks.Delete(ctx, kind, id, version, s.delete)
	}
	return s.delete(ctx, kind, id, version)
}

func (s *Store) delete(ctx context.Context, kind, id string, version int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.docs[kind][id]
	switch {
	case !ok:
		return errs.NotFound(kind, id)
	case version != 0 && version != cur.Version:
		return errs.Conflict(kind, id, "stale version: the object changed since it was read")
	}
	delete(s.docs[kind], id)
	return nil
}

// AppendEvent adds an entry to the event log under key.
func (s *Store) AppendEvent(ctx context.Context, key string, e cluster.Event) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events[key] = append(s.events[key], e)
	return nil
}

// Events returns the event log under key, oldest first.
func (s *Store) Events(_ context.Context, key string) ([]cluster.Event, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return append([]cluster.Event(nil), s.events[key]...), nil
}

func copyDoc(d backend.Doc) backend.Doc {
	d.Data = append([]byte(nil), d.Data...)
	return d
}
