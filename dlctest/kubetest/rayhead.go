package kubetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"k8s.io/utils/ptr"
)

// RayHeadOptions configure a Ray head stand-in.
type RayHeadOptions struct {
	// Fetch gets a remote working_dir by its URI, query included, as
	// smart_open would: https (and http at 2.52) when set, else
	// [FetchHTTP]; s3, gs, azure and abfss only through it (without it
	// such a job fails its runtime_env setup, as a Ray without smart_open's
	// extras does). Point it only at loopback.
	Fetch func(ctx context.Context, url string) (io.ReadCloser, error)
	// MaxLog bounds how much of the end of a driver log is read back for a
	// failure message; 0 means 1 MiB. The whole log stays in a file.
	MaxLog int
	// RayVersion is the Ray the head behaves as: [RayVersion241],
	// [RayVersion246] (the default when empty) or [RayVersion252]; any
	// other value fails the test.
	RayVersion string
	// NodeIP is the head node's IP, as driver_info and
	// driver_agent_http_address report it; empty means 127.0.0.1. (In a
	// [RayLoop], the head pod's IP.)
	NodeIP string
	// StopGrace is how long a stop waits after SIGTERM before SIGKILL
	// (RAY_JOB_STOP_WAIT_TIME_S); 0 means 3 s.
	StopGrace time.Duration
	// AuthToken, when set, turns on Ray's token authentication
	// (RAY_AUTH_MODE=token, RAY_AUTH_TOKEN): every request but the health
	// checks needs "Authorization: Bearer <token>" (or, with no
	// Authorization header, X-Ray-Authorization). Only [RayVersion252]
	// has it; setting it at an older version fails the test.
	AuthToken string
}

// RayHead is a Ray head stand-in: an HTTP server on loopback that speaks
// Ray's Jobs REST API (submit, status, list, logs, stop, delete), the state
// API's driver-log endpoint (/api/v0/logs/file) and, at 2.52, token
// authentication, and refuses what a real Ray refuses, with Ray's status
// codes and texts: each behaviour cites the Ray source it follows. Each
// entrypoint runs as a real local process (sh -c) in its working_dir,
// with runtime_env.env_vars set and its output in a driver log file; no
// Ray wheel is needed.
//
// As in Ray, a submit is answered once the job is recorded PENDING; its
// runtime_env is validated only when the supervisor starts (an invalid one
// fails the job, not the submit); the working_dir is then downloaded on
// the head node, and again on each node that joins while the job runs
// ([RayHead.NodeJoined]): the stand-in assumes every such node starts a
// worker of the job, as a job that autoscaled would.
type RayHead struct {
	// URL is the dashboard's base URL: http://127.0.0.1:<port> for a head
	// of its own ([NewRayHead]), http://127.0.0.1:<port>/heads/<uid> for a
	// [RayLoop]'s.
	URL string

	opts    RayHeadOptions
	ver     rayVersion
	srv     *httptest.Server // nil when a RayLoop serves it
	handler http.Handler
	base    string
	ctx     context.Context // ends at Close
	cancel  context.CancelFunc

	mu          sync.Mutex
	jobs        map[string]*headJob // the GCS's job table, by submission id
	submits     map[string]int
	fetches     map[string]int             // downloads by URI
	nodes       map[string]map[string]bool // packages each node (by IP) has
	dlLocks     map[string]*sync.Mutex     // one download per node and package at a time
	wg          sync.WaitGroup
	hung        chan struct{} // while not nil, every request waits for it to close
	down        bool          // its head pod is gone or not running: no answer
	lost        int           // drivers lost to a head that went down
	closed      chan struct{}
	manager     bool   // the head agent's job manager exists (it is made lazily)
	nodeIP      string // the head node's IP, this incarnation's
	nodeID      string // the head node's id, this incarnation's
	incarnation int    // the head pods so far, less one
	nextJob     uint32 // the GCS's job counter
	token       string // token authentication's token; "" is off
}

