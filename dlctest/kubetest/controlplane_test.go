package kubetest_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/aidlc/dlc/dlctest/kubetest"
)

// TestMain shares one control plane across this package's tests. envtest logs
// through controller-runtime's logger, which warns (with a stack trace) when no
// logger has been set after 30 s; these tests do not need its logs.
func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	os.Exit(kubetest.RunMain(m))
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func rayContainer(name string) corev1.Container {
	return corev1.Container{
		Name:  name,
		Image: "rayproject/ray:2.46.0",
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("1"),
				corev1.ResourceMemory: resource.MustParse("2Gi"),
			},
			Limits: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("1"),
				corev1.ResourceMemory: resource.MustParse("2Gi"),
			},
		},
	}
}

func headGroup() rayv1.HeadGroupSpec {
	return rayv1.HeadGroupSpec{
		RayStartParams: map[string]string{"dashboard-host": "0.0.0.0"},
		Template: corev1.PodTemplateSpec{
			Spec: corev1.PodSpec{Containers: []corev1.Container{rayContainer("ray-head")}},
		},
	}
}

func workerGroup(name string, minReplicas, maxReplicas *int32) rayv1.WorkerGroupSpec {
	return rayv1.WorkerGroupSpec{
		GroupName:      name,
		Replicas:       minReplicas,
		MinReplicas:    minReplicas,
		MaxReplicas:    maxReplicas,
		RayStartParams: map[string]string{},
		Labels:         map[string]string{"zone": "a"},
		Template: corev1.PodTemplateSpec{
			Spec: corev1.PodSpec{Containers: []corev1.Container{rayContainer("ray-worker")}},
		},
	}
}

func TestRayClusterRoundTrip(t *testing.T) {
	cp := kubetest.StartControlPlane(t)
	ns := cp.NewNamespace(t)

	tests := []struct {
		name string
		spec rayv1.RayClusterSpec
		// want is spec as the API server stores it (CRD defaults applied).
		want func(rayv1.RayClusterSpec) rayv1.RayClusterSpec
	}{{
		name: "head only",
		spec: rayv1.RayClusterSpec{RayVersion: "2.46.0", HeadGroupSpec: headGroup()},
	}, {
		name: "suspended with bounded workers and autoscaling",
		spec: rayv1.RayClusterSpec{
			RayVersion:              "2.46.0",
			Suspend:                 ptr.To(true),
			EnableInTreeAutoscaling: ptr.To(true),
			HeadGroupSpec:           headGroup(),
			WorkerGroupSpecs: []rayv1.WorkerGroupSpec{
				workerGroup("cpu", ptr.To[int32](1), ptr.To[int32](4)),
				workerGroup("gpu", ptr.To[int32](0), ptr.To[int32](0)),
			},
		},
		want: func(s rayv1.RayClusterSpec) rayv1.RayClusterSpec {
			for i := range s.WorkerGroupSpecs {
				s.WorkerGroupSpecs[i].NumOfHosts = 1 // CRD default
			}
			return s
		},
	}, {
		name: "worker bounds left to the CRD defaults",
		spec: rayv1.RayClusterSpec{
			HeadGroupSpec:    headGroup(),
			WorkerGroupSpecs: []rayv1.WorkerGroupSpec{workerGroup("small", nil, nil)},
		},
		want: func(s rayv1.RayClusterSpec) rayv1.RayClusterSpec {
			w := &s.WorkerGroupSpecs[0]
			w.Replicas = ptr.To[int32](0)
			w.MinReplicas = ptr.To[int32](0)
			w.MaxReplicas = ptr.To[int32](2147483647)
			w.NumOfHosts = 1
			return s
		},
	}}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := cp.Client()
			in := &rayv1.RayCluster{
				ObjectMeta: metav1.ObjectMeta{
					Name:        "rc-" + string(rune('a'+i)),
					Namespace:   ns,
					Labels:      map[string]string{"dlc.io/cluster-id": "c-123"},
					Annotations: map[string]string{"dlc.io/display-name": "训练集群"},
				},
				Spec: *tt.spec.DeepCopy(),
			}
			if err := c.Create(ctx(t), in); err != nil {
				t.Fatalf("Create: %v", err)
			}

			var got rayv1.RayCluster
			if err := c.Get(ctx(t), client.ObjectKeyFromObject(in), &got); err != nil {
				t.Fatalf("Get: %v", err)
			}
			want := *tt.spec.DeepCopy()
			if tt.want != nil {
				want = tt.want(want)
			}
			if !equality.Semantic.DeepEqual(got.Spec, want) {
				t.Errorf("spec read back differs\n got: %s\nwant: %s", mustJSON(t, got.Spec), mustJSON(t, want))
			}
			if got.Labels["dlc.io/cluster-id"] != "c-123" || got.Annotations["dlc.io/display-name"] != "训练集群" {
				t.Errorf("metadata read back: labels %v, annotations %v", got.Labels, got.Annotations)
			}
			if got.UID == "" || got.ResourceVersion == "" || got.Generation != 1 {
				t.Errorf("server-set metadata missing: uid %q, resourceVersion %q, generation %d",
					got.UID, got.ResourceVersion, got.Generation)
			}
		})
	}
}

