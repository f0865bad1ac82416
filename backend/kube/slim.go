package kube

import (
	"slices"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	rayutils "github.com/ray-project/kuberay/ray-operator/controllers/ray/utils"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/aidlc/dlc/quota"
)

// slimRayCluster is the transform of the provisioner's RayCluster
// informer. Every replica caches every RayCluster of the platform (issue
// 43), so it builds a new RayCluster of only what is read of a cached one,
// and drops the rest — whatever KubeRay adds later too:
//
//   - metadata: the name, namespace, uid, resourceVersion (apply waits for
//     it), generation and deletionTimestamp; of the labels
//     KeyClusterID (the indexCluster index, changed, Observe) and
//     KeyResourceGroup (inPlace); of the annotations KeyClusterID
//     (rayCluster), KeyGeneration (generationOf) and KubeRay's
//     ray.io/ft-enabled (the test loop's head stand-in,
//     rayutils.IsGCSFaultToleranceEnabled). The informer's label selector
//     is the API server's: the managed-by label is not read here;
//   - spec: suspend and enableInTreeAutoscaling (clusterObservation,
//     autoscaled, nameSurplus, kubeRayOwes, leaveOldNamespace); whether
//     gcsFaultToleranceOptions is set (takeover), not what it holds; the
//     head service's name while the status names none (headService); of
//     the head's pod template only
//     the head container's name, image (the test loop's head stand-in
//     plays its Ray version) and RAY_AUTH_MODE and RAY_AUTH_TOKEN
//     (RayTokenOf); of each worker group its name, replicas and
//     scaleStrategy.workersToDelete (autoscaled, carryOver: nameSurplus
//     reads the rendered RayCluster or the live one, not the cached one);
//   - status: observedGeneration (clusterObservation), the head's service
//     name (headService, before the spec's head service, which is kept only
//     without it) and the head's addresses (not read here: what an
//     Options.Dashboard may read), and the conditions read: HeadPodReady
//     with its status, transition time, reason and message (takeover,
//     clusterObservation); RayClusterProvisioned, RayClusterSuspending and
//     RayClusterSuspended only when true, the only way they are read
//     (meta.IsStatusConditionTrue); ReplicaFailure only when true, with its
//     message (quotaRefusal).
//
// What writes a RayCluster whole reads it from the API server first
// (resizeJobCluster); an apply renders its own; delete sends only the
// name and uid.
func slimRayCluster(rc *rayv1.RayCluster) *rayv1.RayCluster {
	return cachedRayClusterOf(rc).rayCluster()
}

// cachedRayCluster is what the provisioner's RayCluster informer keeps of
// a RayCluster in place of the object (cacheRayCluster), and what its
// index holds (Provisioner.rcs): what slimRayCluster keeps, in fields of
// its own. A rayv1.RayCluster, however empty, is 1.6 KiB and each worker
// group's 0.9 KiB more (their pod templates); this is a third of that
// (issue 43). rayCluster returns it as the RayCluster the readers read. A
// cachedRayCluster is never changed once made.
type cachedRayCluster struct {
	metav1.TypeMeta
	metav1.ObjectMeta // without labels and annotations: kept is what of them is read
	kept              [len(rcLabelsRead) + len(rcAnnotationsRead)]string
	suspend           *bool
	autoscaling       *bool
	faultTolerant     bool // spec.gcsFaultToleranceOptions is set
	headContainer     bool // the head's pod template has the HeadContainer
	headImage         string
	headService       string          // the spec's head service name, while the status names none
	headEnv           []corev1.EnvVar // RAY_AUTH_MODE and RAY_AUTH_TOKEN
	workers           []cachedWorkerGroup
	observed          int64
	head              rayv1.HeadInfo
	conditions        []metav1.Condition
}

// cachedWorkerGroup is what a cachedRayCluster keeps of a worker group.
type cachedWorkerGroup struct {
	name     string
	replicas *int32
	toDelete []string
}

