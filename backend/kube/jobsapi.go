package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

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
//
// A head runs the user's image, so the client trusts none of it: it never
// follows a redirect (a 3xx answer is an error naming where it pointed,
// and nothing, neither a credential nor the submission, goes anywhere but
// Base); every call has a deadline (Timeout); what it reads of an answer
// is bounded (Logs keeps the end of long logs).
type JobsClient struct {
	// Base is the dashboard's base URL: http://<head>:8265, or the API
	// server's service proxy (ServiceProxyURL).
	Base string
	// HTTP is the client requests go through; nil means a plain one. For
	// the service proxy use rest.HTTPClientFor. Its redirect policy is
	// replaced: no redirect is followed.
	HTTP *http.Client
	// Timeout bounds each call, from connecting to the last byte of the
	// answer; 0 means DefaultHeadTimeout.
	Timeout time.Duration
	// Guard, when set, isolates this head from the others it guards: at
	// most one call to a head at a time, and none for a while after one
	// timed out (see HeadGuard). It gates the control calls (Submit,
	// Status, Stop).
	Guard *HeadGuard
	// LogGuard, when set, does for Logs what Guard does for the control
	// calls, apart from them: a log read that is slow or times out never
	// holds up, nor opens the breaker of, the calls that follow a run.
	LogGuard *HeadGuard
	// LogTimeout bounds a Logs call (a log can be large, and Ray answers
	// it whole); 0 means DefaultLogTimeout.
	LogTimeout time.Duration
	// Token, when set, is the cluster's Ray token (Ray's token
	// authentication, RAY_AUTH_MODE=token, Ray >= 2.52), sent with every
	// call as "X-Ray-Authorization: Bearer <token>": the header Ray reads
	// for requests that come through a proxy, which the API server's
	// service proxy lets through (it takes Authorization for itself).
	Token string
}

// DefaultLogTimeout is how long a Logs call may take when
// JobsClient.LogTimeout is zero.
const DefaultLogTimeout = time.Minute

// DefaultHeadTimeout is how long a call to a Ray head may take when
// JobsClient.Timeout (Options.HeadTimeout) is zero.
const DefaultHeadTimeout = 10 * time.Second

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
	if err := r.Config.SubmitProblems().ToError(); err != nil {
		return nil, err
	}
	env, err := runtimeEnv(&r.Config, r.ID, o)
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

// JobInfo is what Ray's Jobs API answers of a job (JobDetails in
// Ray's pydantic_models.py): KubeRay's RayJobInfo and the fields of
// JobDetails it does not carry.
type JobInfo struct {
	utiltypes.RayJobInfo
	// DriverAgentHTTPAddress is the address of the agent on the node that
	// runs the job's driver (http://<node ip>:<port>), set once the
	// driver runs: a job whose driver's node is gone has lost its driver.
	DriverAgentHTTPAddress string `json:"driver_agent_http_address,omitempty"`
	// DriverNodeID is the Ray node id of that node.
	DriverNodeID string `json:"driver_node_id,omitempty"`
	// DriverExitCode is the entrypoint's exit code, once it exited.
	DriverExitCode *int `json:"driver_exit_code,omitempty"`
}

// DriverIP returns the IP of the node that runs the job's driver, from
// DriverAgentHTTPAddress, or "" when Ray does not say.
func (i *JobInfo) DriverIP() string {
	u, err := url.Parse(i.DriverAgentHTTPAddress)
	if err != nil || u.Host == "" {
		return ""
	}
	return u.Hostname()
}

// Status returns what the head knows of a job.
func (c *JobsClient) Status(ctx context.Context, id string) (*JobInfo, error) {
	status, resp, err := c.do(ctx, http.MethodGet, "/api/jobs/"+url.PathEscape(id), nil)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, c.fail("status", id, status, resp)
	}
	var info JobInfo
	if err := json.Unmarshal(resp, &info); err != nil {
		return nil, fmt.Errorf("kube: job %s: the head answered %q: %w", id, clip(resp), err)
	}
	return &info, nil
}

