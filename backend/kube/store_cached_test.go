package kube

import (
	"testing"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/aidlc/dlc/backend/kube/api/v1alpha1"
)

// TestRelistKeepsOneCopy: a relist hands the informer every object again
// at the version the store has; what the informer keeps of it is the
// store's entry, so its data is held once (it was held twice until the
// object next changed); an object at a new version, or another object
// under the same name, is made afresh.
func TestRelistKeepsOneCopy(t *testing.T) {
	k := kinds["hold"]
	entryAt := func(rv, uid, data string) *v1alpha1.StoreEntry {
		return &v1alpha1.StoreEntry{ObjectMeta: metav1.ObjectMeta{Name: "h", Namespace: "ns", ResourceVersion: rv, UID: k8stypes.UID(uid),
			Labels:      map[string]string{StoreKeyKind: "hold"},
			Annotations: map[string]string{StoreKeyID: "h1", StoreKeyLabels: "{}"}}, Data: data}
	}
	s := &Store{docs: map[string]map[string]entry{"hold": {}}, lastRV: map[string]string{},
		unselectable: map[string]map[string]bool{}, tick: make(chan struct{})}
	cached := func(o *v1alpha1.StoreEntry) *cachedObject {
		got, err := s.toCached(o)
		if err != nil {
			t.Fatal(err)
		}
		return got.(*cachedObject)
	}
	first := cached(entryAt("7", "u-1", `{"x":1}`))
	s.observe(k, first, false)
	data := func(c *cachedObject) *byte { return unsafe.SliceData(c.e.doc.Data) }
	stored := func() *byte { return unsafe.SliceData(s.docs["hold"]["h1"].doc.Data) }
	if relisted := cached(entryAt("7", "u-1", `{"x":1}`)); data(relisted) != stored() {
		t.Error("after a relist the informer and the store each hold the data")
	}
	for _, tc := range []struct{ name, rv, uid string }{{"a new version", "8", "u-1"}, {"another object", "7", "u-2"}} {
		next := cached(entryAt(tc.rv, tc.uid, `{"x":2}`))
		if data(next) == stored() || string(next.e.doc.Data) != `{"x":2}` || next.e.doc.Version != tc.rv {
			t.Errorf("%s: took the stored entry (%s at %s)", tc.name, next.e.doc.Data, next.e.doc.Version)
		}
	}
}