// LostDriver is the message a job whose driver was lost with its head gets
// once a new head's job manager recovers the jobs it finds running in the
// GCS, of one whose supervisor actor is gone. Cite:
// python/ray/dashboard/modules/job/job_manager.py
// JobManager._monitor_job_internal (via _recover_running_jobs, fact 29).
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
	ver, ok := parseRayVersion(o.RayVersion)
	if !ok {
		t.Fatalf("dlctest: ray head: unknown RayVersion %q (want %q, %q or %q)", o.RayVersion, RayVersion241, RayVersion246, RayVersion252)
		return nil
	}
	if o.AuthToken != "" && ver < ver252 {
		t.Fatalf("dlctest: ray head: token authentication needs Ray %s, not %s", RayVersion252, o.RayVersion)
		return nil
	}
	if o.MaxLog <= 0 {
		o.MaxLog = 1 << 20
	}
	if o.NodeIP == "" {
		o.NodeIP = "127.0.0.1"
	}
	if o.StopGrace <= 0 {
		o.StopGrace = 3 * time.Second
	}
	base, err := os.MkdirTemp("", "dlc-rayhead-")
	if err != nil {
		t.Fatalf("dlctest: ray head: %v", err)
		return nil
	}
	h := &RayHead{opts: o, ver: ver, base: base, jobs: map[string]*headJob{}, submits: map[string]int{},
		fetches: map[string]int{}, nodes: map[string]map[string]bool{}, dlLocks: map[string]*sync.Mutex{},
		closed: make(chan struct{}), nodeIP: o.NodeIP, nodeID: newNodeID(), nextJob: 1, token: o.AuthToken}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/jobs/{$}", h.submit)
	mux.HandleFunc("GET /api/jobs/{$}", h.list)
	mux.HandleFunc("GET /api/jobs/{id}", h.status)
	mux.HandleFunc("DELETE /api/jobs/{id}", h.delete)
	mux.HandleFunc("GET /api/jobs/{id}/logs", h.logsOf)
	mux.HandleFunc("POST /api/jobs/{id}/stop", h.stop)
	mux.HandleFunc("GET /api/v0/logs/file", h.stateLogs)
	mux.HandleFunc("GET /api/healthz", func(w http.ResponseWriter, _ *http.Request) { text(w, http.StatusOK, "success") })
	if ver >= ver252 {
		mux.HandleFunc("GET /api/authentication_mode", h.authMode)
	}
	api := h.authenticate(noBrowserPosts(mux))
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
		api.ServeHTTP(w, r)
	})
	t.Cleanup(h.Close)
	return h
}

func newNodeID() string {
	b := make([]byte, 28) // a Ray NodeID is 28 bytes
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
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
// answered 503; the supervisors and drivers of the jobs that still run go
// with the pod (their processes are killed), and so do the head agent's
// job manager and the node's downloaded packages. The job records stay as
// they were, RUNNING included: the GCS (with fault tolerance, in Redis)
// keeps them, and only a new job manager's recovery fails them.
func (h *RayHead) goDown() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.down = true
	h.manager = false
	delete(h.nodes, h.nodeIP)
	for _, j := range h.jobs {
		if !rayv1.IsJobTerminal(j.status) && !j.lost {
			j.lost = true
			h.lost++
			j.kill()
		}
	}
}

// goUp brings the head back: a new head pod runs, on node IP ip (empty:
// the same IP as before), a new node of its own.
func (h *RayHead) goUp(ip string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.down = false
	if ip != "" {
		h.nodeIP = ip
	}
	h.nodeID = newNodeID()
	h.incarnation++
}

// forget drops every job record, as a new head without GCS fault
// tolerance starts with an empty GCS.
func (h *RayHead) forget() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, j := range h.jobs {
		if !j.lost && !rayv1.IsJobTerminal(j.status) {
			j.lost = true
			h.lost++
		}
		j.kill()
	}
	h.jobs = map[string]*headJob{}
	h.nextJob = 1
	h.manager = false
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

