package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/ray-project/kuberay/ray-operator/controllers/ray/common"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/auth"
	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/backend/kube/api/v1alpha1"
	"github.com/aidlc/dlc/cluster"
	"github.com/aidlc/dlc/event"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/quota"
)

var configDir = filepath.Join("..", "..", "..", "config")

// asServiceAccount has the scene's client run on a backend that is the
// backend's ServiceAccount, with the Role config/rbac ships in the
// scene's namespace and config/rbac/group's in each of groupNS: what it
// does from here on, it may do with those rights alone.
func (s *scene) asServiceAccount(groupNS ...string) {
	t := s.t
	t.Helper()
	admin := s.w.cp.Client()
	saCfg := s.w.cp.BindRBAC(t, s.ns, filepath.Join(configDir, "rbac"))
	b, err := os.ReadFile(filepath.Join(configDir, "rbac", "group", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range groupNS {
		var role rbacv1.Role
		if err := yaml.UnmarshalStrict(b, &role); err != nil {
			t.Fatal(err)
		}
		role.Namespace = ns
		bind := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name, Namespace: ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "dlc-backend", Namespace: s.ns}}}
		for _, obj := range []client.Object{&role, bind} {
			if err := admin.Create(s.ctx, obj); err != nil {
				t.Fatal(err)
			}
		}
	}
	o := s.o
	o.Dashboard, o.Render.WorkingDir, o.PollInterval = s.w.loop.Dashboard, s.w.presign, 50*time.Millisecond
	// Its informers retry until the authorizer grants the group Roles
	// (a moment after they are made), within the store's sync timeout.
	be, err := kube.New(s.ctx, saCfg, o)
	if err != nil {
		t.Fatalf("kube.New as the ServiceAccount: %v", err)
	}
	t.Cleanup(be.Close)
	_ = s.c.Close()
	s.be, s.c = be, newClient(t, be)
}

// granted waits until c may do verb on resource (group/resource) in ns,
// as the API server's authorizer says (it learns a binding a moment
// after it is made).
func granted(t *testing.T, ctx context.Context, c client.Client, ns, verb, group, res string) {
	t.Helper()
	waitFor(t, "the authorizer granting "+verb+" "+res, func() (bool, string) {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: group, Resource: res}}}
		if err := c.Create(ctx, review); err != nil {
			return false, err.Error()
		}
		return review.Status.Allowed, review.Status.Reason
	})
}

// restrictedPod is a pod of the restricted Pod Security profile asking
// for cpu cores and 1 GiB of memory: one an editor of a namespace may
// make there.
func restrictedPod(ns, name string, cpu int64) *corev1.Pod {
	res := corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(cpu, resource.DecimalSI), corev1.ResourceMemory: resource.MustParse("1Gi")}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](1000),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{Name: "squat", Image: "busybox",
				Resources: corev1.ResourceRequirements{Requests: res, Limits: res},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}},
		},
	}
}

