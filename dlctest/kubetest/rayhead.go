package kubetest

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	utiltypes "github.com/ray-project/kuberay/ray-operator/controllers/ray/utils/types"
)

// RayHeadOptions configure a Ray head stand-in.
type RayHeadOptions struct {
	// Fetch gets a working_dir given as a URL (the job package, e.g. a
	// presigned URL of the S3-compatible test server, or a cos:// URI a
	// test serves itself); nil means an HTTP GET with the default client,
	// of http and https URLs only. Point it only at loopback.
	Fetch func(ctx context.Context, url string) (io.ReadCloser, error)
	// MaxLog bounds the log kept per job; 0 means 1 MiB (older output is
	// dropped from the front).
	MaxLog int
}

// RayHead is a Ray head stand-in: an HTTP server on loopback that speaks
// the part of the Ray Jobs REST API the SDK uses — submit with
// submission_id (a second submit of one id is refused, as Ray does),
// status, logs, stop — and runs each entrypoint as a real local process
// (sh -c) in a directory of its own, with working_dir unpacked into it
// (a ZIP by URL or path, or a directory) and runtime_env.env_vars set.
// Exit code 0 is SUCCEEDED; any other is FAILED with the tail of its
// output; stop kills the process group (STOPPED). No Ray wheel is needed.
type RayHead struct {
	// URL is the dashboard's base URL: http://127.0.0.1:<port> for a head
	// of its own ([NewRayHead]), http://127.0.0.1:<port>/heads/<uid> for a
	// [RayLoop]'s.
	URL string

	opts    RayHeadOptions
	srv     *httptest.Server // nil when a RayLoop serves it
	handler http.Handler
	base    string
	mu      sync.Mutex
	jobs    map[string]*headJob
	submits map[string]int
	wg      sync.WaitGroup
	hung    chan struct{} // while not nil, every request waits for it to close
	down    bool          // its head pod is gone or not running: no answer
	lost    int           // drivers lost to a head that went down
	closed  chan struct{}
}

type headJob struct {
	info    utiltypes.RayJobInfo
	logs    tailBuffer
	cancel  context.CancelFunc
	stopped bool
	lost    bool // its driver went with the head pod
}

// LostDriver is the message a job whose driver was lost with its head gets
// once a new head is up: what Ray's job manager writes, when it recovers
// the jobs it finds running in the GCS, of one whose supervisor actor is
// gone.
const LostDriver = "Unexpected error occurred: failed to get job supervisor."

// NewRayHead starts a Ray head stand-in; it stops, killing what still
// runs, when the test ends.
func NewRayHead(t TestingT, o RayHeadOptions) *RayHead {
	t.Helper()
	h := newRayHead(t, o)
	h.srv = httptest.NewServer(h.handler)
	h.URL = h.srv.URL
	return h
}

// newRayHead makes a head stand-in without a server of its own: its
// handler serves the Jobs API at its root (a [RayLoop] serves every
// head's from one listener, under a path of its own).
func newRayHead(t TestingT, o RayHeadOptions) *RayHead {
	t.Helper()
	if o.MaxLog <= 0 {
		o.MaxLog = 1 << 20
	}
	base, err := os.MkdirTemp("", "dlc-rayhead-")
	if err != nil {
		t.Fatalf("dlctest: ray head: %v", err)
	}
	h := &RayHead{opts: o, base: base, jobs: map[string]*headJob{}, submits: map[string]int{}, closed: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/jobs/{$}", h.submit)
	mux.HandleFunc("GET /api/jobs/{id}", h.status)
	mux.HandleFunc("GET /api/jobs/{id}/logs", h.logsOf)
	mux.HandleFunc("POST /api/jobs/{id}/stop", h.stop)
	h.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		hung, down := h.hung, h.down
		h.mu.Unlock()
		select {
		case <-h.closed:
			panic(http.ErrAbortHandler) // a closed head answers nothing, as a closed listener
		default:
		}
		if down {
			// As the API server's service proxy answers for a head service
			// with no ready pod behind it.
			http.Error(w, "dlctest: no endpoints available for the head service: the head pod is not running", http.StatusServiceUnavailable)
			return
		}
		if hung != nil {
			select {
			case <-hung:
			case <-h.closed:
			case <-r.Context().Done():
			}
			panic(http.ErrAbortHandler) // accepted, never answered: the connection ends with no response
		}
		mux.ServeHTTP(w, r)
	})
	t.Cleanup(h.Close)
	return h
}

// Hang makes the head accept every request and never answer it, as a
// Ray head whose dashboard is stuck does, until resume is called (or the
// head closes); a request that was held then ends with no answer. Jobs go
// on running meanwhile.
func (h *RayHead) Hang() (resume func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.hung == nil {
		h.hung = make(chan struct{})
	}
	hung := h.hung
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.hung == hung {
			close(hung)
			h.hung = nil
		}
	}
}

