package views

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/watch"
)

// What a watcher merges of the changes not yet read: per object, the
// event that tells a reader who last heard of it before them all, in the
// order the objects first changed.
func TestWatcherMerges(t *testing.T) {
	for _, c := range []struct {
		pushes []string // "id:type"
		want   string
	}{
		{[]string{"a:ADDED", "a:MODIFIED"}, "[a:ADDED]"},
		{[]string{"a:ADDED", "a:DELETED"}, "[]"},
		{[]string{"a:ADDED", "a:DELETED", "a:ADDED"}, "[a:ADDED]"},
		{[]string{"a:MODIFIED", "a:DELETED"}, "[a:DELETED]"},
		{[]string{"a:DELETED", "a:ADDED"}, "[a:MODIFIED]"},
		{[]string{"a:MODIFIED", "b:ADDED", "a:MODIFIED", "c:MODIFIED"}, "[a:MODIFIED b:ADDED c:MODIFIED]"},
		{[]string{"a:ADDED", "b:ADDED", "a:DELETED", "a:ADDED"}, "[a:ADDED b:ADDED]"},
	} {
		w := &watcher{pending: map[string]watch.EventType{}, wake: make(chan struct{}, 1)}
		for _, p := range c.pushes {
			var id, typ string
			for i := range p {
				if p[i] == ':' {
					id, typ = p[:i], p[i+1:]
				}
			}
			w.push(id, watch.EventType(typ))
		}
		var got []string
		for {
			id, typ, ok := w.pop()
			if !ok {
				break
			}
			got = append(got, id+":"+string(typ))
		}
		if s := fmt.Sprint(got); s != c.want {
			t.Errorf("%v: %s, want %s", c.pushes, s, c.want)
		}
	}
}

// docs is a Source of fixed documents.
type docs []backend.Doc

func (d docs) SelectDocs(kind string, sel map[string]string) []backend.Doc {
	var out []backend.Doc
	for _, x := range d {
		if x.Kind == kind && backend.Matches(x.Labels, sel) {
			out = append(out, x)
		}
	}
	return out
}

// A hub tells each watch what it selects: the cache's documents first
// (initial), then the changes published, and ends the watch when its
// context is done or the client closes; Watchable and WaitFor say why.
func TestHub(t *testing.T) {
	src := docs{{Kind: "run", ID: "r1", Labels: map[string]string{"job": "a"}}, {Kind: "run", ID: "r2", Labels: map[string]string{"job": "b"}}}
	done := make(chan struct{})
	h := NewHub(src, done)
	if h.Watching() {
		t.Fatal("a hub with no watch says it is watching")
	}
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan string, 10)
	Typed(h, ctx, "run", map[string]string{"job": "a"}, nil, true, out, func(id string, et watch.EventType) (string, bool) {
		return id + ":" + string(et), id != "skip"
	})
	if got := <-out; got != "r1:ADDED" {
		t.Fatalf("first event %q, want the cache's r1 as ADDED", got)
	}
	h.Publish(backend.Doc{Kind: "run", ID: "r2", Labels: map[string]string{"job": "b"}}, backend.Doc{}, false, true) // not selected
	h.Publish(backend.Doc{Kind: "run", ID: "skip", Labels: map[string]string{"job": "a"}}, backend.Doc{}, false, false)
	h.Publish(backend.Doc{Kind: "run", ID: "r3", Labels: map[string]string{"job": "a"}}, backend.Doc{}, false, false)
	h.Publish(backend.Doc{Kind: "run", ID: "r1"}, backend.Doc{Kind: "run", ID: "r1", Labels: map[string]string{"job": "a"}}, true, true)
	h.Publish(backend.Doc{Kind: "run", ID: "gone"}, backend.Doc{}, true, false) // never cached: told to none
	for _, want := range []string{"r3:ADDED", "r1:DELETED"} {
		if got := <-out; got != want {
			t.Fatalf("event %q, want %q", got, want)
		}
	}
	cancel()
	if _, open := <-out; open {
		t.Fatal("the watch did not end with its context")
	}
	for h.Watching() {
		runtime.Gosched() // the watch's goroutine takes itself off after closing out
	}
	if err := h.Watchable(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Watchable of a done context: %v", err)
	}
	events := make(chan string)
	close(done)
	if err := h.Watchable(context.Background()); !errors.Is(err, errs.ErrUnavailable) || !errors.Is(err, ErrClosed) {
		t.Errorf("Watchable of a closed client: %v", err)
	}
	n := 0
	_, err := WaitFor(context.Background(), "run", "r1", func(context.Context, string) (*int, error) { return &n, nil }, func() <-chan string { close(events); return events }(),
		func(string) (watch.EventType, *int) { return watch.Modified, &n }, func(*int) string { return "nothing" }, func(*int) (bool, error) { return false, nil })
	if !errors.Is(err, ErrClosed) {
		t.Errorf("a wait whose watch ended with the client: %v", err)
	}
}
