package kubetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"k8s.io/utils/ptr"
)

// headJob is a job as the head stand-in keeps it: its record in the GCS
// and, while it runs, its supervisor's state.
type headJob struct {
	sid, entrypoint string
	runtimeEnvRaw   any // as submitted: *pyDict or nil
	metadata        any // as submitted: *pyDict or nil
	wantsResources  bool
	env             runtimeEnv // validated when the supervisor starts

	status       rayv1.JobStatus
	message      *string // nil: JobInfo's default for the status
	errorType    string
	startTime    uint64
	endTime      uint64
	jobID        string // the driver's GCS job id, hex; "" until it runs
	pid          int
	driverIP     string
	driverAgent  string
	driverNodeID string
	exitCode     *int
	incarnation  int // the head pod its driver ran on

	dir, logPath string
	ctx          context.Context // the supervisor's: ends with a stop, a lost head or Close
	cancel       context.CancelFunc
	proc         *os.Process
	done         chan struct{} // closed once the entrypoint has exited
	stopping     bool          // a stop was asked for
	lost         bool          // its supervisor went with its head
	closing      bool          // the head is closing: the record no longer changes
	nodeFailure  bool          // a node's runtime_env setup failed: the driver exits 1
}

// newJob records a submitted job PENDING, with its start time, and
// writes Ray's first driver-log line. Cite: job_manager.py
// JobManager.submit_job: put_info (PENDING, start_time) before the
// supervisor actor is made (fact 7); driver_logger.info("Runtime env is
// setting up.") with ray_constants.LOGGER_FORMAT (fact 37). h.mu is held.
func (h *RayHead) newJob(sid string, req *pyDict) *headJob {
	j := &headJob{sid: sid, status: rayv1.JobStatusPending, startTime: uint64(time.Now().UnixMilli()), done: make(chan struct{})}
	j.entrypoint, _ = req.vals["entrypoint"].(string)
	j.runtimeEnvRaw, _ = req.get("runtime_env")
	j.metadata, _ = req.get("metadata")
	for _, k := range []string{"entrypoint_num_cpus", "entrypoint_num_gpus", "entrypoint_memory"} {
		if n, ok := req.vals[k].(json.Number); ok {
			if f, _ := n.Float64(); f > 0 {
				j.wantsResources = true
			}
		}
	}
	if d, ok := req.vals["entrypoint_resources"].(*pyDict); ok {
		for _, k := range d.keys {
			if n, ok := d.vals[k].(json.Number); ok {
				if f, _ := n.Float64(); f > 0 {
					j.wantsResources = true
				}
			}
		}
	}
	j.ctx, j.cancel = context.WithCancel(h.ctx)
	dir, err := os.MkdirTemp(h.base, "job-")
	if err != nil {
		dir = h.base
	}
	j.dir, j.logPath = dir, filepath.Join(dir, "job-driver.log")
	appendLog(j.logPath, rayLogLine("job_manager.py", 1, "Runtime env is setting up."))
	h.jobs[sid] = j
	return j
}

// rayLogLine is a line of Ray's own logger, LOGGER_FORMAT
// "%(asctime)s\t%(levelname)s %(filename)s:%(lineno)s -- %(message)s"
// (fact 37; the line numbers are the stand-in's).
func rayLogLine(file string, line int, msg string) string {
	now := time.Now()
	return fmt.Sprintf("%s,%03d\tINFO %s:%d -- %s\n", now.Format("2006-01-02 15:04:05"), now.Nanosecond()/1e6, file, line, msg)
}

func appendLog(path, s string) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	_, _ = io.WriteString(f, s)
	_ = f.Close()
}

