package kubetest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/ray-project/kuberay/ray-operator/controllers/ray/utils"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Fake addresses the kubelet stand-in reports in pod status. They are for
// status only: nothing listens on them, and tests must send them no traffic.
const (
	// KubeletHostIP is the status.hostIP of every pod the stand-in runs.
	KubeletHostIP = "10.255.0.1"
	// KubeletNode is the node the stand-in binds pods to where they are
	// to linger once deleted ([Kubelet.Linger]); no Node object has it.
	KubeletNode = "dlctest-node"
	// kubeletPodNet is the first two octets of the pod IPs handed out.
	kubeletPodNet = "10.254"
)

// Kubelet is a kubelet stand-in for a control plane that has none (see
// [ControlPlane.StartKubelet]). It watches pods and:
//
//   - marks each new pod Running and Ready: status.phase Running; conditions
//     PodScheduled, Initialized, ContainersReady and Ready true; every
//     container running and ready, every init container terminated with
//     exit code 0; a podIP from 10.254.0.0/16 and hostIP [KubeletHostIP].
//     The addresses are fake: nothing listens on them;
//   - deletes pods that are being deleted (deletionTimestamp set, no
//     finalizers left) with grace period 0, as a kubelet does once the
//     containers stop. (The API server deletes a pod that was never bound to
//     a node at once, so this matters only for pods with spec.nodeName.)
//
// [Kubelet.Fail] fails a pod; [Kubelet.FailMatching] every pod of a
// selector, replacements included, until undone. No container runs and
// nothing is scheduled: a pod's spec is not looked at beyond its container
// names.
type Kubelet struct {
	*standIn
	// rayPods, when set, hears of every Ray head and worker pod's add,
	// update and delete (gone), in the informer's order.
	rayPods func(pod *corev1.Pod, gone bool)

	mu     sync.Mutex
	nextIP int
	ips    map[types.UID]string
	marked int
	breaks map[int]podBreak
	nextB  int
	runs   map[types.UID]*PodRun
	linger map[string]time.Duration // namespace → how long a deleted pod still runs
	dying  map[types.UID]dying      // the deleted pods that linger
}

// dying is a deleted pod that lingers: its key, and when the stand-in
// first saw it deleted.
type dying struct {
	key   types.NamespacedName
	since time.Time
}

// PodRun is one pod's stretch of running as the stand-in made it run:
// from the moment the stand-in's write of its Running status returned to
// the moment it saw the pod deleted, or wrote it failed (End zero while it
// runs). What metering is checked against.
type PodRun struct {
	Namespace, Name string
	UID             types.UID
	Labels          map[string]string
	// Requests are the pod's containers' requests, summed.
	Requests   corev1.ResourceList
	Start, End time.Time
}

// Runs returns every pod run the stand-in has made so far, by start.
func (k *Kubelet) Runs() []PodRun {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]PodRun, 0, len(k.runs))
	for _, r := range k.runs {
		c := *r
		c.Labels = maps.Clone(r.Labels)
		c.Requests = r.Requests.DeepCopy()
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b PodRun) int { return a.Start.Compare(b.Start) })
	return out
}

// ran records that pod runs from now.
func (k *Kubelet) ran(pod *corev1.Pod) {
	req := corev1.ResourceList{}
	for _, c := range pod.Spec.Containers {
		for name, q := range c.Resources.Requests {
			sum := req[name]
			sum.Add(q)
			req[name] = sum
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.runs[pod.UID]; !ok {
		k.runs[pod.UID] = &PodRun{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, Labels: maps.Clone(pod.Labels),
			Requests: req, Start: time.Now()}
	}
}

// stopped records that pod uid stopped running now, if it ran.
func (k *Kubelet) stopped(uid types.UID) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.dying, uid)
	if r, ok := k.runs[uid]; ok && r.End.IsZero() {
		r.End = time.Now()
	}
}

