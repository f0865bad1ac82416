// Package memory is the SDK's embedded default backend: an in-process
// store of versioned, labelled documents and a simulated Ray that
// provisions clusters and runs jobs on an injectable clock. It is a real,
// complete implementation of the interfaces package dlc uses, so other
// repos' tests can script what Ray does (delays, failures, log lines) and
// inject faults into any store or Ray call, without a Kubernetes cluster.
// Several clients may share one Backend: that is how replicas of a
// service share one API server.
//
// What it does not model: Kubernetes scheduling and images, Ray's own
// task scheduling inside a cluster, and persistence across processes.
// For tests against a real API server with the KubeRay CRDs, use
// kubetest.StartControlPlane.
package memory

import (
	"context"
	"sort"
	"strconv"
	"sync"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/errs"
)

// WriteOp names a store write.
type WriteOp string

// The store writes.
const (
	OpCreate WriteOp = "create"
	OpUpdate WriteOp = "update"
	OpDelete WriteOp = "delete"
)

// Write is one store write as a hook sees it. For a delete, Doc holds
// only Kind, ID and Version.
type Write struct {
	Op  WriteOp
	Doc backend.Doc
}

// StoreHooks intercept store calls, as controller-runtime's interceptor
// does for its fake client: a nil hook passes through. Write gets every
// create, update and delete with next, the real write: it may fail
// instead of calling next, call next and fail anyway (a reply lost after
// the write took effect), or pass next's result on. Read is called
// before every Get and List; a non-nil error fails the read.
//
// A hook may call another client over the same store (a replica acting
// between a decision and its write), but not, from inside a write of a
// resource group, the client whose write it is for a change of the same
// group's reservations: a client writes one change of an account at a
// time, and such a call would wait for the write it is inside of.
type StoreHooks struct {
	Write func(ctx context.Context, w Write, next func(context.Context) (string, error)) (string, error)
	Read  func(ctx context.Context, kind, id string) error
}

// Store keeps documents in memory with optimistic concurrency: an update
// or delete whose version is not the current one is a conflict. It is
// safe for concurrent use and copies every document in and out. Watchers
// hear of every change in the order the changes were made.
type Store struct {
	hooks StoreHooks

	mu       sync.RWMutex
	docs     map[string]map[string]backend.Doc
	seq      uint64
	watchers backend.Watchers[func(backend.Change)]
}

// NewStore returns an empty store with the given hooks.
func NewStore(h StoreHooks) *Store {
	return &Store{hooks: h, docs: map[string]map[string]backend.Doc{}}
}

// Get returns the document kind/id, or an error that is errors.Is ErrNotFound.
func (s *Store) Get(ctx context.Context, kind, id string) (backend.Doc, error) {
	if err := s.read(ctx, kind, id); err != nil {
		return backend.Doc{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	d, ok := s.docs[kind][id]
	if !ok {
		return backend.Doc{}, errs.NotFound(kind, id)
	}
	return backend.CopyDoc(d), nil
}

// List returns the documents of a kind whose labels include every pair of
// selector (all of the kind when selector is empty), by id.
func (s *Store) List(ctx context.Context, kind string, selector map[string]string) ([]backend.Doc, error) {
	if err := s.read(ctx, kind, ""); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []backend.Doc
	for _, d := range s.docs[kind] {
		if backend.Matches(d.Labels, selector) {
			out = append(out, backend.CopyDoc(d))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func (s *Store) read(ctx context.Context, kind, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.hooks.Read != nil {
		return s.hooks.Read(ctx, kind, id)
	}
	return nil
}

// Create stores a new document and returns its version; an existing id is
// a conflict that changes nothing.
func (s *Store) Create(ctx context.Context, d backend.Doc) (string, error) {
	d = backend.CopyDoc(d)
	return s.write(ctx, Write{Op: OpCreate, Doc: d}, func(context.Context) (string, error) {
		return s.apply(func(byID map[string]backend.Doc) (backend.Doc, bool, error) {
			if _, ok := byID[d.ID]; ok {
				return backend.Doc{}, false, errs.Conflict(d.Kind, d.ID, "already exists")
			}
			return d, false, nil
		}, d.Kind)
	})
}

// Update replaces a document whose current version is d.Version and
// returns the new version; another version is a conflict, a missing
// document not found, and either changes nothing.
func (s *Store) Update(ctx context.Context, d backend.Doc) (string, error) {
	d = backend.CopyDoc(d)
	return s.write(ctx, Write{Op: OpUpdate, Doc: d}, func(context.Context) (string, error) {
		return s.apply(func(byID map[string]backend.Doc) (backend.Doc, bool, error) {
			cur, ok := byID[d.ID]
			switch {
			case !ok:
				return backend.Doc{}, false, errs.NotFound(d.Kind, d.ID)
			case cur.Version != d.Version:
				return backend.Doc{}, false, errs.Conflict(d.Kind, d.ID, "stale version: the object changed since it was read")
			}
			return d, false, nil
		}, d.Kind)
	})
}

// Delete removes kind/id if version is its current one ("": any version).
func (s *Store) Delete(ctx context.Context, kind, id, version string) error {
	_, err := s.write(ctx, Write{Op: OpDelete, Doc: backend.Doc{Kind: kind, ID: id, Version: version}}, func(context.Context) (string, error) {
		return s.apply(func(byID map[string]backend.Doc) (backend.Doc, bool, error) {
			cur, ok := byID[id]
			switch {
			case !ok:
				return backend.Doc{}, false, errs.NotFound(kind, id)
			case version != "" && version != cur.Version:
				return backend.Doc{}, false, errs.Conflict(kind, id, "stale version: the object changed since it was read")
			}
			return cur, true, nil
		}, kind)
	})
	return err
}

func (s *Store) write(ctx context.Context, w Write, next func(context.Context) (string, error)) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if s.hooks.Write != nil {
		return s.hooks.Write(ctx, w, next)
	}
	return next(ctx)
}

// apply runs one write under the lock: check decides the document to put
// (or, with del, to remove) or refuses. Watchers hear of it before the
// lock is released, so they see changes in order.
func (s *Store) apply(check func(map[string]backend.Doc) (backend.Doc, bool, error), kind string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	byID := s.docs[kind]
	if byID == nil {
		byID = map[string]backend.Doc{}
		s.docs[kind] = byID
	}
	d, del, err := check(byID)
	if err != nil {
		return "", err
	}
	if del {
		delete(byID, d.ID)
	} else {
		s.seq++
		d.Version = strconv.FormatUint(s.seq, 10)
		byID[d.ID] = d
	}
	s.watchers.Each(func(h func(backend.Change)) { h(backend.Change{Doc: backend.CopyDoc(d), Deleted: del}) })
	return d.Version, nil
}

// Watch calls h with every change from now on, until ctx is done, and
// returns every document as of the moment it started: no change is missed
// between the snapshot and the first call. h is called in the order of
// the changes, with the store locked: it must return quickly and must not
// call the store.
func (s *Store) Watch(ctx context.Context, h func(backend.Change)) ([]backend.Doc, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var snap []backend.Doc
	s.watchers.Add(ctx, &s.mu, h, func() {
		for _, byID := range s.docs {
			for _, d := range byID {
				snap = append(snap, backend.CopyDoc(d))
			}
		}
	})
	return snap, nil
}
