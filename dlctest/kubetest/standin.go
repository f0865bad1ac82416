package kubetest

import (
	"context"
	"errors"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// standIn is what the controller stand-ins (the kubelet's, the Job
// controller's) share: an informer cache on some namespaces, a
// rate-limited queue of object keys and one worker that syncs each key,
// again with backoff while it fails.
type standIn struct {
	client client.Client
	cache  cache.Cache
	queue  workqueue.TypedRateLimitingInterface[types.NamespacedName]
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// newStandIn makes a stand-in's cache on namespaces (all when none) and
// its queue, named name; byObject narrows what the cache holds.
func newStandIn(cp *ControlPlane, name string, namespaces []string, byObject map[client.Object]cache.ByObject) (*standIn, error) {
	opts := cache.Options{Scheme: cp.scheme, ByObject: byObject}
	if len(namespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	c, err := cache.New(cp.Config(), opts)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &standIn{client: cp.client, cache: c, ctx: ctx, cancel: cancel,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[types.NamespacedName](5*time.Millisecond, time.Second),
			workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: name})}, nil
}

// handle adds h to the informer of obj's type.
func (s *standIn) handle(obj client.Object, h toolscache.ResourceEventHandlerFuncs) error {
	inf, err := s.cache.GetInformer(s.ctx, obj)
	if err != nil {
		return err
	}
	_, err = inf.AddEventHandler(h)
	return err
}

// add queues obj's key (a tombstone's object's).
func (s *standIn) add(obj any) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if o, ok := obj.(client.Object); ok {
		s.queue.Add(types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()})
	}
}

// run starts the cache and the worker, which syncs each queued key, and
// waits for the cache to sync (what names what did not, in the error).
func (s *standIn) run(what string, sync func(context.Context, types.NamespacedName) error) error {
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		_ = s.cache.Start(s.ctx) // returns when ctx ends
	}()
	go func() {
		defer s.wg.Done()
		for {
			key, shutdown := s.queue.Get()
			if shutdown {
				return
			}
			if err := sync(s.ctx, key); err != nil && s.ctx.Err() == nil {
				s.queue.AddRateLimited(key)
			} else {
				s.queue.Forget(key)
			}
			s.queue.Done(key)
		}
	}()
	syncCtx, syncCancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer syncCancel()
	if !s.cache.WaitForCacheSync(syncCtx) {
		s.stop()
		return errors.New(what + " did not sync")
	}
	return nil
}

func (s *standIn) stop() {
	s.cancel()
	s.queue.ShutDown()
	s.wg.Wait()
}
