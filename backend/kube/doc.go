// Package kube renders dlc's clusters, jobs and storage mounts as
// Kubernetes and KubeRay objects and applies them through
// controller-runtime's client. Kubernetes types appear here and in dlctest
// only; the domain packages stay plain Go.
//
// The Render… functions are pure: values in, objects out, no I/O. What
// they need from outside (how a storage instance becomes a volume) comes
// in through small interfaces defined next to their use, such as
// VolumeResolver.
package kube
