package kube

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"sync"

	toolscache "k8s.io/client-go/tools/cache"
)

// cachedOf is what an informer of the provisioner keeps of an object of a
// cluster (cachedPod, cachedRayCluster): it knows its cluster's id.
type cachedOf interface {
	*cachedPod | *cachedRayCluster
	GetNamespace() string
	GetName() string
	cluster() string
}

// clusterIndex holds what an informer keeps of the objects of each
// cluster, by cluster id and "namespace/name", as its event handler keeps
// it (update): the provisioner's own index of them, in place of the
// cache's field index, whose sets of keys per value were as large again
// (issue 43).
type clusterIndex[T cachedOf] struct {
	mu sync.RWMutex
	m  map[string]map[string]T
}

// update notes an informer's event: old is what it held before (nil for
// an add), obj what it holds now (nil for a delete); either may be a
// tombstone. Anything not of type T is ignored.
func (x *clusterIndex[T]) update(old, obj any) {
	was, wasOK := asCached[T](old)
	is, isOK := asCached[T](obj)
	if !wasOK && !isOK {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if wasOK {
		id := was.cluster()
		delete(x.m[id], was.GetNamespace()+"/"+was.GetName())
		if len(x.m[id]) == 0 {
			delete(x.m, id)
		}
	}
	if isOK {
		if id := is.cluster(); id != "" {
			if x.m == nil {
				x.m = map[string]map[string]T{}
			}
			if x.m[id] == nil {
				x.m[id] = map[string]T{}
			}
			x.m[id][is.GetNamespace()+"/"+is.GetName()] = is
		}
	}
}

// of returns what the index holds of cluster id, by namespace and name.
func (x *clusterIndex[T]) of(id string) []T {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return slices.SortedFunc(maps.Values(x.m[id]), func(a, b T) int {
		return cmp.Or(strings.Compare(a.GetNamespace(), b.GetNamespace()), strings.Compare(a.GetName(), b.GetName()))
	})
}

// ids returns the ids of the clusters the index holds objects of.
func (x *clusterIndex[T]) ids() []string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return slices.Sorted(maps.Keys(x.m))
}

// asCached returns o as a T, o a tombstone's included.
func asCached[T cachedOf](o any) (T, bool) {
	if t, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	c, ok := o.(T)
	return c, ok && c != nil
}
