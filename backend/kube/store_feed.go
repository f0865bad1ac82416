package kube

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/aidlc/dlc/backend/kube/api/v1alpha1"
)

// feed keeps the store's documents of the kinds of one type of object up
// to date: it is the store of a client-go Reflector that lists and
// watches that type in the store's namespace (StoreEntries by the
// StoreKeyKind label of the kinds cached). The reflector hands it each
// object it lists or is told of; the feed turns it into the store's entry
// (entryOf) and applies it to the documents (Store.apply), and keeps
// nothing of its own.
//
// An informer kept every object a second time, its key and a namespace
// index of every key, beside the store's documents, which are all the
// store reads (issue 43: about 2.5 KiB a stored object in every replica,
// with the stand-in the informer kept of it). A feed keeps none of that:
// the documents are the cache.
type feed struct {
	s     *Store
	kinds []*kindInfo // the kinds of the objects listed: one, or the StoreEntry kinds cached
	once  sync.Once
	ready chan struct{} // closed on the first Replace: the documents hold a full list
}

var _ toolscache.TransformingStore = (*feed)(nil)

// Add applies an object the reflector was told of.
func (f *feed) Add(obj any) error { f.s.observe(f.s.listedOf(obj), false); return nil }

// Update applies an object the reflector was told of.
func (f *feed) Update(obj any) error { f.s.observe(f.s.listedOf(obj), false); return nil }

// Delete applies the deletion of an object.
func (f *feed) Delete(obj any) error { f.s.observe(f.s.listedOf(obj), true); return nil }

// Resync does nothing: the feed has no resync period.
func (f *feed) Resync() error { return nil }

// Transformer is what the reflector keeps of each object while it streams
// a list into a store of its own before it hands the feed the whole
// (client-go's watch-list): the listed stand-in, not the object, so that
// a replica at its start or on a relist does not hold every object whole.
func (f *feed) Transformer() toolscache.TransformFunc {
	return func(obj any) (any, error) { return f.s.listedOf(obj), nil }
}

// Replace applies a full list of the type's objects, at resourceVersion
// rv: each object listed, and the deletion of each document of the feed's
// kinds that the list has not (deleted while the watch was down). An
// object listed that the store cannot read (its entry does not decode)
// keeps the document it had, as a watch event of it does.
func (f *feed) Replace(list []any, rv string) error {
	listed := make(map[string]map[string]bool, len(f.kinds))
	for _, k := range f.kinds {
		listed[k.kind] = map[string]bool{}
	}
	for _, obj := range list {
		l := f.s.listedOf(obj)
		if l.kind != nil && listed[l.kind.kind] != nil && l.id != "" {
			listed[l.kind.kind][l.id] = true
		}
		f.s.observe(l, false)
	}
	for _, k := range f.kinds {
		f.s.forget(k, listed[k.kind], rv)
	}
	f.once.Do(func() { close(f.ready) })
	return nil
}

// listed is what the store reads of an object a feed's reflector hands
// it: the kind and id it is of, and its entry when it is one of the
// store's cached objects and decodes (ok); with the name and namespace
// that key it in the reflector's own store of a list being streamed.
type listed struct {
	metav1.ObjectMeta // name and namespace only
	kind              *kindInfo
	id                string
	e                 entry
	unselectable      bool
	ok                bool
}

// listedOf is what the store reads of obj, an object (or a listed
// stand-in already).
func (s *Store) listedOf(obj any) *listed {
	switch o := obj.(type) {
	case *listed:
		return o
	case client.Object:
		l := &listed{ObjectMeta: metav1.ObjectMeta{Name: o.GetName(), Namespace: o.GetNamespace()}}
		if k := storeKindOf(o); k != nil && !slices.Contains(uncachedKinds, k.kind) {
			l.kind, l.id = k, o.GetAnnotations()[StoreKeyID]
		}
		l.e, l.unselectable, l.ok = s.entryOf(l.kind, o)
		return l
	}
	return &listed{}
}

// startFeeds starts a reflector for each type of object the store caches
// and returns the feeds, each ready once its first list is applied. The
// reflectors stop when ctx is done; done is closed when they have.
func (s *Store) startFeeds(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, sel labels.Selector) ([]*feed, <-chan struct{}, error) {
	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, nil, fmt.Errorf("kube store: %w", err)
	}
	byType := map[string]*feed{}
	var order []string
	for _, k := range kinds {
		if slices.Contains(uncachedKinds, k.kind) {
			continue
		}
		gvk, err := apiutil.GVKForObject(k.newObj(), scheme)
		if err != nil {
			return nil, nil, fmt.Errorf("kube store: %w", err)
		}
		f := byType[gvk.Kind]
		if f == nil {
			f = &feed{s: s, ready: make(chan struct{})}
			byType[gvk.Kind] = f
			order = append(order, gvk.Kind)
		}
		f.kinds = append(f.kinds, k)
	}
	slices.Sort(order)
	var feeds []*feed
	var rs []*toolscache.Reflector
	for _, kind := range order {
		f := byType[kind]
		obj := f.kinds[0].newObj()
		gvk, _ := apiutil.GVKForObject(obj, scheme)
		newList := func() (client.ObjectList, error) {
			l, err := scheme.New(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
			if err != nil {
				return nil, err
			}
			return l.(client.ObjectList), nil
		}
		if _, err := newList(); err != nil {
			return nil, nil, fmt.Errorf("kube store: a list of %s: %w", kind, err)
		}
		var selector labels.Selector
		if _, ok := obj.(*v1alpha1.StoreEntry); ok {
			selector = sel
		}
		lw := &toolscache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
				l, err := newList()
				if err != nil {
					return nil, err
				}
				err = wc.List(ctx, l, &client.ListOptions{Raw: &opts, Namespace: s.namespace, LabelSelector: selector,
					Limit: opts.Limit, Continue: opts.Continue})
				return l, err
			},
			WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
				l, err := newList()
				if err != nil {
					return nil, err
				}
				opts.AllowWatchBookmarks = true
				return wc.Watch(ctx, l, &client.ListOptions{Raw: &opts, Namespace: s.namespace, LabelSelector: selector})
			},
		}
		ro := toolscache.ReflectorOptions{Name: "dlc store " + kind, TypeDescription: kind}
		if s.opts.Logger.GetSink() != nil {
			ro.Logger = &s.opts.Logger
		}
		rs = append(rs, toolscache.NewReflectorWithOptions(lw, obj, f, ro))
		feeds = append(feeds, f)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for _, r := range rs {
		wg.Go(func() { r.RunWithContext(ctx) })
	}
	go func() { wg.Wait(); close(done) }()
	return feeds, done, nil
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

// entryOf returns the store's entry of object o of kind k — the one the
// store's documents hold when it is of o's version (a relist lists every
// object again: its data is not made and held twice), else a new one —
// and whether o lacks one of its kind's selectable labels in
// metadata.labels (noteSelectable). ok is false when k is nil (o is not
// one of the store's cached objects) or o does not decode: the store
// ignores it.
func (s *Store) entryOf(k *kindInfo, o client.Object) (e entry, unselectable, ok bool) {
	if k == nil {
		return entry{}, false, false
	}
	if e, ok = s.current(k, o); !ok {
		var err error
		if e, err = fromObject(k, o); err != nil {
			return entry{}, false, false
		}
	}
	if len(k.selectable) > 0 {
		unselectable = lacksSelectable(k, o, e.doc.Labels)
	}
	return e, unselectable, true
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