// messageOrDefault is the job's message, or JobInfo's default for its
// status. Cite: common.py JobInfo.__post_init__ (fact 27).
func (j *headJob) messageOrDefault() string {
	if j.message != nil {
		return *j.message
	}
	switch j.status {
	case rayv1.JobStatusPending:
		msg := "Job has not started yet."
		if j.wantsResources {
			msg += " It may be waiting for resources (CPUs, GPUs, memory, custom resources) to become available."
		}
		if env, ok := j.runtimeEnvRaw.(*pyDict); ok && len(env.keys) > 0 {
			msg += " It may be waiting for the runtime environment to be set up."
		}
		return msg
	case rayv1.JobStatusRunning:
		return "Job is currently running."
	case rayv1.JobStatusStopped:
		return "Job was intentionally stopped."
	case rayv1.JobStatusSucceeded:
		return "Job finished successfully."
	}
	return "Job failed."
}

// supervisorAlive reports whether the job's supervisor actor still
// exists: it has not ended and did not go with its head. h.mu is held.
func (j *headJob) supervisorAlive() bool { return !rayv1.IsJobTerminal(j.status) && !j.lost }

// kill ends the job's setup and SIGKILLs its process group. h.mu is held.
func (j *headJob) kill() {
	j.cancel()
	if j.proc != nil {
		select {
		case <-j.done:
		default:
			_ = syscall.Kill(-j.proc.Pid, syscall.SIGKILL)
		}
	}
}

// endLocked records how the job ended. Cite: job_manager.py / common.py
// JobInfoStorageClient.put_status: end_time set with a terminal status
// (fact 26). h.mu is held.
func (h *RayHead) endLocked(j *headJob, st rayv1.JobStatus, msg *string, errorType string, exit *int) {
	j.status, j.message, j.errorType, j.exitCode = st, msg, errorType, exit
	j.endTime = uint64(time.Now().UnixMilli())
}

var frameJobManagerSubmit = pyFrame{file: "dashboard/modules/job/job_manager.py", fn: "submit_job", line: 1,
	code: "supervisor = self._supervisor_actor_cls.options("}

// startSupervisor makes the job's supervisor actor: RuntimeEnv(**runtime_env)
// first, whose error fails the job at once (the submit still answers 200).
// Cite: job_manager.py JobManager.submit_job, its `except Exception` around
// the actor's creation (fact 7).
func (h *RayHead) startSupervisor(j *headJob) {
	var envDict *pyDict
	if d, ok := j.runtimeEnvRaw.(*pyDict); ok {
		envDict = d
	}
	env, perr := h.ver.parseRuntimeEnv(envDict)
	h.mu.Lock()
	defer h.mu.Unlock()
	if perr != nil {
		msg := fmt.Sprintf("Failed to start supervisor actor %s: '%s'. Full traceback:\n%s", j.sid, perr.msg,
			perr.traceback(frameJobManagerSubmit, pyFrame{file: "runtime_env/runtime_env.py", fn: "__init__", line: 1, code: "self.update(runtime_env)"}))
		h.endLocked(j, rayv1.JobStatusFailed, &msg, "JOB_SUPERVISOR_ACTOR_START_FAILURE", nil)
		return
	}
	j.env = env
	if h.isClosed() {
		return
	}
	h.wg.Add(1)
	go h.supervise(j)
}

