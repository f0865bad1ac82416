package kube_test

import (
	"archive/zip"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/dlctest/kubetest"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/job"
	"github.com/aidlc/dlc/storage"
)

// writeZip writes a job package with the given files under a top-level
// directory, as `zip -r` of a project folder makes it.
func writeZip(t *testing.T, files map[string]string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "job.zip")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	for name, body := range files {
		w, err := zw.Create("project/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

func waitJob(t *testing.T, c *kube.JobsClient, id string) job.Observation {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		info, err := c.Status(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if o := kube.Observation(info); o.State.Terminal() {
			return o
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("job %s did not end", id)
	return job.Observation{}
}

// The Jobs API client against the Ray head stand-in: a package really
// runs, its output comes back as logs, the exit code decides the state,
// a retried submit is one job, and stop kills it.
func TestJobsClient(t *testing.T) {
	head := kubetest.NewRayHead(t, kubetest.RayHeadOptions{})
	c := &kube.JobsClient{Base: head.URL}
	ctx := context.Background()
	pkg := writeZip(t, map[string]string{
		"run.sh":  "echo hello from $GREETING\nls\n",
		"fail.sh": "echo about to fail >&2\nexit 3\n",
	})
	run := func(id, entry string) *job.Run {
		return &job.Run{ID: id, JobID: "job-1", Config: job.Config{Entrypoint: entry, Package: storage.LocalPackage(pkg),
			Runtime: job.RuntimeEnv{EnvVars: map[string]string{"GREETING": "dlc"}}}}
	}
	opts := kube.RenderOptions{WorkingDir: func(p storage.Package) (string, error) { return p.Local, nil }}
	cases := []struct {
		name, id, entry string
		state           job.RunState
		logs, message   string
	}{
		{"succeeds", "run-ok", "sh run.sh", job.Succeeded, "hello from dlc", ""},
		{"fails with the tail", "run-fail", "sh fail.sh", job.Failed, "about to fail", "exit code 3"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, err := kube.RunRequest(run(tc.id, tc.entry), opts)
			if err != nil {
				t.Fatal(err)
			}
			if req.SubmissionId != tc.id || req.RuntimeEnv["working_dir"] != pkg {
				t.Fatalf("request %+v", req)
			}
			for range 2 { // a retried submit is the same job
				if err := c.Submit(ctx, req); err != nil {
					t.Fatal(err)
				}
			}
			o := waitJob(t, c, tc.id)
			if o.State != tc.state || !strings.Contains(o.Message, tc.message) || o.StartedAt.IsZero() || o.EndedAt.Before(o.StartedAt) {
				t.Fatalf("observation %+v", o)
			}
			logs, err := c.Logs(ctx, tc.id)
			if err != nil || !strings.Contains(logs, tc.logs) {
				t.Fatalf("logs %q, %v", logs, err)
			}
		})
	}
	t.Run("package by URL", func(t *testing.T) {
		files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, pkg) }))
		defer files.Close()
		byURL := kube.RenderOptions{WorkingDir: func(storage.Package) (string, error) { return files.URL + "/job.zip", nil }}
		req, err := kube.RunRequest(run("run-url", "sh run.sh"), byURL)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Submit(ctx, req); err != nil {
			t.Fatal(err)
		}
		if o := waitJob(t, c, "run-url"); o.State != job.Succeeded {
			t.Fatalf("%+v", o)
		}
		if logs, _ := c.Logs(ctx, "run-url"); !strings.Contains(logs, "run.sh") {
			t.Fatalf("the package was not unpacked into the working dir: %q", logs)
		}
	})
	t.Run("stop", func(t *testing.T) {
		req, _ := kube.RunRequest(run("run-long", "sleep 30"), opts)
		if err := c.Submit(ctx, req); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := c.Stop(ctx, "run-long"); err != nil {
			t.Fatal(err)
		}
		if o := waitJob(t, c, "run-long"); o.State != job.Stopped || time.Since(start) > 10*time.Second {
			t.Fatalf("after stop: %+v after %s", o, time.Since(start))
		}
		if err := c.Stop(ctx, "run-long"); err != nil {
			t.Fatalf("stopping an ended job: %v", err)
		}
	})
	t.Run("unknown job", func(t *testing.T) {
		if _, err := c.Status(ctx, "run-none"); !errors.Is(err, errs.ErrNotFound) {
			t.Fatalf("status of an unknown job: %v", err)
		}
		if err := c.Stop(ctx, "run-none"); err != nil {
			t.Fatalf("stop of an unknown job: %v", err)
		}
	})
}

// Throttling, server errors and a head that does not answer are
// ErrUnavailable; a refusal is a plain error.
func TestJobsClientErrors(t *testing.T) {
	codes := map[string]int{"/api/jobs/busy": http.StatusTooManyRequests, "/api/jobs/down": http.StatusServiceUnavailable,
		"/api/jobs/bad": http.StatusBadRequest}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", codes[r.URL.Path])
	}))
	c := &kube.JobsClient{Base: srv.URL}
	ctx := context.Background()
	for _, tc := range []struct {
		id          string
		unavailable bool
	}{{"busy", true}, {"down", true}, {"bad", false}} {
		_, err := c.Status(ctx, tc.id)
		if err == nil || errors.Is(err, errs.ErrUnavailable) != tc.unavailable {
			t.Errorf("%s: %v", tc.id, err)
		}
	}
	srv.Close()
	if _, err := c.Status(ctx, "any"); !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("a head that is gone: %v", err)
	}
}

func TestServiceProxyURL(t *testing.T) {
	for _, host := range []string{"https://127.0.0.1:6443/", "https://127.0.0.1:6443"} {
		got, err := kube.ServiceProxyURL(&rest.Config{Host: host}, "team-a", "c1-head-svc")
		if err != nil || got != "https://127.0.0.1:6443/api/v1/namespaces/team-a/services/c1-head-svc:dashboard/proxy" {
			t.Fatalf("%s: %q %v", host, got, err)
		}
	}
}

// The README's Ray head snippet: a run's request rendered and submitted to
// the stand-in, which runs it (TestReadmeSnippets, in the repository's
// root, checks the region against the README).
func TestReadmeRayHead(t *testing.T) {
	ctx := context.Background()
	pkg := writeZip(t, map[string]string{"main.py": "print('hello')\n"})
	run := &job.Run{ID: "run-readme", JobID: "job-1", Config: job.Config{Entrypoint: "python main.py", Package: storage.LocalPackage(pkg)}}
	presign := func(p storage.Package) (string, error) { return p.Local, nil } // a local package as is; a COS one would be presigned
	// snippet rayhead
	head := kubetest.NewRayHead(t, kubetest.RayHeadOptions{})
	c := &kube.JobsClient{Base: head.URL}
	req, _ := kube.RunRequest(run, kube.RenderOptions{WorkingDir: presign})
	err := c.Submit(ctx, req)
	// end snippet rayhead
	if err != nil {
		t.Fatal(err)
	}
	if o := waitJob(t, c, run.ID); o.State != job.Succeeded {
		t.Fatalf("%+v", o)
	}
}
