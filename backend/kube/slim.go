package kube

import (
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	rayutils "github.com/ray-project/kuberay/ray-operator/controllers/ray/utils"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
// name and uid. Anything else passes unchanged.
func slimRayCluster(in any) (any, error) {
	rc, ok := in.(*rayv1.RayCluster)
	if !ok {
		return in, nil
	}
	m := &rc.ObjectMeta
	out := &rayv1.RayCluster{TypeMeta: rc.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion, Generation: m.Generation,
		DeletionTimestamp: m.DeletionTimestamp,
		Labels:            keep(m.Labels, KeyClusterID, KeyResourceGroup),
		Annotations:       keep(m.Annotations, KeyClusterID, KeyGeneration, rayutils.RayFTEnabledAnnotationKey),
	}}
	s, o := &rc.Spec, &out.Spec
	o.Suspend, o.EnableInTreeAutoscaling = s.Suspend, s.EnableInTreeAutoscaling
	if s.GcsFaultToleranceOptions != nil {
		o.GcsFaultToleranceOptions = &rayv1.GcsFaultToleranceOptions{}
	}
	if h := s.HeadGroupSpec.HeadService; h != nil && h.Name != "" && rc.Status.Head.ServiceName == "" {
		o.HeadGroupSpec.HeadService = &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: h.Name}}
	}
	for _, c := range s.HeadGroupSpec.Template.Spec.Containers {
		if c.Name != HeadContainer {
			continue
		}
		kept := corev1.Container{Name: HeadContainer, Image: c.Image}
		for _, e := range c.Env {
			if e.Name == "RAY_AUTH_MODE" || e.Name == "RAY_AUTH_TOKEN" {
				kept.Env = append(kept.Env, e)
			}
		}
		o.HeadGroupSpec.Template.Spec.Containers = append(o.HeadGroupSpec.Template.Spec.Containers, kept)
	}
	if len(s.WorkerGroupSpecs) > 0 {
		o.WorkerGroupSpecs = make([]rayv1.WorkerGroupSpec, len(s.WorkerGroupSpecs))
		for i, w := range s.WorkerGroupSpecs {
			o.WorkerGroupSpecs[i] = rayv1.WorkerGroupSpec{GroupName: w.GroupName, Replicas: w.Replicas,
				ScaleStrategy: rayv1.ScaleStrategy{WorkersToDelete: w.ScaleStrategy.WorkersToDelete}}
		}
	}
	st := &rc.Status
	out.Status = rayv1.RayClusterStatus{ObservedGeneration: st.ObservedGeneration, Head: st.Head}
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
		out.Status.Conditions = append(out.Status.Conditions, kept)
	}
	return out, nil
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

// keep returns the entries of m under keys, or nil when it has none.
func keep(m map[string]string, keys ...string) map[string]string {
	var out map[string]string
	for _, k := range keys {
		if v, ok := m[k]; ok {
			if out == nil {
				out = make(map[string]string, len(keys))
			}
			out[k] = v
		}
	}
	return out
}

// slimPod is the transform of the provisioner's pod informer: it keeps of
// a pod what the provisioner reads (podOf, podResources, podsOfIn,
// podRunning, nameSurplus, kubeRayOwes, driverGone, lingering) and drops
// the rest before the pod is cached: its managedFields, and of its spec
// everything but the node, the containers' names, images and resources,
// and the overhead; of its status all but the containers' images and ids. A Ray pod's environment, volumes, probes and
// commands were most of its bytes, and every replica cached every pod of
// every cluster (issue 43: 14 KiB a pod). A pod read past the cache (the
// live list of driverGone) is whole. Anything else passes unchanged.
func slimPod(in any) (any, error) {
	pod, ok := in.(*corev1.Pod)
	if !ok {
		return in, nil
	}
	m := &pod.ObjectMeta
	out := &corev1.Pod{TypeMeta: pod.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion, Generation: m.Generation,
		CreationTimestamp: m.CreationTimestamp, DeletionTimestamp: m.DeletionTimestamp,
		DeletionGracePeriodSeconds: m.DeletionGracePeriodSeconds,
		Labels:                     m.Labels, Annotations: m.Annotations, OwnerReferences: m.OwnerReferences, Finalizers: m.Finalizers,
	}}
	out.Spec.NodeName, out.Spec.Overhead = pod.Spec.NodeName, pod.Spec.Overhead
	out.Spec.Containers = slimContainers(pod.Spec.Containers)
	out.Spec.InitContainers = slimContainers(pod.Spec.InitContainers)
	s := &pod.Status
	out.Status = corev1.PodStatus{Phase: s.Phase, PodIP: s.PodIP, PodIPs: s.PodIPs, StartTime: s.StartTime,
		Reason: s.Reason, Message: s.Message, Conditions: s.Conditions} // kubeRayOwes: rayutils.IsRunningAndReady reads PodReady
	if len(s.ContainerStatuses) > 0 {
		out.Status.ContainerStatuses = make([]corev1.ContainerStatus, len(s.ContainerStatuses))
		for i, cs := range s.ContainerStatuses {
			out.Status.ContainerStatuses[i] = corev1.ContainerStatus{Name: cs.Name, State: cs.State, Ready: cs.Ready, RestartCount: cs.RestartCount}
		}
	}
	return out, nil
}

// slimContainers keeps each container's name, image, resources and
// restart policy (an init container restarted Always is a sidecar, whose
// requests add to the pod's: podResources).
func slimContainers(cs []corev1.Container) []corev1.Container {
	if len(cs) == 0 {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i, c := range cs {
		out[i] = corev1.Container{Name: c.Name, Image: c.Image, Resources: c.Resources, RestartPolicy: c.RestartPolicy}
	}
	return out
}
