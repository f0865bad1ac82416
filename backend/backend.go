// Package backend is the contract between the SDK's client and its
// backends: the interfaces a backend satisfies (Store, Provisioner), the
// versioned document a Store keeps and the changes it reports, the Clock
// both run on, and what every backend shares (Matches, CopyDoc, the
// Watchers registry). A backend author reads this package and runs
// dlctest.RunConformance.
package backend

import (
	"sort"
	"sync"
	"time"
)

// Doc is one stored object: its kind and id, the store's version of it,
// the labels it is found by, and its content as JSON.
type Doc struct {
	Kind string
	ID   string
	// Version is the store's opaque version of the document: set by the
	// store, passed back on an update or delete so that a stale write is
	// a conflict. Compare versions only for equality.
	Version string
	// Labels are equality-matched keys the document is listed and indexed
	// by (e.g. "state": "waiting"). Keys and values are short strings.
	Labels map[string]string
	Data   []byte
}

// Change is one change a store reports: a document written, or deleted
// (Deleted, with the document as it last was). Its Doc.Data, and those of
// the snapshot Watch returns, may be the store's own bytes, shared with
// its cache and every other watcher: a watcher reads them and never
// changes them (a replica kept a copy of every stored document per
// watcher before: issue 43). Its Doc.Labels are the watcher's own.
type Change struct {
	Doc     Doc
	Deleted bool
}

// Clock tells the time and runs functions later. Tests inject a
// FakeClock to make every delay deterministic.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine (RealClock) or from Advance
	// (FakeClock) once d has passed, unless stopped first.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// RealClock is the wall clock.
type RealClock struct{}

// Now returns the current time.
func (RealClock) Now() time.Time { return time.Now() }

// AfterFunc runs f after d on its own goroutine.
func (RealClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// FakeClock is a clock that moves only when Advance is called. It is safe
// for concurrent use. Functions due at an Advance run in the caller's
// goroutine, in time order, after the clock has moved.
type FakeClock struct {
	mu     sync.Mutex
	now    time.Time
	seq    int
	timers map[int]fakeTimer
}

type fakeTimer struct {
	at  time.Time
	seq int
	f   func()
}

// NewFakeClock returns a fake clock showing t.
func NewFakeClock(t time.Time) *FakeClock {
	return &FakeClock{now: t, timers: map[int]fakeTimer{}}
}

// Now returns the fake time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc schedules f for d after the fake now. It never runs f before
// the next Advance, even when d ≤ 0.
func (c *FakeClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	id := c.seq
	c.timers[id] = fakeTimer{at: c.now.Add(d), seq: id, f: f}
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		_, ok := c.timers[id]
		delete(c.timers, id)
		return ok
	}
}

// Advance moves the clock by d and runs every function that has come
// due, including ones they schedule within the same span.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	target := c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		var due []fakeTimer
		for _, t := range c.timers {
			if !t.at.After(target) {
				due = append(due, t)
			}
		}
		if len(due) == 0 {
			c.now = target
			c.mu.Unlock()
			return
		}
		sort.Slice(due, func(i, j int) bool {
			if !due[i].at.Equal(due[j].at) {
				return due[i].at.Before(due[j].at)
			}
			return due[i].seq < due[j].seq
		})
		next := due[0]
		delete(c.timers, next.seq)
		if next.at.After(c.now) {
			c.now = next.at
		}
		c.mu.Unlock()
		next.f()
	}
}

// Pending returns how many functions wait to run.
func (c *FakeClock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// Next returns when the earliest function waiting to run is due, and
// false when none waits.
func (c *FakeClock) Next() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var at time.Time
	found := false
	for _, t := range c.timers {
		if !found || t.at.Before(at) {
			at, found = t.at, true
		}
	}
	return at, found
}