// podBreak is a rule of FailMatching.
type podBreak struct {
	namespace string
	sel       labels.Selector
	reason    string
}

// StartKubelet starts a kubelet stand-in ([Kubelet]) for the pods in the
// given namespaces (all namespaces when none are given) and stops it when
// t's test ends. Tests sharing a control plane should each pass their own
// namespace, so that one test's stand-in does not touch another's pods.
// Pods that run have a garbage collector too: it starts the control
// plane's controllers ([ControlPlane.StartControllers]), so that a deleted
// RayCluster's pods go after it, as on a real cluster.
//
//	cp := kubetest.StartControlPlane(t)
//	ns := cp.NewNamespace(t)
//	kubelet := cp.StartKubelet(t, ns)
//	// ... pods created in ns become Running and Ready ...
//	err := kubelet.Fail(ns, "head-pod", "OOMKilled")
func (cp *ControlPlane) StartKubelet(t TestingT, namespaces ...string) *Kubelet {
	t.Helper()
	cp.StartControllers(t)
	k, err := startKubelet(cp, namespaces, nil)
	if err != nil {
		t.Fatalf("dlctest: kubelet: %v", err)
		return nil
	}
	t.Cleanup(k.stop)
	return k
}

func startKubelet(cp *ControlPlane, namespaces []string, rayPods func(pod *corev1.Pod, gone bool)) (*Kubelet, error) {
	si, err := newStandIn(cp, "dlctest-kubelet", namespaces, nil)
	if err != nil {
		return nil, err
	}
	k := &Kubelet{standIn: si, rayPods: rayPods, ips: map[types.UID]string{}, breaks: map[int]podBreak{}, runs: map[types.UID]*PodRun{},
		linger: map[string]time.Duration{}, dying: map[types.UID]dying{}}
	enqueue := func(obj any) {
		if pod, ok := obj.(*corev1.Pod); ok {
			k.add(pod)
			k.rayPodEvent(pod, false)
		}
	}
	if err := k.handle(&corev1.Pod{}, toolscache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				k.stopped(pod.UID)
				k.rayPodEvent(pod, true)
			}
		},
	}); err != nil {
		si.cancel()
		return nil, err
	}
	if err := k.run("the pod informer", k.sync); err != nil {
		return nil, err
	}
	return k, nil
}

// rayPodEvent tells k.rayPods of a Ray head or worker pod's event (by
// its label ray.io/node-type).
func (k *Kubelet) rayPodEvent(pod *corev1.Pod, gone bool) {
	if k.rayPods == nil {
		return
	}
	switch rayv1.RayNodeType(pod.Labels[utils.RayNodeTypeLabelKey]) {
	case rayv1.HeadNode, rayv1.WorkerNode:
		k.rayPods(pod, gone)
	}
}

// Marked reports how many times the stand-in has marked a pod Running and
// Ready.
func (k *Kubelet) Marked() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.marked
}