// goDown takes the head down with its pod: until goUp every request is
// answered 503, and the drivers of the jobs that still run go with the
// pod (their processes are killed): each ends FAILED with [LostDriver].
// The job records stay, as a head with GCS fault tolerance finds them in
// Redis when it comes back.
func (h *RayHead) goDown() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.down = true
	for _, j := range h.jobs {
		if !rayv1.IsJobTerminal(j.info.JobStatus) && !j.lost && !j.stopped {
			j.lost = true
			h.lost++
			j.cancel()
		}
	}
}

// goUp brings the head back: a new head pod runs.
func (h *RayHead) goUp() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.down = false
}

// Down reports whether the head is down: its RayCluster's head pod is gone
// or not running, and no new one runs yet (see [RayLoop]).
func (h *RayHead) Down() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.down
}

// LostDrivers reports how many jobs' drivers were lost to the head going
// down.
func (h *RayHead) LostDrivers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lost
}

// Jobs returns the submission ids of the jobs the head has started, in no
// particular order: each is started once, however often it is submitted.
func (h *RayHead) Jobs() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	ids := make([]string, 0, len(h.jobs))
	for id := range h.jobs {
		ids = append(ids, id)
	}
	return ids
}

// Submits reports how many submit requests named submission id, the
// refused repeats included.
func (h *RayHead) Submits(id string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.submits[id]
}

// Close stops every job and the server.
func (h *RayHead) Close() {
	h.mu.Lock()
	for _, j := range h.jobs {
		if j.cancel != nil {
			j.stopped = true
			j.cancel()
		}
	}
	select {
	case <-h.closed:
	default:
		close(h.closed)
	}
	h.mu.Unlock()
	h.wg.Wait()
	if h.srv != nil {
		h.srv.Close()
	}
	_ = os.RemoveAll(h.base)
}