// Jobs returns the submission ids of the jobs the head has recorded, in
// no particular order: each is recorded once, however often it is
// submitted.
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

// Fetches reports how many times a working_dir URI (the full URI, query
// included) has been downloaded, on any node, failed attempts included.
func (h *RayHead) Fetches(uri string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.fetches[uri]
}

// Close stops every job and the server.
func (h *RayHead) Close() {
	h.mu.Lock()
	select {
	case <-h.closed:
	default:
		close(h.closed)
	}
	for _, j := range h.jobs {
		j.closing = true
		j.kill()
	}
	h.mu.Unlock()
	h.cancel()
	h.wg.Wait()
	if h.srv != nil {
		h.srv.Close()
	}
	_ = os.RemoveAll(h.base)
}

// isClosed reports whether Close has begun; h.mu is held.
func (h *RayHead) isClosed() bool {
	select {
	case <-h.closed:
		return true
	default:
		return false
	}
}

// text answers as aiohttp's web.Response(text=..., status=...) does.
func text(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, body)
}

// pyReply answers Response(text=json.dumps(v), content_type="application/json").
func pyReply(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, pyDumps(v))
}

// aiohttpInternalError is aiohttp's answer to an exception a handler does
// not catch.
func aiohttpInternalError(w http.ResponseWriter) {
	text(w, http.StatusInternalServerError, "500 Internal Server Error\n\nServer got itself in trouble")
}

var (
	frameHeadSubmit = pyFrame{file: "dashboard/modules/job/job_head.py", fn: "submit_job", line: 1,
		code: "resp = await job_agent_client.submit_job_internal(submit_request)"}
	frameHeadSubmitInternal = pyFrame{file: "dashboard/modules/job/job_head.py", fn: "submit_job_internal", line: 1,
		code: "await self._raise_error(resp)"}
	frameHeadRaise = pyFrame{file: "dashboard/modules/job/job_head.py", fn: "_raise_error", line: 1,
		code: `raise RuntimeError(f"Request failed with status code {status}: {error_text}.")`}
	frameParse = pyFrame{file: "dashboard/modules/job/utils.py", fn: "parse_and_validate_request", line: 1,
		code: "return validate_request_type(json_data, request_type)"}
	frameValidateType = pyFrame{file: "dashboard/modules/job/common.py", fn: "validate_request_type", line: 1,
		code: "return request_type(**json_data)"}
	framePostInit = pyFrame{file: "dashboard/modules/job/common.py", fn: "__post_init__", line: 1, code: "raise TypeError("}
	frameInit     = pyFrame{file: "<string>", fn: "__init__", line: 1}
)

// headError is the head's answer to an agent call that failed with code
// and body: _raise_error's RuntimeError, caught by `except Exception` →
// 500 with the head's traceback. Cite:
// python/ray/dashboard/modules/job/job_head.py JobAgentSubmissionClient
// _raise_error (fact 6).
func headError(w http.ResponseWriter, code int, body string, outer ...pyFrame) {
	text(w, http.StatusInternalServerError, pyTraceback(fmt.Sprintf("RuntimeError: Request failed with status code %d: %s.", code, body),
		append(outer, frameHeadRaise)...))
}

// submitFields are JobSubmitRequest's fields, in order. Cite:
// python/ray/dashboard/modules/job/common.py JobSubmitRequest (fact 3).
var submitFields = []string{"entrypoint", "submission_id", "job_id", "runtime_env", "metadata",
	"entrypoint_num_cpus", "entrypoint_num_gpus", "entrypoint_memory", "entrypoint_resources"}