// rcLabelsRead and rcAnnotationsRead are the keys read of a cached
// RayCluster's labels and annotations. A RayCluster's label or
// annotation of these keys is never empty (the SDK's and KubeRay's): an
// empty value is one it has not.
var (
	rcLabelsRead      = [...]string{KeyClusterID, KeyResourceGroup}
	rcAnnotationsRead = [...]string{KeyClusterID, KeyGeneration, rayutils.RayFTEnabledAnnotationKey}
)

// cluster returns the id of the cluster c is a RayCluster of (its
// KeyClusterID label), or "".
func (c *cachedRayCluster) cluster() string { return c.kept[0] }

// DeepCopyObject returns a copy of c that shares what is never changed.
func (c *cachedRayCluster) DeepCopyObject() runtime.Object {
	out := *c
	out.ObjectMeta = *c.ObjectMeta.DeepCopy()
	return &out
}

// cacheRayCluster is the transform of the provisioner's RayCluster
// informer: a RayCluster becomes its cachedRayCluster. Anything else (one
// handed back on a relist, a tombstone) passes unchanged.
func cacheRayCluster(in any) (any, error) {
	if rc, ok := in.(*rayv1.RayCluster); ok {
		return cachedRayClusterOf(rc), nil
	}
	return in, nil
}

// cachedRayClusterOf is what the RayCluster informer keeps of rc.
func cachedRayClusterOf(rc *rayv1.RayCluster) *cachedRayCluster {
	m := &rc.ObjectMeta
	out := &cachedRayCluster{TypeMeta: rc.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion, Generation: m.Generation,
		DeletionTimestamp: m.DeletionTimestamp,
	}}
	for i, k := range rcLabelsRead {
		out.kept[i] = m.Labels[k]
	}
	for i, k := range rcAnnotationsRead {
		out.kept[len(rcLabelsRead)+i] = m.Annotations[k]
	}
	s := &rc.Spec
	out.suspend, out.autoscaling, out.faultTolerant = s.Suspend, s.EnableInTreeAutoscaling, s.GcsFaultToleranceOptions != nil
	if h := s.HeadGroupSpec.HeadService; h != nil && h.Name != "" && rc.Status.Head.ServiceName == "" {
		out.headService = h.Name
	}
	for _, c := range s.HeadGroupSpec.Template.Spec.Containers {
		if c.Name != HeadContainer {
			continue
		}
		out.headContainer, out.headImage = true, c.Image
		for _, e := range c.Env {
			if e.Name == "RAY_AUTH_MODE" || e.Name == "RAY_AUTH_TOKEN" {
				out.headEnv = append(out.headEnv, e)
			}
		}
		break // the first: a second of the name is an invalid pod
	}
	if len(s.WorkerGroupSpecs) > 0 {
		out.workers = make([]cachedWorkerGroup, len(s.WorkerGroupSpecs))
		for i, w := range s.WorkerGroupSpecs {
			out.workers[i] = cachedWorkerGroup{name: w.GroupName, replicas: w.Replicas, toDelete: w.ScaleStrategy.WorkersToDelete}
		}
	}
	st := &rc.Status
	out.observed, out.head = st.ObservedGeneration, st.Head
	for _, c := range st.Conditions {
		typ, read := readCondition(c.Type) // the constant's string, not a copy of its own in every object
		if !read || (typ != string(rayv1.HeadPodReady) && c.Status != metav1.ConditionTrue) {
			continue // but HeadPodReady's, read as meta.IsStatusConditionTrue: one not true reads as one missing
		}
		kept := metav1.Condition{Type: typ, Status: conditionStatus(c.Status)}
		switch typ {
		case string(rayv1.HeadPodReady):
			kept.LastTransitionTime, kept.Reason, kept.Message = c.LastTransitionTime, c.Reason, c.Message
		case string(rayv1.RayClusterReplicaFailure):
			kept.Message = c.Message
		}
		out.conditions = append(out.conditions, kept)
	}
	return out
}