func reply(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func (h *RayHead) submit(w http.ResponseWriter, r *http.Request) {
	var req utiltypes.RayJobRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil || req.Entrypoint == "" {
		http.Error(w, "a job needs an entrypoint", http.StatusBadRequest)
		return
	}
	id := req.SubmissionId
	if id == "" {
		id = fmt.Sprintf("raysubmit_%d", time.Now().UnixNano())
	}
	h.mu.Lock()
	h.submits[id]++
	if _, ok := h.jobs[id]; ok {
		h.mu.Unlock()
		http.Error(w, fmt.Sprintf("Job with submission_id %s already exists. Please use a different submission_id.", id), http.StatusInternalServerError)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	j := &headJob{cancel: cancel, logs: tailBuffer{max: h.opts.MaxLog},
		info: utiltypes.RayJobInfo{JobId: id, SubmissionId: id, Entrypoint: req.Entrypoint, JobStatus: rayv1.JobStatusPending,
			Metadata: req.Metadata, RuntimeEnv: req.RuntimeEnv}}
	h.jobs[id] = j
	h.wg.Add(1)
	h.mu.Unlock()
	go h.run(ctx, j, req)
	reply(w, http.StatusOK, utiltypes.RayJobResponse{JobId: id})
}

// run prepares the job's directory and runs its entrypoint to the end.
func (h *RayHead) run(ctx context.Context, j *headJob, req utiltypes.RayJobRequest) {
	defer h.wg.Done()
	defer j.cancel()
	dir, err := h.prepare(ctx, j.info.JobId, req.RuntimeEnv)
	if err != nil {
		h.end(j, rayv1.JobStatusFailed, "preparing the runtime environment failed: "+err.Error())
		return
	}
	cmd := exec.CommandContext(ctx, "sh", "-c", req.Entrypoint)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "RAY_JOB_SUBMISSION_ID="+j.info.JobId)
	if vars, ok := req.RuntimeEnv["env_vars"].(map[string]any); ok {
		for k, v := range vars {
			cmd.Env = append(cmd.Env, k+"="+fmt.Sprint(v))
		}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.Stdout, cmd.Stderr = &j.logs, &j.logs
	h.mu.Lock()
	if j.stopped || j.lost {
		h.mu.Unlock()
		h.end(j, rayv1.JobStatusStopped, "Job was intentionally stopped.")
		return
	}
	err = cmd.Start()
	if err == nil {
		j.info.JobStatus, j.info.StartTime = rayv1.JobStatusRunning, uint64(time.Now().UnixMilli())
	}
	h.mu.Unlock()
	if err == nil {
		err = cmd.Wait()
	}
	h.mu.Lock()
	stopped := j.stopped
	h.mu.Unlock()
	var exit *exec.ExitError
	switch {
	case stopped:
		h.end(j, rayv1.JobStatusStopped, "Job was intentionally stopped.")
	case err == nil:
		h.end(j, rayv1.JobStatusSucceeded, "Job finished successfully.")
	case errors.As(err, &exit):
		h.end(j, rayv1.JobStatusFailed, fmt.Sprintf("Job entrypoint command failed with exit code %d, last available logs (truncated to 20,000 chars):\n%s",
			exit.ExitCode(), j.logs.tail(20000)))
	default:
		h.end(j, rayv1.JobStatusFailed, "Job entrypoint command could not start: "+err.Error())
	}
}

// end records how job j ended; a job whose driver was lost ends FAILED
// with LostDriver, whatever its process did as it was killed.
func (h *RayHead) end(j *headJob, st rayv1.JobStatus, msg string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if j.lost {
		st, msg = rayv1.JobStatusFailed, LostDriver
	}
	j.info.JobStatus, j.info.Message, j.info.EndTime = st, msg, uint64(time.Now().UnixMilli())
}

// prepare makes the job's directory, with working_dir unpacked into it.
func (h *RayHead) prepare(ctx context.Context, id string, env utiltypes.RuntimeEnvType) (string, error) {
	dir, err := os.MkdirTemp(h.base, "job-")
	if err != nil {
		return "", err
	}
	wd, _ := env["working_dir"].(string)
	switch {
	case wd == "":
		return dir, nil
	case strings.HasPrefix(wd, "http://") || strings.HasPrefix(wd, "https://") || (h.opts.Fetch != nil && strings.Contains(wd, "://")):
		fetch := h.opts.Fetch
		if fetch == nil {
			fetch = FetchHTTP
		}
		rc, err := fetch(ctx, wd)
		if err != nil {
			return "", fmt.Errorf("fetching working_dir: %w", err)
		}
		defer rc.Close()
		data, err := io.ReadAll(io.LimitReader(rc, 256<<20))
		if err != nil {
			return "", fmt.Errorf("fetching working_dir: %w", err)
		}
		return dir, unzip(data, dir)
	}
	fi, err := os.Stat(wd)
	if err != nil {
		return "", fmt.Errorf("working_dir %s: %w", wd, err)
	}
	if fi.IsDir() {
		return wd, nil
	}
	data, err := os.ReadFile(wd)
	if err != nil {
		return "", err
	}
	return dir, unzip(data, dir)
}

// FetchHTTP is the default Fetch of a Ray head stand-in: an HTTP GET of
// url with the default client; a status other than 200 is an error. A
// test's own Fetch can fall back to it for the URLs it does not serve.
func FetchHTTP(ctx context.Context, url string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("GET working_dir: %s", resp.Status)
	}
	return resp.Body, nil
}

// unzip unpacks a ZIP into dir as Ray does: if every entry is under one
// top-level directory, that directory's content becomes the working dir.
func unzip(data []byte, dir string) error {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return fmt.Errorf("working_dir is not a ZIP: %w", err)
	}
	prefix := commonTop(zr.File)
	for _, f := range zr.File {
		name := strings.TrimPrefix(f.Name, prefix)
		if name == "" || strings.HasSuffix(name, "/") {
			continue
		}
		p := filepath.Join(dir, filepath.FromSlash(name))
		if !strings.HasPrefix(p, filepath.Clean(dir)+string(filepath.Separator)) {
			return fmt.Errorf("working_dir entry %q leaves the directory", f.Name)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		rc, err := f.Open()
		if err != nil {
			return err
		}
		out, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, f.Mode().Perm()|0o600)
		if err == nil {
			_, err = io.Copy(out, io.LimitReader(rc, 256<<20))
			if cerr := out.Close(); err == nil {
				err = cerr
			}
		}
		rc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

func commonTop(files []*zip.File) string {
	top := ""
	for _, f := range files {
		first, _, nested := strings.Cut(f.Name, "/")
		if !nested {
			return ""
		}
		if top == "" {
			top = first
		} else if top != first {
			return ""
		}
	}
	if top == "" {
		return ""
	}
	return top + "/"
}

func (h *RayHead) job(w http.ResponseWriter, r *http.Request) (*headJob, bool) {
	h.mu.Lock()
	j, ok := h.jobs[r.PathValue("id")]
	h.mu.Unlock()
	if !ok {
		http.Error(w, "Job "+r.PathValue("id")+" does not exist", http.StatusNotFound)
	}
	return j, ok
}

func (h *RayHead) status(w http.ResponseWriter, r *http.Request) {
	j, ok := h.job(w, r)
	if !ok {
		return
	}
	h.mu.Lock()
	info := j.info
	h.mu.Unlock()
	reply(w, http.StatusOK, info)
}

func (h *RayHead) logsOf(w http.ResponseWriter, r *http.Request) {
	if j, ok := h.job(w, r); ok {
		reply(w, http.StatusOK, utiltypes.RayJobLogsResponse{Logs: j.logs.String()})
	}
}

func (h *RayHead) stop(w http.ResponseWriter, r *http.Request) {
	j, ok := h.job(w, r)
	if !ok {
		return
	}
	h.mu.Lock()
	live := !rayv1.IsJobTerminal(j.info.JobStatus)
	if live {
		j.stopped = true
		j.cancel()
	}
	h.mu.Unlock()
	reply(w, http.StatusOK, utiltypes.RayJobStopResponse{Stopped: live})
}

// tailBuffer keeps the last max bytes written to it; safe for concurrent use.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append([]byte(nil), t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

func (t *tailBuffer) tail(n int) string {
	s := t.String()
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