// parseSubmit is parse_and_validate_request(req, JobSubmitRequest): the
// top-level nulls dropped, then JobSubmitRequest(**json_data). Cite:
// python/ray/dashboard/modules/job/utils.py parse_and_validate_request and
// common.py JobSubmitRequest.__post_init__ (facts 2, 3).
func parseSubmit(body *pyDict) (*pyDict, *pyErr) {
	req := body.withoutNulls()
	te := func(msg string) *pyErr { return typeError(msg, frameValidateType, frameInit, framePostInit) }
	for _, k := range req.keys {
		if !contains(submitFields, k) {
			return nil, typeError(fmt.Sprintf("JobSubmitRequest.__init__() got an unexpected keyword argument '%s'", k), frameValidateType)
		}
	}
	ep, ok := req.get("entrypoint")
	if !ok {
		return nil, typeError("JobSubmitRequest.__init__() missing 1 required positional argument: 'entrypoint'", frameValidateType)
	}
	if _, ok := ep.(string); !ok {
		return nil, te("entrypoint must be a string, got " + pyType(ep))
	}
	for _, k := range []string{"submission_id", "job_id"} {
		if v, ok := req.get(k); ok {
			if _, ok := v.(string); !ok {
				return nil, te(k + " must be a string if provided, got " + pyType(v))
			}
		}
	}
	checkDict := func(name string, vals func(any) bool, valMsg string) *pyErr {
		v, ok := req.get(name)
		if !ok {
			return nil
		}
		d, ok := v.(*pyDict)
		if !ok {
			return te(name + " must be a dict, got " + pyType(v))
		}
		// JSON object keys are always strings: "keys must be strings" cannot fire.
		for _, k := range d.keys {
			if vals != nil && !vals(d.vals[k]) {
				return te(name + " values must be " + valMsg + ", got " + pyType(d.vals[k]))
			}
		}
		return nil
	}
	if err := checkDict("runtime_env", nil, ""); err != nil {
		return nil, err
	}
	if err := checkDict("metadata", func(v any) bool { _, ok := v.(string); return ok }, "strings"); err != nil {
		return nil, err
	}
	for _, k := range []string{"entrypoint_num_cpus", "entrypoint_num_gpus"} {
		if v, ok := req.get(k); ok && !pyIsNumber(v) {
			return nil, te(k + " must be a number, got " + pyType(v))
		}
	}
	if v, ok := req.get("entrypoint_memory"); ok && !pyIsIntValue(v) {
		return nil, te("entrypoint_memory must be an integer, got " + pyType(v))
	}
	if err := checkDict("entrypoint_resources", pyIsNumber, "numbers"); err != nil {
		return nil, err
	}
	return req, nil
}

func contains(l []string, s string) bool {
	for _, e := range l {
		if e == s {
			return true
		}
	}
	return false
}

// submissionChars are generate_job_id's alphabet: letters and digits
// less I, l, o, O and 0. Cite: job_manager.py generate_job_id (fact 4).
const submissionChars = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnpqrstuvwxyz123456789"

func generateSubmissionID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = submissionChars[int(b[i])%len(submissionChars)]
	}
	return "raysubmit_" + string(b)
}

