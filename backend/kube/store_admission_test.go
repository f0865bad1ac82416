package kube_test

import (
	"context"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/backend/kube/api/v1alpha1"
	"github.com/aidlc/dlc/dlctest/kubetest"
	"github.com/aidlc/dlc/quota"
)

// storeDenied is the start of the dlc-store policy's refusal.
const storeDenied = "ValidatingAdmissionPolicy 'dlc-store'"

// TestAdmissionStore: in a namespace the policies are enforced in, only
// the backend's ServiceAccount writes the SDK's kinds (issue 38). A
// resource group's holds (StoreEntries of store kind "hold", and
// status.pending of its ResourceGroup), the members sharing the work and
// the name claims are the quota ledger: removing a running cluster's hold
// let a second cluster start in its quota when they were ConfigMaps,
// which the namespace's editors write. Now nothing aggregates the SDK's
// kinds to the edit role, and whoever is granted them anyway (a user
// given every verb on them, a cluster administrator, whom RBAC does not
// stop) is refused by admission: every write of a StoreEntry, of a
// status, of a spec, and every delete; nothing the backend wrote changes.
// The backend itself writes as before. Once the namespace is being
// deleted, its deletes pass for anyone (the namespace controller's).
func TestAdmissionStore(t *testing.T) {
	cp := kubetest.StartControlPlane(t)
	ns := cp.NewNamespace(t)
	cfg := cp.BindRBAC(t, ns, rbacDir)
	cp.BindAdmission(t, ns, configDir)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	// The backend writes the ledger and a resource group, through its store.
	st, err := kube.NewStore(ctx, cfg, ns, kube.StoreOptions{NoEvents: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	acc := &quota.Account{Group: quota.Group{ID: "rg-1", Package: "pkg-1", Capacity: quota.Cores(8)}}
	acc.Sum = quota.Cores(8)
	for _, d := range []backend.Doc{
		{Kind: "hold", ID: "rg-1.cls-a", Data: []byte(`{"cpu":8000}`)},
		{Kind: "replica", ID: "replica-1", Data: []byte(`{"id":"replica-1"}`)},
		{Kind: "name", ID: "cluster:a", Data: []byte(`{"owner":"cls-a"}`)},
		{Kind: "resourcegroup", ID: acc.ID, Data: mustJSON(t, acc)},
	} {
		if _, err := st.Create(ctx, d); err != nil {
			t.Fatalf("the backend's create of %s %s: %v", d.Kind, d.ID, err)
		}
	}
	admin := cp.Client()
	var entries v1alpha1.StoreEntryList
	if err := admin.List(ctx, &entries, client.InNamespace(ns)); err != nil || len(entries.Items) != 3 {
		t.Fatalf("StoreEntries: %d, %v; want the hold, the member and the claim", len(entries.Items), err)
	}
	snapshot := func() (map[string]string, string) {
		t.Helper()
		out := map[string]string{}
		var l v1alpha1.StoreEntryList
		if err := admin.List(ctx, &l, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, e := range l.Items {
			out[e.Name] = e.ResourceVersion + " " + e.Data
		}
		var rg v1alpha1.ResourceGroup
		if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "rg-1"}, &rg); err != nil {
			t.Fatal(err)
		}
		return out, rg.ResourceVersion
	}
	entriesBefore, rgBefore := snapshot()

	// What a foreign writer tries: each returns its error.
	tries := func(c client.Client) map[string]func() error {
		entry := func() *v1alpha1.StoreEntry { return entries.Items[0].DeepCopy() }
		rg := func() *v1alpha1.ResourceGroup {
			var r v1alpha1.ResourceGroup
			if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "rg-1"}, &r); err != nil {
				t.Fatal(err)
			}
			return &r
		}
		return map[string]func() error{
			"create a StoreEntry (a forged member)": func() error {
				return c.Create(ctx, &v1alpha1.StoreEntry{ObjectMeta: metav1.ObjectMeta{Name: "forged", Namespace: ns,
					Labels: map[string]string{kube.StoreKeyKind: "replica"}}, Data: `{"id":"forged"}`})
			},
			"update a StoreEntry (a hold lowered)": func() error {
				e := entry()
				e.Data = `{}`
				return c.Update(ctx, e)
			},
			"delete a StoreEntry (a hold removed)": func() error { return c.Delete(ctx, entry()) },
			"update a ResourceGroup's status (the sum lowered)": func() error {
				r := rg()
				r.Status.Reserved = v1alpha1.Resources{}
				return c.Status().Update(ctx, r)
			},
			"update a ResourceGroup's spec (the capacity raised)": func() error {
				r := rg()
				r.Spec.Capacity.MilliCPU *= 2
				return c.Update(ctx, r)
			},
			"create a ClusterGroup": func() error {
				return c.Create(ctx, &v1alpha1.ClusterGroup{ObjectMeta: metav1.ObjectMeta{Name: "grp-forged", Namespace: ns},
					Spec: v1alpha1.ClusterGroupSpec{Name: "forged"}})
			},
			"delete a ResourceGroup": func() error { return c.Delete(ctx, rg()) },
		}
	}

	t.Run("an editor of the SDK's objects", func(t *testing.T) {
		// A platform granted a user every verb on the SDK's kinds, status
		// included: RBAC lets each try through, admission refuses it.
		ecfg := cp.AddUser(t, "editor-of-team-a")
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "dlc-editor", Namespace: ns},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.Group}, Resources: []string{"*", "*/status"}, Verbs: []string{"*"}}}}
		bind := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "dlc-editor", Namespace: ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "editor-of-team-a"}}}
		for _, obj := range []client.Object{role, bind} {
			if err := admin.Create(ctx, obj); err != nil {
				t.Fatal(err)
			}
		}
		editor, err := client.New(ecfg, client.Options{Scheme: cp.Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		for {
			review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "delete", Group: v1alpha1.Group, Resource: "storeentries"}}}
			if err := editor.Create(ctx, review); err != nil {
				t.Fatal(err)
			}
			if review.Status.Allowed {
				break
			}
			if ctx.Err() != nil {
				t.Fatal("the authorizer never granted the editor's Role")
			}
			time.Sleep(10 * time.Millisecond) // polls the authorizer's informers; no timing assumed
		}
		for what, try := range tries(editor) {
			if err := try(); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), storeDenied) {
				t.Errorf("%s: %v, want the dlc-store policy's refusal", what, err)
			}
		}
	})

	t.Run("a cluster administrator", func(t *testing.T) {
		root, err := client.New(cp.AddUser(t, "root-of-team-a", "system:masters"), client.Options{Scheme: cp.Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		for what, try := range tries(root) {
			if err := try(); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), storeDenied) {
				t.Errorf("%s: %v, want the dlc-store policy's refusal", what, err)
			}
		}
	})

	entriesAfter, rgAfter := snapshot()
	if rgAfter != rgBefore || len(entriesAfter) != len(entriesBefore) {
		t.Fatalf("the backend's objects changed: resource group %s → %s, entries %v → %v", rgBefore, rgAfter, entriesBefore, entriesAfter)
	}
	for name, v := range entriesBefore {
		if entriesAfter[name] != v {
			t.Errorf("StoreEntry %s changed: %s → %s", name, v, entriesAfter[name])
		}
	}

	t.Run("the backend", func(t *testing.T) {
		d, err := st.Get(ctx, "hold", "rg-1.cls-a")
		if err != nil {
			t.Fatal(err)
		}
		d.Data = []byte(`{"cpu":4000}`)
		if _, err := st.Update(ctx, d); err != nil {
			t.Fatalf("the backend's update of its hold: %v", err)
		}
		if err := st.Delete(ctx, "hold", d.ID, ""); err != nil {
			t.Fatalf("the backend's delete of its hold: %v", err)
		}
	})

	t.Run("a namespace being deleted", func(t *testing.T) {
		// Kubernetes' namespace controller empties a namespace being
		// deleted, as itself: its deletes pass (else the namespace would
		// stay Terminating), and nothing else does.
		root, err := client.New(cp.AddUser(t, "system:kube-controller-manager", "system:masters"), client.Options{Scheme: cp.Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		if err := admin.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
		var left v1alpha1.StoreEntryList
		if err := admin.List(ctx, &left, client.InNamespace(ns)); err != nil || len(left.Items) < 2 {
			t.Fatalf("entries left: %d, %v", len(left.Items), err)
		}
		for {
			err := root.Delete(ctx, &left.Items[0])
			if err == nil {
				break
			}
			if !strings.Contains(err.Error(), storeDenied) || ctx.Err() != nil {
				t.Fatalf("a delete in the namespace being deleted: %v", err)
			}
			time.Sleep(10 * time.Millisecond) // polls the policy's view of the namespace; no timing assumed
		}
		e := left.Items[1].DeepCopy()
		e.Data = `{}`
		if err := root.Update(ctx, e); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), storeDenied) {
			t.Errorf("an update in the namespace being deleted: %v, want the policy's refusal", err)
		}
	})
}
