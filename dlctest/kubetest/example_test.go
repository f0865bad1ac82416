package kubetest_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"testing"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/dlctest/kubetest"
)

// A test in another repository creates a RayCluster in a real API server and
// reads it back. The package's TestMain shares one control plane across its
// tests:
//
//	func TestMain(m *testing.M) { os.Exit(kubetest.RunMain(m)) }
//
// Run it after building the binaries once with bash hack/envtest-assets.sh;
// without them the test is skipped (fails when CI=true).
func ExampleStartControlPlane() {
	var t *testing.T // the test's own *testing.T (or *testing.B)

	cp := kubetest.StartControlPlane(t)
	ns := cp.NewNamespace(t)
	ctx := context.Background()

	rc := &rayv1.RayCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: ns},
		Spec: rayv1.RayClusterSpec{
			HeadGroupSpec: rayv1.HeadGroupSpec{
				RayStartParams: map[string]string{},
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "ray-head", Image: "rayproject/ray:2.46.0"}},
				}},
			},
		},
	}
	if err := cp.Client().Create(ctx, rc); err != nil {
		t.Fatalf("Create: %v", err)
	}
	var got rayv1.RayCluster
	if err := cp.Client().Get(ctx, client.ObjectKeyFromObject(rc), &got); err != nil {
		t.Fatalf("Get: %v", err)
	}
	fmt.Println(got.Spec.HeadGroupSpec.Template.Spec.Containers[0].Image)
}

// RunMain in a package's TestMain shares one control plane across all its
// tests; options configure it, here with the CRDs of another API group and
// their Go types.
func ExampleRunMain() {
	var m *testing.M // TestMain's argument

	os.Exit(kubetest.RunMain(m,
		kubetest.WithCRDDirs("config/crd/bases"),
		// kubetest.WithScheme(myapiv1.AddToScheme),
	))
}

// A test puts KubeRay's RayCluster reconciler and a kubelet stand-in in the
// loop: the RayCluster it creates gets real head and worker pods, which the
// stand-in marks Running and Ready, and KubeRay's status follows. Each works
// in the test's own namespace, so tests sharing a control plane do not
// disturb one another.
func ExampleControlPlane_StartKubeRay() {
	var t *testing.T // the test's own *testing.T

	cp := kubetest.StartControlPlane(t)
	ns := cp.NewNamespace(t)
	cp.StartKubeRay(t, kubetest.KubeRayOptions{Namespaces: []string{ns}})
	kubelet := cp.StartKubelet(t, ns)

	// ... create a RayCluster in ns, wait for status.state ready ...

	// Fail its head pod as a kubelet would, e.g. after an out-of-memory kill:
	if err := kubelet.Fail(ns, "demo-head-abcde", "OOMKilled"); err != nil {
		t.Fatalf("Fail: %v", err)
	}
}

// A test runs the Kubernetes backend with Ray in the loop: KubeRay's
// reconcilers, a kubelet stand-in and a Ray head stand-in per RayCluster,
// in the test's namespace. The backend reaches each head through the
// loop's Dashboard, and every job's working_dir is fetched by Fetch (here:
// any URL is the test's ZIP), so a run's entrypoint really runs and its
// output comes back as the run's logs.
func ExampleControlPlane_StartRayLoop() {
	var t *testing.T // the test's own *testing.T
	var zipBytes []byte

	cp := kubetest.StartControlPlane(t)
	ns := cp.NewNamespace(t)
	loop := cp.StartRayLoop(t, kubetest.LoopOptions{
		Namespaces: []string{ns},
		Fetch: func(ctx context.Context, url string) (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(zipBytes)), nil
		},
	})
	be, err := kube.New(t.Context(), cp.Config(), kube.Options{Namespace: ns, Dashboard: loop.Dashboard})
	if err != nil {
		t.Fatalf("kube.New: %v", err)
	}
	defer be.Close()
	c, err := dlc.New(dlc.WithBackend(be))
	if err != nil {
		t.Fatalf("dlc.New: %v", err)
	}
	defer c.Close()

	// ... create and start a cluster, run a job on it: c.Runs().Logs has
	// what its entrypoint printed ...
}

// A test runs the backend as the user the shipped RBAC makes of it: the
// ServiceAccount, Role and RoleBinding of config/rbac installed in the
// test's namespace, and a rest.Config that authenticates as that
// ServiceAccount. What the Role does not grant is forbidden.
func ExampleControlPlane_BindRBAC() {
	var t *testing.T // the test's own *testing.T

	cp := kubetest.StartControlPlane(t)
	ns := cp.NewNamespace(t)
	cfg := cp.BindRBAC(t, ns, "config/rbac") // relative to the test's package directory
	be, err := kube.New(t.Context(), cfg, kube.Options{Namespace: ns})
	if err != nil {
		t.Fatalf("kube.New as the backend's user: %v", err)
	}
	defer be.Close()
}
