package kube

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPodRunningDatesChanges: the pod informer dates a cluster's change
// when one of its pods starts running, starts being deleted (as the
// observation stops counting it: podOf says Terminating) or goes; a
// status update of a running pod is no change.
func TestPodRunningDatesChanges(t *testing.T) {
	p := &Provisioner{podsAt: map[string]time.Time{}}
	pending := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "w", Labels: map[string]string{KeyClusterID: "cls-1"}},
		Status: corev1.PodStatus{Phase: corev1.PodPending}}
	running := pending.DeepCopy()
	running.Status.Phase = corev1.PodRunning
	ready := running.DeepCopy()
	ready.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	terminating := running.DeepCopy()
	terminating.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	other := running.DeepCopy()
	other.Labels = nil
	sentinel := time.Unix(1, 0)
	for _, step := range []struct {
		name     string
		old, obj any
		moves    bool
	}{
		{"added pending", nil, pending, false},
		{"starts running", pending, running, true},
		{"becomes ready", running, ready, false},
		{"starts being deleted", ready, terminating, true},
		{"goes", terminating, nil, false},
		{"added running", nil, running, true},
		{"deleted running", running, nil, true},
		{"not a cluster's", nil, other, false},
	} {
		p.podsAt["cls-1"] = sentinel
		p.podRunning(step.old, step.obj)
		if moved := !p.podsChangedAt("cls-1", false).Equal(sentinel); moved != step.moves {
			t.Errorf("%s: Since moved %v, want %v", step.name, moved, step.moves)
		}
	}
	if terminating := podOf(terminating); terminating.Status != "Terminating" {
		t.Fatalf("podOf says %q of a pod being deleted", terminating.Status)
	}
}
