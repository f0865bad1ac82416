package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	utiltypes "github.com/ray-project/kuberay/ray-operator/controllers/ray/utils/types"
	"k8s.io/client-go/rest"

	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/job"
)

// JobsClient speaks the Ray Jobs REST API of one Ray cluster's head, the
// way runs on an existing cluster or a group member reach Ray (not a
// RayJob with clusterSelector: see DESIGN). The wire types are KubeRay's
// own (RayJobRequest, RayJobInfo). Errors are typed: a job Ray does not
// know is errors.Is errs.ErrNotFound; a transport failure, a timeout, 429
// or 5xx is errors.Is errs.ErrUnavailable (retry); anything else says
// what the head answered.
type JobsClient struct {
	// Base is the dashboard's base URL: http://<head>:8265, or the API
	// server's service proxy (ServiceProxyURL).
	Base string
	// HTTP is the client requests go through; nil means one with a 30 s
	// timeout. For the service proxy use rest.HTTPClientFor.
	HTTP *http.Client
}

// ServiceProxyURL returns the base URL of a Ray head's dashboard reached
// through the API server's service proxy:
// <host>/api/v1/namespaces/<ns>/services/<svc>:dashboard/proxy.
func ServiceProxyURL(cfg *rest.Config, namespace, service string) (string, error) {
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return "", fmt.Errorf("kube: the API server's address %q: %w", cfg.Host, err)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/api/v1/namespaces/" + url.PathEscape(namespace) +
		"/services/" + url.PathEscape(service) + ":dashboard/proxy"
	return u.String(), nil
}

// RunRequest is the submission of run r: its entrypoint under the run's id
// as submission_id (so a retried submit never starts a job twice), its
// runtime environment (working_dir the package's URL), and metadata
// naming the run and the job config.
func RunRequest(r *job.Run, o RenderOptions) (*utiltypes.RayJobRequest, error) {
	env, err := runtimeEnv(&r.Config, o)
	if err != nil {
		return nil, err
	}
	req := &utiltypes.RayJobRequest{Entrypoint: r.Config.Entrypoint, SubmissionId: r.ID,
		Metadata: map[string]string{"dlc.aidlc.io/run-id": r.ID, "dlc.aidlc.io/job-id": r.JobID}}
	if len(env) > 0 {
		req.RuntimeEnv = env
	}
	return req, nil
}

// Submit submits a job. Submitting a submission_id the head already has
// is not an error: the job was submitted before.
func (c *JobsClient) Submit(ctx context.Context, req *utiltypes.RayJobRequest) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	status, resp, err := c.do(ctx, http.MethodPost, "/api/jobs/", body)
	switch {
	case err != nil:
		return err
	case status >= 200 && status < 300:
		return nil
	case strings.Contains(string(resp), "already exists") || strings.Contains(string(resp), "use a different submission_id"):
		return nil // the same submission id: Ray never starts a job twice
	}
	return c.fail("submit", req.SubmissionId, status, resp)
}

// Status returns what the head knows of a job.
func (c *JobsClient) Status(ctx context.Context, id string) (*utiltypes.RayJobInfo, error) {
	status, resp, err := c.do(ctx, http.MethodGet, "/api/jobs/"+url.PathEscape(id), nil)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, c.fail("status", id, status, resp)
	}
	var info utiltypes.RayJobInfo
	if err := json.Unmarshal(resp, &info); err != nil {
		return nil, fmt.Errorf("kube: job %s: the head answered %q: %w", id, clip(resp), err)
	}
	return &info, nil
}

// Logs returns a job's logs so far.
func (c *JobsClient) Logs(ctx context.Context, id string) (string, error) {
	status, resp, err := c.do(ctx, http.MethodGet, "/api/jobs/"+url.PathEscape(id)+"/logs", nil)
	if err != nil {
		return "", err
	}
	if status != http.StatusOK {
		return "", c.fail("logs", id, status, resp)
	}
	var out utiltypes.RayJobLogsResponse
	if err := json.Unmarshal(resp, &out); err != nil {
		return "", fmt.Errorf("kube: logs of job %s: the head answered %q: %w", id, clip(resp), err)
	}
	return out.Logs, nil
}

// Stop stops a job; stopping a job that has ended, or that the head does
// not know, is not an error.
func (c *JobsClient) Stop(ctx context.Context, id string) error {
	status, resp, err := c.do(ctx, http.MethodPost, "/api/jobs/"+url.PathEscape(id)+"/stop", nil)
	switch {
	case err != nil:
		return err
	case status == http.StatusOK || status == http.StatusNotFound:
		return nil
	}
	return c.fail("stop", id, status, resp)
}

// Observation says what a job's status means for its run.
func Observation(info *utiltypes.RayJobInfo) job.Observation {
	o := job.Observation{Message: info.Message}
	switch info.JobStatus {
	case rayv1.JobStatusPending:
		o.State = job.Provisioning
	case rayv1.JobStatusRunning:
		o.State = job.Running
	case rayv1.JobStatusSucceeded:
		o.State = job.Succeeded
	case rayv1.JobStatusFailed:
		o.State = job.Failed
	case rayv1.JobStatusStopped:
		o.State = job.Stopped
	}
	if info.StartTime > 0 {
		o.StartedAt = time.UnixMilli(int64(info.StartTime)).UTC()
	}
	if info.EndTime > 0 {
		o.EndedAt = time.UnixMilli(int64(info.EndTime)).UTC()
	}
	return o
}

// maxResponse bounds what is read of one answer: logs are tailed by the
// caller, and nothing else is large.
const maxResponse = 16 << 20

func (c *JobsClient) do(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.Base, "/")+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return 0, nil, ctx.Err()
		}
		return 0, nil, errs.Unavailable("ray jobs api "+method+" "+path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return 0, nil, errs.Unavailable("ray jobs api "+method+" "+path, err)
	}
	return resp.StatusCode, data, nil
}

func (c *JobsClient) fail(op, id string, status int, body []byte) error {
	detail := fmt.Sprintf("ray jobs api: %s job %s: %d %s: %s", op, id, status, http.StatusText(status), clip(body))
	switch {
	case status == http.StatusNotFound:
		return fmt.Errorf("%w (%s)", errs.NotFound("ray job", id), detail)
	case status == http.StatusTooManyRequests || status >= 500:
		return errs.Unavailable(op+" ray job "+id, errors.New(detail))
	}
	return errors.New(detail)
}

// clip shortens what a head answered for an error message.
func clip(b []byte) string {
	const n = 300
	s := strings.TrimSpace(string(b))
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