// Logs returns a job's logs so far: all of them up to MaxLogBytes, else
// their last MaxLogBytes after a line saying how much was cut. At most
// maxLogRead bytes of the head's answer are read; logs that go on past
// that end with a line saying so. Bytes that are not UTF-8 read as U+FFFD.
//
// Logs goes apart from the control calls: through LogGuard, within
// LogTimeout, so that a large log (Ray answers it whole, as one JSON
// string) neither waits behind nor opens the breaker of Submit, Status and
// Stop. Ray answers 500 for a driver log that is not UTF-8 (its log client
// reads the file as text): Logs then reads the file through Ray's log API
// instead (/api/v0/logs/file, raw bytes) and decodes what it can.
func (c *JobsClient) Logs(ctx context.Context, id string) (string, error) {
	status, resp, logs, err := c.readLogs(ctx, "/api/jobs/"+url.PathEscape(id)+"/logs", tailLogs)
	if err != nil {
		return "", err
	}
	if status == http.StatusInternalServerError && notUTF8(resp) {
		// Ray's log API (state_head.py get_logs) streams the file's bytes
		// as they are: format=text asks Ray 2.41 for no framing (it
		// prefixes each chunk with "1" by default); 2.46 on sends raw
		// bytes anyway.
		path := "/api/v0/logs/file?submission_id=" + url.QueryEscape(id) + "&lines=-1&format=text"
		if status, resp, logs, err = c.readLogs(ctx, path, tailRaw); err != nil {
			return "", err
		}
	}
	if status != http.StatusOK {
		return "", c.fail("logs", id, status, resp)
	}
	return logs, nil
}

// readLogs reads a log answer at path on the log lane: its end, by tail,
// when the head answers 200, else the (bounded) answer itself.
func (c *JobsClient) readLogs(ctx context.Context, path string,
	tail func(r io.Reader, limit int64, keep int) (string, error)) (status int, resp []byte, logs string, err error) {
	status, resp, err = c.call(ctx, http.MethodGet, path, nil, laneLogs, func(status int, body io.Reader) ([]byte, error) {
		if status != http.StatusOK {
			return readBounded(body)
		}
		var err error
		logs, err = tail(body, maxLogRead, MaxLogBytes)
		return nil, err
	})
	return status, resp, logs, err
}

// notUTF8 reports whether a 500 answer of Ray's logs endpoint is its
// failure to read a log file that is not UTF-8 (Python's
// UnicodeDecodeError: "'utf-8' codec can't decode byte ...").
func notUTF8(body []byte) bool {
	s := string(body)
	return strings.Contains(s, "UnicodeDecodeError") || strings.Contains(s, "codec can't decode")
}

// Stop stops a job; stopping a job that has ended, or that Ray says it
// does not know, is not an error.
func (c *JobsClient) Stop(ctx context.Context, id string) error {
	status, resp, err := c.do(ctx, http.MethodPost, "/api/jobs/"+url.PathEscape(id)+"/stop", nil)
	switch {
	case err != nil:
		return err
	case status == http.StatusOK || (status == http.StatusNotFound && rayNotFound(resp)):
		return nil
	}
	return c.fail("stop", id, status, resp)
}

// rayJobStates are Ray's job statuses (JobStatus in ray.dashboard.modules.job.common)
// and what each means for a run.
var rayJobStates = map[rayv1.JobStatus]job.RunState{
	rayv1.JobStatusPending:   job.Provisioning,
	rayv1.JobStatusRunning:   job.Running,
	rayv1.JobStatusSucceeded: job.Succeeded,
	rayv1.JobStatusFailed:    job.Failed,
	rayv1.JobStatusStopped:   job.Stopped,
}

// UnknownStatus reports whether a job status is none of Ray's (PENDING,
// RUNNING, SUCCEEDED, FAILED, STOPPED).
func UnknownStatus(st rayv1.JobStatus) bool {
	_, ok := rayJobStates[st]
	return !ok
}

