package kube_test

import (
	"context"
	"encoding/json"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/ray-project/kuberay/ray-operator/controllers/ray/common"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidlc/dlc/dlctest/kubetest"
)

// configDir is what kubectl apply -k installs: RBAC, the namespace's
// labels, the admission policy.
var configDir = filepath.Join("..", "..", "config")

// policyDenied is how the API server starts a refusal by the shipped policy.
const policyDenied = "ValidatingAdmissionPolicy 'dlc-ray"

// admissionCase is a rendered object made into one the SDK does not
// render, and the words of the refusal.
type admissionCase struct {
	name   string
	base   string // render case
	edit   func(spec *rayv1.RayClusterSpec, job *rayv1.RayJobSpec)
	refuse string // "" when admitted
}

func head(s *rayv1.RayClusterSpec) *corev1.PodSpec { return &s.HeadGroupSpec.Template.Spec }
func worker(s *rayv1.RayClusterSpec) *corev1.PodSpec {
	return &s.WorkerGroupSpecs[0].Template.Spec
}

func admissionCases() []admissionCase {
	const (
		hostNS     = "pods may not use the node's namespaces"
		volumes    = "pods may mount PersistentVolumeClaims only"
		container  = "must set allowPrivilegeEscalation false and drop ALL capabilities"
		podContext = "pods must set securityContext runAsNonRoot true and seccompProfile RuntimeDefault"
		token      = "pods must set automountServiceAccountToken false"
		env        = "env valueFrom only as a secretKeyRef to a Secret whose name starts with dlc-env-"
		exposed    = "the head is reached through its ClusterIP Service only"
		scheduling = "pods may not set nodeName, priorityClassName"
	)
	secretEnv := func(name string) corev1.EnvVar {
		return corev1.EnvVar{Name: "S", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: "k"}}}
	}
	return []admissionCase{
		{name: "privileged head", base: "cluster-cpu", refuse: container,
			edit: func(s *rayv1.RayClusterSpec, _ *rayv1.RayJobSpec) {
				head(s).Containers[0].SecurityContext.Privileged = ptr.To(true)
			}},
		{name: "hostPID worker", base: "cluster-cpu", refuse: hostNS,
			edit: func(s *rayv1.RayClusterSpec, _ *rayv1.RayJobSpec) { worker(s).HostPID = true }},
		{name: "hostNetwork head", base: "cluster-cpu", refuse: hostNS,
			edit: func(s *rayv1.RayClusterSpec, _ *rayv1.RayJobSpec) { head(s).HostNetwork = true }},
		{name: "hostIPC worker", base: "cluster-cpu", refuse: hostNS,
			edit: func(s *rayv1.RayClusterSpec, _ *rayv1.RayJobSpec) { worker(s).HostIPC = true }},
		{name: "hostPath /", base: "cluster-mounts", refuse: volumes,
			edit: func(s *rayv1.RayClusterSpec, _ *rayv1.RayJobSpec) {
				head(s).Volumes = append(head(s).Volumes, corev1.Volume{Name: "root",
					VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
			}},
		{name: "Secret volume", base: "cluster-cpu", refuse: volumes,
			edit: func(s *rayv1.RayClusterSpec, _ *rayv1.RayJobSpec) {
				worker(s).Volumes = []corev1.Volume{{Name: "s",
					VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "dlc-env-x"}}}}
			}},
		{name: "projected token volume", base: "cluster-cpu", refuse: volumes,
			edit: func(s *rayv1.RayClusterSpec, _ *rayv1.RayJobSpec) {
				head(s).Volumes = []corev1.Volume{{Name: "t", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
					Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}}}}
			}},
		{name: "the backend's ServiceAccount", base: "cluster-cpu", refuse: "pods may not name a serviceAccountName",
			edit: func(s *rayv1.RayClusterSpec, _ *rayv1.RayJobSpec) { head(s).ServiceAccountName = "dlc-backend" }},
		{name: "worker token", base: "cluster-autoscaling", refuse: token,
			edit: func(s *rayv1.RayClusterSpec, _ *rayv1.RayJobSpec) { worker(s).AutomountServiceAccountToken = nil }},
		{name: "head token without autoscaling", base: "cluster-cpu", refuse: token,
			edit: func(s *rayv1.RayClusterSpec, _ *rayv1.RayJobSpec) {
				head(s).AutomountServiceAccountToken = ptr.To(true)
			}},
		{name: "added capability", base: "cluster-gpu", refuse: container,
			edit: func(s *rayv1.RayClusterSpec, _ *rayv1.RayJobSpec) {
				worker(s).Containers[0].SecurityContext.Capabilities.Add = []corev1.Capability{"SYS_ADMIN"}
			}},
		{name: "capabilities kept", base: "cluster-cpu", refuse: container,
			edit: func(s *rayv1.RayClusterSpec, _ *rayv1.RayJobSpec) {
				head(s).Containers[0].SecurityContext.Capabilities = nil
			}},
		{name: "privilege escalation", base: "cluster-cpu", refuse: container,
			edit: func(s *rayv1.RayClusterSpec, _ *rayv1.RayJobSpec) {
				worker(s).Containers[0].SecurityContext.AllowPrivilegeEscalation = nil
			}},
		{name: "container as root", base: "cluster-cpu", refuse: container,
			edit: func(s *rayv1.RayClusterSpec, _ *rayv1.RayJobSpec) {
				head(s).Containers[0].SecurityContext.RunAsUser = ptr.To[int64](0)
			}},
		{name: "autoscaler without security context", base: "cluster-autoscaling", refuse: container,
			edit: func(s *rayv1.RayClusterSpec, _ *rayv1.RayJobSpec) { s.AutoscalerOptions = nil }},
		{name: "autoscaler env", base: "cluster-autoscaling", refuse: "autoscalerOptions may not set the autoscaler's image, env",
			edit: func(s *rayv1.RayClusterSpec, _ *rayv1.RayJobSpec) {
				s.AutoscalerOptions.EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "x"}}}}
			}},
		{name: "pod without runAsNonRoot", base: "cluster-cpu", refuse: podContext,
			edit: func(s *rayv1.RayClusterSpec, _ *rayv1.RayJobSpec) { head(s).SecurityContext.RunAsNonRoot = nil }},
		{name: "no pod security context", base: "cluster-cpu", refuse: podContext,
			edit: func(s *rayv1.RayClusterSpec, _ *rayv1.RayJobSpec) { worker(s).SecurityContext = nil }},
		{name: "seccomp unconfined", base: "cluster-cpu", refuse: podContext,
			edit: func(s *rayv1.RayClusterSpec, _ *rayv1.RayJobSpec) {
				head(s).SecurityContext.SeccompProfile.Type = corev1.SeccompProfileTypeUnconfined
			}},
		{name: "envFrom a Secret", base: "cluster-cpu", refuse: "containers may not use envFrom",
			edit: func(s *rayv1.RayClusterSpec, _ *rayv1.RayJobSpec) {
				head(s).Containers[0].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "dlc-env-x"}}}}
			}},
		{name: "env from another Secret", base: "cluster-cpu", refuse: env,
			edit: func(s *rayv1.RayClusterSpec, _ *rayv1.RayJobSpec) {
				worker(s).Containers[0].Env = append(worker(s).Containers[0].Env, secretEnv("db-password"))
			}},
		{name: "env from a ConfigMap", base: "cluster-cpu", refuse: env,
			edit: func(s *rayv1.RayClusterSpec, _ *rayv1.RayJobSpec) {
				head(s).Containers[0].Env = append(head(s).Containers[0].Env, corev1.EnvVar{Name: "C", ValueFrom: &corev1.EnvVarSource{
					ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "x"}, Key: "k"}}})
			}},
		{name: "env from another field", base: "cluster-cpu", refuse: env,
			edit: func(s *rayv1.RayClusterSpec, _ *rayv1.RayJobSpec) {
				head(s).Containers[0].Env = append(head(s).Containers[0].Env, corev1.EnvVar{Name: "C", ValueFrom: &corev1.EnvVarSource{
					FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.serviceAccountName"}}})
			}},
		{name: "env from a dlc-env- Secret", base: "cluster-cpu", // what the SDK renders for Secret references
			edit: func(s *rayv1.RayClusterSpec, _ *rayv1.RayJobSpec) {
				worker(s).Containers[0].Env = append(worker(s).Containers[0].Env, secretEnv("dlc-env-run-1"))
			}},
		{name: "thousands of env vars within the CEL cost budget", base: "cluster-autoscaling",
			edit: func(s *rayv1.RayClusterSpec, _ *rayv1.RayJobSpec) {
				for _, p := range []*corev1.PodSpec{head(s), worker(s), &s.WorkerGroupSpecs[1].Template.Spec} {
					for i := range 2000 {
						e := secretEnv("dlc-env-run-1")
						e.Name = "S" + strconv.Itoa(i)
						p.Containers[0].Env = append(p.Containers[0].Env, e)
					}
				}
			}},
		{name: "init container", base: "cluster-cpu", refuse: "pods may not have initContainers",
			edit: func(s *rayv1.RayClusterSpec, _ *rayv1.RayJobSpec) {
				worker(s).InitContainers = []corev1.Container{{Name: "i", Image: "busybox"}}
			}},
		{name: "host port", base: "cluster-cpu", refuse: "hostPorts",
			edit: func(s *rayv1.RayClusterSpec, _ *rayv1.RayJobSpec) {
				head(s).Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8265, HostPort: 8265}}
			}},
		{name: "ingress", base: "cluster-cpu", refuse: exposed,
			edit: func(s *rayv1.RayClusterSpec, _ *rayv1.RayJobSpec) { s.HeadGroupSpec.EnableIngress = ptr.To(true) }},
		{name: "load balancer", base: "cluster-cpu", refuse: exposed,
			edit: func(s *rayv1.RayClusterSpec, _ *rayv1.RayJobSpec) {
				s.HeadGroupSpec.ServiceType = corev1.ServiceTypeLoadBalancer
			}},
		{name: "head service", base: "cluster-cpu", refuse: exposed,
			edit: func(s *rayv1.RayClusterSpec, _ *rayv1.RayJobSpec) {
				s.HeadGroupSpec.HeadService = &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort}}
			}},
		{name: "node name", base: "cluster-cpu", refuse: scheduling,
			edit: func(s *rayv1.RayClusterSpec, _ *rayv1.RayJobSpec) { head(s).NodeName = "control-plane" }},
		{name: "system priority", base: "cluster-cpu", refuse: scheduling,
			edit: func(s *rayv1.RayClusterSpec, _ *rayv1.RayJobSpec) {
				worker(s).PriorityClassName = "system-node-critical"
			}},
		{name: "tolerations", base: "cluster-cpu", refuse: scheduling,
			edit: func(s *rayv1.RayClusterSpec, _ *rayv1.RayJobSpec) {
				worker(s).Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
			}},
		{name: "another Redis Secret", base: "cluster-ha", refuse: "the Redis user and password must come from a Secret whose name starts with dlc-redis",
			edit: func(s *rayv1.RayClusterSpec, _ *rayv1.RayJobSpec) {
				s.GcsFaultToleranceOptions.RedisPassword.ValueFrom.SecretKeyRef.Name = "db-password"
			}},
		{name: "a Redis user in plain text", base: "cluster-ha", refuse: "the Redis user and password must come from a Secret whose name starts with dlc-redis",
			edit: func(s *rayv1.RayClusterSpec, _ *rayv1.RayJobSpec) {
				s.GcsFaultToleranceOptions.RedisUsername = &rayv1.RedisCredential{Value: "default"}
			}},
		{name: "a Redis user of the resource group's (RenderOptions.RedisFor)", base: "cluster-ha",
			edit: func(s *rayv1.RayClusterSpec, _ *rayv1.RayJobSpec) {
				s.GcsFaultToleranceOptions.RedisUsername = &rayv1.RedisCredential{ValueFrom: &corev1.EnvVarSource{
					SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "dlc-redis-rg-a"}, Key: "user"}}}
			}},
		{name: "a Redis user from another Secret", base: "cluster-ha", refuse: "the Redis user and password must come from a Secret whose name starts with dlc-redis",
			edit: func(s *rayv1.RayClusterSpec, _ *rayv1.RayJobSpec) {
				s.GcsFaultToleranceOptions.RedisUsername = &rayv1.RedisCredential{ValueFrom: &corev1.EnvVarSource{
					SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "db-user"}, Key: "u"}}}
			}},
		{name: "job: privileged cluster", base: "rayjob-ondemand", refuse: hostNS,
			edit: func(s *rayv1.RayClusterSpec, _ *rayv1.RayJobSpec) { head(s).HostPID = true }},
		{name: "job: secret volume", base: "rayjob-queued", refuse: volumes,
			edit: func(s *rayv1.RayClusterSpec, _ *rayv1.RayJobSpec) {
				worker(s).Volumes = append(worker(s).Volumes, corev1.Volume{Name: "s",
					VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "x"}}})
			}},
		{name: "job: submitter pod", base: "rayjob-ondemand", refuse: "submit in HTTPMode",
			edit: func(_ *rayv1.RayClusterSpec, j *rayv1.RayJobSpec) {
				j.SubmissionMode = rayv1.K8sJobMode
				j.SubmitterPodTemplate = &corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "s", Image: "x", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}},
				}}
			}},
		{name: "job: sidecar mode", base: "rayjob-ondemand", refuse: "submit in HTTPMode",
			edit: func(_ *rayv1.RayClusterSpec, j *rayv1.RayJobSpec) { j.SubmissionMode = rayv1.SidecarMode }},
		{name: "job: on another cluster", base: "rayjob-ondemand", refuse: "must bring its own rayClusterSpec",
			edit: func(_ *rayv1.RayClusterSpec, j *rayv1.RayJobSpec) {
				j.RayClusterSpec = nil
				j.ClusterSelector = map[string]string{"ray.io/cluster": "someone-elses"}
			}},
	}
}

