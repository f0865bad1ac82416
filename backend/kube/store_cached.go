package kube

import (
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidlc/dlc/backend/kube/api/v1alpha1"
)

// cachedObject is what the store's informers keep of an object in place
// of the object: the entry fromObject made of it, which the store's
// documents share (its data is the same bytes), and of its metadata the
// name, namespace and resourceVersion the informer's keys and indexes
// read. Kept decoded, every replica held each stored object twice: as the
// typed object in the informer and as the store's document (issue 43).
// Nothing reads the store's informer caches but its event handlers
// (observe). A cachedObject is never changed once made.
type cachedObject struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	// kind is the store's kind of the object; "" when the object is not
	// one of the store's (a hand-made object without its id): the store
	// ignores it, as it ignored such an object before.
	kind string
	e    entry
	// unselectable: the object lacks one of its kind's selectable labels
	// in metadata.labels (noteSelectable).
	unselectable bool
}

// DeepCopyObject returns a copy of c that shares its entry, which is
// never changed.
func (c *cachedObject) DeepCopyObject() runtime.Object {
	out := *c
	out.ObjectMeta = *c.ObjectMeta.DeepCopy()
	return &out
}

// storeKindOf returns the kind of the store that o is an object of, or nil.
func storeKindOf(o client.Object) *kindInfo {
	if se, ok := o.(*v1alpha1.StoreEntry); ok {
		k := kinds[se.Labels[StoreKeyKind]]
		if k == nil || !k.inEntry() {
			return nil
		}
		return k
	}
	t := reflect.TypeOf(o)
	for _, k := range kinds {
		if k.typ != nil && k.typ == t {
			return k
		}
	}
	return nil
}

// toCached is the transform of the store's informers: each object becomes
// the cachedObject that stands for it. An object already transformed (an
// informer may hand one back on a resync or a relist) passes unchanged, as
// does anything that is not an object. An object at the version the
// store's documents have already (a relist lists every object again) takes
// the store's entry of it, so that its data is not held twice.
func (s *Store) toCached(in any) (any, error) {
	if c, ok := in.(*cachedObject); ok {
		return c, nil
	}
	o, ok := in.(client.Object)
	if !ok {
		return in, nil
	}
	out := &cachedObject{ObjectMeta: metav1.ObjectMeta{Name: o.GetName(), Namespace: o.GetNamespace(),
		ResourceVersion: o.GetResourceVersion(), UID: o.GetUID()}}
	k := storeKindOf(o)
	if k == nil {
		return out, nil
	}
	e, ok := s.current(k, o)
	if !ok {
		var err error
		if e, err = fromObject(k, o); err != nil {
			return out, nil // not one of ours (e.g. a hand-made object): ignored
		}
	}
	out.kind, out.e = k.kind, e
	if len(k.selectable) > 0 {
		out.unselectable = lacksSelectable(k, o, e.doc.Labels)
	}
	return out, nil
}

// current returns the store's entry of object o of kind k when it is of
// o's version (the same object: the name, UID and resourceVersion match).
func (s *Store) current(k *kindInfo, o client.Object) (entry, bool) {
	id, ok := o.GetAnnotations()[StoreKeyID]
	if !ok {
		return entry{}, false
	}
	s.mu.RLock()
	e, ok := s.docs[k.kind][id]
	s.mu.RUnlock()
	if !ok || e.doc.Version != o.GetResourceVersion() || e.name != o.GetName() || e.uid != o.GetUID() {
		return entry{}, false
	}
	return e, true
}
