package kube_test

import (
	"archive/zip"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	utiltypes "github.com/ray-project/kuberay/ray-operator/controllers/ray/utils/types"
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
		if o := kube.Observation(&info.RayJobInfo); o.State.Terminal() {
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
	// Ray fetches a package by a URI of its protocols: a local ZIP as file://.
	opts := kube.RenderOptions{WorkingDir: func(u kube.PackageUse) (string, error) { return "file://" + u.Package.Local, nil }}
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
			if req.SubmissionId != tc.id || req.RuntimeEnv["working_dir"] != "file://"+pkg {
				t.Fatalf("request %+v", req)
			}
			for range 2 { // a retried submit is the same job
				if err := c.Submit(ctx, req); err != nil {
					t.Fatal(err)
				}
			}
			o := waitJob(t, c, tc.id)
			// No StartedAt: Ray's start_time is its acceptance, not the driver's start.
			if o.State != tc.state || !strings.Contains(o.Message, tc.message) || !o.StartedAt.IsZero() || o.EndedAt.IsZero() {
				t.Fatalf("observation %+v", o)
			}
			logs, err := c.Logs(ctx, tc.id)
			if err != nil || !strings.Contains(logs, tc.logs) {
				t.Fatalf("logs %q, %v", logs, err)
			}
		})
	}
	t.Run("package by URL", func(t *testing.T) {
		// https: Ray (2.41, 2.46) fetches no plain http URL.
		files := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, pkg) }))
		defer files.Close()
		head := kubetest.NewRayHead(t, kubetest.RayHeadOptions{Fetch: kubetest.FetchWith(files.Client())})
		c := &kube.JobsClient{Base: head.URL}
		byURL := kube.RenderOptions{WorkingDir: func(kube.PackageUse) (string, error) { return files.URL + "/job.zip?sig=x", nil }}
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