// renderByName renders the render case named name into ns.
func renderByName(t *testing.T, name, ns string) client.Object {
	t.Helper()
	for _, rc := range renderCases() {
		if rc.name == name {
			return rc.render(t, ns)
		}
	}
	t.Fatalf("no render case %s", name)
	return nil
}

// TestAdmissionPolicy installs what config/ ships (RBAC, the namespace's
// labels, the admission policy) and checks, as the backend's
// ServiceAccount, that every object the SDK renders is admitted and that
// anything else that would give a pod privileges, a Secret, a token or an
// exposed head is refused, each with a message that names it (dry-run
// creates, which go through admission). Issue 18's RayCluster is refused
// for real, and the backend's identity is held to the policy in a
// namespace without the label too. Pod Security refuses a privileged pod
// and admits every pod KubeRay makes of what the SDK renders.
func TestAdmissionPolicy(t *testing.T) {
	cp := kubetest.StartControlPlane(t)
	ns := cp.NewNamespace(t)
	cfg := cp.BindRBAC(t, ns, rbacDir)
	cp.BindAdmission(t, ns, configDir)
	backend, err := client.New(cfg, client.Options{Scheme: cp.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	t.Run("rendered", func(t *testing.T) {
		for _, rc := range renderCases() {
			if err := backend.Create(ctx, rc.render(t, ns), client.DryRunAll); err != nil {
				t.Errorf("%s: %v", rc.name, err)
			}
		}
	})

	t.Run("refused", func(t *testing.T) {
		for _, ac := range admissionCases() {
			t.Run(ac.name, func(t *testing.T) {
				obj := renderByName(t, ac.base, ns)
				switch o := obj.(type) {
				case *rayv1.RayCluster:
					ac.edit(&o.Spec, nil)
				case *rayv1.RayJob:
					ac.edit(o.Spec.RayClusterSpec, &o.Spec)
				}
				err := backend.Create(ctx, obj, client.DryRunAll)
				switch {
				case ac.refuse == "" && err != nil:
					t.Errorf("refused: %v", err)
				case ac.refuse != "" && (err == nil || !strings.Contains(err.Error(), policyDenied) || !strings.Contains(err.Error(), ac.refuse)):
					t.Errorf("got %v, want the policy's refusal %q", err, ac.refuse)
				}
			})
		}
	})

	t.Run("issue 18", func(t *testing.T) {
		bad := kubetest.PrivilegedRayCluster(ns)
		err := backend.Create(ctx, bad)
		if err == nil || !strings.Contains(err.Error(), policyDenied) {
			t.Fatalf("creating the privileged RayCluster as the backend: %v, want the policy's refusal", err)
		}
		t.Logf("refused: %v", err)
		if err := cp.Client().Get(ctx, client.ObjectKeyFromObject(bad), &rayv1.RayCluster{}); !apierrors.IsNotFound(err) {
			t.Errorf("after the refusal: %v, want NotFound", err)
		}
	})

	t.Run("backend elsewhere", func(t *testing.T) {
		// A namespace without the label: the backend's ServiceAccount is
		// still held to the policy, the administrator is not.
		other := cp.NewNamespace(t)
		c, err := client.New(cp.BindRBAC(t, other, rbacDir), client.Options{Scheme: cp.Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, kubetest.PrivilegedRayCluster(other), client.DryRunAll); err == nil || !strings.Contains(err.Error(), policyDenied) {
			t.Errorf("the backend's privileged RayCluster: %v, want the policy's refusal", err)
		}
		if err := cp.Client().Create(ctx, kubetest.PrivilegedRayCluster(other), client.DryRunAll); err != nil {
			t.Errorf("the administrator's, where the policy is not enforced: %v", err)
		}
	})

	t.Run("pod security", func(t *testing.T) {
		bad := kubetest.PrivilegedRayCluster(ns)
		pod := &corev1.Pod{Spec: bad.Spec.HeadGroupSpec.Template.Spec}
		pod.Name, pod.Namespace = "privileged", ns
		if err := cp.Client().Create(ctx, pod, client.DryRunAll); err == nil || !strings.Contains(err.Error(), "violates PodSecurity") {
			t.Errorf("a privileged pod: %v, want Pod Security's refusal", err)
		}
		for _, rc := range renderCases() {
			var spec *rayv1.RayClusterSpec
			switch o := rc.render(t, ns).(type) {
			case *rayv1.RayCluster:
				spec = &o.Spec
			case *rayv1.RayJob:
				spec = o.Spec.RayClusterSpec
			}
			for what, pod := range kubeRayPods(t, "c", ns, spec) {
				pod.Name, pod.GenerateName = strings.ReplaceAll(what, " ", "-"), ""
				if err := cp.Client().Create(ctx, &pod, client.DryRunAll); err != nil {
					t.Errorf("%s: KubeRay's %s pod: %v", rc.name, what, err)
				}
			}
		}
	})
}

// TestAdmissionPoliciesAgree checks that the RayJob policy holds a RayJob's
// rayClusterSpec to the RayCluster policy's rules word for word (the
// envtest cases exercise every rule on RayClusters, some on RayJobs).
func TestAdmissionPoliciesAgree(t *testing.T) {
	policies, _ := kubetest.ReadAdmission(t, filepath.Join(configDir, "admission"))
	byName := map[string]*admissionv1.ValidatingAdmissionPolicy{}
	for _, p := range policies {
		byName[p.Name] = p
	}
	rc, rj := byName["dlc-raycluster-shapes"], byName["dlc-rayjob-shapes"]
	if rc == nil || rj == nil {
		t.Fatalf("policies %v, want dlc-raycluster-shapes and dlc-rayjob-shapes", slices.Collect(maps.Keys(byName)))
	}
	withoutSpec := func(vs []admissionv1.Variable) []admissionv1.Variable {
		return slices.DeleteFunc(slices.Clone(vs), func(v admissionv1.Variable) bool { return v.Name == "spec" })
	}
	if !equality.Semantic.DeepEqual(withoutSpec(rc.Spec.Variables), withoutSpec(rj.Spec.Variables)) {
		t.Errorf("the variables differ:\n%+v\n%+v", rc.Spec.Variables, rj.Spec.Variables)
	}
	if len(rj.Spec.Validations) != len(rc.Spec.Validations)+1 ||
		!equality.Semantic.DeepEqual(rj.Spec.Validations[1:], rc.Spec.Validations) {
		t.Errorf("the RayJob policy's rules after its first are not the RayCluster policy's")
	}
	if rc.Spec.FailurePolicy == nil || *rc.Spec.FailurePolicy != admissionv1.Fail ||
		rj.Spec.FailurePolicy == nil || *rj.Spec.FailurePolicy != admissionv1.Fail {
		t.Errorf("failurePolicy %v, %v: want Fail", rc.Spec.FailurePolicy, rj.Spec.FailurePolicy)
	}
}

// TestAdmissionHeads checks what the shipped policies leave an autoscaling
// head's token (KubeRay's Role for the ServiceAccount named after its
// RayCluster: patch every pod and RayCluster of the namespace): it may
// scale its own RayCluster, and may not touch another's, suspend or resume
// its own, or change a pod's image or Ray labels.
func TestAdmissionHeads(t *testing.T) {
	cp := kubetest.StartControlPlane(t)
	ns := cp.NewNamespace(t)
	cp.BindAdmission(t, ns, configDir)
	admin := cp.Client()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	var mine, theirs *rayv1.RayCluster
	for i, name := range []string{"cls-mine", "cls-theirs"} {
		rc := renderByName(t, "cluster-autoscaling", ns).(*rayv1.RayCluster)
		rc.Name = name
		if err := admin.Create(ctx, rc); err != nil {
			t.Fatalf("creating %s: %v", name, err)
		}
		if i == 0 {
			mine = rc
		} else {
			theirs = rc
		}
	}
	pod := kubeRayPods(t, mine.Name, ns, &mine.Spec)["head"]
	pod.Name, pod.GenerateName = "cls-mine-head", ""
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "ray.io/v1", Kind: "RayCluster", Name: mine.Name, UID: mine.UID, Controller: ptr.To(true)}}
	if err := admin.Create(ctx, &pod); err != nil {
		t.Fatalf("creating the head pod as KubeRay would: %v", err)
	}

	// The head's token: KubeRay's ServiceAccount, Role and RoleBinding.
	role, err := common.BuildRole(mine)
	if err != nil {
		t.Fatal(err)
	}
	binding, err := common.BuildRoleBinding(mine)
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range []client.Object{role, binding} {
		if err := admin.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	sa := "system:serviceaccount:" + ns + ":" + mine.Name
	head, err := client.New(cp.AddUser(t, sa, "system:serviceaccounts", "system:serviceaccounts:"+ns), client.Options{Scheme: cp.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	patch := func(obj client.Object, p string) error {
		pt := types.MergePatchType
		if _, ok := obj.(*corev1.Pod); ok {
			pt = types.StrategicMergePatchType // containers merge by name
		}
		if strings.HasPrefix(p, "[") {
			pt = types.JSONPatchType
		}
		for {
			var err error
			if body, ok := strings.CutPrefix(p, "resize:"); ok {
				err = head.SubResource("resize").Patch(ctx, obj, client.RawPatch(pt, []byte(body)))
			} else {
				err = head.Patch(ctx, obj, client.RawPatch(pt, []byte(p)))
			}
			// The API server's authorizer learns the binding a moment later.
			if err == nil || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "cannot patch") || ctx.Err() != nil {
				return err
			}
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	scale := `[{"op":"replace","path":"/spec/workerGroupSpecs/0/replicas","value":2}]`
	// Ray's autoscaler writes with JSON patches of these paths
	// (python/ray/autoscaler/_private/kuberay/node_provider.py).
	deleting := func(names ...string) string {
		return `[{"op":"add","path":"/spec/workerGroupSpecs/0/scaleStrategy","value":{"workersToDelete":` + mustJSONString(t, names) + `}}]`
	}
	for _, c := range []struct {
		name   string
		obj    client.Object
		patch  string
		refuse string
	}{
		{"scale its own cluster", mine.DeepCopy(), scale, ""},
		{"scale another's", theirs.DeepCopy(), scale, "may update only the RayCluster of its own name"},
		{"hibernate its own", mine.DeepCopy(), `{"spec":{"suspend":true}}`, "may not suspend or resume a RayCluster"},
		{"privileged own", mine.DeepCopy(), `{"spec":{"headGroupSpec":{"template":{"spec":{"hostPID":true}}}}}`, "node's namespaces|may change only a RayCluster's worker"},
		{"a pod's image", pod.DeepCopy(), `{"spec":{"containers":[{"name":"ray-head","image":"evil:latest"}]}}`, "container images may not change"},
		{"a pod's Ray label", pod.DeepCopy(), `{"metadata":{"labels":{"ray.io/cluster":"elsewhere"}}}`, "ray.io/ and dlc.aidlc.io/ labels may not change"},
		{"a pod's own label", pod.DeepCopy(), `{"metadata":{"labels":{"team":"a"}}}`, ""},
		{"a finalizer on a pod", pod.DeepCopy(), `{"metadata":{"finalizers":["evil.example.com/hold"]}}`, "may not gain a finalizer"},
		{"a pod's owner removed", pod.DeepCopy(), `{"metadata":{"ownerReferences":null}}`, "ownerReferences may not change"},
		{"a deadline on a pod", pod.DeepCopy(), `{"spec":{"activeDeadlineSeconds":1}}`, "activeDeadlineSeconds may not change"},
		{"a resize of a pod", pod.DeepCopy(), "resize:" + `{"spec":{"containers":[{"name":"ray-head","resources":{"requests":{"cpu":"64"},"limits":{"cpu":"64"}}}]}}`, "may not be resized in place"},
		{"workersToDelete naming another's head", mine.DeepCopy(), deleting("cls-theirs-head"), "may name only the RayCluster's own workers"},
		{"workersToDelete naming its own worker", mine.DeepCopy(), deleting("cls-mine-cpu-worker-abcde"), ""},
		{"its own worker template, to read a Secret", mine.DeepCopy(),
			`[{"op":"add","path":"/spec/workerGroupSpecs/0/template/spec/containers/0/env","value":[{"name":"STOLEN","valueFrom":{"secretKeyRef":{"name":"dlc-env-theirs","key":"k"}}}]}]`,
			"may change only a RayCluster's worker"},
		{"its own workers' requests", mine.DeepCopy(),
			`[{"op":"replace","path":"/spec/workerGroupSpecs/0/template/spec/containers/0/resources/requests/cpu","value":"64"}]`,
			"may change only a RayCluster's worker"},
		{"its own ceiling", mine.DeepCopy(), `[{"op":"replace","path":"/spec/workerGroupSpecs/0/maxReplicas","value":100}]`, "may change only a RayCluster's worker"},
		{"its own labels", mine.DeepCopy(), `{"metadata":{"labels":{"dlc.aidlc.io/cluster-id":"cls-theirs"}}}`, "may change only a RayCluster's worker"},
	} {
		err := patch(c.obj, c.patch)
		switch {
		case c.refuse == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.refuse != "" && (err == nil || !strings.Contains(err.Error(), "ValidatingAdmissionPolicy") ||
			!slices.ContainsFunc(strings.Split(c.refuse, "|"), func(r string) bool { return strings.Contains(err.Error(), r) })):
			t.Errorf("%s: %v, want the policy's refusal %q", c.name, err, c.refuse)
		}
	}
}

func mustJSONString(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
