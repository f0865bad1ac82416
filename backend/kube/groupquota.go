package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/internal/check"
	"github.com/aidlc/dlc/quota"
)

// GroupQuotaName is the name of the ResourceQuota the backend keeps in
// the namespace of each resource group that Options.GroupNamespaces maps
// to one of its own.
const GroupQuotaName = "dlc-resource-group"

// GroupQuotaResync is how often the backend looks at a group's
// ResourceQuota when its capacity has not changed: a quota edited or
// deleted by someone else is made the group's again within it.
const GroupQuotaResync = 5 * time.Minute

// groupQuotaReport is how many failed attempts in a row to keep a group's
// ResourceQuota are retried (with backoff) before each further failure is
// logged as an error; it is retried for as long as the backend runs.
const groupQuotaReport = 5

// RenderGroupQuota renders resource group rg's ResourceQuota in
// namespace: what the pods there may request in all (requests.cpu,
// requests.memory and requests.nvidia.com/gpu, the GPUs included when
// there are none, so that a GPU pod is refused) is the group's capacity.
// The Kubernetes quota controller and admission then refuse any pod past
// it, whoever writes it; KubeRay's pods request what the cluster's
// reservation holds (RenderRayCluster), so the SDK's own admission
// decides first and Kubernetes refuses what it would not have admitted.
func RenderGroupQuota(rg, namespace string, capacity quota.Resources) (*corev1.ResourceQuota, error) {
	l := check.ID(errs.NewPath("resourceGroup"), "C4", "resource group", rg)
	if capacity.AnyNegative() {
		l = append(l, errs.Invalid("capacity", "C4", capacity.String(), "capacity is not negative"))
	}
	if err := l.ToError(); err != nil {
		return nil, err
	}
	return &corev1.ResourceQuota{
		TypeMeta: metav1.TypeMeta{APIVersion: corev1.SchemeGroupVersion.String(), Kind: "ResourceQuota"},
		ObjectMeta: metav1.ObjectMeta{Name: GroupQuotaName, Namespace: namespace,
			Labels: withManagedBy(map[string]string{KeyResourceGroup: rg})},
		Spec: corev1.ResourceQuotaSpec{Hard: quotaHard(capacity)},
	}, nil
}

func quotaHard(c quota.Resources) corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceRequestsCPU:                     *resource.NewMilliQuantity(c.MilliCPU, resource.DecimalSI),
		corev1.ResourceRequestsMemory:                  *resource.NewQuantity(c.Memory, resource.BinarySI),
		corev1.ResourceName("requests." + GPUResource): *resource.NewQuantity(c.GPU, resource.DecimalSI),
	}
}

// sameHard reports whether a and b limit the same resources to the same
// amounts.
func sameHard(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, q := range a {
		o, ok := b[k]
		if !ok || q.Cmp(o) != 0 {
			return false
		}
	}
	return true
}

// quotaKeeper keeps the ResourceQuota of every resource group with a
// namespace of its own equal to the group's stored capacity: when the
// store's copy of the group changes, when the backend starts, and every
// GroupQuotaResync. Every replica keeps them; a write is made only on a
// quota that differs, decided on the store (see keep), so replicas agree.
type quotaKeeper struct {
	p     *Provisioner
	queue workqueue.TypedRateLimitingInterface[string]
	fails map[string]int // by the one worker only
	done  chan struct{}
	// seen is each group's capacity as its last change showed it (the
	// bytes of its "capacity" field), by the store's watch only, which
	// calls it with the store locked: every
	// reservation writes the group's document, and only a new capacity
	// (or a delete) is worth a look at its quota.
	seen map[string]string
}

// capacityChanged reports whether ch, a change of a resource group's
// document, shows another capacity than the last one seen (a document
// whose capacity cannot be found counts as changed).
func (k *quotaKeeper) capacityChanged(ch backend.Change) bool {
	if ch.Deleted {
		delete(k.seen, ch.Doc.ID)
		return true
	}
	capacity := capacityBytes(ch.Doc.Data)
	if capacity == "" {
		return true
	}
	if k.seen[ch.Doc.ID] == capacity {
		return false
	}
	k.seen[ch.Doc.ID] = capacity
	return true
}

// capacityBytes returns the "capacity" object of a resource group's
// document as it is written (quota.Group, near its start), or "".
func capacityBytes(data []byte) string {
	const key = `"capacity":`
	i := bytes.Index(data, []byte(key))
	if i < 0 {
		return ""
	}
	rest := data[i+len(key):]
	j := bytes.IndexByte(rest, '}') // its fields are numbers: no nested object
	if j < 0 {
		return ""
	}
	return string(rest[:j+1])
}