// sync brings one pod forward: a deleted pod goes, a new one runs.
func (k *Kubelet) sync(ctx context.Context, key types.NamespacedName) error {
	var pod corev1.Pod
	if err := k.client.Get(ctx, key, &pod); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	if pod.DeletionTimestamp != nil {
		if len(pod.Finalizers) > 0 {
			return nil // someone else's to remove; a later update brings it back
		}
		if left := k.lingers(&pod); left > 0 {
			k.queue.AddAfter(key, left) // its containers still run out their grace
			return nil
		}
		err := k.client.Delete(ctx, &pod, client.GracePeriodSeconds(0),
			client.Preconditions{UID: &pod.UID})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		return err
	}
	if reason, broken := k.broken(&pod); broken {
		if pod.Status.Phase == corev1.PodFailed {
			return nil
		}
		failPod(&pod, reason)
		err := k.client.Status().Update(ctx, &pod)
		if err == nil {
			k.stopped(pod.UID)
		}
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	if pod.Status.Phase != "" && pod.Status.Phase != corev1.PodPending {
		return nil // Running already, or failed or succeeded: left alone
	}
	if pod.Spec.NodeName == "" && k.lingerOf(pod.Namespace) > 0 {
		// Bound, as a scheduler binds it: the API server deletes a pod
		// never bound at once, and only a bound one can linger.
		b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
			Target: corev1.ObjectReference{Kind: "Node", Name: KubeletNode}}
		err := k.client.SubResource("binding").Create(ctx, &pod, b)
		if err == nil || apierrors.IsNotFound(err) {
			return nil // the binding's update brings it back here
		}
		return err // a conflict: read again
	}
	k.markRunning(&pod)
	err := k.client.Status().Update(ctx, &pod)
	if apierrors.IsConflict(err) {
		return err // retried from a fresh read
	}
	if err == nil {
		k.ran(&pod)
		k.mu.Lock()
		k.marked++
		k.mu.Unlock()
	}
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// podIP hands out a fake pod IP, the same one for a pod's lifetime.
func (k *Kubelet) podIP(uid types.UID) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if ip, ok := k.ips[uid]; ok {
		return ip
	}
	k.nextIP++
	ip := fmt.Sprintf("%s.%d.%d", kubeletPodNet, (k.nextIP/250)%250, k.nextIP%250+1)
	k.ips[uid] = ip
	return ip
}

func (k *Kubelet) markRunning(pod *corev1.Pod) {
	now := metav1.Now()
	ip := k.podIP(pod.UID)
	st := &pod.Status
	st.Phase = corev1.PodRunning
	st.HostIP, st.HostIPs = KubeletHostIP, []corev1.HostIP{{IP: KubeletHostIP}}
	st.PodIP, st.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	st.StartTime = &now
	st.Reason, st.Message = "", ""
	st.Conditions = nil
	for _, c := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		st.Conditions = append(st.Conditions, corev1.PodCondition{Type: c, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	st.InitContainerStatuses = nil
	for _, c := range pod.Spec.InitContainers {
		st.InitContainerStatuses = append(st.InitContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: c.Image, ContainerID: containerID(pod, c.Name),
			Ready: true,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 0, Reason: "Completed", StartedAt: now, FinishedAt: now,
			}},
		})
	}
	st.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: c.Image, ContainerID: containerID(pod, c.Name),
			Ready: true, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
}

func containerID(pod *corev1.Pod, name string) string {
	return "dlctest://" + string(pod.UID) + "/" + name
}

// Fail fails the pod namespace/name as a kubelet does when its containers
// exit and it will not restart them: status.phase Failed with the reason
// and a message; conditions Ready and ContainersReady false; every container
// terminated with exit code 1 and the reason (e.g. "OOMKilled", "Error").
// The stand-in leaves a failed pod alone from then on. Fail returns the
// API server's error, e.g. NotFound.
func (k *Kubelet) Fail(namespace, name, reason string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var pod corev1.Pod
		if err := k.client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &pod); err != nil {
			return err
		}
		failPod(&pod, reason)
		if err := k.client.Status().Update(ctx, &pod); err != nil {
			return err
		}
		k.stopped(pod.UID)
		return nil
	})
}

// FailMatching fails, as Fail does, every pod in namespace whose labels
// match sel: those there now and every one created until the returned
// function is called (after which new pods run again; failed ones stay
// failed). A controller that replaces a failed pod sees each replacement
// fail too, e.g. a head pod that keeps crashing:
//
//	undo := kubelet.FailMatching(ns, labels.SelectorFromSet(labels.Set{
//		"ray.io/cluster": rc.Name, "ray.io/node-type": "head"}), "CrashLoopBackOff")
//	defer undo()
func (k *Kubelet) FailMatching(namespace string, sel labels.Selector, reason string) (undo func()) {
	k.mu.Lock()
	id := k.nextB
	k.nextB++
	k.breaks[id] = podBreak{namespace: namespace, sel: sel, reason: reason}
	k.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var pods corev1.PodList
	if err := k.client.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabelsSelector{Selector: sel}); err == nil {
		for _, p := range pods.Items {
			k.queue.Add(types.NamespacedName{Namespace: p.Namespace, Name: p.Name})
		}
	}
	return func() {
		k.mu.Lock()
		delete(k.breaks, id)
		k.mu.Unlock()
	}
}

