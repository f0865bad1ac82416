package kubetest

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// BindAdmission holds namespace ns to what configDir (this module's
// config/) ships besides the RBAC, as `kubectl apply -k` would with the
// kustomization's namespace set to ns:
//
//   - the admission policies and their bindings (every
//     ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding in the
//     files that configDir/admission/kustomization.yaml lists), which are
//     cluster-scoped: created on the first call, updated when a later call
//     reads them changed;
//   - the labels of the Namespace in configDir/namespace.yaml, set on ns:
//     Pod Security's (restricted) and the one that enforces the policies on
//     everyone writing RayClusters and RayJobs in ns.
//
// It returns once the API server enforces the policies and Pod Security in
// ns: a RayCluster with a privileged head is refused by a policy and a
// privileged pod by Pod Security (dry-run creates as the administrator,
// retried until refused, for at most 30 seconds).
func (cp *ControlPlane) BindAdmission(t TestingT, ns, configDir string) {
	t.Helper()
	policies, bindings := ReadAdmission(t, filepath.Join(configDir, "admission"))
	var nsObj corev1.Namespace
	b, err := os.ReadFile(filepath.Join(configDir, "namespace.yaml"))
	if err != nil {
		t.Fatalf("dlctest: %v", err)
	}
	if err := yaml.UnmarshalStrict(b, &nsObj); err != nil || len(nsObj.Labels) == 0 {
		t.Fatalf("dlctest: namespace.yaml: %v, labels %v", err, nsObj.Labels)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := cp.client

	for _, p := range policies {
		if err := createOrUpdateSpec(ctx, c, p, func(cur *admissionv1.ValidatingAdmissionPolicy) bool {
			same := equality.Semantic.DeepEqual(cur.Spec, p.Spec)
			cur.Spec = p.Spec
			return same
		}); err != nil {
			t.Fatalf("dlctest: installing ValidatingAdmissionPolicy %s: %v", p.Name, err)
		}
	}
	// The probe below is refused by the policy on RayCluster creates: its
	// binding goes last, so that once the API server enforces it, it has
	// seen every policy and binding made before (its policy source reads
	// them from informers, which deliver them in order).
	probe := ""
	for _, p := range policies {
		if probe == "" && createsRayClusters(p) {
			probe = p.Name
		}
	}
	if probe == "" {
		t.Fatalf("dlctest: no policy in %s matches RayCluster creates", configDir)
	}
	slices.SortStableFunc(bindings, func(a, b *admissionv1.ValidatingAdmissionPolicyBinding) int {
		return cmpBool(a.Spec.PolicyName == probe, b.Spec.PolicyName == probe)
	})
	for _, bd := range bindings {
		if err := createOrUpdateSpec(ctx, c, bd, func(cur *admissionv1.ValidatingAdmissionPolicyBinding) bool {
			same := equality.Semantic.DeepEqual(cur.Spec, bd.Spec)
			cur.Spec = bd.Spec
			return same
		}); err != nil {
			t.Fatalf("dlctest: installing ValidatingAdmissionPolicyBinding %s: %v", bd.Name, err)
		}
	}
	var cur corev1.Namespace
	if err := c.Get(ctx, client.ObjectKey{Name: ns}, &cur); err != nil {
		t.Fatalf("dlctest: %v", err)
	}
	if cur.Labels == nil {
		cur.Labels = map[string]string{}
	}
	for k, v := range nsObj.Labels {
		cur.Labels[k] = v
	}
	if err := c.Update(ctx, &cur); err != nil {
		t.Fatalf("dlctest: labelling namespace %s: %v", ns, err)
	}

	// Policies and labels take effect a moment later: wait until both refuse.
	bad := PrivilegedRayCluster(ns)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "dlctest-privileged", Namespace: ns},
		Spec:       bad.Spec.HeadGroupSpec.Template.Spec,
	}
	for what, obj := range map[string]client.Object{"policy " + probe: bad, "Pod Security": pod} {
		want := "ValidatingAdmissionPolicy '" + probe + "'"
		if _, isPod := obj.(*corev1.Pod); isPod {
			want = "violates PodSecurity"
		}
		for {
			err := c.Create(ctx, obj.DeepCopyObject().(client.Object), client.DryRunAll)
			if err != nil && strings.Contains(err.Error(), want) {
				break
			}
			if err != nil && !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) {
				t.Fatalf("dlctest: a dry-run create of a privileged %T in %s: %v", obj, ns, err)
			}
			if !pause(ctx) {
				t.Fatalf("dlctest: %s never refused a privileged %T in %s (last: %v)", what, obj, ns, err)
			}
		}
	}
}

