package kubetest

import (
	"context"
	"sort"
	"sync"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidlc/dlc/backend/kube"
)

// AutoscalerFieldManager is the field manager of the [Autoscaler]'s
// writes, as Ray's autoscaler has one of its own.
const AutoscalerFieldManager = "dlctest-ray-autoscaler"

// Autoscaler stands in for Ray's autoscaler, the one KubeRay runs beside an
// autoscaling head, which a control plane without Ray does not have. The
// test sets the demand ([Autoscaler.Demand]: "this many workers in this
// group", as pending tasks would make Ray's autoscaler want), and the
// stand-in acts on the RayCluster as Ray's autoscaler does:
//
//   - up: it writes the worker group's replicas, never above its
//     maxReplicas (a demand beyond stays pending, as in Ray);
//   - down: it names the workers to remove in the group's
//     scaleStrategy.workersToDelete (newest first) and lowers replicas;
//     KubeRay deletes the named pods (with in-tree autoscaling on it
//     deletes no others), and the stand-in clears the list once they are
//     gone.
//
// It looks again every interval, so room made later (a maxReplicas
// raised) is taken up while the demand lasts. It writes with Update, under
// its own field manager ([AutoscalerFieldManager]), and only the fields
// above.
type Autoscaler struct {
	client   client.Client
	interval time.Duration
	cancel   context.CancelFunc
	done     chan struct{}

	mu      sync.Mutex
	demands map[demandKey]int
}

type demandKey struct {
	namespace, clusterID, group string
}

// StartAutoscaler starts an autoscaler stand-in ([Autoscaler]) on the
// control plane; it stops when t's test ends. It acts only on the
// clusters a test has set a demand for.
//
//	as := cp.StartAutoscaler(t)
//	as.Demand(ns, cl.ID, "cpu", 10) // Ray wants 10 workers in group cpu
func (cp *ControlPlane) StartAutoscaler(t TestingT) *Autoscaler {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	a := &Autoscaler{client: cp.client, interval: 50 * time.Millisecond, cancel: cancel,
		done: make(chan struct{}), demands: map[demandKey]int{}}
	go a.run(ctx)
	t.Cleanup(a.stop)
	return a
}

func (a *Autoscaler) stop() {
	a.cancel()
	<-a.done
}

// Demand sets how many workers Ray wants in group of the platform's
// cluster clusterID, in namespace: the stand-in moves the RayCluster
// toward it, within the group's minReplicas and maxReplicas, until the
// demand changes. A negative count forgets the demand (the stand-in then
// leaves the group alone).
func (a *Autoscaler) Demand(namespace, clusterID, group string, workers int) {
	k := demandKey{namespace: namespace, clusterID: clusterID, group: group}
	a.mu.Lock()
	defer a.mu.Unlock()
	if workers < 0 {
		delete(a.demands, k)
		return
	}
	a.demands[k] = workers
}

func (a *Autoscaler) run(ctx context.Context) {
	defer close(a.done)
	tick := time.NewTicker(a.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		a.mu.Lock()
		keys := make([]demandKey, 0, len(a.demands))
		for k := range a.demands {
			keys = append(keys, k)
		}
		a.mu.Unlock()
		for _, k := range keys {
			// A failed step (a conflict with KubeRay's or the platform's
			// write, a cluster not made yet) is tried again next tick.
			_ = a.step(ctx, k)
		}
	}
}

// step moves one worker group one step toward its demand.
func (a *Autoscaler) step(ctx context.Context, k demandKey) error {
	a.mu.Lock()
	want, ok := a.demands[k]
	a.mu.Unlock()
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// The cluster's RayCluster (an on-demand cluster's is the one KubeRay
	// made for its RayJob, under a name of KubeRay's) by the cluster id
	// label.
	var list rayv1.RayClusterList
	if err := a.client.List(ctx, &list, client.InNamespace(k.namespace), client.MatchingLabels{kube.KeyClusterID: k.clusterID}); err != nil {
		return err
	}
	var rc *rayv1.RayCluster
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp == nil {
			rc = &list.Items[i]
		}
	}
	if rc == nil || ptr.Deref(rc.Spec.Suspend, false) {
		return nil
	}
	var w *rayv1.WorkerGroupSpec
	for i := range rc.Spec.WorkerGroupSpecs {
		if rc.Spec.WorkerGroupSpecs[i].GroupName == k.group {
			w = &rc.Spec.WorkerGroupSpecs[i]
		}
	}
	if w == nil {
		return nil
	}
	lo, hi := ptr.Deref(w.MinReplicas, 0), ptr.Deref(w.MaxReplicas, 0)
	target := min(max(int32(want), lo), hi)
	var pods corev1.PodList
	if err := a.client.List(ctx, &pods, client.InNamespace(rc.Namespace), client.MatchingLabels{
		"ray.io/cluster": rc.Name, "ray.io/group": k.group, "ray.io/node-type": "worker"}); err != nil {
		return err
	}
	exists := map[string]bool{}
	var live []*corev1.Pod
	for i := range pods.Items {
		p := &pods.Items[i]
		exists[p.Name] = true
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	pending := false
	for _, n := range w.ScaleStrategy.WorkersToDelete {
		pending = pending || exists[n]
	}
	cur := w.Replicas
	switch {
	case pending:
		return nil // a scale-down under way: wait for KubeRay to delete them
	case len(w.ScaleStrategy.WorkersToDelete) > 0:
		w.ScaleStrategy.WorkersToDelete = nil // done: clear the list, as Ray's autoscaler does
	case cur != nil && *cur == target && int32(len(live)) <= target:
		return nil
	case int32(len(live)) > target:
		sort.Slice(live, func(i, j int) bool {
			a, b := live[i].CreationTimestamp, live[j].CreationTimestamp
			if !a.Equal(&b) {
				return b.Before(&a)
			}
			return live[i].Name > live[j].Name
		})
		for _, p := range live[:int32(len(live))-target] {
			w.ScaleStrategy.WorkersToDelete = append(w.ScaleStrategy.WorkersToDelete, p.Name)
		}
		w.Replicas = ptr.To(target)
	default:
		w.Replicas = ptr.To(target)
	}
	err := a.client.Update(ctx, rc, client.FieldOwner(AutoscalerFieldManager))
	if apierrors.IsConflict(err) {
		return nil // someone wrote first: look again next tick
	}
	return err
}
