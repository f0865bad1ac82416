package objects_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/internal/objects"
)

type thing struct {
	Team string `json:"team"`
	Size int    `json:"size"`
}

// newCache is a cache of "thing" documents, labelled by team, whose
// decodes it counts.
func newCache(decodes *int) *objects.Cache {
	return objects.New(map[string]objects.Derive{"thing": func(d backend.Doc) (map[string]string, any, error) {
		*decodes++
		var t thing
		if err := json.Unmarshal(d.Data, &t); err != nil {
			return nil, nil, err
		}
		if t.Team == "" {
			return nil, nil, errors.New("no team")
		}
		return map[string]string{"team": t.Team, "size": fmt.Sprint(t.Size)}, &t, nil
	}})
}

func doc(id, version, data string) backend.Doc {
	// The labels as read back are someone else's: the cache derives its own.
	return backend.Doc{Kind: "thing", ID: id, Version: version, Data: []byte(data), Labels: map[string]string{"team": "forged"}}
}

func ids(ds []backend.Doc) []string {
	out := []string{}
	for _, d := range ds {
		out = append(out, d.ID)
	}
	return out
}

func TestCache(t *testing.T) {
	decodes := 0
	c := newCache(&decodes)
	put := func(d backend.Doc) {
		d, obj := c.Derived(d)
		c.Put(d, obj)
	}
	put(doc("a", "1", `{"team":"nlp","size":1}`))
	put(doc("b", "2", `{"team":"nlp","size":2}`))
	put(doc("c", "3", `{"team":"cv","size":1}`))
	put(doc("bad", "4", `{"size":1}`))                                                 // does not decode: no labels
	put(backend.Doc{Kind: "other", ID: "x", Labels: map[string]string{"team": "nlp"}}) // not registered: no labels
	for _, tc := range []struct {
		kind string
		sel  map[string]string
		want string
	}{
		{"thing", nil, "[a b bad c]"},
		{"thing", map[string]string{"team": "nlp"}, "[a b]"},
		{"thing", map[string]string{"team": "nlp", "size": "1"}, "[a]"},
		{"thing", map[string]string{"team": "forged"}, "[]"},
		{"thing", map[string]string{"team": "ml"}, "[]"},
		{"other", map[string]string{"team": "nlp"}, "[]"},
		{"other", nil, "[x]"},
	} {
		if got := fmt.Sprint(ids(c.SelectDocs(tc.kind, tc.sel))); got != tc.want {
			t.Errorf("SelectDocs(%s, %v) = %s, want %s", tc.kind, tc.sel, got, tc.want)
		}
		unordered := ids(c.Selected(tc.kind, tc.sel)) // the same, in any order
		if slices.Sort(unordered); fmt.Sprint(unordered) != tc.want {
			t.Errorf("Selected(%s, %v) = %s, want %s in any order", tc.kind, tc.sel, unordered, tc.want)
		}
	}
	// A new version moves the document between the indexes.
	put(doc("a", "5", `{"team":"cv","size":1}`))
	if got := fmt.Sprint(ids(c.SelectDocs("thing", map[string]string{"team": "cv"}))); got != "[a c]" {
		t.Errorf("after a's move: cv has %s", got)
	}
	// Decoded once per version: Put kept the decoded form.
	before := decodes
	obj, ok, err := c.Object("thing", "a", "5", func(backend.Doc) (any, error) { decodes++; return nil, nil })
	if err != nil || !ok || obj.(*thing).Team != "cv" || decodes != before {
		t.Errorf("Object at the cached version: %v %v %v, %d decodes", obj, ok, err, decodes-before)
	}
	if _, ok, _ := c.Object("thing", "a", "1", nil); ok {
		t.Error("Object at another version than the cache's answered")
	}
	c.Seed("thing", "b", "9", &thing{Team: "seeded"}) // another version: ignored
	if obj, _, _ := c.Object("thing", "b", "2", nil); obj.(*thing).Team != "nlp" {
		t.Error("a seed at another version replaced the decoded form")
	}
	c.Remove("thing", "a")
	if _, ok := c.Get("thing", "a"); ok || !c.Deleted("thing", "a") || c.Deleted("thing", "b") {
		t.Error("Remove did not forget a, or Deleted is wrong")
	}
	if got := fmt.Sprint(ids(c.SelectDocs("thing", map[string]string{"team": "cv"}))); got != "[c]" {
		t.Errorf("after a's delete: cv has %s", got)
	}
	put(doc("a", "6", `{"team":"nlp"}`))
	if c.Deleted("thing", "a") {
		t.Error("a stored again still reads as deleted")
	}
}
