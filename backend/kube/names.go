package kube

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Name limits of the KubeRay objects, as KubeRay v1.5.0 checks them
// (utils.MaxRayClusterNameLength and MaxRayJobNameLength): a RayJob's
// cluster is named after the job with a 6-character suffix.
const (
	MaxRayClusterNameLen = 53
	MaxRayJobNameLen     = 47
)

// Keys of the labels and annotations that the rendered objects carry.
// Labels hold ids, so that objects can be selected by them; annotations
// hold what is not a valid label value, such as a display name in
// Chinese.
const (
	// KeyClusterID is the cluster's id: an annotation of a RayCluster,
	// and a label of it and of its pods when the id is a valid label value
	// (every id dlc makes is).
	KeyClusterID = "dlc.aidlc.io/cluster-id"
	// KeyRunID is the run's id on a RayJob and its pods, as KeyClusterID.
	KeyRunID = "dlc.aidlc.io/run-id"
	// KeyJobID is the id of the run's job config on a RayJob, as KeyClusterID.
	KeyJobID = "dlc.aidlc.io/job-id"
	// KeyName is an annotation holding the display name of the cluster or
	// job config, as the user wrote it.
	KeyName = "dlc.aidlc.io/name"
	// KeyGeneration is an annotation of a RayCluster holding the
	// cluster.Cluster.Generation it was rendered from, so an observation of
	// the object can say which generation it reflects.
	KeyGeneration = "dlc.aidlc.io/generation"
	// KeyNodeGroup is a pod template label naming the node group (head or
	// worker group) of the pod, as the spec names it.
	KeyNodeGroup = "dlc.aidlc.io/node-group"
	// KeyNodeSpec is a pod template annotation naming the pod's node spec
	// from the CU/GU catalog.
	KeyNodeSpec = "dlc.aidlc.io/node-spec"
	// KeyManagedBy is the standard label that marks the objects dlc renders;
	// its value is ManagedBy.
	KeyManagedBy = "app.kubernetes.io/managed-by"
	// ManagedBy is the value of the KeyManagedBy label.
	ManagedBy = "dlc"
)

// RayClusterName returns the name of the RayCluster of the cluster with
// id clusterID: a DNS-1035 label of at most MaxRayClusterNameLen
// characters, the same for the same id. See objectName.
func RayClusterName(clusterID string) string {
	return objectName(clusterID, MaxRayClusterNameLen, "c")
}

// RayJobName returns the name of the RayJob of the run with id runID: a
// DNS-1035 label of at most MaxRayJobNameLen characters, the same for the
// same id. See objectName.
func RayJobName(runID string) string { return objectName(runID, MaxRayJobNameLen, "r") }

// hashLen is how many hex digits of the id's SHA-256 a derived name ends in.
const hashLen = 10

// objectName derives an object name from an id. An id that is already a
// DNS-1035 label within max is the name. Any other id is lowered, every
// run of characters outside [a-z0-9] becomes one '-', a leading digit
// gets prefix (a letter), it is cut to leave room, and "-" plus hashLen
// hex digits of the id's SHA-256 are appended: the name stays readable,
// and ids that lower-case or clip to the same text still get different
// names.
func objectName(id string, max int, prefix string) string {
	if len(id) <= max && len(validation.IsDNS1035Label(id)) == 0 {
		return id
	}
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(id) {
		if ('a' <= r && r <= 'z') || ('0' <= r && r <= '9') {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	base := b.String()
	if base == "" || base[0] < 'a' || base[0] > 'z' {
		base = prefix + base
	}
	sum := sha256.Sum256([]byte(id))
	base = strings.TrimRight(base[:min(len(base), max-hashLen-1)], "-")
	return base + "-" + hex.EncodeToString(sum[:])[:hashLen]
}

// labelValue reports whether v can be a label value.
func labelValue(v string) bool { return len(validation.IsValidLabelValue(v)) == 0 }
