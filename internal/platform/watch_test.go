package platform

import (
	"fmt"
	"testing"

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
