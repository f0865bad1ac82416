package kube_test

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	rayutils "github.com/ray-project/kuberay/ray-operator/controllers/ray/utils"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/cluster"
)

// slimFixture is a RayCluster as the informer decodes it: rendered for a
// cluster (with a Ray token, tags, GCS fault tolerance, autoscaling as
// asked), with what the API server and KubeRay write into its metadata,
// spec and status, in one of a few states.
type slimFixture struct {
	token, ha, autoscale bool
	state                string // ready, takeover, failed, suspending, suspended, refused, provisioning, deleting, stale
}

func (f slimFixture) String() string {
	return fmt.Sprintf("token=%v ha=%v autoscale=%v %s", f.token, f.ha, f.autoscale, f.state)
}

func slimFixtures() []slimFixture {
	var out []slimFixture
	for _, state := range []string{"ready", "takeover", "failed", "suspending", "suspended", "refused", "provisioning", "deleting", "stale"} {
		for _, b := range []bool{true, false} {
			out = append(out, slimFixture{token: b, ha: b, autoscale: b, state: state})
		}
	}
	return append(out, slimFixture{token: true, ha: false, autoscale: true, state: "ready"}, slimFixture{ha: true, state: "takeover"})
}

// wholeRayCluster renders f's RayCluster and writes into it what the API
// server and KubeRay would.
func wholeRayCluster(t testing.TB, f slimFixture, now time.Time) (*cluster.Cluster, *rayv1.RayCluster) {
	env := cpuEnv()
	env.Image = "ray-2.52.0-py311-cpu"
	if f.autoscale {
		env.Workers[0].Instances = cluster.Range(1, 3)
		env.AddWorkerGroup("mem", "cu.16c64g", 1, 1)
	}
	env.Head.HighAvailability = f.ha
	c := running("cls-slim000001", "瘦身", env)
	c.Replicas = map[string]int{"cpu": 3}
	c.Spec.Tags = map[string]string{"team": "推荐", "cost-center": "cc-1024"}
	if f.token {
		c.Spec.RayToken = &cluster.SecretKeyRef{Secret: "dlc-env-ray-token", Key: "token"}
	}
	o := goodRedis
	o.Namespace = "dlc-rg-1"
	o.RedisPassword = &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "dlc-redis-ha"}, Key: "password"}
	rc, err := kube.RenderRayCluster(c, o)
	if err != nil {
		t.Fatal(err)
	}
	// What the API server writes.
	m := &rc.ObjectMeta
	m.UID, m.ResourceVersion, m.Generation = "5f0c1a7e-4a4b-4d55-9a0e-0b8c7f3e2d11", "184467", 4
	m.CreationTimestamp = metav1.NewTime(now.Add(-time.Hour).Truncate(time.Second))
	m.ManagedFields = []metav1.ManagedFieldsEntry{
		{Manager: "dlc", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "ray.io/v1", FieldsType: "FieldsV1",
			FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:annotations":{"f:dlc.aidlc.io/cluster-id":{}}},"f:spec":{"f:headGroupSpec":{}}}`)},
		{Manager: "kuberay-operator", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "ray.io/v1", Subresource: "status",
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:status":{"f:conditions":{},"f:endpoints":{}}}`)},
	}
	m.OwnerReferences = []metav1.OwnerReference{{APIVersion: "dlc.aidlc.io/v1alpha1", Kind: "ComputeCluster", Name: "cls-slim000001",
		UID: "0d9c2b1a-1111-2222-3333-444455556666", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	// What KubeRay writes.
	m.Labels["ray.io/originated-from-crd"] = "RayCluster"
	if f.ha {
		m.Finalizers = []string{rayutils.GCSFaultToleranceRedisCleanupFinalizer}
		m.Annotations[rayutils.RayFTEnabledAnnotationKey] = "true"
	}
	m.Annotations["kubectl.kubernetes.io/last-applied-configuration"] = `{"apiVersion":"ray.io/v1","kind":"RayCluster"}`
	w := &rc.Spec.WorkerGroupSpecs[0]
	w.Replicas = ptr.To[int32](2) // what the autoscaler wrote
	w.ScaleStrategy.WorkersToDelete = []string{rc.Name + "-cpu-worker-old", "someone-elses"}
	w.IdleTimeoutSeconds = ptr.To[int32](60)
	if rc.Spec.HeadGroupSpec.HeadService == nil {
		rc.Spec.HeadGroupSpec.HeadService = &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: rc.Name + "-head",
			Labels: map[string]string{"a": "b"}}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP}}
	}
	at := metav1.NewTime(now.Add(-10 * time.Minute).Truncate(time.Second))
	cond := func(typ rayv1.RayClusterConditionType, s metav1.ConditionStatus, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: string(typ), Status: s, Reason: reason, Message: msg, ObservedGeneration: m.Generation, LastTransitionTime: at}
	}
	st := &rc.Status
	*st = rayv1.RayClusterStatus{
		State:      rayv1.Ready, //lint:ignore SA1019 KubeRay still sets State: a whole RayCluster has it
		DesiredCPU: resource.MustParse("28"), DesiredMemory: resource.MustParse("112Gi"), DesiredGPU: resource.MustParse("0"), DesiredTPU: resource.MustParse("0"),
		LastUpdateTime:       &at,
		StateTransitionTimes: map[rayv1.ClusterState]*metav1.Time{rayv1.Ready: &at},
		Endpoints:            map[string]string{"client": "10001", "dashboard": "8265", "gcs-server": "6379", "metrics": "8080", "serve": "8000"},
		Head: rayv1.HeadInfo{PodIP: "10.244.1.17", ServiceIP: "10.96.14.3", PodName: rc.Name + "-head-x7k2p",
			ServiceName: rc.Spec.HeadGroupSpec.HeadService.Name}, // KubeRay names the head service as the spec does
		Conditions: []metav1.Condition{
			cond(rayv1.RayClusterProvisioned, metav1.ConditionTrue, rayv1.AllPodRunningAndReadyFirstTime, "All Ray Pods are ready for the first time"),
			cond(rayv1.HeadPodReady, metav1.ConditionTrue, rayv1.HeadPodRunningAndReady, "Head Pod ready"),
			cond(rayv1.RayClusterReplicaFailure, metav1.ConditionFalse, "", ""),
			cond(rayv1.RayClusterSuspending, metav1.ConditionFalse, "", ""),
			cond(rayv1.RayClusterSuspended, metav1.ConditionFalse, "", ""),
			{Type: "SomethingKubeRayAddsLater", Status: metav1.ConditionTrue, Reason: "Later", Message: "not read", LastTransitionTime: at},
		},
		ReadyWorkerReplicas: 3, AvailableWorkerReplicas: 3, DesiredWorkerReplicas: 3, MinWorkerReplicas: 2, MaxWorkerReplicas: 4,
		ObservedGeneration: m.Generation,
	}
	set := func(typ rayv1.RayClusterConditionType, s metav1.ConditionStatus, reason, msg string) {
		for i := range st.Conditions {
			if st.Conditions[i].Type == string(typ) {
				st.Conditions[i].Status, st.Conditions[i].Reason, st.Conditions[i].Message = s, reason, msg
			}
		}
	}
	switch f.state {
	case "takeover", "failed":
		set(rayv1.HeadPodReady, metav1.ConditionFalse, rayv1.HeadPodNotFound, "Head Pod not found")
		if f.state == "failed" {
			set(rayv1.HeadPodReady, metav1.ConditionFalse, "ContainersNotReady", "")
		}
		st.Head = rayv1.HeadInfo{ServiceName: st.Head.ServiceName}
	case "suspending":
		rc.Spec.Suspend = ptr.To(true)
		set(rayv1.RayClusterSuspending, metav1.ConditionTrue, "RayClusterSuspending", "")
	case "suspended":
		rc.Spec.Suspend = ptr.To(true)
		set(rayv1.RayClusterSuspended, metav1.ConditionTrue, "RayClusterSuspended", "")
		set(rayv1.HeadPodReady, metav1.ConditionFalse, rayv1.HeadPodNotFound, "")
		//lint:ignore SA1019 KubeRay still sets State: a whole RayCluster has it
		st.State = rayv1.Suspended
	case "refused":
		set(rayv1.RayClusterReplicaFailure, metav1.ConditionTrue, "FailedCreateWorkerPod",
			`pods "cls-slim000001-cpu-worker-abcde" is forbidden: exceeded quota: dlc-rg-1, requested: cpu=8, used: cpu=24, limited: cpu=28`)
	case "provisioning":
		set(rayv1.RayClusterProvisioned, metav1.ConditionFalse, rayv1.RayClusterPodsProvisioning, "")
		set(rayv1.HeadPodReady, metav1.ConditionFalse, rayv1.HeadPodNotFound, "")
		st.Head = rayv1.HeadInfo{}
	case "deleting":
		m.DeletionTimestamp = &at
	case "stale":
		st.ObservedGeneration = m.Generation - 1
	}
	return c, rc
}

