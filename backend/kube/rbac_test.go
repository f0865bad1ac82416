package kube_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidlc/dlc/backend"
	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/backend/kube/api/v1alpha1"
	"github.com/aidlc/dlc/dlctest/kubetest"
	"github.com/aidlc/dlc/errs"
)

// rbacDir holds the backend's RBAC: the generated Role and the
// ServiceAccount and RoleBinding written by hand.
var rbacDir = filepath.Join("..", "..", "config", "rbac")

// rbacOp is one thing done as the backend's user in a namespace.
type rbacOp struct {
	name string
	do   func(ctx context.Context, ns string) error
}

// TestLeastPrivilege runs, as the user config/rbac makes of the backend
// (ControlPlane.BindRBAC), what the backend does on the API server: the store, and
// KubeRay's objects, pods, services, the service proxy and events outside
// it. All of it succeeds in the Role's namespace, and is forbidden in
// another; what the Role does not grant (secrets, writing pods, RBAC,
// anything cluster-scoped) is forbidden in its namespace too.
func TestLeastPrivilege(t *testing.T) {
	cp := kubetest.StartControlPlane(t)
	ns, other := cp.NewNamespace(t), cp.NewNamespace(t)
	cfg := cp.BindRBAC(t, ns, rbacDir)
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: cp.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	proxyHTTP, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}

	// What the backend reads but KubeRay would make: a head pod and its
	// service, in both namespaces, so that a refused read is refused with
	// something there to read.
	const headPod, headSvc = "ray-head", "ray-head-svc"
	for _, n := range []string{ns, other} {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: headPod, Namespace: n, Labels: map[string]string{"ray.io/node-type": "head"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "ray-head", Image: "rayproject/ray:2.46.0"}}}}
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: headSvc, Namespace: n},
			Spec: corev1.ServiceSpec{Selector: pod.Labels, Ports: []corev1.ServicePort{{Name: "dashboard", Port: 8265}}}}
		for _, obj := range []client.Object{pod, svc} {
			if err := cp.Client().Create(ctx, obj); err != nil {
				t.Fatalf("creating %s/%s as the administrator: %v", n, obj.GetName(), err)
			}
		}
		cancel()
	}

	t.Run("store", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		start := time.Now()
		s, err := kube.NewStore(ctx, cfg, ns, kube.StoreOptions{})
		if err != nil {
			t.Fatalf("NewStore as the backend's user: %v", err)
		}
		defer s.Close()
		t.Logf("NewStore synced in %v", time.Since(start))
		for _, sc := range storeCases() {
			if sc.kind != "cluster" && sc.kind != "name" {
				continue
			}
			t.Run(sc.kind, func(t *testing.T) {
				d := backend.Doc{Kind: sc.kind, ID: sc.id, Labels: sc.labels, Data: mustJSON(t, sc.v)}
				v1, err := s.Create(ctx, d)
				if err != nil {
					t.Fatalf("Create: %v", err)
				}
				got, err := s.Get(ctx, sc.kind, sc.id)
				if err != nil {
					t.Fatalf("Get: %v", err)
				}
				checkDoc(t, sc, got, v1, sc.labels, sc.v)
				// For a cluster, two writes: the object, then its status.
				d2 := backend.Doc{Kind: sc.kind, ID: sc.id, Version: v1, Labels: sc.labels2, Data: mustJSON(t, sc.v2)}
				v2, err := s.Update(ctx, d2)
				if err != nil {
					t.Fatalf("Update: %v", err)
				}
				if got, err = s.Get(ctx, sc.kind, sc.id); err != nil {
					t.Fatalf("Get after Update: %v", err)
				}
				checkDoc(t, sc, got, v2, sc.labels2, sc.v2)
				if err := s.Delete(ctx, sc.kind, sc.id, v2); err != nil {
					t.Fatalf("Delete: %v", err)
				}
				if _, err := s.Get(ctx, sc.kind, sc.id); !errors.Is(err, errs.ErrNotFound) {
					t.Errorf("Get after Delete: %v, want ErrNotFound", err)
				}
			})
		}
	})

	t.Run("store elsewhere", func(t *testing.T) {
		// The informers' lists are forbidden, so the caches never sync: the
		// refusal ends the wait (within the probe's delay, not the hour of
		// SyncTimeout; bounded here by ctx, whose end fails the test).
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		s, err := kube.NewStore(ctx, cfg, other, kube.StoreOptions{SyncTimeout: time.Hour})
		if ctx.Err() != nil {
			t.Fatalf("NewStore waited for its caches until the test's bound: %v", err)
		}
		if err == nil {
			s.Close()
			t.Fatalf("NewStore on namespace %s, which the Role is not in, succeeded", other)
		}
		if !apierrors.IsForbidden(err) {
			t.Errorf("NewStore on another namespace: %v, want the API server's forbidden", err)
		}
		t.Logf("NewStore on another namespace: %v", err)
	})

	rayCluster := func(ns string) *rayv1.RayCluster {
		return renderCases()[0].render(t, ns).(*rayv1.RayCluster)
	}
	rayJob := func(ns string) *rayv1.RayJob {
		for _, rc := range renderCases() {
			if rc.run != nil {
				return rc.render(t, ns).(*rayv1.RayJob)
			}
		}
		t.Fatal("no RayJob among the render cases")
		return nil
	}
	key := func(ns string, obj client.Object) client.ObjectKey {
		return client.ObjectKey{Namespace: ns, Name: obj.GetName()}
	}
	watch := func(ctx context.Context, ns string, list client.ObjectList) error {
		w, err := c.Watch(ctx, list, client.InNamespace(ns))
		if err != nil {
			return err
		}
		w.Stop()
		return nil
	}
	proxy := func(method string) func(ctx context.Context, ns string) error {
		return func(ctx context.Context, ns string) error {
			base, err := kube.ServiceProxyURL(cfg, ns, headSvc)
			if err != nil {
				return err
			}
			var body io.Reader
			if method == http.MethodPost {
				body = bytes.NewReader([]byte(`{"entrypoint": "true"}`))
			}
			req, err := http.NewRequestWithContext(ctx, method, base+"/api/jobs/", body)
			if err != nil {
				return err
			}
			return proxyError(proxyHTTP.Do(req))
		}
	}
	at := metav1.NewTime(t0)
	coreEvent := func(ns string) *corev1.Event {
		return &corev1.Event{
			ObjectMeta: metav1.ObjectMeta{Name: "cls-1a2b3c.rbac", Namespace: ns},
			InvolvedObject: corev1.ObjectReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: "ComputeCluster",
				Namespace: ns, Name: "cls-1a2b3c"},
			Reason: "Created", Message: "the cluster was created", Type: corev1.EventTypeNormal,
			Source: corev1.EventSource{Component: "dlc"}, FirstTimestamp: at, LastTimestamp: at, Count: 1,
		}
	}
	event := func(ns string) *eventsv1.Event {
		return &eventsv1.Event{
			ObjectMeta: metav1.ObjectMeta{Name: "cls-1a2b3c.rbac-v1", Namespace: ns},
			EventTime:  metav1.NewMicroTime(t0), ReportingController: "dlc.aidlc.io/backend", ReportingInstance: "dlc-0",
			Action: "Create", Reason: "Created", Note: "the cluster was created", Type: corev1.EventTypeNormal,
			Regarding: corev1.ObjectReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: "ComputeCluster",
				Namespace: ns, Name: "cls-1a2b3c"},
		}
	}
	merge := func(format string, args ...any) client.Patch {
		return client.RawPatch(types.MergePatchType, fmt.Appendf(nil, format, args...))
	}
	later := t0.Add(time.Minute).Format(time.RFC3339)
	laterMicro := t0.Add(time.Minute).Format(metav1.RFC3339Micro)

	// What the backend does outside the store, in order.
	granted := []rbacOp{
		{"rayclusters apply (create)", func(ctx context.Context, ns string) error { return apply(ctx, c, rayCluster(ns)) }},
		{"rayclusters apply (change)", func(ctx context.Context, ns string) error {
			rc := rayCluster(ns)
			rc.Annotations[kube.KeyGeneration] = "4"
			return apply(ctx, c, rc)
		}},
		{"rayclusters get", func(ctx context.Context, ns string) error {
			rc := rayCluster(ns)
			return c.Get(ctx, key(ns, rc), rc)
		}},
		{"rayclusters list", func(ctx context.Context, ns string) error {
			return c.List(ctx, &rayv1.RayClusterList{}, client.InNamespace(ns))
		}},
		{"rayclusters watch", func(ctx context.Context, ns string) error { return watch(ctx, ns, &rayv1.RayClusterList{}) }},
		{"rayclusters update", func(ctx context.Context, ns string) error {
			rc := rayCluster(ns)
			if err := c.Get(ctx, key(ns, rc), rc); err != nil {
				return err
			}
			rc.Spec.Suspend = new(true)
			return c.Update(ctx, rc)
		}},
		{"rayjobs create", func(ctx context.Context, ns string) error { return c.Create(ctx, rayJob(ns)) }},
		{"rayjobs apply", func(ctx context.Context, ns string) error { return apply(ctx, c, rayJob(ns)) }},
		{"rayjobs get", func(ctx context.Context, ns string) error {
			rj := rayJob(ns)
			return c.Get(ctx, key(ns, rj), rj)
		}},
		{"rayjobs list", func(ctx context.Context, ns string) error {
			return c.List(ctx, &rayv1.RayJobList{}, client.InNamespace(ns))
		}},
		{"rayjobs watch", func(ctx context.Context, ns string) error { return watch(ctx, ns, &rayv1.RayJobList{}) }},
		{"rayjobs delete", func(ctx context.Context, ns string) error { return c.Delete(ctx, rayJob(ns)) }},
		{"rayclusters delete", func(ctx context.Context, ns string) error { return c.Delete(ctx, rayCluster(ns)) }},
		{"pods get", func(ctx context.Context, ns string) error {
			return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: headPod}, &corev1.Pod{})
		}},
		{"pods list", func(ctx context.Context, ns string) error {
			var pods corev1.PodList
			if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"ray.io/node-type": "head"}); err != nil {
				return err
			}
			if len(pods.Items) != 1 {
				return fmt.Errorf("listed %d pods, want the head", len(pods.Items))
			}
			return nil
		}},
		{"pods watch", func(ctx context.Context, ns string) error { return watch(ctx, ns, &corev1.PodList{}) }},
		{"services get", func(ctx context.Context, ns string) error {
			return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: headSvc}, &corev1.Service{})
		}},
		{"services list", func(ctx context.Context, ns string) error {
			return c.List(ctx, &corev1.ServiceList{}, client.InNamespace(ns))
		}},
		{"services/proxy GET (job status, logs)", proxy(http.MethodGet)},
		{"services/proxy POST (submit, stop)", proxy(http.MethodPost)},
		{"events create", func(ctx context.Context, ns string) error { return c.Create(ctx, coreEvent(ns)) }},
		{"events patch", func(ctx context.Context, ns string) error {
			return c.Patch(ctx, coreEvent(ns), merge(`{"count": 2, "lastTimestamp": %q}`, later))
		}},
		{"events.k8s.io events create", func(ctx context.Context, ns string) error { return c.Create(ctx, event(ns)) }},
		{"events.k8s.io events patch", func(ctx context.Context, ns string) error {
			return c.Patch(ctx, event(ns), merge(`{"series": {"count": 2, "lastObservedTime": %q}}`, laterMicro))
		}},
	}
	t.Run("granted", func(t *testing.T) {
		for _, op := range granted {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			if err := op.do(ctx, ns); err != nil {
				t.Errorf("%s in the Role's namespace: %v", op.name, err)
			}
			cancel()
		}
	})

	// The store's writes, made directly: in another namespace they are
	// forbidden before the object is looked at, so none need exist.
	cc := func(ns string) *v1alpha1.ComputeCluster {
		return &v1alpha1.ComputeCluster{ObjectMeta: metav1.ObjectMeta{Name: "cls-1a2b3c", Namespace: ns, ResourceVersion: "1"}}
	}
	claim := func(ns string) *v1alpha1.StoreEntry {
		return &v1alpha1.StoreEntry{ObjectMeta: metav1.ObjectMeta{Name: "name-claim", Namespace: ns,
			Labels: map[string]string{kube.StoreKeyKind: "name"}}, Data: "{}"}
	}
	storeOps := []rbacOp{
		{"computeclusters create", func(ctx context.Context, ns string) error {
			o := cc(ns)
			o.ResourceVersion = ""
			return c.Create(ctx, o)
		}},
		{"computeclusters get", func(ctx context.Context, ns string) error { return c.Get(ctx, key(ns, cc(ns)), cc(ns)) }},
		{"computeclusters list", func(ctx context.Context, ns string) error {
			return c.List(ctx, &v1alpha1.ComputeClusterList{}, client.InNamespace(ns))
		}},
		{"computeclusters update", func(ctx context.Context, ns string) error { return c.Update(ctx, cc(ns)) }},
		{"computeclusters/status update", func(ctx context.Context, ns string) error { return c.Status().Update(ctx, cc(ns)) }},
		{"computeclusters delete", func(ctx context.Context, ns string) error { return c.Delete(ctx, cc(ns)) }},
		{"runs list", func(ctx context.Context, ns string) error {
			return c.List(ctx, &v1alpha1.RunList{}, client.InNamespace(ns))
		}},
		{"resourcegroups/status update", func(ctx context.Context, ns string) error {
			return c.Status().Update(ctx, &v1alpha1.ResourceGroup{ObjectMeta: metav1.ObjectMeta{Name: "rg-1", Namespace: ns, ResourceVersion: "1"}})
		}},
		{"storeentries create", func(ctx context.Context, ns string) error { return c.Create(ctx, claim(ns)) }},
		{"storeentries list", func(ctx context.Context, ns string) error {
			return c.List(ctx, &v1alpha1.StoreEntryList{}, client.InNamespace(ns))
		}},
		{"storeentries delete", func(ctx context.Context, ns string) error { return c.Delete(ctx, claim(ns)) }},
	}
	t.Run("elsewhere", func(t *testing.T) {
		for _, op := range append(storeOps, granted...) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			if err := op.do(ctx, other); !apierrors.IsForbidden(err) {
				t.Errorf("%s in namespace %s: %v, want forbidden", op.name, other, err)
			}
			cancel()
		}
	})

	// What the backend has no business doing, in its namespace or
	// anywhere.
	denied := []rbacOp{
		{"secrets get", func(ctx context.Context, ns string) error {
			return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "redis-ha"}, &corev1.Secret{})
		}},
		{"secrets list", func(ctx context.Context, ns string) error {
			return c.List(ctx, &corev1.SecretList{}, client.InNamespace(ns))
		}},
		{"pods create", func(ctx context.Context, ns string) error {
			return c.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}})
		}},
		{"pods delete", func(ctx context.Context, ns string) error {
			return c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: headPod, Namespace: ns}})
		}},
		{"pods/log get", func(ctx context.Context, ns string) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+"/api/v1/namespaces/"+ns+"/pods/"+headPod+"/log", nil)
			if err != nil {
				return err
			}
			return proxyError(proxyHTTP.Do(req))
		}},
		{"services create", func(ctx context.Context, ns string) error {
			return c.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: ns},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}})
		}},
		{"services delete", func(ctx context.Context, ns string) error {
			return c.Delete(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: headSvc, Namespace: ns}})
		}},
		{"rolebindings create", func(ctx context.Context, ns string) error {
			return c.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "escalate", Namespace: ns},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "someone"}}})
		}},
		{"roles patch", func(ctx context.Context, ns string) error {
			return c.Patch(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "dlc-backend", Namespace: ns}},
				merge(`{"rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}`))
		}},
		{"namespaces create", func(ctx context.Context, _ string) error {
			return c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "dlc-rbac-"}})
		}},
		{"namespaces delete", func(ctx context.Context, ns string) error {
			return c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		}},
		{"nodes list", func(ctx context.Context, _ string) error { return c.List(ctx, &corev1.NodeList{}) }},
		{"rayclusters list in every namespace", func(ctx context.Context, _ string) error {
			return c.List(ctx, &rayv1.RayClusterList{})
		}},
		{"computeclusters list in every namespace", func(ctx context.Context, _ string) error {
			return c.List(ctx, &v1alpha1.ComputeClusterList{})
		}},
		{"customresourcedefinitions list", func(ctx context.Context, _ string) error {
			crds := &metav1.PartialObjectMetadataList{}
			crds.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinitionList"})
			return c.List(ctx, crds)
		}},
		{"clusterroles create", func(ctx context.Context, _ string) error {
			return c.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "dlc-rbac-test"}})
		}},
	}
	t.Run("denied", func(t *testing.T) {
		for _, op := range denied {
			for _, n := range []string{ns, other} {
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				if err := op.do(ctx, n); !apierrors.IsForbidden(err) {
					t.Errorf("%s (namespace %s): %v, want forbidden", op.name, n, err)
				}
				cancel()
			}
		}
	})
}

// apply applies obj server-side, as the backend's field manager, forcing
// ownership: the API server takes it as a patch, which creates a missing
// object.
func apply(ctx context.Context, c client.Client, obj client.Object) error {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return err
	}
	delete(u, "status")
	unstructured.RemoveNestedField(u, "metadata", "creationTimestamp")
	return c.Apply(ctx, client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: u}),
		client.FieldOwner("dlc"), client.ForceOwnership)
}

// proxyError turns a raw request's response into an error: the API
// server's own error when it refused the request (403, as a Status), nil
// when it let the request through, whatever came back from behind it (here
// no head answers: 503).
func proxyError(resp *http.Response, err error) error {
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusForbidden {
		return nil
	}
	var status metav1.Status
	if err := json.Unmarshal(body, &status); err != nil || status.Kind != "Status" {
		return fmt.Errorf("403 without a Status: %s", body)
	}
	return apierrors.FromObject(&status)
}
