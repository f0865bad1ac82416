package backend_test

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/aidlc/dlc/backend"
)

// Watchers calls its functions in the order they were added, takes the
// snapshot under the owner's lock, and forgets a function once its
// context is done.
func TestWatchers(t *testing.T) {
	var mu sync.Mutex
	var w backend.Watchers[func(string)]
	var got []string
	ctx, cancel := context.WithCancel(context.Background())
	snapped := false
	w.Add(ctx, &mu, func(s string) { got = append(got, "a"+s) }, func() {
		if mu.TryLock() {
			t.Error("then ran without the owner's lock")
			mu.Unlock()
		}
		snapped = true
	})
	w.Add(context.Background(), &mu, func(s string) { got = append(got, "b"+s) }, nil)
	if !snapped {
		t.Fatal("then was not called")
	}
	mu.Lock()
	w.Each(func(f func(string)) { f("1") })
	mu.Unlock()
	cancel()
	// The removal runs on its own goroutine once ctx is done.
	for {
		mu.Lock()
		n := len(w.All())
		mu.Unlock()
		if n == 1 {
			break
		}
		runtime.Gosched()
	}
	mu.Lock()
	for _, f := range w.All() {
		f("2")
	}
	mu.Unlock()
	if want := []string{"a1", "b1", "b2"}; !slices.Equal(got, want) {
		t.Fatalf("calls %v, want %v", got, want)
	}
}

func TestMatchesAndCopyDoc(t *testing.T) {
	for _, tc := range []struct {
		labels, sel map[string]string
		want        bool
	}{
		{map[string]string{"a": "1"}, nil, true},
		{map[string]string{"a": "1", "b": "2"}, map[string]string{"a": "1"}, true},
		{map[string]string{"a": "1"}, map[string]string{"a": "2"}, false},
		{nil, map[string]string{"a": ""}, false},
	} {
		if got := backend.Matches(tc.labels, tc.sel); got != tc.want {
			t.Errorf("Matches(%v, %v) = %v", tc.labels, tc.sel, got)
		}
	}
	d := backend.Doc{Kind: "k", ID: "i", Labels: map[string]string{"a": "1"}, Data: []byte("x")}
	c := backend.CopyDoc(d)
	c.Labels["a"], c.Data[0] = "2", 'y'
	if d.Labels["a"] != "1" || d.Data[0] != 'x' {
		t.Fatalf("CopyDoc shares with its source: %+v", d)
	}
}