// Throttling, server errors, a refused credential, a 404 that is not
// Ray's and a head that does not answer are ErrUnavailable (unreachable is
// not failed); a 404 is ErrNotFound only in Ray's words; another refusal
// is ErrInvalid.
func TestJobsClientErrors(t *testing.T) {
	// The API server's service proxy answers a missing Service so.
	const proxy404 = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"services \"c1-head-svc\" not found","reason":"NotFound","details":{"name":"c1-head-svc","kind":"services"},"code":404}`
	answers := map[string]struct {
		code int
		body string
	}{
		"/api/jobs/busy":     {http.StatusTooManyRequests, "no"},
		"/api/jobs/down":     {http.StatusServiceUnavailable, "no"},
		"/api/jobs/bad":      {http.StatusBadRequest, "TypeError: JobSubmitRequest.__init__() got an unexpected keyword argument 'foo'"},
		"/api/jobs/gone":     {http.StatusNotFound, "Job gone does not exist"}, // job_head.py, get_job_info
		"/api/jobs/proxy":    {http.StatusNotFound, proxy404},
		"/api/jobs/notoken":  {http.StatusUnauthorized, "Unauthorized: Missing authentication token"},
		"/api/jobs/badtoken": {http.StatusForbidden, "Forbidden: Invalid authentication token"},
		"/api/jobs/ingress":  {http.StatusRequestTimeout, "<html>408 Request Time-out</html>"}, // a proxy's, not Ray's
		"/api/jobs/proxy400": {http.StatusBadRequest, "<html>400 Bad Request</html>"},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := answers[strings.TrimSuffix(r.URL.Path, "/stop")]
		http.Error(w, a.body, a.code)
	}))
	c := &kube.JobsClient{Base: srv.URL}
	ctx := context.Background()
	for _, tc := range []struct {
		id   string
		want error // nil: a stop that is no error
		stop error
	}{
		{"busy", errs.ErrUnavailable, errs.ErrUnavailable},
		{"down", errs.ErrUnavailable, errs.ErrUnavailable},
		{"bad", errs.ErrInvalid, errs.ErrInvalid},
		{"gone", errs.ErrNotFound, nil},
		{"proxy", errs.ErrUnavailable, errs.ErrUnavailable},
		{"notoken", errs.ErrUnavailable, errs.ErrUnavailable},
		{"badtoken", errs.ErrUnavailable, errs.ErrUnavailable},
		{"ingress", errs.ErrUnavailable, errs.ErrUnavailable},
		{"proxy400", errs.ErrUnavailable, errs.ErrUnavailable},
	} {
		if _, err := c.Status(ctx, tc.id); !errors.Is(err, tc.want) {
			t.Errorf("status %s: %v, want %v", tc.id, err, tc.want)
		}
		if err := c.Stop(ctx, tc.id); (tc.stop == nil) != (err == nil) || (err != nil && !errors.Is(err, tc.stop)) {
			t.Errorf("stop %s: %v, want %v", tc.id, err, tc.stop)
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

// docs/kubernetes.md's Ray head snippet: a run's request rendered and submitted to
// the stand-in, which runs it (TestReadmeSnippets, in the repository's
// root, checks the region against docs/kubernetes.md).
func TestReadmeRayHead(t *testing.T) {
	ctx := context.Background()
	pkg := writeZip(t, map[string]string{"main.py": "print('hello')\n"})
	run := &job.Run{ID: "run-readme", JobID: "job-1", Config: job.Config{Entrypoint: "python main.py", Package: storage.LocalPackage(pkg)}}
	presign := func(u kube.PackageUse) (string, error) { return "file://" + u.Package.Local, nil } // a local ZIP; a COS one would be presigned (kube.COSWorkingDir)
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

// Log reads go apart from the control calls: a log read that times out
// neither holds up nor opens the breaker of Status, Submit and Stop; and
// a 500 for a driver log that is not UTF-8 (Ray reads it as text) is read
// again through Ray's log API, raw, and decoded.
func TestJobsClientLogsApart(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/api/jobs/slow/logs":
			select { // a log Ray answers slowly: held past the log deadline
			case <-release:
			case <-r.Context().Done():
			}
		case r.URL.Path == "/api/jobs/bytes/logs":
			// job_log_storage_client.py get_logs opens the file as text.
			http.Error(w, "Traceback (most recent call last):\n...\nRuntimeError: Request failed with status code 500: ... UnicodeDecodeError: 'utf-8' codec can't decode byte 0xff in position 6: invalid start byte", 500)
		case r.URL.Path == "/api/v0/logs/file" && r.URL.Query().Get("submission_id") == "bytes" && r.URL.Query().Get("lines") == "-1":
			_, _ = w.Write([]byte("first \xff line\nsecond line\n"))
		case r.URL.Path == "/api/jobs/slow" || r.URL.Path == "/api/jobs/bytes":
			if r.Header.Get("X-Ray-Authorization") != "Bearer s3cret" || r.Header.Get("Authorization") != "" {
				http.Error(w, "Forbidden: Invalid authentication token", http.StatusForbidden)
				return
			}
			_, _ = io.WriteString(w, `{"status":"RUNNING","submission_id":"slow"}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	defer close(release)
	c := &kube.JobsClient{Base: srv.URL, Guard: &kube.HeadGuard{Backoff: time.Hour}, LogGuard: &kube.HeadGuard{Backoff: time.Hour},
		LogTimeout: 200 * time.Millisecond, Token: "s3cret"}
	ctx := context.Background()
	logs, err := c.Logs(ctx, "bytes")
	if err != nil || logs != "first \uFFFD line\nsecond line\n" {
		t.Fatalf("logs that are not UTF-8: %q, %v", logs, err)
	}
	done := make(chan error, 1)
	go func() { _, err := c.Logs(ctx, "slow"); done <- err }()
	// While the log read is in flight, and after it timed out, control
	// calls go through.
	if _, err := c.Status(ctx, "slow"); err != nil {
		t.Fatalf("status while a log read is in flight: %v", err)
	}
	if err := <-done; !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("a log read past its deadline: %v", err)
	}
	if info, err := c.Status(ctx, "slow"); err != nil || info.JobStatus != "RUNNING" {
		t.Fatalf("status after a log read timed out: %+v, %v", info, err)
	}
	// The log lane's own breaker is open for this head now; the control
	// lane's is not (above).
	if _, err := c.Logs(ctx, "bytes"); !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("logs of a head whose log read timed out, within the backoff: %v", err)
	}
}

// What a head answered is kept in an error by its start and its end,
// where a Python traceback puts the exception (Ray answers a refused
// submission with a whole traceback).
func TestJobsClientErrorKeepsTheException(t *testing.T) {
	tb := "Traceback (most recent call last):\n" + strings.Repeat("  File \"/ray/x.py\", line 1, in f\n    g()\n", 200) +
		"TypeError: JobSubmitRequest.__init__() got an unexpected keyword argument 'foo'"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, tb, http.StatusBadRequest) }))
	defer srv.Close()
	err := (&kube.JobsClient{Base: srv.URL}).Submit(context.Background(), &utiltypes.RayJobRequest{Entrypoint: "x", SubmissionId: "run-1"})
	var refused *errs.RefusedError
	if !errors.As(err, &refused) || !strings.HasPrefix(refused.Reason, "Traceback") ||
		!strings.HasSuffix(refused.Reason, "unexpected keyword argument 'foo'") || len(refused.Reason) > 1200 {
		t.Fatalf("%v", err)
	}
}