// supervise is the job's supervisor: its runtime_env set up on the head
// node, then its entrypoint run to the end. Cite: job_supervisor.py
// JobSupervisor.run (fact 31), job_manager.py
// JobManager._monitor_job_internal for a setup failure (fact 21).
func (h *RayHead) supervise(j *headJob) {
	defer h.wg.Done()
	h.mu.Lock()
	ip, incarnation := h.nodeIP, h.incarnation
	h.mu.Unlock()
	dir, err := h.setUpOnHead(j, ip, incarnation)
	h.mu.Lock()
	if j.lost || j.closing {
		h.mu.Unlock()
		return
	}
	if j.stopping {
		h.endLocked(j, rayv1.JobStatusStopped, nil, "", nil)
		h.mu.Unlock()
		return
	}
	if err != nil {
		msg := "runtime_env setup failed: Failed to set up runtime environment.\n" + setupError(ip, err)
		appendLog(j.logPath, msg) // Cite: _monitor_job_internal appends it to the driver log, no newline (fact 37).
		h.endLocked(j, rayv1.JobStatusFailed, &msg, "RUNTIME_ENV_SETUP_FAILURE", nil)
		h.mu.Unlock()
		return
	}
	if h.ver >= ver252 {
		// Cite: PR #58300 "add entrypoint log for jobs" (≥2.52, fact 37).
		appendLog(j.logPath, fmt.Sprintf("Running entrypoint for job %s: %s\n", j.sid, j.entrypoint))
	}
	// Cite: job_supervisor.py JobSupervisor._exec_entrypoint: Popen(shell=True,
	// start_new_session=True, stdout=log, stderr=STDOUT).
	cmd := exec.Command("sh", "-c", j.entrypoint)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "RAY_JOB_SUBMISSION_ID="+j.sid)
	for _, kv := range j.env.envVars {
		cmd.Env = append(cmd.Env, kv[0]+"="+kv[1])
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	log, err := os.OpenFile(j.logPath, os.O_WRONLY|os.O_APPEND, 0)
	if err == nil {
		cmd.Stdout, cmd.Stderr = log, log
		err = cmd.Start()
		log.Close()
	}
	if err != nil {
		msg := pyTraceback("FileNotFoundError: "+err.Error(),
			pyFrame{file: "dashboard/modules/job/job_supervisor.py", fn: "run", line: 1, code: "child_process = self._exec_entrypoint(env, logs_path)"})
		h.endLocked(j, rayv1.JobStatusFailed, &msg, "JOB_ENTRYPOINT_COMMAND_START_ERROR", nil)
		h.mu.Unlock()
		return
	}
	// RUNNING, with the driver's fields as if it called ray.init at once.
	// Cite: job_supervisor.py JobSupervisor.run → put_status(RUNNING,
	// driver_agent_http_address, driver_node_id) (fact 26); the job id is the
	// GCS's next JobID, hex of 4 little-endian bytes (fact 25).
	j.proc, j.pid = cmd.Process, cmd.Process.Pid
	j.status, j.message = rayv1.JobStatusRunning, nil
	n := h.nextJob + 1
	h.nextJob = n
	j.jobID = fmt.Sprintf("%02x%02x%02x%02x", byte(n), byte(n>>8), byte(n>>16), byte(n>>24))
	j.driverIP, j.driverAgent, j.driverNodeID, j.incarnation = ip, "http://"+ip+":52365", h.nodeID, incarnation
	h.mu.Unlock()

	err = cmd.Wait()
	close(j.done)
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = -int(ws.Signal()) // Popen's returncode for a signal
		}
	}
	h.mu.Lock()
	failed := !j.stopping && !j.lost && !j.closing && (j.nodeFailure || code != 0)
	if j.nodeFailure {
		code = 1 // the driver's ray.get raised RuntimeEnvSetupError: Python exits 1
	}
	h.mu.Unlock()
	tail := ""
	if failed {
		tail = logTail(j.logPath, h.opts.MaxLog)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case j.lost || j.closing:
		// The supervisor went with the head: the GCS keeps the record as it was.
	case j.stopping:
		// Cite: job_supervisor.py JobSupervisor.stop: STOPPED, no exit code (fact 33).
		h.endLocked(j, rayv1.JobStatusStopped, nil, "", nil)
	case !failed:
		h.endLocked(j, rayv1.JobStatusSucceeded, nil, "", ptr.To(0))
	default:
		// Cite: job_supervisor.py JobSupervisor.run (fact 31).
		msg := fmt.Sprintf("Job entrypoint command failed with exit code %d. No logs available.", code)
		if tail != "" {
			msg = fmt.Sprintf("Job entrypoint command failed with exit code %d, last available logs (truncated to 20,000 chars):\n%s", code, tail)
		}
		h.endLocked(j, rayv1.JobStatusFailed, &msg, "JOB_ENTRYPOINT_COMMAND_ERROR", ptr.To(code))
	}
}

