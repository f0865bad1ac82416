// Package kube renders dlc's clusters, jobs and storage mounts as
// Kubernetes and KubeRay objects and applies them through
// controller-runtime's client. Kubernetes types appear here and in dlctest
// only; the domain packages stay plain Go.
//
// The Render… functions are pure: values in, objects out, no I/O. What
// they need from outside (how a storage instance becomes a volume) comes
// in through small interfaces defined next to their use, such as
// VolumeResolver, and through RenderOptions.
//
// RenderRayCluster renders a cluster as a RayCluster, RenderRayJob an
// on-demand run as a RayJob with its own cluster; runs on an existing
// cluster go to its Ray Jobs API instead. Object names derive from ids
// (RayClusterName, RayJobName); the ids and display names are in the
// labels and annotations named by the Key… constants. The rendered
// objects pass KubeRay v1.5.0's own validation, which its operator runs
// in the controller rather than at admission.
//
// A high-availability head renders as KubeRay's GCS fault tolerance: the
// GCS state lives in an external Redis and KubeRay restarts a failed head
// from it. KubeRay keeps no standby head (kuberay#522), so a takeover
// lasts as long as a new head pod takes to start, not the product's
// "usually within 30 s" of an active–standby pair.
package kube
