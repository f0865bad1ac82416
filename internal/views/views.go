// Package views is what a client's callers watch and wait on: the
// changes to one kind of the platform's objects as the client's cache
// sees them (the store's watch), told the way an informer's handlers are
// told, level-triggered and never blocking the store, and waits built on
// them.
package views

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/watch"
)

// A watch tells a caller of the changes to one kind of the platform's
// objects as this client's cache sees them (the store's watch), the way
// an informer's handlers are told: level-triggered and never blocking the
// store. Each watcher keeps, per object, the change not yet delivered,
// merged with the ones before it (an object changed twice before the
// caller reads is one event, with the object as it is then), so a slow
// reader costs memory bounded by the objects, not by the changes, and
// loses none: every object's last state is delivered. The object is read
// from the cache when the event is delivered.

// watcher is one watch: what it selects and the events not delivered yet.
type watcher struct {
	kind string
	sel  map[string]string // labels (as derived) a document must carry
	ids  map[string]bool   // nil: any id

	mu      sync.Mutex
	order   []string                   // ids with an event pending, oldest first
	pending map[string]watch.EventType // id → its pending event; "" when it merged into nothing
	wake    chan struct{}
}

func (w *watcher) selects(d backend.Doc) bool {
	if d.Kind != w.kind || (w.ids != nil && !w.ids[d.ID]) {
		return false
	}
	for k, v := range w.sel {
		if d.Labels[k] != v {
			return false
		}
	}
	return true
}

// push merges event t of id into what is pending.
func (w *watcher) push(id string, t watch.EventType) {
	w.mu.Lock()
	old, queued := w.pending[id]
	switch {
	case !queued:
		w.order = append(w.order, id)
	case old == watch.Added && t == watch.Deleted:
		t = "" // came and went before it was read: nothing to tell
	case old == watch.Added:
		t = watch.Added
	case old == watch.Deleted && t == watch.Added:
		t = watch.Modified // gone and back: the caller last heard of it as there
	}
	w.pending[id] = t
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// pop returns the oldest pending event, if any.
func (w *watcher) pop() (string, watch.EventType, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.order) > 0 {
		id := w.order[0]
		w.order = w.order[1:]
		t := w.pending[id]
		delete(w.pending, id)
		if t != "" {
			return id, t, true
		}
	}
	return "", "", false
}

// Source is the cache a hub reads the documents of.
type Source interface {
	// SelectDocs returns kind's documents that carry sel's labels.
	SelectDocs(kind string, sel map[string]string) []backend.Doc
}

// Hub is a client's watches: what the store's watch tells the cache is
// published to each of them.
type Hub struct {
	src      Source
	done     <-chan struct{}            // closed when the client closes: every watch ends
	mu       sync.Mutex                 // serialises changes of watchers
	watchers atomic.Pointer[[]*watcher] // the watches on; nil when none
}

// NewHub returns the watches of a client whose cache is src and which
// closes when done is closed.
func NewHub(src Source, done <-chan struct{}) *Hub { return &Hub{src: src, done: done} }

// Publish tells the watches of a change the store's watch reported: d as
// the cache took it (labels derived); before as the cache had it, if it
// had (had). A deleted document is told to the watches that selected it
// as it was. It runs inside the store's write: it only touches memory.
func (h *Hub) Publish(d, before backend.Doc, deleted, had bool) {
	ws := h.watchers.Load()
	if ws == nil {
		return
	}
	t := watch.Modified
	switch {
	case deleted && !had:
		return // never in the cache: no watch heard of it
	case deleted:
		t, d = watch.Deleted, before
	case !had:
		t = watch.Added
	}
	for _, w := range *ws {
		if w.selects(d) {
			w.push(d.ID, t)
		}
	}
}

// Watching reports whether any watch is on; the caller of Publish looks
// up whether the cache had a document before only then.
func (h *Hub) Watching() bool { return h.watchers.Load() != nil }