// submit is POST /api/jobs/. Cite: job_head.py JobHead.submit_job → the
// head agent's job_agent.py JobAgent.submit_job → job_manager.py
// JobManager.submit_job (facts 1-7).
func (h *RayHead) submit(w http.ResponseWriter, r *http.Request) {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		aiohttpInternalError(w)
		return
	}
	// Cite: utils.py parse_and_validate_request: `await req.json()` is
	// outside its try: bad JSON, or JSON that is no object, is aiohttp's 500.
	v, err := pyDecode(data)
	body, isObj := v.(*pyDict)
	if err != nil || !isObj {
		aiohttpInternalError(w)
		return
	}
	req, perr := parseSubmit(body)
	if perr != nil {
		text(w, http.StatusBadRequest, perr.traceback(frameParse))
		return
	}
	// Cite: job_agent.py JobAgent.submit_job: submission_id or job_id, else
	// job_manager.py generate_job_id (fact 4).
	sid, _ := req.vals["submission_id"].(string)
	if sid == "" {
		sid, _ = req.vals["job_id"].(string)
	}
	if sid == "" {
		sid = generateSubmissionID()
	}
	h.mu.Lock()
	h.submits[sid]++
	h.recoverLocked() // Cite: job_agent.py JobAgent.get_job_manager (fact 28).
	if _, dup := h.jobs[sid]; dup {
		h.mu.Unlock()
		// Cite: job_manager.py JobManager.submit_job raises ValueError; the
		// agent answers 400, the head wraps it in a 500 (fact 6).
		agent := pyTraceback(fmt.Sprintf("ValueError: Job with submission_id %s already exists. Please use a different submission_id.", sid),
			pyFrame{file: "dashboard/modules/job/job_agent.py", fn: "submit_job", line: 1, code: "submission_id = await self.get_job_manager().submit_job("},
			pyFrame{file: "dashboard/modules/job/job_manager.py", fn: "submit_job", line: 1, code: "raise ValueError("})
		headError(w, http.StatusBadRequest, agent, frameHeadSubmit, frameHeadSubmitInternal)
		return
	}
	j := h.newJob(sid, req)
	h.mu.Unlock()
	h.startSupervisor(j)
	pyReply(w, http.StatusOK, newPyDict().set("job_id", sid).set("submission_id", sid))
}

// lookup finds the job of the request's id, or answers 404. Cite:
// job_head.py (find_job_by_ids, job/utils.py): "Job {id} does not exist"
// (fact 23).
func (h *RayHead) lookup(w http.ResponseWriter, r *http.Request) (*headJob, bool) {
	id := r.PathValue("id")
	h.mu.Lock()
	j, ok := h.jobs[id]
	h.mu.Unlock()
	if !ok {
		text(w, http.StatusNotFound, "Job "+id+" does not exist")
	}
	return j, ok
}

// status is GET /api/jobs/{id}: the head reads the GCS alone, no job
// manager involved. Cite: job_head.py JobHead.get_job_info →
// job/utils.py find_job_by_ids (facts 22-27).
func (h *RayHead) status(w http.ResponseWriter, r *http.Request) {
	if j, ok := h.lookup(w, r); ok {
		h.mu.Lock()
		d := h.details(j)
		h.mu.Unlock()
		pyReply(w, http.StatusOK, d)
	}
}

// list is GET /api/jobs/: every submission job's details. Cite:
// job_head.py JobHead.list_jobs.
func (h *RayHead) list(w http.ResponseWriter, _ *http.Request) {
	h.mu.Lock()
	all := make([]any, 0, len(h.jobs))
	for _, j := range h.jobs {
		all = append(all, h.details(j))
	}
	h.mu.Unlock()
	pyReply(w, http.StatusOK, all)
}

// stop is POST /api/jobs/{id}/stop. Cite: job_agent.py JobAgent.stop_job
// → job_manager.py JobManager.stop_job: true if the supervisor actor
// exists (it then stops the job), false if not (facts 33-34).
func (h *RayHead) stop(w http.ResponseWriter, r *http.Request) {
	j, ok := h.lookup(w, r)
	if !ok {
		return
	}
	h.mu.Lock()
	h.recoverLocked()
	live := j.supervisorAlive()
	if live && !j.stopping {
		j.stopping = true
		h.stopLocked(j)
	}
	h.mu.Unlock()
	pyReply(w, http.StatusOK, newPyDict().set("stopped", live))
}

