package kube_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aidlc/dlc/backend/kube"
)

// A deleted cluster is gone once its pods stop using what they request:
// it waits for a running pod, and for one being deleted within its bound;
// not for a finished pod, nor one whose deletion is LingerBound old (its
// node never confirmed it: the pod garbage collector's to remove).
func TestLingeringPods(t *testing.T) {
	now := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(d)} }
	for _, tc := range []struct {
		name    string
		phase   corev1.PodPhase
		deleted *metav1.Time
		waits   bool
	}{
		{"running", corev1.PodRunning, nil, true},
		{"pending", corev1.PodPending, nil, true},
		{"in its grace", corev1.PodRunning, at(20 * time.Second), true},
		{"past its grace, within the bound", corev1.PodRunning, at(-kube.LingerBound + time.Second), true},
		{"past the bound", corev1.PodRunning, at(-kube.LingerBound - time.Second), false},
		{"succeeded", corev1.PodSucceeded, nil, false},
		{"failed, being deleted", corev1.PodFailed, at(time.Second), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", DeletionTimestamp: tc.deleted},
				Status: corev1.PodStatus{Phase: tc.phase}}
			if got := len(kube.Lingering([]corev1.Pod{pod}, now)) == 1; got != tc.waits {
				t.Errorf("waits for it: %v, want %v", got, tc.waits)
			}
		})
	}
}