// rayCluster returns c as a RayCluster of its own (nothing shared with c
// that a reader could change): the fields slimRayCluster's doc lists.
func (c *cachedRayCluster) rayCluster() *rayv1.RayCluster {
	out := &rayv1.RayCluster{TypeMeta: c.TypeMeta, ObjectMeta: *c.ObjectMeta.DeepCopy()}
	out.Labels = kept(c.kept[:len(rcLabelsRead)], rcLabelsRead[:])
	out.Annotations = kept(c.kept[len(rcLabelsRead):], rcAnnotationsRead[:])
	o := &out.Spec
	if c.suspend != nil {
		o.Suspend = new(*c.suspend)
	}
	if c.autoscaling != nil {
		o.EnableInTreeAutoscaling = new(*c.autoscaling)
	}
	if c.faultTolerant {
		o.GcsFaultToleranceOptions = &rayv1.GcsFaultToleranceOptions{}
	}
	if c.headService != "" {
		o.HeadGroupSpec.HeadService = &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: c.headService}}
	}
	if c.headContainer {
		h := corev1.Container{Name: HeadContainer, Image: c.headImage}
		for _, e := range c.headEnv {
			h.Env = append(h.Env, *e.DeepCopy())
		}
		o.HeadGroupSpec.Template.Spec.Containers = []corev1.Container{h}
	}
	if len(c.workers) > 0 {
		o.WorkerGroupSpecs = make([]rayv1.WorkerGroupSpec, len(c.workers))
		for i, w := range c.workers {
			g := rayv1.WorkerGroupSpec{GroupName: w.name, ScaleStrategy: rayv1.ScaleStrategy{WorkersToDelete: slices.Clone(w.toDelete)}}
			if w.replicas != nil {
				g.Replicas = new(*w.replicas)
			}
			o.WorkerGroupSpecs[i] = g
		}
	}
	out.Status = rayv1.RayClusterStatus{ObservedGeneration: c.observed, Head: c.head}
	for _, cond := range c.conditions {
		out.Status.Conditions = append(out.Status.Conditions, *cond.DeepCopy())
	}
	return out
}

// readCondition returns t, the constant's string, when conditions of type
// t are read of a cached RayCluster.
func readCondition(t string) (string, bool) {
	switch rayv1.RayClusterConditionType(t) {
	case rayv1.RayClusterProvisioned:
		return string(rayv1.RayClusterProvisioned), true
	case rayv1.RayClusterSuspending:
		return string(rayv1.RayClusterSuspending), true
	case rayv1.RayClusterSuspended:
		return string(rayv1.RayClusterSuspended), true
	case rayv1.HeadPodReady:
		return string(rayv1.HeadPodReady), true
	case rayv1.RayClusterReplicaFailure:
		return string(rayv1.RayClusterReplicaFailure), true
	}
	return "", false
}

// conditionStatusOf is s, the constant's string of a pod's condition
// status when it is one of the three.
func conditionStatusOf(s corev1.ConditionStatus) corev1.ConditionStatus {
	return corev1.ConditionStatus(conditionStatus(metav1.ConditionStatus(s)))
}

// conditionStatus is s, the constant's string when it is one of the three
// (not a copy of its own in every cached object).
func conditionStatus(s metav1.ConditionStatus) metav1.ConditionStatus {
	switch s {
	case metav1.ConditionTrue:
		return metav1.ConditionTrue
	case metav1.ConditionFalse:
		return metav1.ConditionFalse
	case metav1.ConditionUnknown:
		return metav1.ConditionUnknown
	}
	return s
}