// startQuotaKeeper starts keeping the ResourceQuotas of p's mapped groups
// until ctx is done; stop waits for it. Nothing is kept when no group has
// a namespace of its own.
func startQuotaKeeper(ctx context.Context, p *Provisioner) (stop func(), err error) {
	if len(p.groupNS) == 0 {
		return func() {}, nil
	}
	k := &quotaKeeper{
		p: p,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](200*time.Millisecond, time.Minute),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "dlc-group-quotas"}),
		fails: map[string]int{},
		done:  make(chan struct{}),
		seen:  map[string]string{},
	}
	wctx, cancel := context.WithCancel(ctx)
	if _, err := p.store.Watch(wctx, func(ch backend.Change) {
		if _, ok := p.groupNS[ch.Doc.ID]; ok && ch.Doc.Kind == "resourcegroup" && k.capacityChanged(ch) {
			k.queue.Add(ch.Doc.ID)
		}
	}); err != nil {
		cancel()
		k.queue.ShutDown()
		return nil, err
	}
	for _, rg := range slices.Sorted(maps.Keys(p.groupNS)) {
		k.queue.Add(rg)
	}
	go func() { <-wctx.Done(); k.queue.ShutDown() }()
	go k.run(wctx)
	return func() { cancel(); awaitStopped(k.done) }, nil
}

func (k *quotaKeeper) run(ctx context.Context) {
	defer close(k.done)
	for {
		rg, quit := k.queue.Get()
		if quit {
			return
		}
		err := k.keep(ctx, rg)
		switch {
		case err == nil:
			delete(k.fails, rg)
			k.queue.Forget(rg)
			k.queue.AddAfter(rg, GroupQuotaResync)
		case ctx.Err() != nil:
		default:
			k.fails[rg]++
			if n := k.fails[rg]; n >= groupQuotaReport {
				k.p.log.Error(err, "kube provisioner: the ResourceQuota of a resource group is not kept (retried with backoff)",
					"resourceGroup", rg, "namespace", k.p.groupNS[rg], "attempts", n)
			}
			k.queue.AddRateLimited(rg)
		}
		k.queue.Done(rg)
	}
}

// keep makes resource group rg's ResourceQuota its capacity. It reads the
// quota, then the group from the store itself (not a cache), then writes
// the quota on the version it read: a write of another replica's in
// between, made on a newer capacity, fails it with a conflict, and the
// next attempt reads that capacity. So a replica whose cache lags never
// puts an older capacity back. A group not stored (not yet registered, or
// deleted) has a capacity of nothing: no pod of it may run.
func (k *quotaKeeper) keep(ctx context.Context, rg string) error {
	ns := k.p.groupNS[rg]
	var cur corev1.ResourceQuota
	err := k.p.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: GroupQuotaName}, &cur)
	found := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return apiError("get ResourceQuota", "resource group", rg, err)
	}
	var capacity quota.Resources
	d, err := k.p.store.GetLatest(ctx, "resourcegroup", rg)
	switch {
	case errs.IsNotFound(err):
	case err != nil:
		return err
	default:
		var g quota.Group
		if err := json.Unmarshal(d.Data, &g); err != nil {
			return errors.Join(fmt.Errorf("kube provisioner: resource group %s: %w", rg, err), errs.ErrInvalid)
		}
		capacity = g.Capacity
	}
	want, err := RenderGroupQuota(rg, ns, capacity)
	if err != nil {
		return err
	}
	if !found {
		if err := k.p.c.Create(ctx, want, client.FieldOwner(k.p.manager)); err != nil {
			return apiError("create ResourceQuota", "resource group", rg, err)
		}
		k.p.log.Info("resource group quota created", "resourceGroup", rg, "namespace", ns, "capacity", capacity.String())
		return nil
	}
	if sameHard(cur.Spec.Hard, want.Spec.Hard) && len(cur.Spec.Scopes) == 0 && cur.Spec.ScopeSelector == nil {
		return nil
	}
	next := cur.DeepCopy()
	next.Spec = want.Spec
	next.Labels = want.Labels
	if err := k.p.c.Update(ctx, next, client.FieldOwner(k.p.manager)); err != nil {
		return apiError("update ResourceQuota", "resource group", rg, err)
	}
	k.p.log.Info("resource group quota updated", "resourceGroup", rg, "namespace", ns, "capacity", capacity.String())
	return nil
}
