package kube

import (
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SetListPage sets how many objects one page of s's ListLatest holds, so
// that a test lists a few objects in several pages.
func SetListPage(s *Store, n int64) { s.listPage = n }

// SetMaxLogRead sets how much of a logs answer is read, for a test of the
// bound that need not send a GiB; restore puts the bound back.
func SetMaxLogRead(n int64) (restore func()) {
	old := maxLogRead
	maxLogRead = n
	return func() { maxLogRead = old }
}

// CarryOver is carryOver, for a test of what an apply keeps of the
// RayCluster as it is.
func CarryOver(rc, cur *rayv1.RayCluster) { carryOver(rc, cur) }

// NameSurplus is nameSurplus.
func NameSurplus(rc *rayv1.RayCluster, pods []corev1.Pod) { nameSurplus(rc, pods) }

// KeepRemovedGroups is keepRemovedGroups with full as the RayCluster the
// API server has.
func KeepRemovedGroups(rc, full *rayv1.RayCluster, pods []corev1.Pod) {
	keepGroups(rc, full, removedRunning(rc, pods))
}

// Listed returns how many objects s's ListLatest has read from the API server.
func Listed(s *Store) int64 { return s.listed.Load() }

// Lingering is lingering, for a table test of which pods of a deleted
// cluster it still waits for.
var Lingering = lingering

// PodResources is podResources: what a pod requests (or is limited to),
// as Kubernetes counts it.
var PodResources = podResources

// QuotaRefusal is quotaRefusal.
var QuotaRefusal = quotaRefusal

// CapacityBytes is capacityBytes.
var CapacityBytes = capacityBytes

// SlimRayCluster is slimRayCluster, what the provisioner's informer keeps
// of a RayCluster.
func SlimRayCluster(rc *rayv1.RayCluster) *rayv1.RayCluster {
	return slimRayCluster(rc.DeepCopy())
}

// The readers of a cached RayCluster, for a test that they read the same
// of what the informer keeps (SlimRayCluster) as of the whole object.
var (
	ClusterObservation = clusterObservation
	Autoscaled         = autoscaled
	KubeRayOwes        = kubeRayOwes
	HeadReady          = headReady
	HeadService        = headService
	GenerationOf       = generationOf
)

// Takeover is takeover.
func Takeover(rc *rayv1.RayCluster, now time.Time) (time.Time, bool) { return takeover(rc, now) }

// InPlace is inPlace, for a provisioner in namespace ns with the resource
// groups' namespaces groupNS.
func InPlace(ns string, groupNS map[string]string, o client.Object, rg string) bool {
	return (&Provisioner{namespace: ns, groupNS: groupNS}).inPlace(o, rg)
}
