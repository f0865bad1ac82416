package backend

import (
	"context"
	"maps"
	"slices"
	"sync"

	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/job"
)

// Store keeps the platform's objects as versioned, labelled documents; it
// is the only truth, shared by every client over it. Create fails with
// ErrConflict when the id is taken; Update and Delete take the version
// read and fail with ErrConflict when it is stale. Errors a caller may
// retry (timeouts, throttling, server errors) are errors.Is
// ErrUnavailable. Watch reports every change from the moment it returns
// the snapshot, in order.
type Store interface {
	Get(ctx context.Context, kind, id string) (Doc, error)
	List(ctx context.Context, kind string, selector map[string]string) ([]Doc, error)
	Create(ctx context.Context, d Doc) (version string, err error)
	Update(ctx context.Context, d Doc) (version string, err error)
	Delete(ctx context.Context, kind, id, version string) error
	Watch(ctx context.Context, h func(Change)) (snapshot []Doc, err error)
}

// Provisioner is the Ray side. Every call is idempotent: the client's
// reconcilers call it again after a failure or a restart. Observe tells
// which cluster ("cluster") or run ("run") changed on Ray's side; the
// reconcilers then read the state with ClusterStatus and RunStatus, which
// fail with ErrNotFound when Ray has no such object. A call that fails
// with an error that has a method Busy() bool returning true (the
// Kubernetes backend's "head busy": one call at a time per Ray head) was
// not made; the reconciler retries it with backoff and does not count it
// as a failed step. SubmitRun fails with ErrConflict when Ray follows a
// newer generation of the cluster than the one it is given: a placement
// decided on a cluster read before another client changed it is never
// submitted. What RunStatus reports is stored bounded
// (job.Observation.Bounded).
type Provisioner interface {
	Observe(ctx context.Context, f func(kind, id string))
	ApplyCluster(ctx context.Context, c *cluster.Cluster) error
	DeleteCluster(ctx context.Context, id string) error
	ClusterStatus(ctx context.Context, id string) (cluster.Observation, error)
	SubmitRun(ctx context.Context, r *job.Run, c *cluster.Cluster) error
	StopRun(ctx context.Context, runID string) error
	RunStatus(ctx context.Context, runID string) (job.Observation, error)
	Pods(ctx context.Context, clusterID string) ([]cluster.Pod, error)
	Logs(ctx context.Context, runID string) ([]string, error)
	Dashboard(ctx context.Context, clusterID string) (string, error)
}

// LatestReader is what a Store whose reads are served from a cache (as
// the Kubernetes backend's are, from informers) adds: a read of the
// newest version of one object, past its cache. The client reads through
// it where a decision must not rest on a cache that lags: after a
// conflict, and before it takes a missing object or reservation for gone.
// A Store without it is read with Get.
type LatestReader interface {
	GetLatest(ctx context.Context, kind, id string) (Doc, error)
}

// AwaitingCreator is what a Store whose writes wait until its own cache
// has them (as the Kubernetes backend's do) adds: a create whose wait is
// apart. CreateStored returns once the document is stored, with its
// version and a function that waits, as Create would have before it
// returned, until the store's cache has it (or ctx is done, or the
// store's own bound passes); the caller calls it, before it reads the
// document back from the cache. So a caller can do, while the cache
// catches up, what needs only the document stored: a read that fences it
// against a concurrent delete. A Store without it is created with Create.
//
// A wrapper of a Store that changes what Create does (counts it, delays
// it, refuses it) must wrap CreateStored too, or hide it: a wrapper that
// embeds the Kubernetes backend promotes its CreateStored, which the
// client's run creates use, past the wrapper's Create.
type AwaitingCreator interface {
	CreateStored(ctx context.Context, d Doc) (version string, await func(context.Context), err error)
}

// LatestLister is what a Store whose lists are served from a cache adds:
// a list of the documents of a kind that selector selects (every one of
// the kind when it is empty), by id, as the store has them at the moment
// of the call, past its cache: every write that completed before the call
// is in it. The client lists through it where a decision rests on
// knowing every such document, such as a delete that is refused while a
// dependent exists (a job config's live runs, J17; a cluster group's
// members, G6). A Store without it is listed with List, which must then
// be as fresh.
//
// It is an interface of its own, not a method added to LatestReader, so
// that a Store that implements only GetLatest keeps being read through it.
type LatestLister interface {
	ListLatest(ctx context.Context, kind string, selector map[string]string) ([]Doc, error)
}

