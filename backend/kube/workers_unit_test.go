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
