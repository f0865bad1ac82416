package kube

import (
	"reflect"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// TestSlimPodKeepsWhatIsRead: what the provisioner reads of a pod is the
// same of the pod its informer keeps (slimPod) as of the whole pod, for
// pods in each phase the provisioner tells apart; what it drops is gone.
func TestSlimPodKeepsWhatIsRead(t *testing.T) {
	start := metav1.NewTime(time.Date(2026, 12, 7, 4, 0, 0, 0, time.UTC))
	res := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi")},
	}
	full := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "rc-head-x", Namespace: "ns", UID: "u-1", ResourceVersion: "42",
			CreationTimestamp: start,
			Labels:            map[string]string{KeyClusterID: "cls-1", rayLabelNodeType: "head", KeyNodeGroup: "head"},
			Annotations:       map[string]string{KeyNodeSpec: "cu.4c8g"},
			OwnerReferences:   []metav1.OwnerReference{{APIVersion: "ray.io/v1", Kind: "RayCluster", Name: "rc", UID: "u-rc", Controller: ptr.To(true)}},
			ManagedFields:     []metav1.ManagedFieldsEntry{{Manager: "kuberay", FieldsV1: metav1.NewFieldsV1(string(make([]byte, 4096)))}},
		},
		Spec: corev1.PodSpec{
			NodeName: "node-1",
			Overhead: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
			InitContainers: []corev1.Container{{Name: "wait-gcs", Image: "ray:2.46.0",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m")}},
				Command:   []string{"sh", "-c", "until ray health-check; do sleep 1; done"}},
				// A native sidecar: its requests add to the pod's.
				{Name: "log-shipper", Image: "fluent-bit:3", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("300m"), corev1.ResourceMemory: resource.MustParse("256Mi")}}}},
			Containers: []corev1.Container{{Name: HeadContainer, Image: "ray:2.46.0", Resources: res,
				Env:            []corev1.EnvVar{{Name: "RAY_CLUSTER_NAME", Value: "rc"}, {Name: "RAY_PORT", Value: "6379"}},
				VolumeMounts:   []corev1.VolumeMount{{Name: "logs", MountPath: "/tmp/ray"}},
				LivenessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"bash", "-c", "wget -T 2 -q -O- http://localhost:52365/api/local_raylet_healthz"}}}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"bash", "-c", "true"}}}},
			}},
			Volumes: []corev1.Volume{{Name: "logs", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1", PodIPs: []corev1.PodIP{{IP: "10.0.0.1"}, {IP: "fd00::1"}},
			StartTime:  &start,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: HeadContainer, Ready: true, Image: "ray:2.46.0", ImageID: "sha256:abc",
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: start}}}},
		},
	}
	terminating := full.DeepCopy()
	terminating.DeletionTimestamp = &metav1.Time{Time: start.Add(time.Minute)}
	pending := full.DeepCopy()
	pending.Status = corev1.PodStatus{Phase: corev1.PodPending}
	failed := full.DeepCopy()
	failed.Status.Phase, failed.Status.Reason = corev1.PodFailed, "Evicted"
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
	}{{"running", full}, {"terminating", terminating}, {"pending", pending}, {"failed", failed}} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := slimPod(tc.pod.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			slim := got.(*corev1.Pod)
			if a, b := podOf(tc.pod), podOf(slim); !reflect.DeepEqual(a, b) {
				t.Errorf("podOf differs:\nwhole %+v\nslim  %+v", a, b)
			}
			rc := &rayv1.RayCluster{}
			if a, b := kubeRayOwes(rc, []corev1.Pod{*tc.pod}), kubeRayOwes(rc, []corev1.Pod{*slim}); a != b {
				t.Errorf("kubeRayOwes: whole %v, slim %v", a, b)
			}
			if _, ok := runningPod(slim); ok != (tc.pod.Status.Phase == corev1.PodRunning && tc.pod.DeletionTimestamp == nil) {
				t.Errorf("runningPod of the slim pod: %v", ok)
			}
			info := &JobInfo{DriverAgentHTTPAddress: "http://10.0.0.1:52365"}
			info.StartTime = uint64(start.Add(-time.Minute).UnixMilli())
			if a, b := driverGone([]corev1.Pod{*tc.pod}, info), driverGone([]corev1.Pod{*slim}, info); a != b {
				t.Errorf("driverGone: whole %v, slim %v", a, b)
			}
			now := start.Add(time.Hour)
			if a, b := len(lingering([]corev1.Pod{*tc.pod}, now)), len(lingering([]corev1.Pod{*slim}, now)); a != b {
				t.Errorf("lingering: whole %d, slim %d", a, b)
			}
			if !reflect.DeepEqual(slim.OwnerReferences, tc.pod.OwnerReferences) || !reflect.DeepEqual(slim.Labels, tc.pod.Labels) ||
				slim.ResourceVersion != tc.pod.ResourceVersion || slim.UID != tc.pod.UID {
				t.Error("the slim pod lost what the cache and its index key on")
			}
			c := slim.Spec.Containers[0]
			if slim.ManagedFields != nil || slim.Spec.Volumes != nil || c.Env != nil || c.LivenessProbe != nil || c.VolumeMounts != nil ||
				slim.Spec.InitContainers[0].Command != nil || (len(slim.Status.ContainerStatuses) > 0 && slim.Status.ContainerStatuses[0].ImageID != "") {
				t.Errorf("the slim pod keeps what nothing reads: %+v", slim)
			}
		})
	}
	// A deleted object the informer did not see go passes as it is.
	tomb := toolscache.DeletedFinalStateUnknown{Key: "ns/p", Obj: full}
	if got, err := slimPod(tomb); err != nil || !reflect.DeepEqual(got, tomb) {
		t.Errorf("a tombstone: %v, %v", got, err)
	}
}