// slimReads is every read of a cached RayCluster (the provisioner's and
// the test loop's head stand-in's, through Options.Dashboard), by reader.
func slimReads(rc *rayv1.RayCluster, pods []corev1.Pod, now time.Time) map[string]any {
	until, ok := kube.Takeover(rc, now)
	r := map[string]any{
		"index, changed, Observe: the cluster id label": rc.Labels[kube.KeyClusterID],
		"rayCluster: name, cluster id annotation":       [2]string{rc.Name, rc.Annotations[kube.KeyClusterID]},
		"generationOf":                          kube.GenerationOf(rc),
		"clusterObservation":                    kube.ClusterObservation(rc, now),
		"clusterObservation, in the takeover":   kube.ClusterObservation(rc, until.Add(-time.Second)),
		"clusterObservation, past the takeover": kube.ClusterObservation(rc, until.Add(time.Second)),
		"takeover":                              [2]any{until, ok},
		"autoscaled":                            kube.Autoscaled(rc),
		"kubeRayOwes, no pods":                  kube.KubeRayOwes(rc, nil),
		"kubeRayOwes":                           kube.KubeRayOwes(rc, pods),
		"headReady":                             kube.HeadReady(rc),
		"headService (the default Dashboard)":   [2]string{rc.Namespace, kube.HeadService(rc)},
		"RayTokenOf":                            kube.RayTokenOf(rc),
		"inPlace, one namespace":                kube.InPlace(rc.Namespace, nil, rc, ""),
		"inPlace, the group's namespace":        kube.InPlace("dlc", map[string]string{"rg-1": rc.Namespace}, rc, "rg-1"),
		"ApplyCluster, leaveOldNamespace, deleteObjects, awaitCached": [5]any{rc.Namespace, rc.UID, rc.ResourceVersion,
			rc.DeletionTimestamp, ptr.Deref(rc.Spec.Suspend, false)},
		// The test loop's head stand-in (kubetest.RayLoop.Dashboard, Head).
		"Head: ft": rayutils.IsGCSFaultToleranceEnabled(&rc.Spec, rc.Annotations),
	}
	if cs := rc.Spec.HeadGroupSpec.Template.Spec.Containers; len(cs) > 0 {
		env := map[string]corev1.EnvVar{}
		for _, e := range cs[0].Env {
			if e.Name == "RAY_AUTH_MODE" || e.Name == "RAY_AUTH_TOKEN" {
				env[e.Name] = e
			}
		}
		r["Head: imageRayVersion, authToken"] = [2]any{cs[0].Image, env}
	}
	// An apply over the cached object carries over, and names to delete,
	// as over the whole one.
	c := &cluster.Cluster{ID: "cls-slim000001", State: cluster.Running, Generation: 5, Replicas: map[string]int{"cpu": 1},
		Spec: cluster.Spec{Name: "瘦身", ResourceGroup: "rg-1", Environment: cpuEnv()}}
	c.Spec.Environment.Workers[0].Instances = cluster.Range(1, 3)
	applied, err := kube.RenderRayCluster(c, kube.RenderOptions{})
	if err != nil {
		panic(err)
	}
	applied.Name = rc.Name
	kube.CarryOver(applied, rc)
	kube.NameSurplus(applied, pods)
	r["carryOver, nameSurplus"] = [2]any{applied.ResourceVersion, applied.Spec.WorkerGroupSpecs}
	return r
}

