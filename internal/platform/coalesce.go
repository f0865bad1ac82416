package platform

import (
	"context"
	"sync"
	"time"

	"github.com/aidlc/dlc/backend"
)

// latestReads coalesces concurrent reads of one document past the cache
// (access.latest) without giving up what such a read is for: it sees every
// write that completed before it was asked for.
//
// At most one read of a document is in flight. A caller that finds none
// starts one and alone waits for it. A caller that finds one in flight
// cannot use it (it may have begun before the caller's own write ended),
// so it joins the next read, which starts when the one in flight ends and
// is shared by every caller that joined it meanwhile: each of them asked
// before it began. A hundred concurrent creates of runs of one job config
// (each fenced by a read of the config) cost two or three reads, not a
// hundred.
type latestReads struct {
	mu    sync.Mutex
	slots map[docKey]*readSlot // documents with a read in flight
}

type docKey struct{ kind, id string }

// readSlot is a document's read in flight and the one that follows it.
type readSlot struct{ running, next *readCall }

type readCall struct {
	done   chan struct{} // closed when doc and err are set
	doc    backend.Doc
	err    error
	ctx    context.Context // the next read's: its first caller's, not cancelled by it
	joined int             // callers waiting for it (under latestReads.mu)
}

// get returns what read returns, from a read that began after get was
// called. read gets the context it must use.
func (l *latestReads) get(ctx context.Context, kind, id string, bound time.Duration,
	read func(ctx context.Context) (backend.Doc, error)) (backend.Doc, error) {
	k := docKey{kind, id}
	l.mu.Lock()
	if l.slots == nil {
		l.slots = map[docKey]*readSlot{}
	}
	s := l.slots[k]
	if s == nil {
		call := &readCall{done: make(chan struct{})}
		l.slots[k] = &readSlot{running: call}
		l.mu.Unlock()
		call.doc, call.err = read(ctx) // its caller's alone: its context is the caller's
		l.finish(k, call, bound, read)
		return call.doc, call.err
	}
	if s.next == nil {
		s.next = &readCall{done: make(chan struct{}), ctx: context.WithoutCancel(ctx)}
	}
	call := s.next
	call.joined++
	l.mu.Unlock()
	select {
	case <-call.done:
		return backend.CopyDoc(call.doc), call.err
	case <-ctx.Done():
		return backend.Doc{}, context.Cause(ctx)
	}
}

// finish ends the read in flight and starts the next one, if any caller
// joined it, shared: its callers may give up waiting, so it runs on a
// context of its own, bounded.
func (l *latestReads) finish(k docKey, call *readCall, bound time.Duration,
	read func(ctx context.Context) (backend.Doc, error)) {
	l.mu.Lock()
	s := l.slots[k]
	next := s.next
	s.running, s.next = next, nil
	if next == nil {
		delete(l.slots, k)
	}
	l.mu.Unlock()
	close(call.done)
	if next == nil {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(next.ctx, bound)
		next.doc, next.err = read(ctx)
		cancel()
		l.finish(k, next, bound, read)
	}()
}
