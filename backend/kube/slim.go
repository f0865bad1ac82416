package kube

import (
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// slimRayCluster is the transform of the provisioner's RayCluster
// informer: it drops the managedFields and the pod templates of the head
// and worker groups, which were most of a RayCluster's bytes in every
// replica (issue 43), and keeps of them what the provisioner reads of a
// cached RayCluster: each template's labels and annotations, and the
// head container's name, image and Ray token settings (RayTokenOf). The rest of
// the spec, the metadata and the status are kept. What writes a
// RayCluster whole reads it from the API server first
// (resizeJobCluster); an apply renders its own. Anything else passes
// unchanged.
func slimRayCluster(in any) (any, error) {
	rc, ok := in.(*rayv1.RayCluster)
	if !ok {
		return in, nil
	}
	rc.ManagedFields = nil
	head := slimTemplate(rc.Spec.HeadGroupSpec.Template)
	for _, c := range rc.Spec.HeadGroupSpec.Template.Spec.Containers {
		if c.Name != HeadContainer {
			continue
		}
		kept := corev1.Container{Name: c.Name, Image: c.Image} // the image: the test loop's head stand-in plays its Ray version
		for _, e := range c.Env {
			if e.Name == "RAY_AUTH_MODE" || e.Name == "RAY_AUTH_TOKEN" {
				kept.Env = append(kept.Env, e)
			}
		}
		head.Spec.Containers = append(head.Spec.Containers, kept)
	}
	rc.Spec.HeadGroupSpec.Template = head
	for i := range rc.Spec.WorkerGroupSpecs {
		rc.Spec.WorkerGroupSpecs[i].Template = slimTemplate(rc.Spec.WorkerGroupSpecs[i].Template)
	}
	return rc, nil
}

// slimTemplate keeps a pod template's labels and annotations.
func slimTemplate(t corev1.PodTemplateSpec) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: t.Labels, Annotations: t.Annotations}}
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
