package kubetest

import (
	"context"
	"os"
	"path/filepath"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// BindRBAC installs in namespace ns, as `kubectl apply -k` would with the
// kustomization's namespace set to ns, the backend's RBAC from dir (this
// module's config/rbac: service_account.yaml, role.yaml generated from the
// markers of backend/kube, role_binding.yaml), and returns a REST
// configuration that authenticates as that ServiceAccount (the user
// system:serviceaccount:<ns>:<name>, by a client certificate) once the API
// server authorizes by the binding: it may do exactly what the shipped
// RBAC grants the backend, in ns and nowhere else.
func (cp *ControlPlane) BindRBAC(t TestingT, ns, dir string) *rest.Config {
	t.Helper()
	var (
		sa      corev1.ServiceAccount
		role    rbacv1.Role
		binding rbacv1.RoleBinding
	)
	for name, obj := range map[string]any{"service_account.yaml": &sa, "role.yaml": &role, "role_binding.yaml": &binding} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("dlctest: %v", err)
		}
		if err := yaml.UnmarshalStrict(b, obj); err != nil {
			t.Fatalf("dlctest: %s: %v", name, err)
		}
	}
	if role.Kind != "Role" || role.Name == "" || len(role.Rules) == 0 {
		t.Fatalf("dlctest: role.yaml holds %s %q with %d rules, want a Role", role.Kind, role.Name, len(role.Rules))
	}
	if binding.RoleRef != (rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}) ||
		len(binding.Subjects) != 1 || binding.Subjects[0].Kind != rbacv1.ServiceAccountKind ||
		binding.Subjects[0].Name != sa.Name || binding.Subjects[0].Namespace != sa.Namespace {
		t.Fatalf("dlctest: role_binding.yaml binds %+v to %+v, want Role %s to ServiceAccount %s/%s",
			binding.RoleRef, binding.Subjects, role.Name, sa.Namespace, sa.Name)
	}
	sa.Namespace, role.Namespace, binding.Namespace = ns, ns, ns
	binding.Subjects[0].Namespace = ns

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, obj := range []client.Object{&sa, &role, &binding} {
		if err := cp.client.Create(ctx, obj); err != nil {
			t.Fatalf("dlctest: creating %T %s/%s: %v", obj, ns, obj.GetName(), err)
		}
	}
	cfg := cp.AddUser(t, "system:serviceaccount:"+ns+":"+sa.Name, "system:serviceaccounts", "system:serviceaccounts:"+ns)

	// The API server's authorizer reads roles and bindings from its own
	// informers: wait until it grants the role's first rule to the user.
	c, err := client.New(cfg, client.Options{Scheme: cp.scheme})
	if err != nil {
		t.Fatalf("dlctest: %v", err)
	}
	r := role.Rules[0]
	for {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: ns, Verb: r.Verbs[0], Group: r.APIGroups[0], Resource: r.Resources[0],
			},
		}}
		if err := c.Create(ctx, review); err != nil {
			t.Fatalf("dlctest: reviewing the user's access: %v", err)
		}
		if review.Status.Allowed {
			return cfg
		}
		select {
		case <-ctx.Done():
			t.Fatalf("dlctest: the API server never granted %s %s.%s in %s to the user: %s",
				r.Verbs[0], r.Resources[0], r.APIGroups[0], ns, review.Status.Reason)
		case <-time.After(10 * time.Millisecond):
		}
	}
}
