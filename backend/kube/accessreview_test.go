package kube_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/auth"
	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/dlctest"
	"github.com/aidlc/dlc/dlctest/kubetest"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/quota"
)

// grant binds a Role of rules in ns to a user or a group.
func grant(t *testing.T, c client.Client, ns, name string, subject rbacv1.Subject, rules ...rbacv1.PolicyRule) {
	t.Helper()
	ctx := t.Context()
	if err := c.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules}); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{subject}}); err != nil {
		t.Fatal(err)
	}
}

func dlcRule(resources []string, verbs []string, names ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{"dlc.aidlc.io"}, Resources: resources, Verbs: verbs, ResourceNames: names}
}

// The access-review authorizer decides by the API server's RBAC: verbs on
// the SDK's kinds, named objects, groups, subresources, the namespace;
// it remembers decisions for their TTL and asks about a kind before the
// objects of a list; and a dlc client given it refuses what RBAC refuses.
func TestAccessReviewAuthorizer(t *testing.T) {
	cp := kubetest.StartControlPlane(t)
	ns, other := cp.NewNamespace(t), cp.NewNamespace(t)
	admin := cp.Client()
	alice := rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}
	teamB := rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "team-b"}
	grant(t, admin, ns, "alice", alice,
		dlcRule([]string{"computeclusters"}, []string{"get", "start"}, "cls-a"),
		dlcRule([]string{"jobconfigs"}, []string{"get", "run"}),
		dlcRule([]string{"runs/log"}, []string{"get"}))
	grant(t, admin, ns, "team-b", teamB, dlcRule([]string{"*"}, []string{"*"}))

	var reviews atomic.Int64
	watching, err := client.NewWithWatch(cp.Config(), client.Options{Scheme: cp.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	counted := interceptor.NewClient(watching, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*authorizationv1.SubjectAccessReview); ok {
				reviews.Add(1)
			}
			return c.Create(ctx, obj, opts...)
		}})
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	z, err := kube.NewAccessReviewAuthorizer(counted, ns, kube.AccessReviewOptions{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	elsewhere, err := kube.NewAccessReviewAuthorizer(admin, other, kube.AccessReviewOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a := auth.User{Name: "alice"}
	b := auth.User{Name: "bob", Groups: []string{"team-b"}}
	clusterRes := func(id string) auth.Resource { return auth.Resource{Kind: auth.KindCluster, ID: id} }
	for _, tc := range []struct {
		name  string
		z     auth.Authorizer
		u     auth.User
		act   auth.Action
		r     auth.Resource
		allow bool
	}{
		{"a named object granted", z, a, auth.DescribeCluster, clusterRes("cls-a"), true},
		{"another object of the kind", z, a, auth.DescribeCluster, clusterRes("cls-b"), false},
		{"a custom verb granted", z, a, auth.StartCluster, clusterRes("cls-a"), true},
		{"a verb not granted", z, a, auth.DeleteCluster, clusterRes("cls-a"), false},
		{"a create (no name) not granted", z, a, auth.CreateCluster, clusterRes(""), false},
		{"run on every job config", z, a, auth.RunJob, auth.Resource{Kind: auth.KindJob, ID: "job-1"}, true},
		{"a run's logs are the log subresource", z, a, auth.ReadRunLogs, auth.Resource{Kind: auth.KindRun, ID: "run-1"}, true},
		{"the run itself is not", z, a, auth.DescribeRun, auth.Resource{Kind: auth.KindRun, ID: "run-1"}, false},
		{"a group's grant", z, b, auth.DeleteCluster, clusterRes("cls-a"), true},
		{"the same user without the group", z, auth.User{Name: "bob"}, auth.DeleteCluster, clusterRes("cls-a"), false},
		{"another namespace", elsewhere, b, auth.DescribeCluster, clusterRes("cls-a"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.z.Authorize(t.Context(), tc.u, tc.act, tc.r)
			if tc.allow != (err == nil) || (err != nil && !errors.Is(err, errs.ErrForbidden)) {
				t.Fatalf("allow %v: got %v", tc.allow, err)
			}
		})
	}

	// Remembered: asked again within the TTL, no review; after it, one.
	before := reviews.Load()
	for range 3 {
		if err := z.Authorize(t.Context(), a, auth.DescribeCluster, clusterRes("cls-a")); err != nil {
			t.Fatal(err)
		}
	}
	if n := reviews.Load() - before; n != 0 {
		t.Fatalf("%d reviews within the TTL", n)
	}
	now = now.Add(6 * time.Minute)
	if err := z.Authorize(t.Context(), a, auth.DescribeCluster, clusterRes("cls-a")); err != nil {
		t.Fatal(err)
	}
	if n := reviews.Load() - before; n != 2 { // the kind (refused), then the name
		t.Fatalf("%d reviews after the TTL, want 2", n)
	}
	// A user RBAC allows the whole kind costs one review for a list.
	before = reviews.Load()
	for i := range 50 {
		if err := z.Authorize(t.Context(), b, auth.DescribeCluster, clusterRes("cls-"+string(rune('a'+i%26))+string(rune('0'+i/26)))); err != nil {
			t.Fatal(err)
		}
	}
	if n := reviews.Load() - before; n != 1 {
		t.Fatalf("%d reviews for 50 objects of a kind the user may read, want 1", n)
	}
	if _, err := kube.NewAccessReviewAuthorizer(nil, "", kube.AccessReviewOptions{MaxEntries: -1}); len(errs.Fields(err)) != 3 {
		t.Fatalf("bad options: %v", err)
	}

	// A dlc client (on the memory backend: the authorizer is the API
	// server's, whatever stores the objects) refuses what RBAC refuses.
	m := dlctest.NewMemory(dlctest.MemoryOptions{})
	defer m.Close()
	ctx := dlc.WithUser(t.Context(), "admin")
	if _, err := m.Client.ResourceGroups().Register(ctx, quota.Group{ID: "rg", Package: "pkg",
		Capacity: quota.Resources{MilliCPU: 64000, Memory: 256 * quota.GiB}}); err != nil {
		t.Fatal(err)
	}
	g, err := m.Client.Groups().Create(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := dlc.NewCluster("c").Groups(g.ID).Resources("pkg", "rg").Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1).Build()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := m.Client.Clusters().Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	m.Settle(time.Minute, 1000)
	grant(t, admin, ns, "carol", rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "carol"},
		dlcRule([]string{"computeclusters"}, []string{"get"}, cl.ID))
	gated := m.NewClient(dlc.WithAuthorizer(z))
	carol := dlc.WithUser(t.Context(), "carol")
	if got, err := gated.Clusters().Get(carol, cl.ID); err != nil || got.ID != cl.ID {
		t.Fatalf("carol's get: %v", err)
	}
	if _, err := gated.Clusters().Start(carol, cl.ID); !errors.Is(err, dlc.ErrForbidden) {
		t.Fatalf("carol's start: %v", err)
	}
	if got, err := gated.Clusters().Get(carol, cl.ID); err != nil || got.State != cluster.Created {
		t.Fatalf("after the refused start: %v %v", got, err)
	}
	if list, err := gated.Clusters().List(carol); err != nil || len(list) != 1 {
		t.Fatalf("carol's list: %d %v", len(list), err)
	}
	if list, err := gated.Clusters().List(dlc.WithUser(t.Context(), "dave")); err != nil || len(list) != 0 {
		t.Fatalf("dave's list: %d %v", len(list), err)
	}
}
