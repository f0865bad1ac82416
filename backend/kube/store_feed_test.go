package kube

import (
	"testing"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/backend/kube/api/v1alpha1"
)

// TestFeed: a feed applies what its reflector lists and is told of to the
// store's documents and tells watchers; a relist of an object at the
// version the store has keeps the store's entry, so its data is made and
// held once; a full list without an object deletes it; what is not one of
// the store's objects is ignored; the feed is ready once its first list
// is applied.
func TestFeed(t *testing.T) {
	entryAt := func(kind, id, rv, uid, data string) *v1alpha1.StoreEntry {
		return &v1alpha1.StoreEntry{ObjectMeta: metav1.ObjectMeta{Name: "e-" + id, Namespace: "ns", ResourceVersion: rv, UID: k8stypes.UID(uid),
			Labels:      map[string]string{StoreKeyKind: kind},
			Annotations: map[string]string{StoreKeyID: id, StoreKeyLabels: "{}"}}, Data: data}
	}
	s := &Store{docs: map[string]map[string]entry{"hold": {}, "name": {}}, lastRV: map[string]string{},
		unselectable: map[string]map[string]bool{}, ticks: map[string]chan struct{}{"hold": make(chan struct{}), "name": make(chan struct{})}}
	var changes []backend.Change
	s.watchers.Add(t.Context(), &s.mu, func(c backend.Change) { changes = append(changes, c) }, nil)
	f := &feed{s: s, kinds: []*kindInfo{kinds["hold"], kinds["name"]}, ready: make(chan struct{})}
	data := func(kind, id string) *byte { return unsafe.SliceData(s.docs[kind][id].doc.Data) }
	seen := func() (out []string) {
		for _, c := range changes {
			d := "+"
			if c.Deleted {
				d = "-"
			}
			out = append(out, d+c.Doc.Kind+"/"+c.Doc.ID+"@"+c.Doc.Version)
		}
		changes = nil
		return out
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	must(f.Replace([]any{entryAt("hold", "h1", "7", "u-1", `{"x":1}`), entryAt("name", "n1", "8", "u-2", `{}`),
		entryAt("nosuchkind", "z", "9", "u-3", `{}`), &v1alpha1.StoreEntry{}}, "9"))
	select {
	case <-f.ready:
	default:
		t.Fatal("not ready after its first list")
	}
	if got := seen(); len(got) != 2 {
		t.Fatalf("first list told %v, want h1 and n1 only", got)
	}
	held := data("hold", "h1")

	// A relist: the same objects at the same versions change nothing and
	// keep the store's entries; one missing is deleted.
	must(f.Replace([]any{entryAt("hold", "h1", "7", "u-1", `{"x":1}`)}, "10"))
	if got := seen(); len(got) != 1 || got[0] != "-name/n1@8" {
		t.Errorf("relist told %v, want only the deletion of n1", got)
	}
	if data("hold", "h1") != held {
		t.Error("a relisted object at the store's version was made again")
	}
	if _, ok := s.docs["name"]["n1"]; ok {
		t.Error("an object the list lacks is still stored")
	}

	// Watch events: a new version, another object under the same name, a
	// deletion.
	for _, tc := range []struct {
		name    string
		apply   func(any) error
		obj     *v1alpha1.StoreEntry
		want    string
		present bool
	}{
		{"a new version", f.Update, entryAt("hold", "h1", "11", "u-1", `{"x":2}`), "+hold/h1@11", true},
		{"another object of the id", f.Update, entryAt("hold", "h1", "12", "u-4", `{"x":3}`), "+hold/h1@12", true},
		{"an object added", f.Add, entryAt("name", "n2", "13", "u-5", `{}`), "+name/n2@13", true},
		{"a deletion", f.Delete, entryAt("name", "n2", "14", "u-5", `{}`), "-name/n2@14", false},
		{"not ours", f.Add, entryAt("nosuchkind", "n3", "15", "u-6", `{}`), "", false},
		{"a kind not cached", f.Add, entryAt("usage", "u1", "16", "u-7", `{}`), "", false},
	} {
		must(tc.apply(tc.obj))
		got := seen()
		if (tc.want == "" && len(got) != 0) || (tc.want != "" && (len(got) != 1 || got[0] != tc.want)) {
			t.Errorf("%s: told %v, want %q", tc.name, got, tc.want)
		}
		kind, id := tc.obj.Labels[StoreKeyKind], tc.obj.Annotations[StoreKeyID]
		e, ok := s.docs[kind][id]
		if ok != tc.present || (ok && (e.doc.Version != tc.obj.ResourceVersion || string(e.doc.Data) != tc.obj.Data)) {
			t.Errorf("%s: stored %v %+v", tc.name, ok, e.doc)
		}
	}
	if s.lastRV["name"] != "14" || s.lastRV["hold"] != "12" {
		t.Errorf("last versions %v", s.lastRV)
	}

	// An object the store cannot read (its labels annotation corrupt) is
	// ignored by a watch event and by a relist alike: the document it had
	// stays, and no one is told of a deletion.
	bad := entryAt("hold", "h1", "20", "u-4", `{"x":4}`)
	bad.Annotations[StoreKeyLabels] = "not json"
	must(f.Update(bad))
	must(f.Replace([]any{bad}, "21"))
	if got := seen(); len(got) != 0 {
		t.Errorf("an object that does not decode told %v", got)
	}
	if e, ok := s.docs["hold"]["h1"]; !ok || e.doc.Version != "12" {
		t.Errorf("an object that does not decode: stored %v %+v, want the document at 12 kept", ok, e.doc)
	}

	// A list streamed into the reflector's own store (client-go's watch
	// list) holds what the feed's Transformer makes of each object, and
	// hands the feed those; the list's version is the cache's then.
	tr := f.Transformer()
	var streamed []any
	for _, o := range []*v1alpha1.StoreEntry{entryAt("hold", "h1", "22", "u-4", `{"x":5}`), entryAt("name", "n4", "23", "u-8", `{}`)} {
		l, err := tr(o)
		must(err)
		if _, ok := l.(*listed); !ok || l.(*listed).Name != o.Name {
			t.Fatalf("the transform kept %T", l)
		}
		streamed = append(streamed, l)
	}
	must(f.Replace(streamed, "30"))
	if got := seen(); len(got) != 2 || got[0] != "+hold/h1@22" || got[1] != "+name/n4@23" {
		t.Errorf("a streamed list told %v", got)
	}
	if s.lastRV["name"] != "30" || s.lastRV["hold"] != "30" {
		t.Errorf("after a list at 30 the last versions are %v", s.lastRV)
	}
}