// slimPods are a cluster's pods, as nameSurplus and kubeRayOwes read them.
func slimPods(rc *rayv1.RayCluster, now time.Time) []corev1.Pod {
	var pods []corev1.Pod
	for i, n := range []string{"a", "b", "c", "d"} {
		pods = append(pods, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: rc.Name + "-cpu-worker-" + n,
			CreationTimestamp: metav1.NewTime(now.Add(time.Duration(i) * time.Minute)),
			Labels:            map[string]string{"ray.io/node-type": "worker", "ray.io/group": "cpu"}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}})
	}
	return pods
}

// TestSlimRayClusterKeepsWhatIsRead: every read of a cached RayCluster
// (slimReads) reads the same of what its informer keeps (SlimRayCluster)
// as of the whole object, in each state of a RayCluster, with and without
// a token, GCS fault tolerance and autoscaling; what nothing reads is
// gone; and each field it keeps is needed: dropped, some read differs.
func TestSlimRayClusterKeepsWhatIsRead(t *testing.T) {
	now := time.Now()
	type pair struct {
		f           slimFixture
		whole, slim *rayv1.RayCluster
	}
	var pairs []pair
	for _, f := range slimFixtures() {
		_, whole := wholeRayCluster(t, f, now)
		slim := kube.SlimRayCluster(whole)
		pairs = append(pairs, pair{f, whole, slim})
		pods := slimPods(whole, now)
		a, b := slimReads(whole, pods, now), slimReads(slim, pods, now)
		for k := range a {
			if !reflect.DeepEqual(a[k], b[k]) {
				t.Errorf("%s: %s reads of the whole RayCluster %+v, of the slim one %+v", f, k, a[k], b[k])
			}
		}
		if f.token != (kube.RayTokenOf(slim) != nil) {
			t.Errorf("%s: RayTokenOf %v", f, kube.RayTokenOf(slim))
		}

		// What nothing reads is gone.
		h := slim.Spec.HeadGroupSpec
		if slim.ManagedFields != nil || slim.OwnerReferences != nil || slim.Finalizers != nil || len(slim.Labels) != 2 ||
			slim.Annotations[kube.KeyName] != "" || slim.Annotations[kube.KeyTags] != "" ||
			slim.Spec.AutoscalerOptions != nil || slim.Spec.RayVersion != "" || h.RayStartParams != nil ||
			h.Template.Labels != nil || len(h.Template.Spec.Containers) != 1 || len(h.Template.Spec.Containers[0].Env) > 2 ||
			h.Template.Spec.Containers[0].Command != nil || h.Template.Spec.Volumes != nil ||
			(h.HeadService != nil && (h.HeadService.Spec.Type != "" || h.HeadService.Labels != nil || slim.Status.Head.ServiceName != "")) ||
			(f.ha && *slim.Spec.GcsFaultToleranceOptions != rayv1.GcsFaultToleranceOptions{}) {
			t.Errorf("%s: the slim RayCluster keeps what nothing reads: %+v", f, slim)
		}
		for _, w := range slim.Spec.WorkerGroupSpecs {
			if w.RayStartParams != nil || w.MinReplicas != nil || w.MaxReplicas != nil || w.Template.Labels != nil || w.Template.Spec.Containers != nil || w.IdleTimeoutSeconds != nil {
				t.Errorf("%s: worker group %s keeps what nothing reads: %+v", f, w.GroupName, w)
			}
		}
		st := slim.Status
		//lint:ignore SA1019 KubeRay still sets State; the slim RayCluster drops it
		if st.Endpoints != nil || st.StateTransitionTimes != nil || st.LastUpdateTime != nil || st.State != "" ||
			!st.DesiredCPU.IsZero() || !st.DesiredMemory.IsZero() || st.ReadyWorkerReplicas != 0 || len(st.Conditions) > 3 {
			t.Errorf("%s: the slim status keeps what nothing reads: %+v", f, st)
		}
		for _, c := range st.Conditions {
			if c.Type != string(rayv1.HeadPodReady) && (c.Status != metav1.ConditionTrue || c.Reason != "" ||
				c.Type != string(rayv1.RayClusterReplicaFailure) && c.Message != "") {
				t.Errorf("%s: condition %s keeps what nothing reads: %+v", f, c.Type, c)
			}
		}
	}

	// Each field kept is read: dropped from the slim RayCluster, some read
	// of some fixture differs from the whole one's.
	drops := map[string]func(*rayv1.RayCluster){
		"metadata.name":              func(rc *rayv1.RayCluster) { rc.Name = "" },
		"metadata.namespace":         func(rc *rayv1.RayCluster) { rc.Namespace = "" },
		"metadata.uid":               func(rc *rayv1.RayCluster) { rc.UID = "" },
		"metadata.resourceVersion":   func(rc *rayv1.RayCluster) { rc.ResourceVersion = "" },
		"metadata.generation":        func(rc *rayv1.RayCluster) { rc.Generation = 0 },
		"metadata.deletionTimestamp": func(rc *rayv1.RayCluster) { rc.DeletionTimestamp = nil },
		"label cluster id":           func(rc *rayv1.RayCluster) { delete(rc.Labels, kube.KeyClusterID) },
		"label resource group":       func(rc *rayv1.RayCluster) { delete(rc.Labels, kube.KeyResourceGroup) },
		"annotation cluster id":      func(rc *rayv1.RayCluster) { delete(rc.Annotations, kube.KeyClusterID) },
		"annotation generation":      func(rc *rayv1.RayCluster) { delete(rc.Annotations, kube.KeyGeneration) },
		"annotation ft-enabled": func(rc *rayv1.RayCluster) {
			delete(rc.Annotations, rayutils.RayFTEnabledAnnotationKey)
			rc.Spec.GcsFaultToleranceOptions = nil // what only the annotation says
		},
		"spec.suspend":                  func(rc *rayv1.RayCluster) { rc.Spec.Suspend = nil },
		"spec.enableInTreeAutoscaling":  func(rc *rayv1.RayCluster) { rc.Spec.EnableInTreeAutoscaling = nil },
		"spec.gcsFaultToleranceOptions": func(rc *rayv1.RayCluster) { rc.Spec.GcsFaultToleranceOptions = nil },
		"spec.headGroupSpec.headService.name": func(rc *rayv1.RayCluster) {
			rc.Spec.HeadGroupSpec.HeadService = nil
			rc.Status.Head.ServiceName = "" // what only the spec says
		},
		"the head container's image": func(rc *rayv1.RayCluster) { rc.Spec.HeadGroupSpec.Template.Spec.Containers[0].Image = "" },
		"the head container's env":   func(rc *rayv1.RayCluster) { rc.Spec.HeadGroupSpec.Template.Spec.Containers[0].Env = nil },
		"the head container's name":  func(rc *rayv1.RayCluster) { rc.Spec.HeadGroupSpec.Template.Spec.Containers[0].Name = "" },
		"workerGroupSpecs[].groupName": func(rc *rayv1.RayCluster) {
			for i := range rc.Spec.WorkerGroupSpecs {
				rc.Spec.WorkerGroupSpecs[i].GroupName = ""
			}
		},
		"workerGroupSpecs[].replicas":                      func(rc *rayv1.RayCluster) { rc.Spec.WorkerGroupSpecs[0].Replicas = nil },
		"workerGroupSpecs[].scaleStrategy.workersToDelete": func(rc *rayv1.RayCluster) { rc.Spec.WorkerGroupSpecs[0].ScaleStrategy = rayv1.ScaleStrategy{} },
		"status.observedGeneration":                        func(rc *rayv1.RayCluster) { rc.Status.ObservedGeneration = 0 },
		"status.head.serviceName":                          func(rc *rayv1.RayCluster) { rc.Status.Head.ServiceName = "" },
	}
	for _, typ := range []rayv1.RayClusterConditionType{rayv1.RayClusterProvisioned, rayv1.HeadPodReady, rayv1.RayClusterReplicaFailure,
		rayv1.RayClusterSuspending, rayv1.RayClusterSuspended} {
		drops["condition "+string(typ)] = func(rc *rayv1.RayCluster) {
			rc.Status.Conditions = slicesDeleteCondition(rc.Status.Conditions, string(typ), nil)
		}
	}
	drops["condition HeadPodReady's lastTransitionTime"] = func(rc *rayv1.RayCluster) {
		slicesDeleteCondition(rc.Status.Conditions, string(rayv1.HeadPodReady), func(c *metav1.Condition) { c.LastTransitionTime = metav1.Time{} })
	}
	drops["condition HeadPodReady's message"] = func(rc *rayv1.RayCluster) {
		slicesDeleteCondition(rc.Status.Conditions, string(rayv1.HeadPodReady), func(c *metav1.Condition) { c.Message = "" })
	}
	drops["condition HeadPodReady's reason"] = func(rc *rayv1.RayCluster) {
		slicesDeleteCondition(rc.Status.Conditions, string(rayv1.HeadPodReady), func(c *metav1.Condition) { c.Reason = "" })
	}
	drops["condition ReplicaFailure's message"] = func(rc *rayv1.RayCluster) {
		slicesDeleteCondition(rc.Status.Conditions, string(rayv1.RayClusterReplicaFailure), func(c *metav1.Condition) { c.Message = "" })
	}
	for name, drop := range drops {
		read := false
		for _, p := range pairs {
			less := p.slim.DeepCopy()
			drop(less)
			pods := slimPods(p.whole, now)
			if !reflect.DeepEqual(slimReads(p.whole, pods, now), slimReads(less, pods, now)) {
				read = true
				break
			}
		}
		if !read {
			t.Errorf("the slim RayCluster keeps %s, which no read tells apart", name)
		}
	}
}

// slicesDeleteCondition deletes the condition of type typ from conds, or
// changes it with edit when edit is not nil.
func slicesDeleteCondition(conds []metav1.Condition, typ string, edit func(*metav1.Condition)) []metav1.Condition {
	out := conds[:0]
	for i := range conds {
		if conds[i].Type != typ {
			out = append(out, conds[i])
		} else if edit != nil {
			edit(&conds[i])
			out = append(out, conds[i])
		}
	}
	return out
}