// stopLocked stops a job: one still setting up ends STOPPED; a running
// one gets SIGTERM, and SIGKILL if it is still there after the grace.
// Cite: job_supervisor.py JobSupervisor.stop (RAY_JOB_STOP_SIGNAL to the
// child and its descendants, RAY_JOB_STOP_WAIT_TIME_S = 3, then SIGKILL;
// fact 33). h.mu is held.
func (h *RayHead) stopLocked(j *headJob) {
	if j.proc == nil {
		j.cancel()
		return
	}
	if h.isClosed() {
		return
	}
	pgid, grace := j.proc.Pid, h.opts.StopGrace
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-j.done:
		case <-t.C:
			select {
			case <-j.done:
			default:
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
			}
		}
	}()
}

// logTail is the failure message's tail of a driver log: its last 10
// lines, at most 20,000 characters. Cite: job_log_storage_client.py
// JobLogStorageClient.get_last_n_log_lines (NUM_LOG_LINES_ON_ERROR = 10,
// MAX_LOG_SIZE = 20000; fact 31). Only the last max bytes are read.
func logTail(path string, max int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max64(0, fi.Size()-int64(max))
	buf := make([]byte, fi.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil && err != io.EOF {
		return ""
	}
	lines := strings.SplitAfter(string(buf), "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if len(lines) > 10 {
		lines = lines[len(lines)-10:]
	}
	s := strings.Join(lines, "")
	if n := utf8.RuneCountInString(s); n > 20000 {
		r := []rune(s)
		s = string(r[n-20000:])
	}
	return s
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// setupError is a runtime_env agent's error for a failed setup on node
// ip: "[Node ip] " and the traceback of the download. Cite:
// _private/runtime_env/agent/runtime_env_agent.py
// _create_runtime_env_with_retry (fact 21; the node prefix is seen in NEW).
func setupError(ip string, err error) string {
	typ := "RuntimeError"
	var se errSetup
	if errors.As(err, &se) && strings.HasPrefix(string(se), "You must") {
		typ = "ImportError"
	}
	return "[Node " + ip + "] " + strings.TrimSuffix(pyTraceback(typ+": "+err.Error(),
		pyFrame{file: "_private/runtime_env/packaging.py", fn: "download_and_unpack_package", line: 1,
			code: "protocol.download_remote_uri(source_uri=pkg_uri, dest_file=pkg_file)"}), "\n")
}

// dlLock is the lock of one package on one node (download_and_unpack_package's
// file lock <pkg>.lock, fact 19c).
func (h *RayHead) dlLock(node, pkg string) *sync.Mutex {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := node + "\x00" + pkg
	if h.dlLocks[k] == nil {
		h.dlLocks[k] = &sync.Mutex{}
	}
	return h.dlLocks[k]
}

// cachedLocked reports whether node has pkg; h.mu is held.
func (h *RayHead) cachedLocked(node, pkg string) bool { return h.nodes[node][pkg] }

func (h *RayHead) markCached(node, pkg string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.nodes[node] == nil {
		h.nodes[node] = map[string]bool{}
	}
	h.nodes[node][pkg] = true
}

// setUpOnHead makes the job's working directory on the head node (ip, of
// head pod incarnation): none, a local path as it is (a ZIP file unpacked),
// or a remote package downloaded and unpacked once per node into
// working_dir_files/<package name less its suffix>, shared by the jobs
// whose URIs differ only in their query. Cite: working_dir.py
// WorkingDirPlugin.create → packaging.py download_and_unpack_package (facts
// 19, 20).
func (h *RayHead) setUpOnHead(j *headJob, ip string, incarnation int) (string, error) {
	wd := j.env.workingDir
	switch {
	case wd.uri == "":
		return j.dir, nil
	case wd.local:
		fi, err := os.Stat(wd.uri)
		if err != nil {
			return "", err
		}
		if fi.IsDir() {
			return wd.uri, nil
		}
		data, err := os.ReadFile(wd.uri)
		if err != nil {
			return "", err
		}
		dir := filepath.Join(j.dir, "working_dir")
		return dir, unzip(data, dir, true)
	}
	name := wd.pkg
	for _, sfx := range []string{".zip", ".whl", ".tar.gz", ".tgz"} {
		name = strings.TrimSuffix(name, sfx)
	}
	dir := filepath.Join(h.base, fmt.Sprintf("node-%d", incarnation), "working_dir_files", name)
	lock := h.dlLock(ip, wd.pkg)
	lock.Lock()
	defer lock.Unlock()
	h.mu.Lock()
	cached := h.cachedLocked(ip, wd.pkg) && h.incarnation == incarnation
	h.mu.Unlock()
	if cached {
		return dir, nil
	}
	data, err := h.download(j.ctx, wd)
	if err != nil {
		return "", err
	}
	tmp := dir + ".tmp"
	_ = os.RemoveAll(tmp)
	if err := unpack(wd, data, tmp); err != nil {
		return "", err
	}
	_ = os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		return "", err
	}
	h.mu.Lock()
	same := h.incarnation == incarnation
	h.mu.Unlock()
	if same {
		h.markCached(ip, wd.pkg)
	}
	return dir, nil
}

// NodeJoined tells the head that a node with IP nodeIP joined the cluster
// (a [RayLoop] calls it when a worker pod of the head's RayCluster runs
// and is ready). The stand-in assumes the node starts a worker of every
// job that is RUNNING with a remote working_dir, as a job that autoscaled
// would: the node's runtime-env agent downloads each package it does not
// have yet (see [RayHead.Fetches]). When that fails, the job's driver
// fails as a Ray driver whose task got a RuntimeEnvSetupError does: its
// traceback ends the driver log, the entrypoint ends with exit code 1 and
// the job is FAILED with that log's tail. Cite:
// _private/runtime_env/agent/runtime_env_agent.py GetOrCreateRuntimeEnv
// (per node, per URI cache; facts 18, 19) and exceptions.py
// RuntimeEnvSetupError (fact 21). NodeJoined returns once the node's
// downloads are done.
func (h *RayHead) NodeJoined(nodeIP string) {
	h.mu.Lock()
	if h.isClosed() || h.down {
		h.mu.Unlock()
		return
	}
	byPkg := map[string][]*headJob{}
	var pkgs []string
	for _, j := range h.jobs {
		wd := j.env.workingDir
		if j.status != rayv1.JobStatusRunning || j.lost || j.stopping || j.nodeFailure || !wd.remote() || h.cachedLocked(nodeIP, wd.pkg) {
			continue
		}
		if byPkg[wd.pkg] == nil {
			pkgs = append(pkgs, wd.pkg)
		}
		byPkg[wd.pkg] = append(byPkg[wd.pkg], j)
	}
	h.wg.Add(1)
	h.mu.Unlock()
	defer h.wg.Done()
	for _, pkg := range pkgs {
		jobs := byPkg[pkg]
		lock := h.dlLock(nodeIP, pkg)
		lock.Lock()
		h.mu.Lock()
		cached := h.cachedLocked(nodeIP, pkg)
		h.mu.Unlock()
		var err error
		if !cached {
			if _, err = h.download(h.ctx, jobs[0].env.workingDir); err == nil {
				h.markCached(nodeIP, pkg)
			}
		}
		lock.Unlock()
		if err != nil {
			for _, j := range jobs {
				h.failOnNode(j, nodeIP, err)
			}
		}
	}
}

// failOnNode fails a running job's driver as a runtime_env setup failure
// on node ip makes it fail: RuntimeEnvSetupError raised in the driver,
// which prints its traceback and exits 1.
func (h *RayHead) failOnNode(j *headJob, ip string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if j.status != rayv1.JobStatusRunning || j.lost || j.stopping || j.nodeFailure || j.closing {
		return
	}
	j.nodeFailure = true
	appendLog(j.logPath, "Traceback (most recent call last):\n  File \"<driver>\", line 1, in <module>\n"+
		"ray.exceptions.RuntimeEnvSetupError: Failed to set up runtime environment.\n"+setupError(ip, err)+"\n")
	j.kill()
}