// Observation says what a job's status means for its run, bounded
// (job.Observation.Bounded): a message clipped to job.MaxMessage, keeping
// its end, and times before the Unix epoch or past year 9999 dropped. It
// has no StartedAt: Ray's start_time is when Ray accepted the job. A
// status that is none of Ray's fails the run, saying which status the
// head reported: a head that answers outside the API is not waited on for
// ever.
func Observation(info *utiltypes.RayJobInfo) job.Observation {
	o := job.Observation{Message: info.Message}
	st, ok := rayJobStates[info.JobStatus]
	if !ok {
		st, o.Message = job.Failed, unknownStatusMessage(info.JobStatus)
	}
	o.State = st
	// Not StartedAt: Ray sets start_time when it accepts the job, PENDING
	// (job_manager.py, submit_job), not when the driver starts. The run
	// starts when it is first seen RUNNING.
	o.EndedAt = rayTime(info.EndTime)
	return o.Bounded()
}

func unknownStatusMessage(st rayv1.JobStatus) string {
	return fmt.Sprintf("the Ray head reported job status %q, which is none of PENDING, RUNNING, SUCCEEDED, FAILED, STOPPED: the run is failed and its job stopped",
		clip([]byte(st)))
}

// rayTime is a time Ray gives in milliseconds since the Unix epoch; zero
// (not set) and values past what a time holds are the zero time.
func rayTime(ms uint64) time.Time {
	if ms == 0 || ms > math.MaxInt64 {
		return time.Time{}
	}
	return time.UnixMilli(int64(ms)).UTC()
}

// maxResponse bounds what is read of an answer other than logs: nothing
// else a head should send is large.
const maxResponse = 16 << 20

// MaxLogBytes is the most of a job's logs JobsClient.Logs returns: the
// last bytes, after a line saying how much was cut.
const MaxLogBytes = 8 << 20

// maxLogRead bounds what is read of a logs answer: Ray answers a log
// whole, and its end is what matters, so the bound is large; the memory
// held stays 2*MaxLogBytes (tailLogs, tailRaw) and the time LogTimeout.
var maxLogRead int64 = 1 << 30

func (c *JobsClient) do(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	return c.call(ctx, method, path, body, laneControl, func(_ int, r io.Reader) ([]byte, error) { return readBounded(r) })
}

// readBounded reads an answer of at most maxResponse bytes; a longer one
// is cut there.
func readBounded(r io.Reader) ([]byte, error) {
	return io.ReadAll(io.LimitReader(r, maxResponse))
}

// noRedirect is the redirect policy of every client that talks to a head:
// the 3xx answer itself is returned, and call turns it into an error.
func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// lane is which of a head's two paths a call takes: the control calls
// (Submit, Status, Stop), which fail at once as busy while another is in
// flight, or the log reads, which wait their turn; each has its guard and
// its deadline.
type lane int

const (
	laneControl lane = iota
	laneLogs
)