// RunForgetter is what a Provisioner that keeps what Ray knew of a
// finished run (its job record, its logs) for as long as it is asked
// adds: a way to let that go. The client calls it, where the backend has
// it, just before it deletes a finished run whose Ray part is done (the
// run's retention, dlc.WithRunRetention), and again should that delete
// not happen; so it is idempotent, and forgetting a run Ray does not know
// is not an error. A Provisioner without it keeps what it keeps.
type RunForgetter interface {
	ForgetRun(ctx context.Context, runID string) error
}

// Backend is a Store and a Provisioner, such as *memory.Backend.
type Backend interface {
	Store
	Provisioner
}

// Matches reports whether labels include every pair of selector: how a
// Store's List selects.
func Matches(labels, selector map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// CopyDoc returns d sharing nothing with it: what a Store hands out and
// keeps is never the caller's.
func CopyDoc(d Doc) Doc {
	d.Data = append([]byte(nil), d.Data...)
	d.Labels = maps.Clone(d.Labels)
	return d
}

// Watchers is the set of functions a store (F = func(Change)) or a
// provisioner (F = func(kind, id string)) calls on every change, in the
// order they were added. The zero value is empty. Its owner guards it
// with its own lock: Add takes that lock; Each and All are called with it
// held.
type Watchers[F any] struct {
	next int
	fs   []watcher[F]
}

type watcher[F any] struct {
	id int
	f  F
}

// Add registers f, holding mu; still holding it, it calls then (when not
// nil): a store takes its snapshot there, so that no change falls between
// the snapshot and f's first call. f is removed, under mu, once ctx is
// done.
func (w *Watchers[F]) Add(ctx context.Context, mu sync.Locker, f F, then func()) {
	mu.Lock()
	id := w.next
	w.next++
	w.fs = append(w.fs, watcher[F]{id, f})
	if then != nil {
		then()
	}
	mu.Unlock()
	context.AfterFunc(ctx, func() {
		mu.Lock()
		w.fs = slices.DeleteFunc(w.fs, func(x watcher[F]) bool { return x.id == id })
		mu.Unlock()
	})
}

// Each calls do with every registered function, in order; the caller
// holds the owner's lock (as a store does, so that every watcher hears of
// the changes in the order they were made).
func (w *Watchers[F]) Each(do func(F)) {
	for _, x := range w.fs {
		do(x.f)
	}
}

// All returns the registered functions, in order, for a caller that calls
// them after it lets go of the owner's lock.
func (w *Watchers[F]) All() []F {
	out := make([]F, len(w.fs))
	for i, x := range w.fs {
		out[i] = x.f
	}
	return out
}

// Manifest is one object a provisioner would write for an operation, as
// it would write it: for the Kubernetes backend a *rayv1.RayCluster, a
// *rayv1.RayJob, or the Ray Jobs API request of a run on a cluster.
type Manifest struct {
	// Kind names the object's kind, e.g. "RayCluster" or "RayJobRequest".
	Kind string `json:"kind"`
	// Name is the object's name as the provisioner would make it.
	Name string `json:"name"`
	// Object is the object itself.
	Object any `json:"object"`
}

// Planner is what a Provisioner adds that can say what it would write
// for a cluster or a run, without writing anything or reading what it
// writes: the same rendering its ApplyCluster and SubmitRun use, checked
// as the provisioner's own validation would check it. A Provisioner
// without it is planned by the client with a summary of the cluster or
// run as it would be stored.
type Planner interface {
	// PlanCluster returns what ApplyCluster(c) would apply for standing
	// cluster c.
	PlanCluster(c *cluster.Cluster) ([]Manifest, error)
	// PlanRun returns what placing run r would write: an on-demand run's
	// cluster c with it (a RayJob), or the submission of r to cluster c.
	PlanRun(r *job.Run, c *cluster.Cluster) ([]Manifest, error)
}