// ReadAdmission reads the ValidatingAdmissionPolicies and their bindings
// from the files that dir/kustomization.yaml lists (this module's
// config/admission), and fails t on anything else in them, on a binding of
// a policy they do not hold, or on a policy without a binding.
func ReadAdmission(t TestingT, dir string) ([]*admissionv1.ValidatingAdmissionPolicy, []*admissionv1.ValidatingAdmissionPolicyBinding) {
	t.Helper()
	var k struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Resources  []string `json:"resources"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err == nil {
		err = yaml.UnmarshalStrict(b, &k)
	}
	if err != nil || len(k.Resources) == 0 {
		t.Fatalf("dlctest: %s/kustomization.yaml: %v, resources %v", dir, err, k.Resources)
	}
	var (
		policies []*admissionv1.ValidatingAdmissionPolicy
		bindings []*admissionv1.ValidatingAdmissionPolicyBinding
	)
	for _, name := range k.Resources {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("dlctest: %v", err)
		}
		for i, doc := range strings.Split(string(b), "\n---\n") {
			var meta metav1.TypeMeta
			if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
				t.Fatalf("dlctest: %s, document %d: %v", name, i, err)
			}
			var obj any
			switch meta.Kind {
			case "ValidatingAdmissionPolicy":
				p := &admissionv1.ValidatingAdmissionPolicy{}
				policies, obj = append(policies, p), p
			case "ValidatingAdmissionPolicyBinding":
				bd := &admissionv1.ValidatingAdmissionPolicyBinding{}
				bindings, obj = append(bindings, bd), bd
			default:
				t.Fatalf("dlctest: %s, document %d: kind %q", name, i, meta.Kind)
			}
			if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
				t.Fatalf("dlctest: %s, document %d: %v", name, i, err)
			}
		}
	}
	bound := map[string]bool{}
	for _, bd := range bindings {
		bound[bd.Spec.PolicyName] = true
	}
	for _, p := range policies {
		if !bound[p.Name] {
			t.Fatalf("dlctest: no binding of policy %s", p.Name)
		}
		delete(bound, p.Name)
	}
	if len(bound) > 0 {
		t.Fatalf("dlctest: bindings of policies that %s does not hold: %v", dir, bound)
	}
	return policies, bindings
}

// createsRayClusters reports whether p's rules match RayCluster creates.
func createsRayClusters(p *admissionv1.ValidatingAdmissionPolicy) bool {
	if p.Spec.MatchConstraints == nil {
		return false
	}
	for _, r := range p.Spec.MatchConstraints.ResourceRules {
		if slices.Contains(r.APIGroups, rayv1.GroupVersion.Group) && slices.Contains(r.Resources, "rayclusters") &&
			(slices.Contains(r.Operations, admissionv1.Create) || slices.Contains(r.Operations, admissionv1.OperationAll)) {
			return true
		}
	}
	return false
}

// cmpBool orders false before true.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	default:
		return -1
	}
}

// pause waits a little, or returns false when ctx is done.
func pause(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(20 * time.Millisecond):
		return true
	}
}

// createOrUpdateSpec creates obj, or, when it exists, has set copy obj's
// spec onto the current object (reporting whether it was the same already)
// and updates it when it was not.
func createOrUpdateSpec[T any, P interface {
	*T
	client.Object
}](ctx context.Context, c client.Client, obj P, set func(cur P) (same bool)) error {
	err := c.Create(ctx, obj.DeepCopyObject().(client.Object))
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	cur := P(new(T))
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), cur); err != nil {
		return err
	}
	if set(cur) {
		return nil
	}
	return c.Update(ctx, cur)
}

// PrivilegedRayCluster returns the RayCluster of issue 18's report in
// namespace ns: its head is privileged, in the node's network and process
// namespaces, and mounts the node's root (hostPath /) and a Secret.
func PrivilegedRayCluster(ns string) *rayv1.RayCluster {
	return &rayv1.RayCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "dlctest-privileged", Namespace: ns},
		Spec: rayv1.RayClusterSpec{HeadGroupSpec: rayv1.HeadGroupSpec{
			RayStartParams: map[string]string{},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				HostPID:     true,
				HostNetwork: true,
				Containers: []corev1.Container{{
					Name: "ray-head", Image: "rayproject/ray:2.46.0",
					SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
					VolumeMounts:    []corev1.VolumeMount{{Name: "host", MountPath: "/host"}, {Name: "secret", MountPath: "/secret"}},
				}},
				Volumes: []corev1.Volume{
					{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}},
					{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "anything"}}},
				},
			}},
		}},
	}
}
