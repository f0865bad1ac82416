package platform

import (
	"context"
	"slices"
	"sync"

	"github.com/aidlc/dlc/backend"
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

// publish tells the watches of a change the store's watch reported: d as
// the cache took it (labels derived); before as the cache had it, if it
// had (had). A deleted document is told to the watches that selected it
// as it was. It runs inside the store's write: it only touches memory.
func (c *Engine) publish(d, before backend.Doc, deleted, had bool) {
	ws := c.watchers.Load()
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

// watching reports whether any watch is on; onChange looks up whether the
// cache had a document before only then.
func (c *Engine) watching() bool { return c.watchers.Load() != nil }

// watch starts a watch of kind's documents that carry sel's labels (and,
// with ids, have one of them), and calls deliver, on a goroutine of its
// own, with each event in turn until ctx is done, the client closes, or
// deliver returns false; then it calls end. With initial, every such document in the cache
// is first told as watch.Added, as an informer's list is. deliver reads the
// object; it may find it gone (deleted since), and then skips it: its
// watch.Deleted event follows.
func (c *Engine) watch(ctx context.Context, kind string, sel map[string]string, ids []string, initial bool, deliver func(id string, t watch.EventType) bool, end func()) {
	w := &watcher{kind: kind, sel: sel, pending: map[string]watch.EventType{}, wake: make(chan struct{}, 1)}
	if ids != nil {
		w.ids = map[string]bool{}
		for _, id := range ids {
			w.ids[id] = true
		}
	}
	c.watchMu.Lock()
	var cur []*watcher
	if ws := c.watchers.Load(); ws != nil {
		cur = *ws
	}
	next := append(slices.Clip(cur), w)
	c.watchers.Store(&next)
	c.watchMu.Unlock()
	if initial {
		// Changes since the watch began are pending already, and newer
		// than the cache as read here: those are not told twice.
		for _, d := range c.cache.selectDocs(kind, sel) {
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
		defer c.unwatch(w)
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
			case <-c.ctx.Done():
				return
			}
		}
	}()
}

func (c *Engine) unwatch(w *watcher) {
	c.watchMu.Lock()
	defer c.watchMu.Unlock()
	ws := c.watchers.Load()
	if ws == nil {
		return
	}
	next := slices.DeleteFunc(slices.Clone(*ws), func(x *watcher) bool { return x == w })
	if len(next) == 0 {
		c.watchers.Store(nil)
		return
	}
	c.watchers.Store(&next)
}
