package kube_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/quota"
)

// A group's ResourceQuota limits what its namespace's pods request to the
// group's capacity, GPUs included when it has none; a bad group or a
// negative capacity renders nothing.
func TestRenderGroupQuota(t *testing.T) {
	for _, tc := range []struct {
		name     string
		rg       string
		capacity quota.Resources
		want     map[corev1.ResourceName]string
		invalid  string
	}{
		{"cores and memory", "rg-a", quota.Resources{MilliCPU: 16000, Memory: 64 * quota.GiB},
			map[corev1.ResourceName]string{"requests.cpu": "16", "requests.memory": "64Gi", "requests.nvidia.com/gpu": "0"}, ""},
		{"millicores and GPUs", "rg-b", quota.Resources{MilliCPU: 1500, Memory: 512 << 20, GPU: 8},
			map[corev1.ResourceName]string{"requests.cpu": "1500m", "requests.memory": "512Mi", "requests.nvidia.com/gpu": "8"}, ""},
		{"nothing", "rg-c", quota.Resources{},
			map[corev1.ResourceName]string{"requests.cpu": "0", "requests.memory": "0", "requests.nvidia.com/gpu": "0"}, ""},
		{"not a group id", "RG_A", quota.Cores(1), nil, "resourceGroup"},
		{"negative", "rg-a", quota.Resources{MilliCPU: -1}, nil, "capacity"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rq, err := kube.RenderGroupQuota(tc.rg, "team-a", tc.capacity)
			if tc.invalid != "" {
				if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), tc.invalid) || rq != nil {
					t.Fatalf("%v, %v: want ErrInvalid naming %s", rq, err, tc.invalid)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if rq.Name != kube.GroupQuotaName || rq.Namespace != "team-a" || rq.Labels[kube.KeyResourceGroup] != tc.rg {
				t.Errorf("metadata %+v", rq.ObjectMeta)
			}
			if len(rq.Spec.Hard) != len(tc.want) || len(rq.Spec.Scopes) > 0 || rq.Spec.ScopeSelector != nil {
				t.Errorf("hard %v, scopes %v %v", rq.Spec.Hard, rq.Spec.Scopes, rq.Spec.ScopeSelector)
			}
			for name, want := range tc.want {
				if got := rq.Spec.Hard[name]; got.Cmp(resource.MustParse(want)) != 0 {
					t.Errorf("%s: %s, want %s", name, got.String(), want)
				}
			}
		})
	}
}

// Every pod KubeRay makes of a rendered object requests, as a
// ResourceQuota counts it (its containers, KubeRay's autoscaler on an
// autoscaling head and its wait-gcs-ready init container on workers
// included), exactly its node spec: what the cluster's reservation holds
// for it. So a ResourceQuota equal to a group's capacity admits every pod
// of the clusters the SDK admits, and no more. An autoscaling head's Ray
// container keeps its node spec as its limits, which KubeRay gives Ray as
// its num-cpus and memory.
func TestKubeRayPodsRequestTheirNodeSpecs(t *testing.T) {
	cat := quota.DefaultCatalog()
	for _, rc := range renderCases() {
		t.Run(rc.name, func(t *testing.T) {
			var spec *rayv1.RayClusterSpec
			switch obj := rc.render(t, "team-a").(type) {
			case *rayv1.RayCluster:
				spec = &obj.Spec
			case *rayv1.RayJob:
				spec = obj.Spec.RayClusterSpec
			}
			for role, pod := range kubeRayPods(t, "cls-x", "team-a", spec) {
				ns, ok := cat.Lookup(pod.Annotations[kube.KeyNodeSpec])
				if !ok {
					t.Fatalf("%s: node spec %q", role, pod.Annotations[kube.KeyNodeSpec])
				}
				want := quota.Resources{MilliCPU: ns.CPU * 1000, Memory: ns.MemoryGB * quota.GiB, GPU: ns.GPU}
				got := kube.PodResources(&pod, func(r corev1.ResourceRequirements) corev1.ResourceList { return r.Requests })
				if got != want {
					t.Errorf("%s pod (%d containers, %d init) requests %s, want its node spec %s", role,
						len(pod.Spec.Containers), len(pod.Spec.InitContainers), got, want)
				}
				for _, c := range pod.Spec.Containers {
					if c.Name != kube.HeadContainer && c.Name != kube.WorkerContainer {
						continue
					}
					if cpu := c.Resources.Limits[corev1.ResourceCPU]; cpu.Value() != ns.CPU {
						t.Errorf("%s: Ray container limited to %s cores, want its node spec's %d (Ray's num-cpus)", role, cpu.String(), ns.CPU)
					}
				}
			}
		})
	}
}