// Watch starts a watch of kind's documents that carry sel's labels (and,
// with ids, have one of them), and calls deliver, on a goroutine of its
// own, with each event in turn until ctx is done, the client closes, or
// deliver returns false; then it calls end. With initial, every such
// document in the cache is first told as Added, as an informer's list is.
// deliver reads the object; it may find it gone (deleted since), and then
// skips it: its Deleted event follows.
func (h *Hub) Watch(ctx context.Context, kind string, sel map[string]string, ids []string, initial bool, deliver func(id string, t watch.EventType) bool, end func()) {
	w := &watcher{kind: kind, sel: sel, pending: map[string]watch.EventType{}, wake: make(chan struct{}, 1)}
	if ids != nil {
		w.ids = map[string]bool{}
		for _, id := range ids {
			w.ids[id] = true
		}
	}
	h.mu.Lock()
	var cur []*watcher
	if ws := h.watchers.Load(); ws != nil {
		cur = *ws
	}
	next := append(slices.Clip(cur), w)
	h.watchers.Store(&next)
	h.mu.Unlock()
	if initial {
		// Changes since the watch began are pending already, and newer
		// than the cache as read here: those are not told twice.
		for _, d := range h.src.SelectDocs(kind, sel) {
			if w.ids != nil && !w.ids[d.ID] {
				continue
			}
			w.mu.Lock()
			if _, queued := w.pending[d.ID]; !queued {
				w.pending[d.ID] = watch.Added
				w.order = append(w.order, d.ID)
			}
			w.mu.Unlock()
		}
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
	go func() {
		defer end()
		defer h.unwatch(w)
		for {
			for {
				id, t, ok := w.pop()
				if !ok {
					break
				}
				if !deliver(id, t) {
					return
				}
			}
			select {
			case <-w.wake:
			case <-ctx.Done():
				return
			case <-h.done:
				return
			}
		}
	}()
}

func (h *Hub) unwatch(w *watcher) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ws := h.watchers.Load()
	if ws == nil {
		return
	}
	next := slices.DeleteFunc(slices.Clone(*ws), func(x *watcher) bool { return x == w })
	if len(next) == 0 {
		h.watchers.Store(nil)
		return
	}
	h.watchers.Store(&next)
}

// Typed runs a watch whose events read converts and sends on out, which
// it closes when the watch ends.
func Typed[E any](h *Hub, ctx context.Context, kind string, sel map[string]string, ids []string, initial bool, out chan<- E, read func(string, watch.EventType) (E, bool)) {
	h.Watch(ctx, kind, sel, ids, initial, func(id string, t watch.EventType) bool {
		ev, ok := read(id, t)
		if !ok {
			return true
		}
		select {
		case out <- ev:
			return true
		case <-ctx.Done():
		case <-h.done:
		}
		return false
	}, func() { close(out) })
}

// ErrClosed is the cause of a watch or a wait that ended because its
// client closed.
var ErrClosed = errors.New("client closed")

// Watchable says why a watch cannot begin: ctx done, or the client
// closed.
func (h *Hub) Watchable(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case <-h.done:
		return errs.Unavailable("watch", ErrClosed)
	default:
		return nil
	}
}

// WaitFor is a wait of kind/id: the object as get reads it now, then as
// the watch's events bring it, until cond holds or fails; seen says what
// it last was, for the error of a wait that ends first (ctx done, the
// client closed: events closed; the object deleted: ErrNotFound).
func WaitFor[T, E any](ctx context.Context, kind, id string, get func(context.Context, string) (*T, error),
	events <-chan E, unpack func(E) (watch.EventType, *T), seen func(*T) string, cond func(*T) (bool, error)) (*T, error) {
	obj, err := get(ctx, id)
	for err == nil {
		var done bool
		if done, err = cond(obj); done || err != nil {
			break
		}
		ev, ok := <-events
		if !ok {
			err = ended(ctx, kind, id, seen(obj))
			break
		}
		t, next := unpack(ev)
		if t == watch.Deleted {
			err = fmt.Errorf("%s %s was deleted while waited for (last seen %s): %w", kind, id, seen(obj), errs.NotFound(kind, id))
			break
		}
		obj = next
	}
	return obj, err
}

// ended is the error of a wait whose watch ended before its condition
// held: ctx done, or the client closed.
func ended(ctx context.Context, kind, id, seen string) error {
	if err := context.Cause(ctx); err != nil {
		return fmt.Errorf("waiting for %s %s, last seen %s: %w", kind, id, seen, err)
	}
	return errs.Unavailable("wait for "+kind+" "+id, fmt.Errorf("the client closed; last seen %s: %w", seen, ErrClosed))
}
