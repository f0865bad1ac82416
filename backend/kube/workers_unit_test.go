package kube_test

import (
	"slices"
	"testing"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/aidlc/dlc/backend/kube"
)

// An apply keeps of workersToDelete only the names of the cluster's own
// workers of each group (what KubeRay names them), never another's a
// foreign writer put there; and the surplus it names is only its own.
func TestWorkersToDeleteOnlyOwn(t *testing.T) {
	long := "cls-abcdefghij"
	group := "a-group-name-that-is-long-enough-to-be-cut-by-kuberay"
	for _, tc := range []struct {
		name         string
		cluster, grp string
		listed       []string
		want         []string
	}{
		{"own workers kept", "cls-mine", "cpu", []string{"cls-mine-cpu-worker-abcde"}, []string{"cls-mine-cpu-worker-abcde"}},
		{"another's head and workers dropped", "cls-mine", "cpu",
			[]string{"cls-theirs-head-xyz12", "cls-theirs-cpu-worker-abcde", "cls-mine-head-abcde", "cls-mine-gpu-worker-abcde", "cls-mine-cpu-worker-fghij"},
			[]string{"cls-mine-cpu-worker-fghij"}},
		{"a long prefix is cut at 50 as KubeRay cuts it", long, group,
			[]string{(long + "-" + group)[:50] + "-worker-abcde", long + "-" + group + "-worker-abcde"},
			[]string{(long + "-" + group)[:50] + "-worker-abcde"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cur := &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: tc.cluster}, Spec: rayv1.RayClusterSpec{
				WorkerGroupSpecs: []rayv1.WorkerGroupSpec{{GroupName: tc.grp, ScaleStrategy: rayv1.ScaleStrategy{WorkersToDelete: tc.listed}}}}}
			rc := &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: tc.cluster}, Spec: rayv1.RayClusterSpec{
				WorkerGroupSpecs: []rayv1.WorkerGroupSpec{{GroupName: tc.grp}}}}
			kube.CarryOver(rc, cur)
			if got := rc.Spec.WorkerGroupSpecs[0].ScaleStrategy.WorkersToDelete; !slices.Equal(got, tc.want) {
				t.Fatalf("kept %v, want %v", got, tc.want)
			}
		})
	}
	// A pod with the group's labels but another's name is not named.
	rc := &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: "cls-mine"}, Spec: rayv1.RayClusterSpec{
		EnableInTreeAutoscaling: ptr.To(true),
		WorkerGroupSpecs:        []rayv1.WorkerGroupSpec{{GroupName: "cpu", MinReplicas: ptr.To[int32](0), MaxReplicas: ptr.To[int32](0)}}}}
	pod := func(name string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			"ray.io/node-type": "worker", "ray.io/group": "cpu"}}}
	}
	kube.NameSurplus(rc, []corev1.Pod{pod("cls-mine-cpu-worker-abcde"), pod("cls-theirs-head-abcde")})
	if got := rc.Spec.WorkerGroupSpecs[0].ScaleStrategy.WorkersToDelete; !slices.Equal(got, []string{"cls-mine-cpu-worker-abcde"}) {
		t.Fatalf("named %v", got)
	}
}

// An apply that drops a worker group whose workers still run (a start from
// abnormal after an edit removed it) keeps the group at no workers, so
// that KubeRay, which reconciles only the groups in the spec, deletes
// them; the workers are named for the autoscaler's KubeRay. A group with
// none of its workers left running (none, all terminating, or only
// pods that are not the cluster's) is dropped.
func TestKeepRemovedGroups(t *testing.T) {
	worker := func(name, group string, deleting bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			"ray.io/node-type": "worker", "ray.io/group": group}}}
		if deleting {
			p.DeletionTimestamp = &metav1.Time{}
		}
		return p
	}
	template := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "b"}}}
	for _, tc := range []struct {
		name      string
		pods      []corev1.Pod
		wantGroup bool
		wantNamed []string
	}{
		{"its workers run: kept at none, each named", []corev1.Pod{worker("cls-x-gone-worker-aaaaa", "gone", false),
			worker("cls-x-gone-worker-bbbbb", "gone", true), worker("cls-x-cpu-worker-ccccc", "cpu", false)},
			true, []string{"cls-x-gone-worker-aaaaa"}},
		{"no worker of it", []corev1.Pod{worker("cls-x-cpu-worker-ccccc", "cpu", false)}, false, nil},
		{"its workers all terminating", []corev1.Pod{worker("cls-x-gone-worker-aaaaa", "gone", true)}, false, nil},
		{"only another's pod with its labels", []corev1.Pod{worker("cls-y-gone-worker-aaaaa", "gone", false)}, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cur := &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: "cls-x"}, Spec: rayv1.RayClusterSpec{
				EnableInTreeAutoscaling: ptr.To(true),
				WorkerGroupSpecs: []rayv1.WorkerGroupSpec{
					{GroupName: "cpu", Replicas: ptr.To[int32](1), MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](1)},
					{GroupName: "gone", Replicas: ptr.To[int32](2), MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](3),
						Template: template, ScaleStrategy: rayv1.ScaleStrategy{WorkersToDelete: []string{"cls-x-gone-worker-bbbbb"}}},
				}}}
			rc := &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: "cls-x"}, Spec: rayv1.RayClusterSpec{
				EnableInTreeAutoscaling: ptr.To(true),
				WorkerGroupSpecs: []rayv1.WorkerGroupSpec{
					{GroupName: "cpu", Replicas: ptr.To[int32](1), MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](1)}}}}
			kube.CarryOver(rc, cur)
			kube.KeepRemovedGroups(rc, cur, tc.pods)
			kube.NameSurplus(rc, tc.pods)
			if !tc.wantGroup {
				if len(rc.Spec.WorkerGroupSpecs) != 1 {
					t.Fatalf("groups %d, want the kept one alone", len(rc.Spec.WorkerGroupSpecs))
				}
				return
			}
			if len(rc.Spec.WorkerGroupSpecs) != 2 {
				t.Fatalf("groups %d, want the removed one kept", len(rc.Spec.WorkerGroupSpecs))
			}
			g := rc.Spec.WorkerGroupSpecs[1]
			if g.GroupName != "gone" || *g.Replicas != 0 || *g.MinReplicas != 0 || *g.MaxReplicas != 0 || g.Template.Labels["a"] != "b" {
				t.Fatalf("the removed group as kept: %+v", g)
			}
			if !slices.Equal(g.ScaleStrategy.WorkersToDelete, tc.wantNamed) {
				t.Fatalf("named %v, want %v", g.ScaleStrategy.WorkersToDelete, tc.wantNamed)
			}
			if cur.Spec.WorkerGroupSpecs[1].ScaleStrategy.WorkersToDelete[0] != "cls-x-gone-worker-bbbbb" || *cur.Spec.WorkerGroupSpecs[1].Replicas != 2 {
				t.Fatal("the RayCluster as read was changed")
			}
		})
	}
}
