package kube

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/aidlc/dlc/cluster"
)

// podsOfInKeep reports whether podsOfIn keeps pod as one of its cluster's
// (of resource group rg-1, in namespace ns).
func podsOfInKeep(pod *corev1.Pod) bool {
	return (&Provisioner{namespace: "ns"}).rayPodIn(pod, "rg-1")
}

// TestSlimPodKeepsWhatIsRead: what the provisioner reads of a pod is the
// same of the pod its informer keeps (cachePod, read as cachedPod.pod) as of the whole pod, for
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
			Labels: map[string]string{KeyClusterID: "cls-1", rayLabelNodeType: "head", KeyNodeGroup: "head", KeyResourceGroup: "rg-1",
				"ray.io/cluster": "rc", "ray.io/identifier": "rc-head", "ray.io/is-ray-node": "yes", TagLabelPrefix + "team": "a"},
			Annotations:     map[string]string{KeyNodeSpec: "cu.4c8g", "ray.io/ft-enabled": "false"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "ray.io/v1", Kind: "RayCluster", Name: "rc", UID: "u-rc", Controller: ptr.To(true)}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kuberay", FieldsV1: metav1.NewFieldsV1(string(make([]byte, 4096)))}},
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
			Containers: []corev1.Container{{Name: "autoscaler", Image: "ray:2.46.0-autoscaler",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("512Mi")},
					Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi"), GPUResource: resource.MustParse("1")}}}, {Name: HeadContainer, Image: "ray:2.46.0", Resources: res,
				Env:            []corev1.EnvVar{{Name: "RAY_CLUSTER_NAME", Value: "rc"}, {Name: "RAY_PORT", Value: "6379"}},
				VolumeMounts:   []corev1.VolumeMount{{Name: "logs", MountPath: "/tmp/ray"}},
				LivenessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"bash", "-c", "wget -T 2 -q -O- http://localhost:52365/api/local_raylet_healthz"}}}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"bash", "-c", "true"}}}},
			}},
			Volumes: []corev1.Volume{{Name: "logs", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1", PodIPs: []corev1.PodIP{{IP: "10.0.0.1"}, {IP: "fd00::1"}},
			StartTime: &start,
			Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: start},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: start}},
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
			got, err := cachePod(tc.pod.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			slim := got.(*cachedPod).pod()
			if a, b := podOf(tc.pod), podOf(slim); !reflect.DeepEqual(a, b) {
				t.Errorf("podOf differs:\nwhole %+v\nslim  %+v", a, b)
			}
			rc := &rayv1.RayCluster{}
			if a, b := kubeRayOwes(rc, []corev1.Pod{*tc.pod}), kubeRayOwes(rc, []corev1.Pod{*slim}); a != b {
				t.Errorf("kubeRayOwes: whole %v, slim %v", a, b)
			}
			if _, ok := runningPod(got); ok != (tc.pod.Status.Phase == corev1.PodRunning && tc.pod.DeletionTimestamp == nil) {
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
			if a, b := podsOfInKeep(tc.pod), podsOfInKeep(slim); !a || a != b {
				t.Errorf("podsOfIn keeps the whole pod: %v, the slim one: %v", a, b)
			}
			wantLabels := map[string]string{KeyClusterID: "cls-1", rayLabelNodeType: "head", KeyNodeGroup: "head", KeyResourceGroup: "rg-1"}
			if !reflect.DeepEqual(slim.OwnerReferences, tc.pod.OwnerReferences) || !reflect.DeepEqual(slim.Labels, wantLabels) ||
				slim.ResourceVersion != tc.pod.ResourceVersion || slim.UID != tc.pod.UID {
				t.Errorf("the slim pod lost what the cache and its index key on: %+v", slim.ObjectMeta)
			}
			if !reflect.DeepEqual(slim.Annotations, map[string]string{KeyNodeSpec: "cu.4c8g"}) {
				t.Errorf("annotations: %v", slim.Annotations)
			}
			c := slim.Spec.Containers[0]
			if slim.ManagedFields != nil || slim.Spec.Volumes != nil || c.Env != nil || c.LivenessProbe != nil || c.VolumeMounts != nil ||
				len(slim.Spec.Containers) != 1 || slim.Spec.InitContainers != nil || slim.Spec.Overhead != nil ||
				(len(slim.Status.ContainerStatuses) > 0 && slim.Status.ContainerStatuses[0].ImageID != "") ||
				(len(slim.Status.Conditions) > 0 && (len(slim.Status.Conditions) != 1 || !slim.Status.Conditions[0].LastTransitionTime.IsZero())) {
				t.Errorf("the slim pod keeps what nothing reads: %+v", slim)
			}
		})
	}
	// The whole pod's requests: 4 CPUs and 8 GiB of the head, 0.5 CPU and
	// 512 MiB of the autoscaler, 0.3 CPU and 256 MiB of the sidecar,
	// 0.1 CPU of overhead (the init container's 0.2 CPU with the sidecar
	// is less than the containers'); its limits, 5 CPUs, 9 GiB and a GPU.
	want := cluster.Pod{}.Requests
	want.MilliCPU, want.Memory = 4900, 8<<30+768<<20
	if got := podOf(full).Requests; got != want {
		t.Errorf("the fixture's requests: %+v, want %+v", got, want)
	}
	// A deleted object the informer did not see go passes as it is.
	tomb := toolscache.DeletedFinalStateUnknown{Key: "ns/p", Obj: full}
	if got, err := cachePod(tomb); err != nil || !reflect.DeepEqual(got, tomb) {
		t.Errorf("a tombstone: %v, %v", got, err)
	}
}

