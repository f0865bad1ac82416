package cli

import (
	"strings"
	"testing"
)

func TestSelector(t *testing.T) {
	for _, c := range []struct {
		sel     string
		err     string
		match   []map[string]string
		nomatch []map[string]string
	}{
		{sel: "", match: []map[string]string{nil, {"a": "b"}}},
		{sel: "team=a", match: []map[string]string{{"team": "a", "x": "y"}}, nomatch: []map[string]string{{"team": "b"}, nil}},
		{sel: "team==a", match: []map[string]string{{"team": "a"}}, nomatch: []map[string]string{{"team": "aa"}}},
		{sel: "env!=prod", match: []map[string]string{nil, {"env": "dev"}}, nomatch: []map[string]string{{"env": "prod"}}},
		{sel: "gpu", match: []map[string]string{{"gpu": ""}}, nomatch: []map[string]string{{"cpu": "1"}}},
		{sel: "!spot", match: []map[string]string{{"gpu": "1"}}, nomatch: []map[string]string{{"spot": ""}}},
		{sel: " team = a , env != prod ", match: []map[string]string{{"team": "a"}}, nomatch: []map[string]string{{"team": "a", "env": "prod"}}},
		{sel: "团队=搜索", match: []map[string]string{{"团队": "搜索"}}},
		{sel: "team=", match: []map[string]string{{"team": ""}}, nomatch: []map[string]string{{"team": "a"}}},
		{sel: "env!=prod,env!=dev", match: []map[string]string{{"env": "test"}, nil}, nomatch: []map[string]string{{"env": "prod"}, {"env": "dev"}}},
		{sel: "team in (search,vision)", err: "no valid key"},
		{sel: "a=b=c", err: "no valid value"},
		{sel: "a,,b", err: "an empty term"},
		{sel: "=a", err: "no valid key"},
		{sel: "!", err: "no valid key"},
		{sel: "team=a,team=b", err: "cannot equal both"},
		{sel: strings.Repeat("k,", MaxSelectorTerms) + "k", err: "more than 64 terms"},
	} {
		s, err := parseSelector(c.sel)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want %q", c.sel, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.sel, err)
			continue
		}
		for _, m := range c.match {
			if !s.matches(m) {
				t.Errorf("%q does not match %v", c.sel, m)
			}
		}
		for _, m := range c.nomatch {
			if s.matches(m) {
				t.Errorf("%q matches %v", c.sel, m)
			}
		}
	}
}

func TestKindOf(t *testing.T) {
	for _, c := range []struct{ doc, kind, err string }{
		{doc: "name: x\nentrypoint: python a.py\n", kind: kindJob},
		{doc: "name: x\nresourceGroup: rg\n", kind: kindCluster},
		{doc: "name: x\ndescription: d\nimage: i\n", kind: kindTemplate},
		{doc: "- a\n- b\n", err: "cannot unmarshal"},
		{doc: "a: [\n", err: "invalid"},
	} {
		k, err := kindOf([]byte(c.doc))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want %q", c.doc, err, c.err)
			}
			continue
		}
		if err != nil || k != c.kind {
			t.Errorf("%q: %q, %v; want %q", c.doc, k, err, c.kind)
		}
	}
}

func TestSplitDocuments(t *testing.T) {
	docs := splitDocuments([]byte("# only a comment\n---\na: 1\n---\n\n---\nb: 2\n--- \n"))
	if len(docs) != 2 || string(docs[0]) != "a: 1\n" || string(docs[1]) != "b: 2\n" {
		t.Errorf("documents: %q", docs)
	}
}

// A watch shows a delete only of what it showed: a cluster the filters
// excluded is not printed as deleted.
func TestWatchShown(t *testing.T) {
	w := watchShown{"listed": true}
	for _, c := range []struct {
		id               string
		matches, deleted bool
		want             bool
	}{
		{"excluded", false, false, false},
		{"excluded", false, true, false},
		{"listed", false, true, true},
		{"listed", false, true, false}, // gone already
		{"new", true, false, true},
		{"new", false, false, false}, // no longer selected
		{"new", false, true, false},
	} {
		if got := w.selects(c.id, c.matches, c.deleted); got != c.want {
			t.Errorf("%+v: shown %v", c, got)
		}
	}
}