func TestRayJobRoundTrip(t *testing.T) {
	cp := kubetest.StartControlPlane(t)
	ns := cp.NewNamespace(t)

	clusterSpec := rayv1.RayClusterSpec{
		HeadGroupSpec:    headGroup(),
		WorkerGroupSpecs: []rayv1.WorkerGroupSpec{workerGroup("cpu", ptr.To[int32](1), ptr.To[int32](2))},
	}
	tests := []struct {
		name string
		spec rayv1.RayJobSpec
		want func(rayv1.RayJobSpec) rayv1.RayJobSpec
	}{{
		name: "on demand cluster",
		spec: rayv1.RayJobSpec{
			Entrypoint:               "python train.py --epochs 3",
			RuntimeEnvYAML:           "working_dir: https://example.com/pkg.zip\nenv_vars:\n  A: b\n",
			JobId:                    "run-0001",
			ShutdownAfterJobFinishes: true,
			RayClusterSpec:           clusterSpec.DeepCopy(),
		},
		want: func(s rayv1.RayJobSpec) rayv1.RayJobSpec {
			s.BackoffLimit = ptr.To[int32](0)
			s.SubmissionMode = rayv1.K8sJobMode
			s.RayClusterSpec.WorkerGroupSpecs[0].NumOfHosts = 1
			return s
		},
	}, {
		name: "existing cluster",
		spec: rayv1.RayJobSpec{
			Entrypoint:      "python eval.py",
			ClusterSelector: map[string]string{"ray.io/cluster": "rc-shared"},
			SubmissionMode:  rayv1.HTTPMode,
			Suspend:         true,
		},
		want: func(s rayv1.RayJobSpec) rayv1.RayJobSpec {
			s.BackoffLimit = ptr.To[int32](0)
			return s
		},
	}}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := cp.Client()
			in := &rayv1.RayJob{
				ObjectMeta: metav1.ObjectMeta{Name: "job-" + string(rune('a'+i)), Namespace: ns},
				Spec:       *tt.spec.DeepCopy(),
			}
			if err := c.Create(ctx(t), in); err != nil {
				t.Fatalf("Create: %v", err)
			}
			var got rayv1.RayJob
			if err := c.Get(ctx(t), client.ObjectKeyFromObject(in), &got); err != nil {
				t.Fatalf("Get: %v", err)
			}
			want := tt.want(*tt.spec.DeepCopy())
			if !equality.Semantic.DeepEqual(got.Spec, want) {
				t.Errorf("spec read back differs\n got: %s\nwant: %s", mustJSON(t, got.Spec), mustJSON(t, want))
			}

			var list rayv1.RayJobList
			if err := c.List(ctx(t), &list, client.InNamespace(ns)); err != nil {
				t.Fatalf("List: %v", err)
			}
			found := false
			for _, j := range list.Items {
				found = found || j.Name == in.Name
			}
			if !found {
				t.Errorf("List in %s does not hold %s", ns, in.Name)
			}
		})
	}
}