// TestPodIndex: the provisioner's index of pods by cluster follows the pod
// informer's adds, updates (a pod moved to another cluster's label
// included), deletes and tombstones, and what podsOf returns shares
// nothing with what it keeps.
func TestPodIndex(t *testing.T) {
	p := &Provisioner{namespace: "ns"}
	pod := func(name, cluster string, phase corev1.PodPhase) *cachedPod {
		return cachedPodOf(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns",
			Labels:          map[string]string{KeyClusterID: cluster},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "ray.io/v1", Kind: "RayCluster", Name: "rc", Controller: ptr.To(true)}}},
			Status: corev1.PodStatus{Phase: phase}})
	}
	names := func(cluster string) []string {
		pods, err := p.podsOf(t.Context(), cluster)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, pod := range pods {
			out = append(out, pod.Name+":"+string(pod.Status.Phase))
		}
		return out
	}
	a, b := pod("a", "cls-1", corev1.PodPending), pod("b", "cls-1", corev1.PodRunning)
	p.index(nil, a)
	p.index(nil, b)
	p.index(nil, pod("c", "", corev1.PodRunning)) // no cluster: not indexed
	a2 := pod("a", "cls-1", corev1.PodRunning)
	p.index(a, a2)
	if got, want := names("cls-1"), []string{"a:Running", "b:Running"}; !reflect.DeepEqual(got, want) {
		t.Errorf("after adds and an update: %v, want %v", got, want)
	}
	moved := pod("b", "cls-2", corev1.PodRunning)
	p.index(b, moved)
	if got, want := names("cls-1"), []string{"a:Running"}; !reflect.DeepEqual(got, want) {
		t.Errorf("after a move: cls-1 %v, want %v", got, want)
	}
	if got, want := names("cls-2"), []string{"b:Running"}; !reflect.DeepEqual(got, want) {
		t.Errorf("after a move: cls-2 %v, want %v", got, want)
	}
	p.index(toolscache.DeletedFinalStateUnknown{Key: "ns/a", Obj: a2}, nil)
	p.index(moved, nil)
	if len(p.pods.m) != 0 {
		t.Errorf("after the deletes the index holds %v", p.pods.m)
	}
	p.index(nil, a2)
	got, _ := p.podsOf(t.Context(), "cls-1")
	got[0].Labels[KeyClusterID] = "changed"
	got[0].Status.Phase = corev1.PodFailed
	if again := names("cls-1"); !reflect.DeepEqual(again, []string{"a:Running"}) || a2.cluster() != "cls-1" {
		t.Errorf("a change to what podsOf returned reached the index: %v", again)
	}
}

// TestPodChangeTellsItsCluster: a change of a cached pod (the informer's
// cachedPod, whose labels are kept apart) tells the observers of its
// cluster, a tombstone's too; a pod of no cluster tells nobody.
func TestPodChangeTellsItsCluster(t *testing.T) {
	p := &Provisioner{tick: make(chan struct{})}
	var told []string
	p.watchers.Add(t.Context(), &p.mu, func(kind, id string) { told = append(told, kind+"/"+id) }, nil)
	of := cachedPodOf(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "ns",
		Labels: map[string]string{KeyClusterID: "cls-1", "ray.io/cluster": "rc"}}})
	none := cachedPodOf(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "ns"}})
	p.changed(of)
	p.changed(toolscache.DeletedFinalStateUnknown{Key: "ns/w", Obj: of})
	p.changed(none)
	if want := []string{"cluster/cls-1", "cluster/cls-1"}; !reflect.DeepEqual(told, want) {
		t.Errorf("told %v, want %v", told, want)
	}
}