// Linger makes the pods of namespace that are deleted keep running for d
// after the stand-in first sees them deleted, before it removes them: a
// real kubelet stops a deleted pod's containers, which run out their
// termination grace (terminationGracePeriodSeconds, 30 s unless the pod
// says otherwise), and the pod keeps its node's resources meanwhile; a
// node that does not answer keeps it longer still (until the pod garbage
// collector, which this control plane does not run, takes it): d is not
// bounded by the grace. By default the stand-in removes a deleted pod at
// once. So that a pod can
// linger, the stand-in binds the namespace's new pods to the node
// [KubeletNode] (spec.nodeName), as a scheduler would: the API server
// deletes a pod that was never bound at once. undo ends it, and the pods
// lingering then go at once.
func (k *Kubelet) Linger(namespace string, d time.Duration) (undo func()) {
	k.mu.Lock()
	k.linger[namespace] = d
	k.mu.Unlock()
	return func() {
		k.mu.Lock()
		delete(k.linger, namespace)
		var now []types.NamespacedName
		for _, p := range k.dying {
			if p.key.Namespace == namespace {
				now = append(now, p.key)
			}
		}
		k.mu.Unlock()
		for _, key := range now {
			k.queue.Add(key)
		}
	}
}

// lingerOf returns how long namespace's deleted pods linger (Linger).
func (k *Kubelet) lingerOf(namespace string) time.Duration {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.linger[namespace]
}

// lingers returns how much longer deleted pod keeps running (Linger), 0
// when it is to go now.
func (k *Kubelet) lingers(pod *corev1.Pod) time.Duration {
	k.mu.Lock()
	defer k.mu.Unlock()
	d := k.linger[pod.Namespace]
	p, seen := k.dying[pod.UID]
	if d <= 0 && !seen {
		return 0
	}
	if !seen {
		p = dying{key: types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}, since: time.Now()}
		k.dying[pod.UID] = p
	}
	if left := time.Until(p.since.Add(d)); left > 0 {
		return left
	}
	delete(k.dying, pod.UID)
	return 0
}

// broken reports whether a FailMatching rule holds pod, and its reason.
func (k *Kubelet) broken(pod *corev1.Pod) (string, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, b := range k.breaks {
		if b.namespace == pod.Namespace && b.sel.Matches(labels.Set(pod.Labels)) {
			return b.reason, true
		}
	}
	return "", false
}

func failPod(pod *corev1.Pod, reason string) {
	now := metav1.Now()
	st := &pod.Status
	st.Phase = corev1.PodFailed
	st.Reason = reason
	st.Message = "dlctest: the kubelet stand-in failed the pod: " + reason
	for _, c := range []corev1.PodConditionType{corev1.ContainersReady, corev1.PodReady} {
		setPodCondition(st, corev1.PodCondition{
			Type: c, Status: corev1.ConditionFalse, Reason: "PodFailed", LastTransitionTime: now,
		})
	}
	st.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		started := now
		st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: c.Image, ContainerID: containerID(pod, c.Name),
			Ready: false, Started: ptr.To(false),
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 1, Reason: reason, Message: st.Message,
				StartedAt: started, FinishedAt: now, ContainerID: containerID(pod, c.Name),
			}},
		})
	}
}

func setPodCondition(st *corev1.PodStatus, c corev1.PodCondition) {
	for i := range st.Conditions {
		if st.Conditions[i].Type == c.Type {
			st.Conditions[i] = c
			return
		}
	}
	st.Conditions = append(st.Conditions, c)
}