// TestSchemaRejectsMalformed shows that the API server checks KubeRay objects
// against the CRDs' schemas: a malformed one is an Invalid error naming the
// field, and nothing is stored.
func TestSchemaRejectsMalformed(t *testing.T) {
	cp := kubetest.StartControlPlane(t)
	ns := cp.NewNamespace(t)

	validHead := map[string]any{
		"rayStartParams": map[string]any{},
		"template": map[string]any{"spec": map[string]any{"containers": []any{
			map[string]any{"name": "ray-head", "image": "rayproject/ray:2.46.0"},
		}}},
	}
	workerTemplate := map[string]any{"spec": map[string]any{"containers": []any{
		map[string]any{"name": "ray-worker", "image": "rayproject/ray:2.46.0"},
	}}}

	tests := []struct {
		name string
		obj  func(name string) client.Object
		// field is the path the API server must name, in the cause and message.
		field string
	}{{
		name: "raycluster without headGroupSpec",
		obj: func(name string) client.Object {
			return unstructuredRay("RayCluster", ns, name, map[string]any{"rayVersion": "2.46.0"})
		},
		field: "spec.headGroupSpec",
	}, {
		name: "raycluster head without template",
		obj: func(name string) client.Object {
			return unstructuredRay("RayCluster", ns, name, map[string]any{
				"headGroupSpec": map[string]any{"rayStartParams": map[string]any{}},
			})
		},
		field: "spec.headGroupSpec.template",
	}, {
		name: "worker group without groupName",
		obj: func(name string) client.Object {
			return unstructuredRay("RayCluster", ns, name, map[string]any{
				"headGroupSpec": validHead,
				"workerGroupSpecs": []any{map[string]any{
					"minReplicas": int64(0), "maxReplicas": int64(2), "template": workerTemplate,
				}},
			})
		},
		field: "spec.workerGroupSpecs[0].groupName",
	}, {
		name: "worker group without template",
		obj: func(name string) client.Object {
			return unstructuredRay("RayCluster", ns, name, map[string]any{
				"headGroupSpec": validHead,
				"workerGroupSpecs": []any{map[string]any{
					"groupName": "cpu", "minReplicas": int64(0), "maxReplicas": int64(2),
				}},
			})
		},
		field: "spec.workerGroupSpecs[0].template",
	}, {
		name: "worker maxReplicas of the wrong type",
		obj: func(name string) client.Object {
			return unstructuredRay("RayCluster", ns, name, map[string]any{
				"headGroupSpec": validHead,
				"workerGroupSpecs": []any{map[string]any{
					"groupName": "cpu", "minReplicas": int64(0), "maxReplicas": "ten", "template": workerTemplate,
				}},
			})
		},
		field: "spec.workerGroupSpecs[0].maxReplicas",
	}, {
		name: "suspend of the wrong type",
		obj: func(name string) client.Object {
			return unstructuredRay("RayCluster", ns, name, map[string]any{
				"headGroupSpec": validHead, "suspend": "yes",
			})
		},
		field: "spec.suspend",
	}, {
		name: "raycluster managedBy outside its CEL rule",
		obj: func(name string) client.Object {
			return &rayv1.RayCluster{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec:       rayv1.RayClusterSpec{HeadGroupSpec: headGroup(), ManagedBy: ptr.To("someone-else")},
			}
		},
		field: "spec.managedBy",
	}, {
		name: "rayjob with a cluster spec without headGroupSpec",
		obj: func(name string) client.Object {
			return unstructuredRay("RayJob", ns, name, map[string]any{
				"entrypoint":     "python train.py",
				"rayClusterSpec": map[string]any{"rayVersion": "2.46.0"},
			})
		},
		field: "spec.rayClusterSpec.headGroupSpec",
	}, {
		name: "rayjob entrypointNumCpus of the wrong type",
		obj: func(name string) client.Object {
			return unstructuredRay("RayJob", ns, name, map[string]any{
				"entrypoint": "python train.py", "entrypointNumCpus": "one",
			})
		},
		field: "spec.entrypointNumCpus",
	}}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := cp.Client()
			obj := tt.obj("bad-" + string(rune('a'+i)))
			err := c.Create(ctx(t), obj)
			if err == nil {
				t.Fatalf("Create accepted a malformed %T", obj)
			}
			t.Logf("refused: %v", err)
			if !apierrors.IsInvalid(err) {
				t.Fatalf("Create: got %v (reason %q), want an Invalid error", err, apierrors.ReasonForError(err))
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Errorf("error does not mention %s: %v", tt.field, err)
			}
			if !hasCause(err, tt.field) {
				t.Errorf("no cause for field %s in %v", tt.field, causes(err))
			}

			// Bad input changes nothing.
			got := obj.DeepCopyObject().(client.Object)
			if err := c.Get(ctx(t), client.ObjectKeyFromObject(obj), got); !apierrors.IsNotFound(err) {
				t.Errorf("Get after a refused Create: got %v, want NotFound", err)
			}
		})
	}
}

func unstructuredRay(kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(rayv1.GroupVersion.WithKind(kind))
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

func causes(err error) []metav1.StatusCause {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return nil
	}
	return status.Status().Details.Causes
}

func hasCause(err error, field string) bool {
	for _, c := range causes(err) {
		if c.Field == field {
			return true
		}
	}
	return false
}

// TestClientScheme checks the client knows the types other packages will use.
func TestClientScheme(t *testing.T) {
	cp := kubetest.StartControlPlane(t)
	for _, obj := range []runtime.Object{&rayv1.RayCluster{}, &rayv1.RayJob{}, &rayv1.RayService{}, &corev1.Pod{}, &corev1.Event{}} {
		gvks, _, err := cp.Scheme().ObjectKinds(obj)
		if err != nil || len(gvks) == 0 {
			t.Errorf("scheme does not know %T: %v", obj, err)
		}
	}
	if cp.Config().Host == "" {
		t.Error("Config().Host is empty")
	}
	cfg := cp.Config()
	cfg.Host = "changed"
	if cp.Config().Host == "changed" {
		t.Error("Config() hands out the control plane's own config")
	}
	if cp.StartupTime() <= 0 {
		t.Errorf("StartupTime() = %v", cp.StartupTime())
	}
	t.Logf("control plane started in %v", cp.StartupTime())
}

// BenchmarkCreateRayCluster shows the fixture in a benchmark.
func BenchmarkCreateRayCluster(b *testing.B) {
	cp := kubetest.StartControlPlane(b)
	ns := cp.NewNamespace(b)
	c := cp.Client()
	b.ReportAllocs()
	for b.Loop() {
		rc := &rayv1.RayCluster{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "bench-", Namespace: ns},
			Spec:       rayv1.RayClusterSpec{HeadGroupSpec: headGroup()},
		}
		if err := c.Create(b.Context(), rc); err != nil {
			b.Fatalf("Create: %v", err)
		}
	}
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("json.Marshal: %v", err)
	}
	return string(b)
}