// TestRayClusterIndex: the provisioner's index of RayClusters by cluster
// follows the informer (adds, a move to another cluster's label, deletes,
// tombstones); rayClustersOf and getCached read from it what
// the informer keeps, in the cluster's place only; what they return
// shares nothing with what it keeps; a change of one tells its cluster.
func TestRayClusterIndex(t *testing.T) {
	p := &Provisioner{namespace: "ns", groupNS: map[string]string{"rg-b": "ns-b"}, tick: make(chan struct{})}
	var told []string
	p.watchers.Add(t.Context(), &p.mu, func(kind, id string) { told = append(told, kind+"/"+id) }, nil)
	rc := func(name, ns, cluster, rg string, replicas int32) *cachedRayCluster {
		labels := map[string]string{KeyClusterID: cluster}
		if rg != "" {
			labels[KeyResourceGroup] = rg
		}
		return cachedRayClusterOf(&rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels,
			Annotations: map[string]string{KeyClusterID: cluster}},
			Spec: rayv1.RayClusterSpec{WorkerGroupSpecs: []rayv1.WorkerGroupSpec{{GroupName: "g", Replicas: ptr.To(replicas)}}}})
	}
	names := func(id, rg string) []string {
		rcs, err := p.rayClustersOf(t.Context(), id, rg)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, rc := range rcs {
			out = append(out, rc.Namespace+"/"+rc.Name+":"+fmt.Sprint(*rc.Spec.WorkerGroupSpecs[0].Replicas))
		}
		return out
	}
	own := rc(RayClusterName("c1"), "ns", "c1", "", 1)
	elsewhere := rc(RayClusterName("c1"), "ns-b", "c1", "", 1) // in rg-b's namespace but not labelled rg-b: not in place
	grouped := rc("g1", "ns-b", "c1", "rg-b", 2)
	for _, o := range []*cachedRayCluster{own, elsewhere, grouped} {
		p.index(nil, o)
		p.changed(o)
	}
	if got, want := names("c1", ""), []string{"ns/" + RayClusterName("c1") + ":1", "ns-b/g1:2"}; !reflect.DeepEqual(got, want) {
		t.Errorf("in place: %v, want %v", got, want)
	}
	if got, want := names("c1", "rg-b"), []string{"ns-b/g1:2"}; !reflect.DeepEqual(got, want) {
		t.Errorf("in rg-b: %v, want %v", got, want)
	}
	if got := told; !reflect.DeepEqual(got, []string{"cluster/c1", "cluster/c1", "cluster/c1"}) {
		t.Errorf("told %v", got)
	}
	into := &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{KeyClusterID: "c1"}}}
	if err := p.getCached(t.Context(), types.NamespacedName{Namespace: "ns-b", Name: "g1"}, into); err != nil || into.Name != "g1" {
		t.Errorf("getCached: %v %v", err, into.Name)
	}
	into.Spec.WorkerGroupSpecs[0].GroupName = "changed"
	*into.Spec.WorkerGroupSpecs[0].Replicas = 9
	if got := names("c1", "rg-b"); !reflect.DeepEqual(got, []string{"ns-b/g1:2"}) || grouped.workers[0].name != "g" {
		t.Errorf("a change to what getCached returned reached the index: %v", got)
	}
	if err := p.getCached(t.Context(), types.NamespacedName{Namespace: "ns", Name: "nope"}, into); !apierrors.IsNotFound(err) {
		t.Errorf("getCached of what is not cached: %v, want not found", err)
	}
	moved := rc("g1", "ns-b", "c2", "rg-b", 2)
	p.index(grouped, moved)
	if got := names("c1", "rg-b"); len(got) != 0 {
		t.Errorf("after a move, c1 still has %v", got)
	}
	if got, want := names("c1", ""), []string{"ns/" + RayClusterName("c1") + ":1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("after a move, c1 has %v, want %v", got, want)
	}
	p.index(toolscache.DeletedFinalStateUnknown{Key: "ns/x", Obj: own}, nil)
	p.index(elsewhere, nil)
	p.index(moved, nil)
	if len(p.rcs.m) != 0 || len(p.pods.m) != 0 {
		t.Errorf("after the deletes the index holds %v %v", p.rcs.m, p.pods.m)
	}
}