// cachedPod is what the provisioner's pod informer keeps of a pod in
// place of the pod (cachePod), and what its pod index holds
// (clusterIndex): what the provisioner reads of a pod (podOf,
// podResources, podsOfIn, podRunning, changed, nameSurplus, kubeRayOwes,
// driverGone, lingering) and nothing else. Every replica caches every pod
// of every cluster: a Ray pod's environment, volumes, probes and commands,
// its managedFields, KubeRay's labels and each container's resource lists
// were most of its bytes (issue 43: 14 KiB a pod), and a corev1.Pod,
// however empty, is 2 KiB, its status alone 0.3 KiB and each container's
// status 0.3 KiB more. It keeps:
//
//   - of the metadata, the name, namespace, UID, resourceVersion,
//     generation, times, owner references and finalizers, the labels in
//     podLabelsRead and the annotations in podAnnotationsRead;
//   - of the spec, the node, and of the one container podOf takes the
//     image of (named HeadContainer or WorkerContainer, or the only one)
//     the name and image; and the pod's requests and limits as
//     podResources counts them (its containers, sidecars and init
//     containers, and its overhead);
//   - of the status, the phase, the IPs (hasIP), the Ready condition's
//     status (rayutils.IsRunningAndReady) and when the HeadContainer
//     started running, if it is (driverGone).
//
// pod returns it as a corev1.Pod that the readers read as the whole pod.
// A cachedPod is never changed once made.
type cachedPod struct {
	metav1.TypeMeta
	metav1.ObjectMeta // without labels and annotations: kept is what of them is read
	kept              [len(podLabelsRead) + len(podAnnotationsRead)]string
	node, container   string
	image             string
	requests, limits  quota.Resources
	phase             corev1.PodPhase
	ip                string
	otherIPs          []corev1.PodIP         // status.podIPs but ip
	ready             corev1.ConditionStatus // of the Ready condition: a true one if any; "" when it has none
	headRunning       *metav1.Time           // when the HeadContainer's running state began; nil when not running
}

// cluster returns the id of the cluster c is a pod of (its KeyClusterID
// label), or "".
func (c *cachedPod) cluster() string { return c.kept[0] }

// DeepCopyObject returns a copy of c that shares what is never changed.
func (c *cachedPod) DeepCopyObject() runtime.Object {
	out := *c
	out.ObjectMeta = *c.ObjectMeta.DeepCopy()
	return &out
}

// cachedPodOf is what the pod informer keeps of pod.
func cachedPodOf(pod *corev1.Pod) *cachedPod {
	m := &pod.ObjectMeta
	out := &cachedPod{ObjectMeta: metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion, Generation: m.Generation,
		CreationTimestamp: m.CreationTimestamp, DeletionTimestamp: m.DeletionTimestamp,
		DeletionGracePeriodSeconds: m.DeletionGracePeriodSeconds,
		OwnerReferences:            m.OwnerReferences, Finalizers: m.Finalizers,
	}, node: pod.Spec.NodeName,
		requests: podResources(pod, func(r corev1.ResourceRequirements) corev1.ResourceList { return r.Requests }),
		limits:   podResources(pod, func(r corev1.ResourceRequirements) corev1.ResourceList { return r.Limits }),
	}
	out.TypeMeta = pod.TypeMeta
	for i, k := range podLabelsRead {
		out.kept[i] = m.Labels[k]
	}
	for i, k := range podAnnotationsRead {
		out.kept[len(podLabelsRead)+i] = m.Annotations[k]
	}
	if i := rayContainer(pod); i >= 0 {
		out.container, out.image = pod.Spec.Containers[i].Name, pod.Spec.Containers[i].Image
	}
	s := &pod.Status
	out.phase, out.ip = s.Phase, s.PodIP
	for _, a := range s.PodIPs {
		if a.IP != s.PodIP {
			out.otherIPs = append(out.otherIPs, a)
		}
	}
	for _, c := range s.Conditions {
		if c.Type == corev1.PodReady { // kubeRayOwes: rayutils.IsRunningAndReady reads it (any true one)
			out.ready = conditionStatusOf(c.Status)
			if c.Status == corev1.ConditionTrue {
				break
			}
		}
	}
	for _, cs := range s.ContainerStatuses {
		if cs.Name == HeadContainer { // driverGone reads the first
			if r := cs.State.Running; r != nil {
				out.headRunning = new(r.StartedAt)
			}
			break
		}
	}
	return out
}

