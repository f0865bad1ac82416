// Package e2e_test runs the Kubernetes backend end to end on an envtest
// control plane with Ray in the loop: KubeRay's own reconcilers, a kubelet
// stand-in and a Ray head stand-in per cluster (kubetest.RayLoop). The loop
// watches every namespace, so it lives in a test binary of its own, with
// its own control plane.
package e2e_test

import (
	"archive/zip"
	"bytes"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/dlctest/cosfake"
	"github.com/aidlc/dlc/dlctest/kubetest"
	"github.com/aidlc/dlc/storage"
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	os.Exit(kubetest.RunMain(runner{m}))
}

// runner runs the tests, then stops what lives as long as the test binary,
// before RunMain stops the control plane.
type runner struct{ m *testing.M }

func (r runner) Run() int {
	defer pkg.cleanup()
	return r.m.Run()
}

// pkgT is the kubetest.TestingT of what lives as long as the test binary:
// the first test that asks for the world reports its failures, and
// cleanups run when every test is done.
type pkgT struct {
	testing.TB
	mu       sync.Mutex
	cleanups []func()
}

func (p *pkgT) Cleanup(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cleanups = append(p.cleanups, f)
}

func (p *pkgT) cleanup() {
	p.mu.Lock()
	fs := p.cleanups
	p.cleanups = nil
	p.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}

var (
	pkg       pkgT
	worldOnce sync.Once
	theWorld  *world
)

// world is the control plane with Ray in the loop in every namespace,
// and a COS (S3-compatible, HTTPS) server on loopback that serves the job
// packages: Ray fetches a package only from a URI of its protocols (a
// presigned https URL here), never cos://.
type world struct {
	cp   *kubetest.ControlPlane
	loop *kubetest.RayLoop
	cos  *cosfake.Server
	// presign is the backends' RenderOptions.WorkingDir: a presigned URL
	// of the package, for as long as the run asks.
	presign func(kube.PackageUse) (string, error)
}

// getWorld starts the world on first use (skipping t when the envtest
// binaries are missing).
func getWorld(t testing.TB) *world {
	t.Helper()
	cp := kubetest.StartControlPlane(t)
	worldOnce.Do(func() {
		pkg.TB = t
		srv, err := cosfake.Start(cosfake.WithTLS())
		if err != nil {
			t.Fatal(err)
		}
		pkg.Cleanup(srv.Close)
		cos, err := storage.NewCOSClient(storage.COSOptions{Region: cosfake.DefaultRegion, Endpoint: srv.URL, HTTPClient: srv.Client(),
			Credentials: storage.Credentials{SecretID: "AKIDe2e", SecretKey: "e2e-secret"}})
		if err != nil {
			t.Fatal(err)
		}
		presign := kube.COSWorkingDir(cos, storage.WorkingDirOptions{})
		w := &world{cp: cp, cos: srv}
		w.presign = func(u kube.PackageUse) (string, error) {
			// Any package these tests name holds scripts: put it there on
			// first use.
			if obj, err := storage.ParseCOSURL(u.Package.COS); err == nil {
				if _, err := srv.Object(obj.Bucket, obj.Key); err != nil {
					if err := srv.PutObject(obj.Bucket, obj.Key, zipOnce()); err != nil {
						return "", err
					}
				}
			}
			return presign(u)
		}
		w.loop = cp.StartRayLoop(&pkg, kubetest.LoopOptions{Fetch: kubetest.FetchWith(srv.Client())})
		theWorld = w
	})
	if theWorld == nil {
		t.Fatal("the world failed to start")
	}
	return theWorld
}

// backend starts a kube backend on a new namespace of the world.
func (w *world) backend(t testing.TB, o kube.Options) *kube.Backend {
	t.Helper()
	if o.Namespace == "" {
		o.Namespace = w.cp.NewNamespace(t)
	}
	if o.Dashboard == nil {
		o.Dashboard = w.loop.Dashboard
	}
	if o.Render.WorkingDir == nil {
		o.Render.WorkingDir = w.presign
	}
	if o.PollInterval == 0 {
		o.PollInterval = 50 * time.Millisecond
	}
	b, err := kube.New(t.Context(), w.cp.Config(), o)
	if err != nil {
		t.Fatalf("kube.New: %v", err)
	}
	t.Cleanup(b.Close)
	return b
}

// scripts is the job package a cos:// working_dir stands for in these
// tests: the conformance suite's entrypoints, each printing a line.
var scripts = map[string]string{
	"main.py":  "print('main.py ran')\n",
	"train.py": "print('train.py ran')\n",
	"slow.py":  "import time\ntime.sleep(3)\nprint('slow.py ran')\n",
	// ticks.py logs a line every 0.3 s for 3 s: logs followed while it runs.
	"ticks.py": "import time\nfor i in range(10):\n    print('tick', i, flush=True)\n    time.sleep(0.3)\n",
	// fails.py exits 1; long.py runs for a minute (a deadline stops it).
	"fails.py": "import sys\nprint('failing', flush=True)\nsys.exit(1)\n",
	"long.py":  "import time\nprint('long.py started', flush=True)\ntime.sleep(60)\n",
}

var zipOnce = sync.OnceValue(func() []byte { return zipOf(scripts) })

// zipOf returns a ZIP holding files (name → content).
func zipOf(files map[string]string) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, body := range files {
		f, err := zw.Create(name)
		if err != nil {
			panic(err) // a bytes.Buffer does not fail
		}
		if _, err := io.WriteString(f, body); err != nil {
			panic(err)
		}
	}
	if err := zw.Close(); err != nil {
		panic(err)
	}
	return buf.Bytes()
}