// The two-team scene of issue 38. Teams A and B each have a resource
// group of 16 cores with a namespace of its own, the policies of
// config/admission enforced in both and in the backend's, which runs as
// its ServiceAccount; KubeRay's reconcilers, the kubelet and head
// stand-ins, and the real ResourceQuota controller and garbage collector
// run. Team A's user (through the SDK's policy authorizer), the token of
// A's autoscaling head, and an editor of A's namespace (who may also edit
// the SDK's kinds, the worst a platform could grant) try what issue 38
// lists against team B: each attempt is refused or has no effect on B, and
// B's runs succeed throughout. A pod past A's capacity is refused by the
// API server, whoever writes it; a cluster of A whose worker Kubernetes
// refuses for quota (an editor's pod took the room) records that and
// waits, not abnormal, and runs once the room is back.
func TestTwoTeams(t *testing.T) {
	w := getWorld(t)
	nsA, nsB := w.cp.NewNamespace(t), w.cp.NewNamespace(t)
	s := newScene(t, kube.Options{GroupNamespaces: map[string]string{"rg-a": nsA, "rg-b": nsB}})
	for _, rg := range []string{"rg-a", "rg-b"} {
		if _, err := s.c.ResourceGroups().Register(s.ctx, quota.Group{ID: rg, Package: "pkg-1",
			Capacity: quota.Resources{MilliCPU: 16000, Memory: 64 * quota.GiB}}); err != nil {
			t.Fatal(err)
		}
	}
	admin := w.cp.Client()
	s.asServiceAccount(nsA, nsB)
	for _, ns := range []string{s.ns, nsA, nsB} {
		w.cp.BindAdmission(t, ns, configDir)
	}

	// Each group's namespace has its ResourceQuota: the group's capacity,
	// counted by the quota controller.
	for _, ns := range []string{nsA, nsB} {
		waitFor(t, "the ResourceQuota of "+ns, func() (bool, string) {
			var rq corev1.ResourceQuota
			if err := admin.Get(s.ctx, client.ObjectKey{Namespace: ns, Name: kube.GroupQuotaName}, &rq); err != nil {
				return false, err.Error()
			}
			cpu := rq.Status.Hard[corev1.ResourceRequestsCPU]
			return cpu.Cmp(resource.MustParse("16")) == 0, fmt.Sprint(rq.Spec.Hard, rq.Status.Hard)
		})
	}

	// Team B: a running cluster, its runs, a Secret of its scope.
	specB, err := dlc.NewCluster("team_b").Groups(s.grp.ID).Resources("pkg-1", "rg-b").Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1).Build()
	if err != nil {
		t.Fatal(err)
	}
	b := s.started(specB)
	if err := admin.Create(s.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "dlc-env-rg-b.creds", Namespace: nsB},
		StringData: map[string]string{"token": "team-b-only"}}); err != nil {
		t.Fatal(err)
	}
	byB := client.MatchingLabels{kube.KeyClusterID: b.ID}
	podsOf := func(ns string, l client.MatchingLabels) []string {
		t.Helper()
		var pods corev1.PodList
		if err := admin.List(s.ctx, &pods, client.InNamespace(ns), l); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				out = append(out, p.Name)
			}
		}
		slices.Sort(out)
		return out
	}
	bPods := podsOf(nsB, byB)
	if len(bPods) != 2 {
		t.Fatalf("team B's pods: %v", bPods)
	}
	bHead := ""
	for _, p := range bPods {
		if strings.Contains(p, "-head") {
			bHead = p
		}
	}
	reserved := func(rg string) quota.Resources {
		t.Helper()
		u, err := s.c.ResourceGroups().Get(s.ctx, rg)
		if err != nil {
			t.Fatal(err)
		}
		return u.Reserved
	}
	bHeld := reserved("rg-b")
	runB := func(name string) *job.Run {
		return s.run(dlc.NewJob(name).OnCluster(b.ID).COSPackage("cos://jobs-1250000000/slow.zip").Entrypoint("python slow.py"))
	}
	var bRuns []*job.Run
	bRuns = append(bRuns, runB("b-before"))

	// Team A's user, through a client with the policy authorizer: what
	// draws on rg-a, and what alice made herself.
	p, err := auth.ParsePolicy([]byte(`
version: "2.0"
statement:
  - effect: allow
    principal: {group: [team-a]}
    action: ["dlc:*"]
    resource: ["*"]
    condition: {string_equal: {"dlc:resource_group": ["rg-a"]}}
  - effect: allow
    principal: {group: [team-a]}
    action: ["dlc:*"]
    resource: ["*"]
    condition: {string_equal: {"dlc:creator": ["${user}"]}}
`))
	if err != nil {
		t.Fatal(err)
	}
	authz, err := auth.NewPolicyAuthorizer(p)
	if err != nil {
		t.Fatal(err)
	}
	cA := newClient(t, s.be, dlc.WithAuthorizer(authz))
	ctxA := auth.NewContext(t.Context(), auth.User{Name: "alice", Groups: []string{"team-a"}})
	grpA, err := cA.Groups().Create(ctxA, "team_a")
	if err != nil {
		t.Fatal(err)
	}
	specA, err := dlc.NewCluster("team_a").Groups(grpA.ID).Resources("pkg-1", "rg-a").Image("ray-2.46.0-py310-cpu").
		Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 0, 1).Build() // autoscaling: its head has a token
	if err != nil {
		t.Fatal(err)
	}
	a, err := cA.Clusters().Create(ctxA, specA)
	if err != nil {
		t.Fatal(err)
	}
	s.clusterState(a.ID, cluster.Created)
	if _, err := cA.Clusters().Start(ctxA, a.ID); err != nil {
		t.Fatal(err)
	}
	s.clusterState(a.ID, cluster.Running)

	t.Run("team A's user", func(t *testing.T) {
		forbidden := map[string]func() error{
			"get B's cluster":       func() error { _, err := cA.Clusters().Get(ctxA, b.ID); return err },
			"describe B's cluster":  func() error { _, err := cA.Clusters().Details(ctxA, b.ID); return err },
			"hibernate B's cluster": func() error { _, err := cA.Clusters().Hibernate(ctxA, b.ID, dlc.HibernateOptions{}); return err },
			"delete B's cluster":    func() error { return cA.Clusters().Delete(ctxA, b.ID, dlc.DeleteOptions{}) },
			"read B's run":          func() error { _, err := cA.Runs().Get(ctxA, bRuns[0].ID); return err },
			"run a job on B's cluster": func() error {
				cfg, err := dlc.NewJob("steal").OnCluster(b.ID).COSPackage("cos://jobs-1250000000/main.zip").Entrypoint("python main.py").Build()
				if err != nil {
					return err
				}
				_, err = cA.Jobs().Create(ctxA, cfg, dlc.SaveOptions{})
				return err
			},
			"a cluster drawing on B's group": func() error {
				spec, err := dlc.NewCluster("in_b").Groups(grpA.ID).Resources("pkg-1", "rg-b").Image("ray-2.46.0-py310-cpu").
					Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1).Build()
				if err != nil {
					return err
				}
				_, err = cA.Clusters().Create(ctxA, spec)
				return err
			},
		}
		for what, try := range forbidden {
			if err := try(); !errors.Is(err, dlc.ErrForbidden) {
				t.Errorf("%s: %v, want ErrForbidden", what, err)
			}
		}
		list, err := cA.Clusters().List(ctxA)
		if err != nil || len(list) != 1 || list[0].ID != a.ID {
			t.Errorf("alice lists %d clusters (%v), want her own only", len(list), err)
		}
		// B's Secret, named from a run of A's own group: refused by
		// validation (J10: a run names only Secrets of its own group).
		cfg, err := dlc.NewJob("read-b-secret").OnDemand("pkg-1", "rg-a").Image("ray-2.46.0-py310-cpu").Head("head", "cu.4c8g").
			COSPackage("cos://jobs-1250000000/main.zip").Entrypoint("python main.py").SecretEnv("TOKEN", "dlc-env-rg-b.creds", "token").Build()
		if err == nil {
			_, err = cA.Jobs().Create(ctxA, cfg, dlc.SaveOptions{})
		}
		if !errors.Is(err, dlc.ErrInvalid) || !strings.Contains(err.Error(), "dlc-env-rg-a.") {
			t.Errorf("a run of rg-a naming rg-b's Secret: %v, want ErrInvalid naming the scope", err)
		}
	})

	// The token KubeRay gives A's autoscaling head: its ServiceAccount,
	// named after its RayCluster, with KubeRay's head Role.
	rcA := s.rayClustersIn(nsA, a.ID)
	if len(rcA) != 1 {
		t.Fatalf("%d RayClusters of team A's cluster in %s", len(rcA), nsA)
	}
	for _, obj := range func() []client.Object {
		role, err := common.BuildRole(&rcA[0])
		if err != nil {
			t.Fatal(err)
		}
		binding, err := common.BuildRoleBinding(&rcA[0])
		if err != nil {
			t.Fatal(err)
		}
		return []client.Object{role, binding}
	}() {
		if err := admin.Create(s.ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	headSA := "system:serviceaccount:" + nsA + ":" + rcA[0].Name
	head, err := client.New(w.cp.AddUser(t, headSA, "system:serviceaccounts", "system:serviceaccounts:"+nsA), client.Options{Scheme: w.cp.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	granted(t, s.ctx, head, nsA, "patch", "", "pods")
	aHead := ""
	for _, n := range podsOf(nsA, client.MatchingLabels{kube.KeyClusterID: a.ID}) {
		if strings.Contains(n, "-head") {
			aHead = n
		}
	}

	t.Run("team A's head token", func(t *testing.T) {
		podB := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: bHead, Namespace: nsB}}
		podA := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: aHead, Namespace: nsA}}
		rc := rcA[0].DeepCopy()
		workersToDelete := `[{"op":"add","path":"/spec/workerGroupSpecs/0/scaleStrategy","value":{"workersToDelete":["` + bHead + `"]}}]`
		for _, c := range []struct {
			what string
			try  func() error
			want string // in the refusal
		}{
			{"delete B's head", func() error { return head.Delete(s.ctx, podB) }, "forbidden"},
			{"a finalizer on B's head", func() error {
				return head.Patch(s.ctx, podB, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":["evil.example.com/hold"]}}`)))
			}, "forbidden"},
			{"resize B's head", func() error {
				return head.SubResource("resize").Patch(s.ctx, podB, client.RawPatch(types.StrategicMergePatchType,
					[]byte(`{"spec":{"containers":[{"name":"ray-head","resources":{"requests":{"cpu":"100m"}}}]}}`)))
			}, "forbidden"},
			{"read B's Secret", func() error {
				return head.Get(s.ctx, client.ObjectKey{Namespace: nsB, Name: "dlc-env-rg-b.creds"}, &corev1.Secret{})
			}, "forbidden"},
			{"workersToDelete naming B's head", func() error {
				return head.Patch(s.ctx, rc, client.RawPatch(types.JSONPatchType, []byte(workersToDelete)))
			}, "may name only the RayCluster's own workers"},
			{"resize its own head past its hold", func() error {
				return head.SubResource("resize").Patch(s.ctx, podA, client.RawPatch(types.StrategicMergePatchType,
					[]byte(`{"spec":{"containers":[{"name":"ray-head","resources":{"requests":{"cpu":"16"},"limits":{"cpu":"16"}}}]}}`)))
				// Refused by the API server's validation first when the
				// pod is on a node (the stand-in kubelet's says it cannot
				// resize), else by dlc-ray-pods (TestAdmissionHeads).
			}, "resize"},
			{"forge a member of the work sharing", func() error {
				return head.Create(s.ctx, &v1alpha1.StoreEntry{ObjectMeta: metav1.ObjectMeta{Name: "forged", Namespace: s.ns,
					Labels: map[string]string{kube.StoreKeyKind: "replica"}}, Data: `{"id":"forged"}`})
			}, "forbidden"},
		} {
			if err := c.try(); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %v, want a refusal saying %q", c.what, err, c.want)
			}
		}
	})
	bRuns = append(bRuns, runB("b-after-the-head"))

	// An editor of A's namespace (Kubernetes' edit role there) who may
	// also write the SDK's kinds in the backend's namespace.
	editorCfg := w.cp.AddUser(t, "editor-of-team-a")
	editor, err := client.New(editorCfg, client.Options{Scheme: w.cp.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	subject := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "editor-of-team-a"}}
	sdkRole := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "dlc-editor", Namespace: s.ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.Group}, Resources: []string{"*", "*/status"}, Verbs: []string{"*"}}}}
	for _, obj := range []client.Object{
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "edit", Namespace: nsA},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"}, Subjects: subject},
		// KubeRay's chart aggregates RayClusters into edit; here the
		// editor is given them directly.
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "ray-editor", Namespace: nsA},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{rayv1.GroupVersion.Group}, Resources: []string{"*"}, Verbs: []string{"*"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "ray-editor", Namespace: nsA},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "ray-editor"}, Subjects: subject},
		sdkRole,
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "dlc-editor", Namespace: s.ns},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: sdkRole.Name}, Subjects: subject},
	} {
		if err := admin.Create(s.ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	granted(t, s.ctx, editor, nsA, "create", "", "pods")
	granted(t, s.ctx, editor, nsA, "create", rayv1.GroupVersion.Group, "rayclusters")
	granted(t, s.ctx, editor, s.ns, "update", v1alpha1.Group, "storeentries")

	t.Run("an editor of team A", func(t *testing.T) {
		var entries v1alpha1.StoreEntryList
		if err := admin.List(s.ctx, &entries, client.InNamespace(s.ns), client.MatchingLabels{kube.StoreKeyKind: "name"}); err != nil || len(entries.Items) == 0 {
			t.Fatalf("name claims: %d, %v", len(entries.Items), err)
		}
		for _, c := range []struct {
			what string
			try  func() error
			want string
		}{
			{"a pod in B's namespace", func() error { return editor.Create(s.ctx, restrictedPod(nsB, "squat", 1)) }, "forbidden"},
			{"delete B's RayCluster", func() error {
				return editor.Delete(s.ctx, &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: kube.RayClusterName(b.ID), Namespace: nsB}})
			}, "forbidden"},
			{"a pod past A's capacity", func() error { return editor.Create(s.ctx, restrictedPod(nsA, "too-big", 32)) }, "exceeded quota"},
			{"a name claim removed", func() error { return editor.Delete(s.ctx, entries.Items[0].DeepCopy()) }, "dlc-store"},
			{"a forged member", func() error {
				return editor.Create(s.ctx, &v1alpha1.StoreEntry{ObjectMeta: metav1.ObjectMeta{Name: "forged", Namespace: s.ns,
					Labels: map[string]string{kube.StoreKeyKind: "replica"}}, Data: `{"id":"forged"}`})
			}, "dlc-store"},
			{"B's reserved sum lowered", func() error {
				var rg v1alpha1.ResourceGroup
				if err := admin.Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: "rg-b"}, &rg); err != nil {
					return err
				}
				rg.Status.Reserved = v1alpha1.Resources{}
				return editor.Status().Update(s.ctx, &rg)
			}, "dlc-store"},
		} {
			if err := c.try(); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %v, want a refusal saying %q", c.what, err, c.want)
			}
		}

		// A RayCluster in A's namespace passing for B's cluster: KubeRay
		// runs its pods there, on A's quota; B's cluster does not take it
		// for its own.
		var rcB rayv1.RayCluster
		if err := admin.Get(s.ctx, client.ObjectKey{Namespace: nsB, Name: kube.RayClusterName(b.ID)}, &rcB); err != nil {
			t.Fatal(err)
		}
		forged := rcB.DeepCopy()
		forged.ObjectMeta = metav1.ObjectMeta{Name: rcB.Name, Namespace: nsA, Labels: maps.Clone(rcB.Labels), Annotations: maps.Clone(rcB.Annotations)}
		forged.Spec.Suspend = nil
		if err := editor.Create(s.ctx, forged); err != nil {
			t.Fatalf("the editor's RayCluster in A's namespace: %v", err)
		}
		waitFor(t, "the forged RayCluster's pods in A's namespace", func() (bool, string) {
			n := podsOf(nsA, byB)
			return len(n) == 2, fmt.Sprint(n)
		})
		details, err := s.c.Clusters().Details(s.ctx, b.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(details.Pods) != 2 || !slices.ContainsFunc(details.Pods, func(p cluster.Pod) bool { return p.Name == bHead }) {
			t.Errorf("B's cluster shows pods %v beside a forged RayCluster in A's namespace", details.Pods)
		}
		if err := editor.Delete(s.ctx, forged); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the forged RayCluster's pods gone", func() (bool, string) {
			var pods corev1.PodList
			if err := admin.List(s.ctx, &pods, client.InNamespace(nsA), byB); err != nil {
				return false, err.Error()
			}
			return len(pods.Items) == 0, fmt.Sprint(len(pods.Items), " pods")
		})
	})

	t.Run("a cluster Kubernetes refuses for quota waits", func(t *testing.T) {
		// A's cluster runs its head (4 cores); the editor's pod takes 8
		// more. A second 8-core cluster fits the group as the SDK counts
		// it (8 + 8 of 16) but not the namespace's quota (4 + 8 + 8): its
		// worker is refused, and it says so and waits.
		// The forged RayCluster's pods are gone and counted so (the quota
		// controller recounts once they are): A's namespace uses its
		// cluster's head alone.
		waitFor(t, "A's quota counting its cluster's head alone", func() (bool, string) {
			var rq corev1.ResourceQuota
			if err := admin.Get(s.ctx, client.ObjectKey{Namespace: nsA, Name: kube.GroupQuotaName}, &rq); err != nil {
				return false, err.Error()
			}
			used := rq.Status.Used[corev1.ResourceRequestsCPU]
			return used.Cmp(resource.MustParse("4")) == 0, fmt.Sprint(rq.Status.Used)
		})
		squat := restrictedPod(nsA, "squatter", 8)
		if err := editor.Create(s.ctx, squat); err != nil {
			t.Fatalf("the editor's pod within A's quota: %v", err)
		}
		spec2, err := dlc.NewCluster("team_a_second").Groups(grpA.ID).Resources("pkg-1", "rg-a").Image("ray-2.46.0-py310-cpu").
			Head("head", "cu.4c8g").WorkerGroup("cpu", "cu.4c8g", 1, 1).Build()
		if err != nil {
			t.Fatal(err)
		}
		a2, err := cA.Clusters().Create(ctxA, spec2)
		if err != nil {
			t.Fatal(err)
		}
		s.clusterState(a2.ID, cluster.Created)
		if _, err := cA.Clusters().Start(ctxA, a2.ID); err != nil {
			t.Fatal(err)
		}
		byA2 := client.MatchingLabels{kube.KeyClusterID: a2.ID}
		waitFor(t, "the second cluster saying Kubernetes refuses its pods", func() (bool, string) {
			cl, err := s.c.Clusters().Get(s.ctx, a2.ID)
			if err != nil {
				return false, err.Error()
			}
			if cl.State != cluster.Starting && cl.State != cluster.Running {
				t.Fatalf("the second cluster is %s (%s), want it waiting for its worker", cl.State, cl.Reason)
			}
			return slices.ContainsFunc(cl.Events, func(e event.Event) bool {
				return e.Action == "quota-refused" && strings.Contains(e.Message, "exceeded quota")
			}), fmt.Sprint(cl.Events)
		})
		// KubeRay calls a RayCluster provisioned once the pods it has run
		// (raycluster_controller.go, calculateStatus): the cluster may run
		// on its head while its worker waits.
		if pods := podsOf(nsA, byA2); len(pods) != 1 {
			t.Fatalf("the second cluster has pods %v while the namespace's quota is full, want its head only", pods)
		}
		if err := editor.Delete(s.ctx, squat, client.GracePeriodSeconds(0)); err != nil {
			t.Fatal(err)
		}
		took := waitForLonger(t, "the second cluster running with its worker once the room is back", 3*time.Minute, func() (bool, string) {
			cl, err := s.c.Clusters().Details(s.ctx, a2.ID)
			if err != nil {
				return false, err.Error()
			}
			running := 0
			for _, p := range cl.Pods {
				if p.Status == string(corev1.PodRunning) {
					running++
				}
			}
			return cl.Cluster.State == cluster.Running && running == 2, fmt.Sprint(cl.Cluster.State, " ", cl.Cluster.Reason, " ", running, " pods running")
		})
		t.Logf("the refused worker ran %v after the editor's pod was deleted", took.Round(time.Millisecond))
	})

	// A's capacity raised: its namespace's quota follows, in every
	// replica's view (two backends keep it here: the first, as the
	// administrator, and the ServiceAccount's).
	if _, err := s.c.ResourceGroups().Register(s.ctx, quota.Group{ID: "rg-a", Package: "pkg-1",
		Capacity: quota.Resources{MilliCPU: 24000, Memory: 96 * quota.GiB}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "A's ResourceQuota following its capacity", func() (bool, string) {
		var rq corev1.ResourceQuota
		if err := admin.Get(s.ctx, client.ObjectKey{Namespace: nsA, Name: kube.GroupQuotaName}, &rq); err != nil {
			return false, err.Error()
		}
		cpu, mem := rq.Spec.Hard[corev1.ResourceRequestsCPU], rq.Spec.Hard[corev1.ResourceRequestsMemory]
		return cpu.Cmp(resource.MustParse("24")) == 0 && mem.Cmp(resource.MustParse("96Gi")) == 0, fmt.Sprint(rq.Spec.Hard)
	})

	bRuns = append(bRuns, runB("b-at-the-end"))
	for _, r := range bRuns {
		if got := s.ended(s.c, r.ID); got.State != job.Succeeded {
			t.Errorf("team B's run %s: %s %q", r.Config.Name, got.State, got.Message)
		}
	}
	if got := podsOf(nsB, byB); !slices.Equal(got, bPods) {
		t.Errorf("team B's pods were %v, now %v", bPods, got)
	}
	if got := reserved("rg-b"); got != bHeld {
		t.Errorf("team B's group reserves %s, was %s", got, bHeld)
	}
	if cl, err := s.c.Clusters().Get(s.ctx, b.ID); err != nil || cl.State != cluster.Running || len(cl.Events) == 0 {
		t.Errorf("team B's cluster: %v %v", cl, err)
	} else if i := slices.IndexFunc(cl.Events, func(e event.Event) bool { return strings.HasPrefix(e.Action, "quota-") }); i >= 0 {
		t.Errorf("team B's cluster recorded %s: %s", cl.Events[i].Action, cl.Events[i].Message)
	}
	s.noWarnings()
}

// rayClustersIn lists the RayClusters of cluster id in namespace ns.
func (s *scene) rayClustersIn(ns, id string) []rayv1.RayCluster {
	s.t.Helper()
	var l rayv1.RayClusterList
	if err := s.w.cp.Client().List(s.ctx, &l, client.InNamespace(ns), client.MatchingLabels{kube.KeyClusterID: id}); err != nil {
		s.t.Fatal(err)
	}
	return l.Items
}

// waitForLonger is waitFor with a bound of its own.
func waitForLonger(t *testing.T, what string, bound time.Duration, cond func() (bool, string)) time.Duration {
	t.Helper()
	began := time.Now()
	for {
		ok, state := cond()
		if ok {
			return time.Since(began)
		}
		if time.Since(began) > bound {
			t.Fatalf("after %v, still waiting for %s: %s", bound, what, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
