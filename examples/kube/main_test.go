package main

import (
	"archive/zip"
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/dlctest/cosfake"
	"github.com/aidlc/dlc/dlctest/kubetest"
	"github.com/aidlc/dlc/storage"
)

// The example's whole story on an envtest control plane with Ray in the
// loop (KubeRay's reconcilers, a kubelet stand-in, a Ray head stand-in
// per cluster), the job package in a COS (S3-compatible) server on
// loopback, fetched by the heads through presigned HTTPS URLs.
func TestExample(t *testing.T) {
	var pkg bytes.Buffer
	zw := zip.NewWriter(&pkg)
	f, err := zw.Create("main.py")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(f, "print('hello from the job')\n"); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	srv := cosfake.New(t, cosfake.WithTLS())
	if err := srv.PutObject(cosfake.DefaultBucket, "hello.zip", pkg.Bytes()); err != nil {
		t.Fatal(err)
	}
	cos, err := storage.NewCOSClient(storage.COSOptions{Region: cosfake.DefaultRegion, Endpoint: srv.URL, HTTPClient: srv.Client(),
		Credentials: storage.Credentials{SecretID: "AKIDexample", SecretKey: "example-secret"}})
	if err != nil {
		t.Fatal(err)
	}
	cp := kubetest.StartControlPlane(t)
	ns := cp.NewNamespace(t)
	loop := cp.StartRayLoop(t, kubetest.LoopOptions{Namespaces: []string{ns},
		Fetch: kubetest.FetchWith(srv.Client())})
	// Twice, as a user runs it again: the second run finds the resource
	// group and the cluster group the first left.
	for i := range 2 {
		var out bytes.Buffer
		o := options{Namespace: ns, InstallCRDs: i == 0, Package: "cos://" + cosfake.DefaultBucket + "/hello.zip",
			WorkingDir: kube.COSWorkingDir(cos, storage.WorkingDirOptions{}), COS: cos, Logs: "cos://" + cosfake.DefaultBucket + "/dlc-logs",
			Entrypoint: "python main.py", Timeout: 3 * time.Minute, Dashboard: loop.Dashboard, PollInterval: 100 * time.Millisecond}
		start := time.Now()
		err = run(t.Context(), cp.Config(), o, &out)
		t.Logf("run %d took %v and printed:\n%s", i+1, time.Since(start), out.String())
		if err != nil {
			t.Fatal(err)
		}
		// The on-demand run's whole log, read from COS after its cluster is gone.
		want := []string{"running", "pod ", "| hello from the job", "succeeded", "is released", "its whole log, from cos://", "|| hello from the job"}
		if i == 0 {
			want = append(want, "dlc's CRDs installed")
		}
		for _, w := range want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("run %d: the output has no %q", i+1, w)
			}
		}
		if strings.Contains(out.String(), "deleting") {
			t.Errorf("run %d: a clean-up failed", i+1)
		}
	}
}
