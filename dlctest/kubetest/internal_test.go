package kubetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// fakeT records what a fixture does with its TestingT. Skipf and Fatalf end
// the goroutine, as testing.T's do; run gives the fixture a goroutine to end.
type fakeT struct {
	mu       sync.Mutex
	skipped  bool
	failed   bool
	msg      string
	logs     []string
	cleanups []func()
}

func (f *fakeT) Helper() {}

func (f *fakeT) Cleanup(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cleanups = append(f.cleanups, fn)
}

func (f *fakeT) Logf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.logs = append(f.logs, fmt.Sprintf(format, args...))
}

func (f *fakeT) Skipf(format string, args ...any) {
	f.mu.Lock()
	f.skipped, f.msg = true, fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

func (f *fakeT) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.failed, f.msg = true, fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

// run calls fn in a goroutine of its own, then the cleanups it registered.
func run(fn func(*fakeT)) *fakeT {
	f := &fakeT{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
	return f
}

var _ TestingT = (*testing.T)(nil)
var _ TestingT = (*testing.B)(nil)
var _ TestingT = (*testing.F)(nil)

func TestAssetsDir(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{{
		name: "KUBEBUILDER_ASSETS wins",
		env:  map[string]string{EnvAssets: "/a", EnvAssetsDir: "/b", "XDG_CACHE_HOME": "/c", "HOME": "/h"},
		want: "/a",
	}, {
		name: "then DLC_ENVTEST_DIR",
		env:  map[string]string{EnvAssets: "", EnvAssetsDir: "/b", "XDG_CACHE_HOME": "/c", "HOME": "/h"},
		want: "/b",
	}, {
		name: "then the XDG cache",
		env:  map[string]string{EnvAssets: "", EnvAssetsDir: "", "XDG_CACHE_HOME": "/c", "HOME": "/h"},
		want: "/c/dlc/envtest/k8s-1.37.2-etcd-3.7.0/bin",
	}, {
		name: "then HOME/.cache",
		env:  map[string]string{EnvAssets: "", EnvAssetsDir: "", "XDG_CACHE_HOME": "", "HOME": "/h"},
		want: "/h/.cache/dlc/envtest/k8s-1.37.2-etcd-3.7.0/bin",
	}, {
		name: "nothing to go on",
		env:  map[string]string{EnvAssets: "", EnvAssetsDir: "", "XDG_CACHE_HOME": "", "HOME": ""},
		want: "",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			if got := AssetsDir(); got != tt.want {
				t.Errorf("AssetsDir() = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestAssetsDirMatchesScript keeps the default in step with the script's.
func TestAssetsDirMatchesScript(t *testing.T) {
	script, err := os.ReadFile(filepath.Join("..", "..", "hack", "envtest-assets.sh"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`K8S_VERSION="${K8S_VERSION:-` + kubernetesVersion + `}"`,
		`ETCD_VERSION="${ETCD_VERSION:-` + etcdVersion + `}"`,
		`${DLC_ENVTEST_DIR:-${cache_root}/dlc/envtest/k8s-${K8S_VERSION}-etcd-${ETCD_VERSION}/bin}`,
		`cache_root="${XDG_CACHE_HOME:-${HOME:?HOME is not set}/.cache}"`,
	} {
		if !strings.Contains(string(script), want) {
			t.Errorf("hack/envtest-assets.sh does not contain %s", want)
		}
	}
}

func TestMissingAssets(t *testing.T) {
	empty := t.TempDir()
	half := t.TempDir()
	if err := os.WriteFile(filepath.Join(half, "etcd"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A binary without its executable bit (a half-copied one) is missing too.
	if err := os.WriteFile(filepath.Join(half, "kube-apiserver"), nil, 0o644); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name        string
		dir, ci     string
		wantSkip    bool
		wantFail    bool
		wantMissing string
	}{
		{name: "skips locally", dir: empty, ci: "", wantSkip: true, wantMissing: "kube-apiserver and etcd not found"},
		{name: "skips when CI is false", dir: empty, ci: "false", wantSkip: true, wantMissing: "kube-apiserver and etcd"},
		{name: "fails in CI", dir: empty, ci: "true", wantFail: true, wantMissing: "kube-apiserver and etcd"},
		{name: "names what is missing", dir: half, ci: "true", wantFail: true, wantMissing: "kube-apiserver not found in " + half},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(EnvAssets, tt.dir)
			t.Setenv(EnvCI, tt.ci)
			// startPrivate is what StartControlPlane does outside RunMain.
			var cp *ControlPlane
			f := run(func(f *fakeT) { cp = startPrivate(f, nil) })
			if f.skipped != tt.wantSkip || f.failed != tt.wantFail {
				t.Fatalf("skipped %v, failed %v; want %v, %v (%s)", f.skipped, f.failed, tt.wantSkip, tt.wantFail, f.msg)
			}
			if cp != nil {
				t.Errorf("got a control plane without binaries")
			}
			for _, want := range []string{tt.wantMissing, "bash hack/envtest-assets.sh", EnvAssets} {
				if !strings.Contains(f.msg, want) {
					t.Errorf("message does not say %q:\n%s", want, f.msg)
				}
			}
		})
	}
}

func TestOptionsUnderRunMainAreFatal(t *testing.T) {
	f := run(func(f *fakeT) { StartControlPlane(f, WithCRDDirs(t.TempDir())) })
	if !f.failed || !strings.Contains(f.msg, "pass them to RunMain") {
		t.Errorf("failed %v, message %q; want a failure pointing at RunMain", f.failed, f.msg)
	}
}

func TestKubeRayCRDDir(t *testing.T) {
	t.Run("from the module cache", func(t *testing.T) {
		t.Setenv(EnvKubeRayCRDDir, "")
		dir, err := kubeRayCRDDir()
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"ray.io_rayclusters.yaml", "ray.io_rayjobs.yaml"} {
			if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	})
	t.Run("override", func(t *testing.T) {
		t.Setenv(EnvKubeRayCRDDir, "/somewhere/crds")
		if dir, err := kubeRayCRDDir(); err != nil || dir != "/somewhere/crds" {
			t.Errorf("kubeRayCRDDir() = %q, %v", dir, err)
		}
	})
}

const widgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.test.dlc.io
spec:
  group: test.dlc.io
  names: {kind: Widget, listKind: WidgetList, plural: widgets, singular: widget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [size]
            properties:
              size: {type: integer, minimum: 1}
`

// TestPrivateControlPlaneWithExtraCRDs starts a second, private control plane
// (what StartControlPlane does outside RunMain) with a CRD of its own, and
// checks it is served next to KubeRay's and stopped when the test ends.
func TestPrivateControlPlaneWithExtraCRDs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a second control plane (about 10 s); skipped with -short")
	}
	crds := t.TempDir()
	if err := os.WriteFile(filepath.Join(crds, "widgets.yaml"), []byte(widgetCRD), 0o644); err != nil {
		t.Fatal(err)
	}

	var plane *ControlPlane
	t.Run("start", func(t *testing.T) {
		cp := startPrivate(t, []Option{WithCRDDirs(crds), WithStartTimeout(2 * time.Minute)})
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		ns := cp.NewNamespace(t)

		gvk := schema.GroupVersionKind{Group: "test.dlc.io", Version: "v1", Kind: "Widget"}
		for _, tt := range []struct {
			size    int64
			invalid bool
		}{{size: 3}, {size: 0, invalid: true}} {
			u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"size": tt.size}}}
			u.SetGroupVersionKind(gvk)
			u.SetNamespace(ns)
			u.SetName(fmt.Sprintf("w%d", tt.size))
			err := cp.Client().Create(ctx, u)
			if (err != nil) != tt.invalid {
				t.Errorf("Create widget of size %d: %v (want invalid: %v)", tt.size, err, tt.invalid)
			}
		}
		// KubeRay's CRDs are there too.
		if _, err := cp.Client().RESTMapper().RESTMapping(schema.GroupKind{Group: "ray.io", Kind: "RayCluster"}, "v1"); err != nil {
			t.Errorf("RayCluster not served: %v", err)
		}
		plane = cp
	})
	if plane == nil {
		if t.Failed() {
			return
		}
		t.Skip("no control plane (see the subtest's skip message)")
	}
	// Once its test has ended the control plane is gone.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	var list corev1.NamespaceList
	if err := plane.Client().List(ctx, &list); err == nil {
		t.Error("the private control plane still answers after its test ended")
	}
}