// What a pod requests is counted as Kubernetes counts it: containers
// added up, an init container at least, sidecars (restartable init
// containers) added, the pod's overhead added.
func TestPodResources(t *testing.T) {
	c := func(cpu string) corev1.Container {
		return corev1.Container{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}
	}
	always := corev1.ContainerRestartPolicyAlways
	sidecar := c("300m")
	sidecar.RestartPolicy = &always
	for _, tc := range []struct {
		name string
		spec corev1.PodSpec
		want int64 // millicores
	}{
		{"containers added up", corev1.PodSpec{Containers: []corev1.Container{c("3500m"), c("500m")}}, 4000},
		{"a smaller init container", corev1.PodSpec{Containers: []corev1.Container{c("4")}, InitContainers: []corev1.Container{c("200m")}}, 4000},
		{"a larger init container", corev1.PodSpec{Containers: []corev1.Container{c("1")}, InitContainers: []corev1.Container{c("2")}}, 2000},
		{"a sidecar", corev1.PodSpec{Containers: []corev1.Container{c("1")}, InitContainers: []corev1.Container{sidecar, c("1")}}, 1300},
		{"overhead", corev1.PodSpec{Containers: []corev1.Container{c("1")}, Overhead: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}}, 1250},
	} {
		pod := &corev1.Pod{Spec: tc.spec}
		if got := kube.PodResources(pod, func(r corev1.ResourceRequirements) corev1.ResourceList { return r.Requests }); got.MilliCPU != tc.want {
			t.Errorf("%s: %dm, want %dm", tc.name, got.MilliCPU, tc.want)
		}
	}
}

// KubeRay's ReplicaFailure condition saying the API server refused a pod
// for a ResourceQuota is a quota refusal, said in words that do not
// change with the amounts; any other failure, or none, is not.
func TestQuotaRefusal(t *testing.T) {
	// The API server's message (quota admission), as KubeRay wraps it.
	refused := `FailedCreateWorkerPod: pods "cls-a-cpu-worker-x7k2q" is forbidden: exceeded quota: dlc-resource-group, requested: requests.cpu=4, used: requests.cpu=16, limited: requests.cpu=16`
	other := `FailedCreateWorkerPod: pods "cls-a-cpu-worker-x7k2q" is forbidden: violates PodSecurity "restricted:latest"`
	for _, tc := range []struct {
		name string
		cond *metav1.Condition
		want string
	}{
		{"exceeded quota", &metav1.Condition{Type: string(rayv1.RayClusterReplicaFailure), Status: metav1.ConditionTrue, Reason: "FailedCreateWorkerPod", Message: refused},
			`exceeded quota "dlc-resource-group"`},
		{"another refusal", &metav1.Condition{Type: string(rayv1.RayClusterReplicaFailure), Status: metav1.ConditionTrue, Message: other}, ""},
		{"healed", &metav1.Condition{Type: string(rayv1.RayClusterReplicaFailure), Status: metav1.ConditionFalse, Message: refused}, ""},
		{"none", nil, ""},
	} {
		rc := &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a"}}
		if tc.cond != nil {
			rc.Status.Conditions = []metav1.Condition{*tc.cond}
		}
		got := kube.QuotaRefusal(rc)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) || strings.Contains(got, "used:") {
			t.Errorf("%s: %q, want one saying %q", tc.name, got, tc.want)
		}
	}
	rc := &rayv1.RayCluster{Status: rayv1.RayClusterStatus{Conditions: []metav1.Condition{{Type: string(rayv1.RayClusterReplicaFailure), Status: metav1.ConditionTrue,
		Message: strings.Replace(refused, "used: requests.cpu=16", "used: requests.cpu=12", 1)}}}}
	rc2 := &rayv1.RayCluster{Status: rayv1.RayClusterStatus{Conditions: []metav1.Condition{{Type: string(rayv1.RayClusterReplicaFailure), Status: metav1.ConditionTrue, Message: refused}}}}
	if kube.QuotaRefusal(rc) != kube.QuotaRefusal(rc2) {
		t.Errorf("the refusal's words change with the amounts: %q, %q", kube.QuotaRefusal(rc), kube.QuotaRefusal(rc2))
	}
}

// The quota keeper looks at a group's quota when its capacity changes,
// not at every reservation: the capacity is found in the document as the
// store has it, and is the same bytes whatever the holds.
func TestCapacityBytes(t *testing.T) {
	doc := func(a *quota.Account) []byte {
		t.Helper()
		b, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a := &quota.Account{Group: quota.Group{ID: "rg-a", Package: "pkg-1", Capacity: quota.Cores(16)}}
	before := kube.CapacityBytes(doc(a))
	if before == "" || !strings.Contains(before, "16000") {
		t.Fatalf("capacity of %s: %q", doc(a), before)
	}
	if _, err := a.Set("cls-1", quota.Cores(4), time.Now()); err != nil {
		t.Fatal(err)
	}
	if got := kube.CapacityBytes(doc(a)); got != before {
		t.Errorf("a reservation changed the capacity's bytes: %q, was %q", got, before)
	}
	a.Capacity = quota.Cores(24)
	if got := kube.CapacityBytes(doc(a)); got == before || got == "" {
		t.Errorf("a new capacity reads %q, as before (%q)", got, before)
	}
	if got := kube.CapacityBytes([]byte(`{"id":"rg-a"}`)); got != "" {
		t.Errorf("no capacity: %q", got)
	}
}