// call makes one request within its lane's deadline, through its lane's
// guard, and reads the answer with read.
func (c *JobsClient) call(ctx context.Context, method, path string, body []byte, ln lane,
	read func(status int, body io.Reader) ([]byte, error)) (int, []byte, error) {
	op := "ray jobs api " + method + " " + path
	timeout, guard, wait := c.Timeout, c.Guard, false
	if timeout <= 0 {
		timeout = DefaultHeadTimeout
	}
	if ln == laneLogs {
		timeout, guard, wait = c.LogTimeout, c.LogGuard, true
		if timeout <= 0 {
			timeout = DefaultLogTimeout
		}
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	outcome := callFailed
	if guard != nil {
		leave, err := guard.enter(cctx, c.Base, wait)
		if err != nil {
			if ctx.Err() != nil {
				return 0, nil, ctx.Err()
			}
			return 0, nil, err
		}
		defer func() { leave(outcome) }()
	}
	hc := http.Client{}
	if c.HTTP != nil {
		hc = *c.HTTP
	}
	hc.CheckRedirect = noRedirect
	req, err := http.NewRequestWithContext(cctx, method, strings.TrimSuffix(c.Base, "/")+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("X-Ray-Authorization", "Bearer "+c.Token)
	}
	failed := func(err error) error {
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case cctx.Err() != nil:
			outcome = callTimedOut
			return errs.Unavailable(op, fmt.Errorf("the Ray head did not answer within %s", timeout))
		}
		return errs.Unavailable(op, err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, failed(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		outcome = callAnswered
		return 0, nil, fmt.Errorf("%s: the Ray head answered %d %s, a redirect to %q: a head's redirects are not followed",
			op, resp.StatusCode, http.StatusText(resp.StatusCode), clip([]byte(resp.Header.Get("Location"))))
	}
	data, err := read(resp.StatusCode, resp.Body)
	if err != nil {
		var bad *logsError
		if errors.As(err, &bad) {
			outcome = callAnswered
			return 0, nil, fmt.Errorf("%s: %w", op, err)
		}
		return 0, nil, failed(err)
	}
	outcome = callAnswered
	return resp.StatusCode, data, nil
}

func (c *JobsClient) fail(op, id string, status int, body []byte) error {
	detail := fmt.Sprintf("ray jobs api: %s job %s: %d %s: %s", op, id, status, http.StatusText(status), clip(body))
	switch {
	case status == http.StatusNotFound && rayNotFound(body):
		return fmt.Errorf("%w (%s)", errs.NotFound("ray job", id), detail)
	case status == http.StatusNotFound:
		// Not Ray's answer: the API server's service proxy's (a JSON
		// Status: no such Service, no endpoints) or something else on the
		// way. The head is unreachable, which is no word on the job.
		return errs.Unavailable(op+" ray job "+id, fmt.Errorf("the Ray head is unreachable (%s)", detail))
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		// The cluster's token is wrong or missing (Ray's token auth), or
		// the proxy refused us: no word on the job; retried while the
		// credential may be put right, within the step's bound.
		return errs.Unavailable(op+" ray job "+id, fmt.Errorf("the Ray head refused the credential (%s)", detail))
	case status == http.StatusBadRequest && rayRefusal(body):
		return &errs.RefusedError{Op: "ray jobs api: " + op + " job " + id, Status: status, Reason: clip(body)}
	case status >= 400:
		// 429, 5xx, and a 4xx that is not Ray's refusal: a proxy's or an
		// ingress's on the way (408, 413, 421, …) says nothing of the job.
		return errs.Unavailable(op+" ray job "+id, errors.New(detail))
	}
	return errors.New(detail)
}

// rayRefusal reports whether a 400 is Ray's refusal of the request itself:
// Ray answers one with the Python traceback of what refused it
// (job/utils.py, parse_and_validate_request: traceback.format_exc()), or
// with its own sentence naming the job kind ("Can only stop submission
// type jobs").
func rayRefusal(body []byte) bool {
	s := string(body)
	return strings.Contains(s, "Traceback (most recent call last)") || strings.Contains(s, "Error: ") ||
		strings.Contains(s, "submission type jobs")
}

// rayNotFound reports whether a 404 answer is Ray's own word that it has
// no such job: the text "Job <id> does not exist" (job_head.py answers an
// unknown job so), not the JSON Status of the API server's proxy.
func rayNotFound(body []byte) bool {
	s := strings.TrimSpace(string(body))
	return !strings.HasPrefix(s, "{") && strings.Contains(s, "does not exist")
}

// clip shortens what a head answered for an error message: its start and
// its end, where a Python traceback puts the exception, with what was cut
// between them said.
func clip(b []byte) string {
	const head, tail = 200, 800
	s := strings.TrimSpace(string(b))
	if len(s) <= head+tail+40 {
		return strings.ToValidUTF8(s, "\uFFFD")
	}
	start, end := head, len(s)-tail
	for start > 0 && !utf8.RuneStart(s[start]) {
		start--
	}
	for end < len(s) && !utf8.RuneStart(s[end]) {
		end++
	}
	return strings.ToValidUTF8(fmt.Sprintf("%s[… %d bytes cut …]%s", s[:start], end-start, s[end:]), "\uFFFD")
}