// pod returns c as a pod of its own (nothing shared with c): one
// container with the pod's image and, as its requests and limits, the
// pod's, so that podResources of it is that of the whole pod.
func (c *cachedPod) pod() *corev1.Pod {
	out := &corev1.Pod{TypeMeta: c.TypeMeta, ObjectMeta: *c.ObjectMeta.DeepCopy()}
	out.Labels = kept(c.kept[:len(podLabelsRead)], podLabelsRead[:])
	out.Annotations = kept(c.kept[len(podLabelsRead):], podAnnotationsRead[:])
	out.Spec.NodeName = c.node
	out.Spec.Containers = []corev1.Container{{Name: c.container, Image: c.image, Resources: corev1.ResourceRequirements{
		Requests: resourceList(c.requests), Limits: resourceList(c.limits)}}}
	st := &out.Status
	st.Phase, st.PodIP = c.phase, c.ip
	if c.ip != "" || len(c.otherIPs) > 0 {
		if c.ip != "" {
			st.PodIPs = []corev1.PodIP{{IP: c.ip}}
		}
		st.PodIPs = append(st.PodIPs, c.otherIPs...)
	}
	if c.ready != "" {
		st.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: c.ready}}
	}
	if c.headRunning != nil {
		st.ContainerStatuses = []corev1.ContainerStatus{{Name: HeadContainer,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: *c.headRunning}}}}
	}
	return out
}

// cachePod is the transform of the provisioner's pod informer: a pod
// becomes its cachedPod. Anything else (a cachedPod handed back on a
// relist, a tombstone) passes unchanged.
func cachePod(in any) (any, error) {
	if pod, ok := in.(*corev1.Pod); ok {
		return cachedPodOf(pod), nil
	}
	return in, nil
}

// podLabelsRead and podAnnotationsRead are the keys the provisioner reads
// of a cached pod's labels (the cluster index, podsOfIn, podRunning,
// podOf, nameSurplus, kubeRayOwes) and annotations (podOf). A pod's
// label or annotation is never empty (KubeRay's and the SDK's): an empty
// value is one the pod has not.
var (
	podLabelsRead      = [...]string{KeyClusterID, KeyResourceGroup, KeyNodeGroup, rayLabelNodeType, rayLabelGroup}
	podAnnotationsRead = [...]string{KeyNodeSpec}
)

// kept returns the map of keys[i] to values[i], for each value not empty,
// or nil when there is none.
func kept(values []string, keys []string) map[string]string {
	var out map[string]string
	for i, v := range values {
		if v != "" {
			if out == nil {
				out = make(map[string]string, len(values))
			}
			out[keys[i]] = v
		}
	}
	return out
}

// rayContainer returns the index of the container podOf takes a pod's
// image from, or -1.
func rayContainer(pod *corev1.Pod) int {
	for i, c := range pod.Spec.Containers {
		if c.Name == HeadContainer || c.Name == WorkerContainer || len(pod.Spec.Containers) == 1 {
			return i
		}
	}
	return -1
}

// resourceList is r as the resource list resourcesOf reads back as r (no
// entry for what is zero).
func resourceList(r quota.Resources) corev1.ResourceList {
	var out corev1.ResourceList
	add := func(name corev1.ResourceName, q *resource.Quantity) {
		if out == nil {
			out = corev1.ResourceList{}
		}
		out[name] = *q
	}
	if r.MilliCPU != 0 {
		add(corev1.ResourceCPU, resource.NewMilliQuantity(r.MilliCPU, resource.DecimalSI))
	}
	if r.Memory != 0 {
		add(corev1.ResourceMemory, resource.NewQuantity(r.Memory, resource.BinarySI))
	}
	if r.GPU != 0 {
		add(GPUResource, resource.NewQuantity(r.GPU, resource.DecimalSI))
	}
	return out
}
