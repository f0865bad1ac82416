package kube_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/errs"
)

// The Role a group's namespace binds (config/rbac/group) grants on its
// resources exactly what the backend's generated Role grants on them, and
// nothing of the SDK's own kinds, which stay in the backend's namespace.
func TestGroupRoleMatchesTheBackendRole(t *testing.T) {
	read := func(path string) rbacv1.Role {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var r rbacv1.Role
		if err := yaml.UnmarshalStrict(b, &r); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return r
	}
	backend := read(filepath.Join(rbacDir, "role.yaml"))
	group := read(filepath.Join(rbacDir, "group", "role.yaml"))
	verbs := func(r rbacv1.Role) map[string][]string { // group/resource → verbs
		out := map[string][]string{}
		for _, rule := range r.Rules {
			for _, g := range rule.APIGroups {
				for _, res := range rule.Resources {
					out[g+"/"+res] = slices.Sorted(slices.Values(rule.Verbs))
				}
			}
		}
		return out
	}
	want, got := verbs(backend), verbs(group)
	if len(got) == 0 || group.Name != "dlc-backend-ray" {
		t.Fatalf("group Role %q with %d resources", group.Name, len(got))
	}
	// Only a group's own namespace has a ResourceQuota the backend keeps
	// (GroupQuotaName): the backend's Role has no right on them.
	groupOnly := map[string][]string{"/resourcequotas": {"create", "get", "update"}}
	for res, v := range got {
		if only, ok := groupOnly[res]; ok {
			if _, ok := want[res]; ok {
				t.Errorf("the backend's Role grants %s, which only a group's namespace needs", res)
			}
			want[res] = only
		}
		if !slices.Equal(v, want[res]) {
			t.Errorf("%s: the group Role grants %v, the backend's %v", res, v, want[res])
		}
		if strings.HasPrefix(res, "dlc.aidlc.io/") {
			t.Errorf("the group Role grants the SDK's kind %s", res)
		}
	}
	for _, res := range []string{"ray.io/rayclusters", "ray.io/rayjobs", "/pods", "/services", "/services/proxy", "networking.k8s.io/networkpolicies", "/resourcequotas"} {
		if _, ok := got[res]; !ok {
			t.Errorf("the group Role lacks %s", res)
		}
	}
}

// A GroupNamespaces entry that is not a namespace name is ErrInvalid from
// New, before any call to the API server (the config points nowhere).
func TestGroupNamespacesInvalid(t *testing.T) {
	for _, ns := range []string{"", "Team_A", "a.b", strings.Repeat("x", 64)} {
		_, err := kube.New(t.Context(), &rest.Config{Host: "http://127.0.0.1:1"},
			kube.Options{Namespace: "dlc-system", GroupNamespaces: map[string]string{"rg-1": ns}})
		if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), "rg-1") {
			t.Errorf("namespace %q: %v, want ErrInvalid naming the resource group", ns, err)
		}
	}
	for name, m := range map[string]map[string]string{
		"two groups in one namespace":  {"rg-1": "team-a", "rg-2": "team-a"},
		"a group in the backend's own": {"rg-1": "dlc-system"},
	} {
		_, err := kube.New(t.Context(), &rest.Config{Host: "http://127.0.0.1:1"}, kube.Options{Namespace: "dlc-system", GroupNamespaces: m})
		if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), "rg-1") {
			t.Errorf("%s: %v, want ErrInvalid naming the resource group", name, err)
		}
	}
	if _, err := kube.New(t.Context(), &rest.Config{Host: "http://127.0.0.1:1"}, kube.Options{}); !errors.Is(err, errs.ErrInvalid) {
		t.Errorf("no namespace: %v, want ErrInvalid", err)
	}
}