// delete is DELETE /api/jobs/{id}. Cite: job_agent.py JobAgent.delete_job
// → job_manager.py JobManager.delete_job: a job not yet ended is refused
// with a RuntimeError (agent 500, head 500) (fact 34).
func (h *RayHead) delete(w http.ResponseWriter, r *http.Request) {
	j, ok := h.lookup(w, r)
	if !ok {
		return
	}
	h.mu.Lock()
	h.recoverLocked()
	if !rayv1.IsJobTerminal(j.status) {
		st := j.status
		h.mu.Unlock()
		agent := pyTraceback(fmt.Sprintf("RuntimeError: Attempted to delete job '%s', but it is in a non-terminal state %s.", j.sid, st),
			pyFrame{file: "dashboard/modules/job/job_agent.py", fn: "delete_job", line: 1, code: "deleted = await self.get_job_manager().delete_job(job.submission_id)"},
			pyFrame{file: "dashboard/modules/job/job_manager.py", fn: "delete_job", line: 1, code: "raise RuntimeError("})
		headError(w, http.StatusInternalServerError, agent,
			pyFrame{file: "dashboard/modules/job/job_head.py", fn: "delete_job", line: 1, code: "resp = await job_agent_client.delete_job_internal(job.submission_id)"})
		return
	}
	if h.jobs[j.sid] == j {
		delete(h.jobs, j.sid)
	}
	h.mu.Unlock()
	pyReply(w, http.StatusOK, newPyDict().set("deleted", true))
}

// recoverLocked makes the head agent's job manager if there is none: its
// recovery fails every job the GCS has as running whose supervisor is
// gone. Cite: job_agent.py JobAgent.get_job_manager (made on the first
// submit, stop, delete or logs call) and job_manager.py
// JobManager._recover_running_jobs / _monitor_job_internal (facts 28, 29).
// A job still PENDING would fail only after RAY_JOB_START_TIMEOUT_SECONDS
// (900 s); the stand-in leaves it PENDING. h.mu is held.
func (h *RayHead) recoverLocked() {
	if h.manager {
		return
	}
	h.manager = true
	for _, j := range h.jobs {
		if j.lost && !rayv1.IsJobTerminal(j.status) && j.status != rayv1.JobStatusPending {
			h.endLocked(j, rayv1.JobStatusFailed, ptr.To(LostDriver), "JOB_SUPERVISOR_ACTOR_START_FAILURE", nil)
		}
	}
}

// details is the job's JobDetails, as GET /api/jobs/{id} writes it. Cite:
// python/ray/dashboard/modules/job/pydantic_models.py JobDetails, its
// fields in order (fact 24), and common.py JobInfo.__post_init__ for the
// default messages (fact 27). h.mu is held.
func (h *RayHead) details(j *headJob) *pyDict {
	d := newPyDict().set("type", "SUBMISSION")
	var driverInfo any
	if j.jobID != "" {
		d.set("job_id", j.jobID)
		driverInfo = newPyDict().set("id", j.jobID).set("node_ip_address", j.driverIP).set("pid", fmt.Sprint(j.pid))
	} else {
		d.set("job_id", nil)
	}
	d.set("submission_id", j.sid).set("driver_info", driverInfo).set("status", string(j.status)).
		set("entrypoint", j.entrypoint).set("message", j.messageOrDefault())
	// Cite: PR #55578 "Add error_type to job failures" (2025-08): null
	// before 2.52 (fact 32).
	if h.ver >= ver252 && j.errorType != "" {
		d.set("error_type", j.errorType)
	} else {
		d.set("error_type", nil)
	}
	d.set("start_time", j.startTime)
	if j.endTime != 0 {
		d.set("end_time", j.endTime)
	} else {
		d.set("end_time", nil)
	}
	d.set("metadata", j.metadata).set("runtime_env", j.runtimeEnvRaw)
	if j.driverAgent != "" {
		d.set("driver_agent_http_address", j.driverAgent).set("driver_node_id", j.driverNodeID)
	} else {
		d.set("driver_agent_http_address", nil).set("driver_node_id", nil)
	}
	if j.exitCode != nil {
		d.set("driver_exit_code", *j.exitCode)
	} else {
		d.set("driver_exit_code", nil)
	}
	return d
}
