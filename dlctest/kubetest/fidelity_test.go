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
	"os"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	utiltypes "github.com/ray-project/kuberay/ray-operator/controllers/ray/utils/types"
)

// pred is a check of a JobDetails field that no single value expresses.
type pred func(v any) bool

var (
	isHex8   pred = func(v any) bool { s, _ := v.(string); return regexp.MustCompile(`^[0-9a-f]{8}$`).MatchString(s) }
	isNodeID pred = func(v any) bool { s, _ := v.(string); return regexp.MustCompile(`^[0-9a-f]{56}$`).MatchString(s) }
	isMillis pred = func(v any) bool { f, _ := v.(float64); return f > 1.6e12 }
	isPidStr pred = func(v any) bool {
		d, _ := v.(map[string]any)
		pid, _ := d["pid"].(string)
		return d["node_ip_address"] == "127.0.0.1" && regexp.MustCompile(`^[1-9][0-9]*$`).MatchString(pid) && isHex8(d["id"])
	}
)

// fidelityCase is one behaviour of a real Ray head the stand-in must
// have: a request (after the submits in before) and what Ray answers, and,
// when the request made a job, what its JobDetails and log become.
type fidelityCase struct {
	name    string
	cite    string // Ray's file and function the behaviour follows
	version string
	token   string
	fetch   func(ctx context.Context, url string) (io.ReadCloser, error)
	before  []string // submit bodies, each answered 200, first; each ends before the request
	running bool     // the before jobs need only run

	method, path, body string
	header             map[string]string
	wantCode           int
	wantType           string // Content-Type prefix
	wantBody           string // exact, when set
	wantRE             string // the body matches, when set
	wantHas            []string
	wantSuffix         string

	job        string // a job to follow to wantStatus
	wantStatus rayv1.JobStatus
	wantFields map[string]any // JobDetails field → want: a JSON value (nil: null) or a pred
	wantMsg    []string       // the message contains each
	wantLog    []string       // GET logs' text contains each
	wantNoLog  []string       // GET logs' text contains none
}

func submitBody(fields map[string]any) string {
	b, _ := json.Marshal(fields)
	return string(b)
}

func TestRayHeadFidelity(t *testing.T) {
	pkg := zipOf(t, map[string]string{"top/main.sh": "echo from the package\n"})
	var fetched sync.Map // URL → true
	fetchZip := func(_ context.Context, url string) (io.ReadCloser, error) {
		fetched.Store(url, true)
		return io.NopCloser(bytes.NewReader(pkg)), nil
	}
	failing := func(context.Context, string) (io.ReadCloser, error) {
		return nil, errors.New("403 Forbidden: the signature expired")
	}
	blocking := func(ctx context.Context, _ string) (io.ReadCloser, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	const jobHead = "dashboard/modules/job/job_head.py"
	const parse = "dashboard/modules/job/utils.py parse_and_validate_request; common.py JobSubmitRequest.__post_init__"
	const noSupervisor = "dashboard/modules/job/job_manager.py JobManager.submit_job (except around the supervisor actor); runtime_env/runtime_env.py RuntimeEnv.__init__"
	const validateURI = "_private/runtime_env/validation.py validate_uri; _private/runtime_env/packaging.py parse_uri; protocol.py"
	const setup = "dashboard/modules/job/job_manager.py JobManager._monitor_job_internal; _private/runtime_env/agent/runtime_env_agent.py _create_runtime_env_with_retry; exceptions.py RuntimeEnvSetupError"
	const supervisor = "dashboard/modules/job/job_supervisor.py JobSupervisor.run"
	const stateLogs = "dashboard/state_head.py StateHead.get_logs; state_manager LogsManager._resolve_job_filename; log agent StreamLog"
	const auth = "_private/authentication/http_token_authentication.py get_token_auth_middleware; AuthenticationToken::FromMetadata"
	wdJob := func(id, wd string) string {
		return submitBody(map[string]any{"entrypoint": "sh main.sh", "submission_id": id, "runtime_env": map[string]any{"working_dir": wd}})
	}
	failedSupervisor := func(id string) []string {
		return []string{"Failed to start supervisor actor " + id + ": '", "'. Full traceback:\nTraceback (most recent call last):\n"}
	}
	endedNoExit := map[string]any{"end_time": isMillis, "driver_exit_code": nil, "job_id": nil, "driver_info": nil, "driver_agent_http_address": nil}

	cases := []fidelityCase{{
		name: "unknown field", cite: parse + " (TypeError from the dataclass __init__)",
		method: "POST", path: "/api/jobs/", body: `{"entrypoint": "true", "foo": 1}`,
		wantCode: 400, wantType: "text/plain", wantHas: []string{"Traceback (most recent call last):\n"},
		wantSuffix: "TypeError: JobSubmitRequest.__init__() got an unexpected keyword argument 'foo'\n",
	}, {
		name: "missing entrypoint", cite: parse,
		method: "POST", path: "/api/jobs/", body: `{"submission_id": "x"}`,
		wantCode: 400, wantType: "text/plain",
		wantSuffix: "TypeError: JobSubmitRequest.__init__() missing 1 required positional argument: 'entrypoint'\n",
	}, {
		name: "null entrypoint is missing", cite: "dashboard/modules/job/utils.py strip_keys_with_value_none",
		method: "POST", path: "/api/jobs/", body: `{"entrypoint": null}`,
		wantCode: 400, wantSuffix: "missing 1 required positional argument: 'entrypoint'\n",
	}, {
		name: "entrypoint not a string", cite: parse,
		method: "POST", path: "/api/jobs/", body: `{"entrypoint": 3}`,
		wantCode: 400, wantSuffix: "TypeError: entrypoint must be a string, got <class 'int'>\n",
	}, {
		name: "entrypoint_memory a float", cite: parse,
		method: "POST", path: "/api/jobs/", body: `{"entrypoint": "true", "entrypoint_memory": 1.0}`,
		wantCode: 400, wantSuffix: "TypeError: entrypoint_memory must be an integer, got <class 'float'>\n",
	}, {
		name: "metadata value not a string", cite: parse,
		method: "POST", path: "/api/jobs/", body: `{"entrypoint": "true", "metadata": {"a": 1}}`,
		wantCode: 400, wantSuffix: "TypeError: metadata values must be strings, got <class 'int'>\n",
	}, {
		name: "runtime_env not a dict", cite: parse,
		method: "POST", path: "/api/jobs/", body: `{"entrypoint": "true", "runtime_env": ["x"]}`,
		wantCode: 400, wantSuffix: "TypeError: runtime_env must be a dict, got <class 'list'>\n",
	}, {
		name: "entrypoint_resources value not a number", cite: parse,
		method: "POST", path: "/api/jobs/", body: `{"entrypoint": "true", "entrypoint_resources": {"TPU": "1"}}`,
		wantCode: 400, wantSuffix: "TypeError: entrypoint_resources values must be numbers, got <class 'str'>\n",
	}, {
		name: "malformed JSON", cite: "dashboard/modules/job/utils.py parse_and_validate_request (await req.json() outside the try): aiohttp's 500",
		method: "POST", path: "/api/jobs/", body: `{"entrypoint": `,
		wantCode: 500, wantBody: "500 Internal Server Error\n\nServer got itself in trouble",
	}, {
		name: "JSON not an object", cite: "dashboard/modules/job/utils.py parse_and_validate_request",
		method: "POST", path: "/api/jobs/", body: `["true"]`,
		wantCode: 500, wantBody: "500 Internal Server Error\n\nServer got itself in trouble",
	}, {
		name: "submitted", cite: "dashboard/modules/job/job_agent.py JobAgent.submit_job (JobSubmitResponse)",
		method: "POST", path: "/api/jobs/", body: `{"entrypoint": "true", "submission_id": "ok", "entrypoint_num_cpus": null}`,
		wantCode: 200, wantType: "application/json", wantBody: `{"job_id": "ok", "submission_id": "ok"}`,
	}, {
		name: "job_id as submission id", cite: "dashboard/modules/job/job_agent.py JobAgent.submit_job (submission_id or job_id)",
		method: "POST", path: "/api/jobs/", body: `{"entrypoint": "true", "job_id": "old-style"}`,
		wantCode: 200, wantBody: `{"job_id": "old-style", "submission_id": "old-style"}`,
	}, {
		name: "generated submission id", cite: "dashboard/modules/job/job_manager.py generate_job_id",
		method: "POST", path: "/api/jobs/", body: `{"entrypoint": "true"}`,
		wantCode: 200, wantRE: `^\{"job_id": "(raysubmit_[A-HJ-NP-Za-km-z1-9]{16})", "submission_id": "(raysubmit_[A-HJ-NP-Za-km-z1-9]{16})"\}$`,
	}, {
		name: "duplicate submission id", cite: "dashboard/modules/job/job_manager.py JobManager.submit_job (ValueError); " + jobHead + " _raise_error",
		before: []string{`{"entrypoint": "true", "submission_id": "dup"}`},
		method: "POST", path: "/api/jobs/", body: `{"entrypoint": "true", "submission_id": "dup"}`,
		wantCode: 500, wantType: "text/plain",
		wantHas: []string{"RuntimeError: Request failed with status code 400: Traceback (most recent call last):\n",
			"ValueError: Job with submission_id dup already exists. Please use a different submission_id.\n."},
	}, {
		name: "status of an unknown job", cite: jobHead + " JobHead.get_job_info; job/utils.py find_job_by_ids",
		method: "GET", path: "/api/jobs/nope", wantCode: 404, wantType: "text/plain", wantBody: "Job nope does not exist",
	}, {
		name: "stop of an unknown job", cite: jobHead + " JobHead.stop_job",
		method: "POST", path: "/api/jobs/nope/stop", wantCode: 404, wantBody: "Job nope does not exist",
	}, {
		name: "logs of an unknown job", cite: jobHead + " JobHead.get_job_logs",
		method: "GET", path: "/api/jobs/nope/logs", wantCode: 404, wantBody: "Job nope does not exist",
	}, {
		name: "image_uri with working_dir (2.46)", cite: noSupervisor + " (image_uri check)",
		method: "POST", path: "/api/jobs/", body: submitBody(map[string]any{"entrypoint": "true", "submission_id": "img",
			"runtime_env": map[string]any{"image_uri": "rayproject/ray:2.46.0", "working_dir": "https://h/a.zip"}}),
		wantCode: 200, job: "img", wantStatus: rayv1.JobStatusFailed, wantFields: merge(endedNoExit, map[string]any{"error_type": nil}),
		wantMsg: append(failedSupervisor("img"), "The 'image_uri' field currently cannot be used together with other fields of runtime_env. Specified fields: {'working_dir'}'"),
		wantLog: []string{""},
	}, {
		name: "image_uri with working_dir (2.52)", cite: noSupervisor + "; PR #55578 error_type", version: RayVersion252,
		method: "POST", path: "/api/jobs/", body: submitBody(map[string]any{"entrypoint": "true", "submission_id": "img",
			"runtime_env": map[string]any{"image_uri": "rayproject/ray:2.52.0", "working_dir": "https://h/a.zip"}}),
		wantCode: 200, job: "img", wantStatus: rayv1.JobStatusFailed,
		wantFields: merge(endedNoExit, map[string]any{"error_type": "JOB_SUPERVISOR_ACTOR_START_FAILURE"}),
		wantMsg:    []string{"Specified fields: {'working_dir'}"},
	}, {
		name: "container with pip", cite: noSupervisor + " (container check)",
		method: "POST", path: "/api/jobs/", body: submitBody(map[string]any{"entrypoint": "true", "submission_id": "ctr",
			"runtime_env": map[string]any{"container": map[string]any{"image": "x"}, "pip": []string{"numpy"}}}),
		wantCode: 200, job: "ctr", wantStatus: rayv1.JobStatusFailed,
		wantMsg: []string{"The 'container' field currently cannot be used together with other fields of runtime_env. Specified fields: {'pip'}"},
	}, {
		name: "pip with conda", cite: noSupervisor + " (pip/uv/conda exclusivity)",
		method: "POST", path: "/api/jobs/", body: `{"entrypoint": "true", "submission_id": "pc", "runtime_env": {"pip": ["numpy"], "conda": "base"}}`,
		wantCode: 200, job: "pc", wantStatus: rayv1.JobStatusFailed,
		wantMsg: []string{"'The 'pip' field, 'uv' field, and 'conda' field of runtime_env cannot be specified at the same time.\nspecified pip field: ['numpy']\nspecified conda field: base\nspecified uv field: None\nTo use pip with conda, please only set the 'conda'field,"},
	}, {
		name: "env_vars value not a string", cite: "_private/runtime_env/validation.py parse_and_validate_env_vars",
		method: "POST", path: "/api/jobs/", body: `{"entrypoint": "true", "submission_id": "ev", "runtime_env": {"env_vars": {"N": 1}}}`,
		wantCode: 200, job: "ev", wantStatus: rayv1.JobStatusFailed,
		wantMsg: []string{"runtime_env['env_vars'] must be of type Dict[str, str], but the value 1 is of type <class 'int'>"},
	}, {
		name: "cos:// working_dir", cite: validateURI,
		method: "POST", path: "/api/jobs/", body: wdJob("cos", "cos://bucket/key.zip"),
		wantCode: 200, job: "cos", wantStatus: rayv1.JobStatusFailed, wantFields: endedNoExit,
		wantMsg: []string{"Failed to start supervisor actor cos: 'cos://bucket/key.zip is not a valid URI. Passing directories or modules to be dynamically uploaded is only supported at the job level (i.e., passed to `ray.init`).'. Full traceback:\n"},
	}, {
		name: "http:// working_dir (2.46)", cite: validateURI + " (no http protocol in MID)", fetch: fetchZip,
		method: "POST", path: "/api/jobs/", body: wdJob("http", "http://127.0.0.1:1/pkg.zip"),
		wantCode: 200, job: "http", wantStatus: rayv1.JobStatusFailed, wantMsg: []string{"http://127.0.0.1:1/pkg.zip is not a valid URI."},
	}, {
		name: "http:// working_dir (2.52)", cite: validateURI + " (NEW adds http)", version: RayVersion252, fetch: fetchZip,
		method: "POST", path: "/api/jobs/", body: wdJob("http", "http://127.0.0.1:1/pkg.zip"),
		wantCode: 200, job: "http", wantStatus: rayv1.JobStatusSucceeded, wantLog: []string{"from the package\n"},
	}, {
		name: "package name in the query (2.46)", cite: validateURI + " (suffix checked on the URL path)", fetch: fetchZip,
		method: "POST", path: "/api/jobs/", body: wdJob("q", "https://h/dl?f=a.zip"),
		wantCode: 200, job: "q", wantStatus: rayv1.JobStatusFailed, wantMsg: []string{"'Only .zip or .whl files supported for remote URIs.'"},
	}, {
		name: "package name in the query (2.52)", cite: validateURI, version: RayVersion252, fetch: fetchZip,
		method: "POST", path: "/api/jobs/", body: wdJob("q", "https://h/dl?f=a.zip"),
		wantCode: 200, job: "q", wantStatus: rayv1.JobStatusFailed, wantMsg: []string{"'Only .zip, .whl, .tar.gz, and .tgz files supported for remote URIs.'"},
	}, {
		name: "presigned https working_dir", cite: validateURI + "; packaging.py download_and_unpack_package (the full URI to smart_open)", fetch: fetchZip,
		method: "POST", path: "/api/jobs/", body: wdJob("sig", "https://h/a.zip?sig=x&exp=1"),
		wantCode: 200, job: "sig", wantStatus: rayv1.JobStatusSucceeded, wantLog: []string{"from the package\n"},
	}, {
		name: "s3:// without smart_open", cite: setup + "; packaging.py download_remote_uri",
		method: "POST", path: "/api/jobs/", body: wdJob("s3", "s3://bucket/pkg.zip"),
		wantCode: 200, job: "s3", wantStatus: rayv1.JobStatusFailed, wantFields: map[string]any{"error_type": nil, "driver_exit_code": nil},
		wantMsg: []string{"runtime_env setup failed: Failed to set up runtime environment.\n[Node 127.0.0.1] Traceback (most recent call last):\n", "pip install smart_open[s3]"},
	}, {
		name: "download fails (2.52)", cite: setup, version: RayVersion252, fetch: failing,
		method: "POST", path: "/api/jobs/", body: wdJob("dl", "https://h/pkg.zip"),
		wantCode: 200, job: "dl", wantStatus: rayv1.JobStatusFailed, wantFields: map[string]any{"error_type": "RUNTIME_ENV_SETUP_FAILURE"},
		wantMsg: []string{"runtime_env setup failed: Failed to set up runtime environment.\n[Node 127.0.0.1] ", "403 Forbidden: the signature expired"},
	}, {
		name: "gcs:// package", cite: setup + " (the stand-in keeps no GCS packages)",
		method: "POST", path: "/api/jobs/", body: wdJob("gcs", "gcs://_ray_pkg_abc.zip"),
		wantCode: 200, job: "gcs", wantStatus: rayv1.JobStatusFailed, wantMsg: []string{"runtime_env setup failed:", "gcs://_ray_pkg_abc.zip"},
	}, {
		name: "succeeded", cite: supervisor + "; pydantic_models.py JobDetails",
		method: "POST", path: "/api/jobs/", body: `{"entrypoint": "echo hi", "submission_id": "ok", "metadata": {"k": "v"}}`,
		wantCode: 200, job: "ok", wantStatus: rayv1.JobStatusSucceeded,
		wantFields: map[string]any{"type": "SUBMISSION", "job_id": isHex8, "message": "Job finished successfully.", "driver_exit_code": 0.0,
			"driver_info": isPidStr, "driver_agent_http_address": "http://127.0.0.1:52365", "driver_node_id": isNodeID,
			"start_time": isMillis, "end_time": isMillis, "metadata": map[string]any{"k": "v"}, "runtime_env": nil, "error_type": nil},
		wantLog: []string{"\tINFO job_manager.py:", " -- Runtime env is setting up.\nhi\n"}, wantNoLog: []string{"Running entrypoint"},
	}, {
		name: "the entrypoint log line (2.52)", cite: "PR #58300 (job_manager/job_supervisor: Running entrypoint for job)", version: RayVersion252,
		method: "POST", path: "/api/jobs/", body: `{"entrypoint": "echo hi", "submission_id": "ok"}`,
		wantCode: 200, job: "ok", wantStatus: rayv1.JobStatusSucceeded,
		wantLog: []string{" -- Runtime env is setting up.\nRunning entrypoint for job ok: echo hi\nhi\n"},
	}, {
		name: "failed with an exit code (2.46)", cite: supervisor + " (NUM_LOG_LINES_ON_ERROR, MAX_LOG_SIZE)",
		method: "POST", path: "/api/jobs/", body: `{"entrypoint": "seq 1 20; echo broken >&2; exit 3", "submission_id": "bad"}`,
		wantCode: 200, job: "bad", wantStatus: rayv1.JobStatusFailed, wantFields: map[string]any{"driver_exit_code": 3.0, "error_type": nil},
		wantMsg: []string{"Job entrypoint command failed with exit code 3, last available logs (truncated to 20,000 chars):\n12\n13\n14\n15\n16\n17\n18\n19\n20\nbroken\n"},
	}, {
		name: "failed with an exit code (2.52)", cite: supervisor + "; PR #55578", version: RayVersion252,
		method: "POST", path: "/api/jobs/", body: `{"entrypoint": "exit 4", "submission_id": "bad"}`,
		wantCode: 200, job: "bad", wantStatus: rayv1.JobStatusFailed,
		wantFields: map[string]any{"driver_exit_code": 4.0, "error_type": "JOB_ENTRYPOINT_COMMAND_ERROR"},
		wantMsg:    []string{"Job entrypoint command failed with exit code 4, last available logs"},
	}, {
		name: "killed by a signal", cite: supervisor + " (Popen returncode -N)",
		method: "POST", path: "/api/jobs/", body: `{"entrypoint": "kill -9 $$", "submission_id": "sig"}`,
		wantCode: 200, job: "sig", wantStatus: rayv1.JobStatusFailed, wantFields: map[string]any{"driver_exit_code": -9.0},
		wantMsg: []string{"Job entrypoint command failed with exit code -9"},
	}, {
		name: "pending while the runtime env sets up", cite: "dashboard/modules/job/common.py JobInfo.__post_init__; " + jobHead + " JobHead.get_job_logs (no driver agent)",
		fetch: blocking, method: "POST", path: "/api/jobs/", body: submitBody(map[string]any{"entrypoint": "true", "submission_id": "slow",
			"entrypoint_num_cpus": 1, "runtime_env": map[string]any{"working_dir": "https://h/pkg.zip"}}),
		wantCode: 200, job: "slow", wantStatus: rayv1.JobStatusPending,
		wantFields: map[string]any{"job_id": nil, "driver_info": nil, "driver_agent_http_address": nil, "driver_node_id": nil, "end_time": nil,
			"start_time": isMillis, "runtime_env": map[string]any{"working_dir": "https://h/pkg.zip"},
			"message": "Job has not started yet. It may be waiting for resources (CPUs, GPUs, memory, custom resources) to become available. It may be waiting for the runtime environment to be set up."},
		wantLog: []string{""},
	}, {
		name: "logs as json.dumps writes them", cite: "dashboard/modules/job/job_log_storage_client.py JobLogStorageClient.get_logs (text mode); json.dumps ensure_ascii",
		method: "POST", path: "/api/jobs/", body: `{"entrypoint": "printf 'h\\303\\251 \\360\\237\\230\\200 \"q\"\\r\\nz\\r'", "submission_id": "utf"}`,
		wantCode: 200, job: "utf", wantStatus: rayv1.JobStatusSucceeded, wantLog: []string{"hé 😀 \"q\"\nz\n"},
	}, {
		name: "stop of an ended job", cite: "dashboard/modules/job/job_manager.py JobManager.stop_job (no supervisor actor)",
		before: []string{`{"entrypoint": "true", "submission_id": "done"}`},
		method: "POST", path: "/api/jobs/done/stop", wantCode: 200, wantBody: `{"stopped": false}`,
	}, {
		name: "delete of an ended job", cite: "dashboard/modules/job/job_manager.py JobManager.delete_job",
		before: []string{`{"entrypoint": "true", "submission_id": "done"}`},
		method: "DELETE", path: "/api/jobs/done", wantCode: 200, wantBody: `{"deleted": true}`,
	}, {
		name: "delete of a running job", cite: "dashboard/modules/job/job_manager.py JobManager.delete_job (RuntimeError)",
		before: []string{`{"entrypoint": "sleep 30", "submission_id": "run"}`}, running: true,
		method: "DELETE", path: "/api/jobs/run", wantCode: 500,
		wantHas: []string{"RuntimeError: Request failed with status code 500: ", "Attempted to delete job 'run', but it is in a non-terminal state"},
	}, {
		name: "browser POST", cite: "dashboard/http_server_head.py browsers_no_post_put_middleware",
		method: "POST", path: "/api/jobs/", body: `{"entrypoint": "true"}`, header: map[string]string{"User-Agent": "Mozilla/5.0"},
		wantCode: 405, wantBody: "Method Not Allowed for browser traffic.",
	}, {
		name: "state logs framed (2.41)", cite: stateLogs + " (format=leading_1)", version: RayVersion241,
		before: []string{`{"entrypoint": "echo one; echo two", "submission_id": "s"}`},
		method: "GET", path: "/api/v0/logs/file?submission_id=s&lines=1", wantCode: 200, wantBody: "1two\n",
	}, {
		name: "state logs as text (2.41)", cite: stateLogs + " (format=text)", version: RayVersion241,
		before: []string{`{"entrypoint": "echo one; echo two", "submission_id": "s"}`},
		method: "GET", path: "/api/v0/logs/file?submission_id=s&lines=2&format=text", wantCode: 200, wantBody: "one\ntwo\n",
	}, {
		name: "state logs raw (2.46)", cite: stateLogs + " (Subprocess-era: raw bytes)",
		before: []string{`{"entrypoint": "echo one; echo two", "submission_id": "s"}`},
		method: "GET", path: "/api/v0/logs/file?submission_id=s&lines=1", wantCode: 200, wantBody: "two\n",
	}, {
		name: "state logs of an unknown job (2.41)", cite: stateLogs + " (an error: b\"0\" + text, 200)", version: RayVersion241,
		method: "GET", path: "/api/v0/logs/file?submission_id=nope", wantCode: 200,
		wantHas: []string{"0Closing HTTP stream due to internal server error.\nCould not find a log file. Please make sure the given option exists in the cluster."},
	}, {
		name: "state logs of an unknown job (2.46)", cite: stateLogs + " (an error on the first chunk: 500)",
		method: "GET", path: "/api/v0/logs/file?submission_id=nope", wantCode: 500,
		wantHas: []string{"Could not find a log file. Please make sure the given option exists in the cluster.\n\tnode_id: None\n\tsubmission_id: nope"},
	}, {
		name: "no token", cite: auth, version: RayVersion252, token: "s3cret",
		method: "GET", path: "/api/jobs/nope", wantCode: 401, wantType: "text/plain", wantBody: "Unauthorized: Missing authentication token",
	}, {
		name: "wrong token", cite: auth, version: RayVersion252, token: "s3cret",
		method: "GET", path: "/api/jobs/nope", header: map[string]string{"Authorization": "Bearer nope"},
		wantCode: 403, wantBody: "Forbidden: Invalid authentication token",
	}, {
		name: "lower-case bearer", cite: auth + " (\"Bearer \" is case-sensitive)", version: RayVersion252, token: "s3cret",
		method: "GET", path: "/api/jobs/nope", header: map[string]string{"Authorization": "bearer s3cret"},
		wantCode: 403, wantBody: "Forbidden: Invalid authentication token",
	}, {
		name: "X-Ray-Authorization", cite: auth + " (fallback when Authorization is empty)", version: RayVersion252, token: "s3cret",
		method: "GET", path: "/api/jobs/nope", header: map[string]string{"X-Ray-Authorization": "Bearer s3cret"},
		wantCode: 404, wantBody: "Job nope does not exist",
	}, {
		name: "wrong Authorization, right X-Ray-Authorization", cite: auth, version: RayVersion252, token: "s3cret",
		method: "GET", path: "/api/jobs/nope", header: map[string]string{"Authorization": "Bearer nope", "X-Ray-Authorization": "Bearer s3cret"},
		wantCode: 403,
	}, {
		name: "health check exempt", cite: auth + " (exempt paths)", version: RayVersion252, token: "s3cret",
		method: "GET", path: "/api/healthz", wantCode: 200, wantBody: "success",
	}, {
		name: "authentication mode", cite: auth + " (GET /api/authentication_mode)", version: RayVersion252, token: "s3cret",
		method: "GET", path: "/api/authentication_mode", wantCode: 200, wantBody: `{"authentication_mode": "token"}`,
	}}
	t.Run("rows", func(t *testing.T) { fidelityRows(t, cases) })
	if _, ok := fetched.Load("https://h/a.zip?sig=x&exp=1"); !ok {
		t.Errorf("Fetch never got the presigned URL with its query")
	}
}

func fidelityRows(t *testing.T, cases []fidelityCase) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.cite == "" {
				t.Fatal("a row without a citation")
			}
			h := NewRayHead(t, RayHeadOptions{RayVersion: tc.version, AuthToken: tc.token, Fetch: tc.fetch})
			c := &headClient{t: t, h: h, token: tc.token}
			for _, b := range tc.before {
				code, body, _ := c.do("POST", "/api/jobs/", b, nil)
				if code != 200 {
					t.Fatalf("submit %s: %d %s", b, code, body)
				}
				var resp struct {
					SubmissionID string `json:"submission_id"`
				}
				_ = json.Unmarshal([]byte(body), &resp)
				c.waitStarted(resp.SubmissionID, !tc.running)
			}
			code, body, typ := (&headClient{t: t, h: h}).do(tc.method, tc.path, tc.body, tc.header)
			if code != tc.wantCode {
				t.Fatalf("%s %s: %d, want %d; body:\n%s", tc.method, tc.path, code, tc.wantCode, body)
			}
			if tc.wantType != "" && !strings.HasPrefix(typ, tc.wantType) {
				t.Errorf("Content-Type %q, want %s", typ, tc.wantType)
			}
			if tc.wantBody != "" && body != tc.wantBody {
				t.Errorf("body:\n%q\nwant\n%q", body, tc.wantBody)
			}
			if tc.wantRE != "" {
				if m := regexp.MustCompile(tc.wantRE).FindStringSubmatch(body); m == nil || m[1] != m[2] {
					t.Errorf("body %q does not match %s", body, tc.wantRE)
				}
			}
			for _, want := range tc.wantHas {
				if !strings.Contains(body, want) {
					t.Errorf("body does not contain %q:\n%s", want, body)
				}
			}
			if tc.wantSuffix != "" && !strings.HasSuffix(body, tc.wantSuffix) {
				t.Errorf("body does not end with %q:\n%s", tc.wantSuffix, body)
			}
			if tc.job == "" {
				return
			}
			d := c.waitStatus(tc.job, tc.wantStatus)
			for k, want := range tc.wantFields {
				got, ok := d[k]
				if !ok {
					t.Errorf("JobDetails has no %s", k)
					continue
				}
				if p, isPred := want.(pred); isPred {
					if !p(got) {
						t.Errorf("%s = %#v", k, got)
					}
				} else if !jsonEqual(got, want) {
					t.Errorf("%s = %#v, want %#v", k, got, want)
				}
			}
			msg, _ := d["message"].(string)
			for _, want := range tc.wantMsg {
				if !strings.Contains(msg, want) {
					t.Errorf("message does not contain %q:\n%s", want, msg)
				}
			}
			if tc.wantLog == nil && tc.wantNoLog == nil {
				return
			}
			logs := c.logs(tc.job)
			for _, want := range tc.wantLog {
				if !strings.Contains(logs, want) {
					t.Errorf("logs do not contain %q:\n%q", want, logs)
				}
			}
			if len(tc.wantLog) == 1 && tc.wantLog[0] == "" && logs != "" {
				t.Errorf("logs %q, want none", logs)
			}
			for _, not := range tc.wantNoLog {
				if strings.Contains(logs, not) {
					t.Errorf("logs contain %q:\n%q", not, logs)
				}
			}
		})
	}
}

// TestRayHeadJobDetailsOrder checks the JobDetails fields and their order
// (pydantic_models.py JobDetails) and that KubeRay's client decodes them.
func TestRayHeadJobDetailsOrder(t *testing.T) {
	h := NewRayHead(t, RayHeadOptions{})
	c := &headClient{t: t, h: h}
	c.submit(`{"entrypoint": "true", "submission_id": "o", "runtime_env": {"env_vars": {"B": "1", "A": "\u00e9"}}}`)
	c.waitStatus("o", rayv1.JobStatusSucceeded)
	_, body, _ := c.do("GET", "/api/jobs/o", "", nil)
	want := []string{"type", "job_id", "submission_id", "driver_info", "status", "entrypoint", "message", "error_type", "start_time",
		"end_time", "metadata", "runtime_env", "driver_agent_http_address", "driver_node_id", "driver_exit_code"}
	last := -1
	for _, k := range want {
		i := strings.Index(body, `"`+k+`": `)
		if i < last {
			t.Errorf("field %s out of order or missing in %s", k, body)
		}
		last = i
	}
	if n := strings.Count(body, `": `) - 2 - 3 - 1; n != len(want) { // less env_vars' two, driver_info's three, runtime_env's env_vars
		t.Errorf("%d fields, want %d: %s", n, len(want), body)
	}
	if !strings.Contains(body, `"runtime_env": {"env_vars": {"B": "1", "A": "\u00e9"}}`) {
		t.Errorf("runtime_env not as submitted (order, ensure_ascii): %s", body)
	}
	var info utiltypes.RayJobInfo
	if err := json.Unmarshal([]byte(body), &info); err != nil || info.JobStatus != rayv1.JobStatusSucceeded || info.SubmissionId != "o" {
		t.Errorf("KubeRay's RayJobInfo: %+v, %v", info, err)
	}
}

// headClient calls a head stand-in over HTTP.
type headClient struct {
	t     *testing.T
	h     *RayHead
	token string
}

func (c *headClient) do(method, path, body string, header map[string]string) (int, string, string) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.h.URL+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if c.token != "" && header == nil {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp.StatusCode, string(data), resp.Header.Get("Content-Type")
}

func (c *headClient) submit(body string) {
	c.t.Helper()
	if code, resp, _ := c.do("POST", "/api/jobs/", body, nil); code != 200 {
		c.t.Fatalf("submit: %d %s", code, resp)
	}
}

func (c *headClient) details(id string) (int, map[string]any) {
	c.t.Helper()
	code, body, _ := c.do("GET", "/api/jobs/"+id, "", nil)
	var d map[string]any
	if code == 200 {
		if err := json.Unmarshal([]byte(body), &d); err != nil {
			c.t.Fatalf("JobDetails %s: %v", body, err)
		}
	}
	return code, d
}

// waitFor polls cond every 10 ms for up to 30 s.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, s := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s: %s", what, s)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (c *headClient) waitStatus(id string, st rayv1.JobStatus) map[string]any {
	c.t.Helper()
	var d map[string]any
	waitFor(c.t, id+" "+string(st), func() (bool, string) {
		var code int
		code, d = c.details(id)
		return code == 200 && d["status"] == string(st), fmt.Sprint(code, d)
	})
	return d
}

// waitStarted waits for the job to run (ended: to end).
func (c *headClient) waitStarted(id string, ended bool) {
	c.t.Helper()
	waitFor(c.t, id+" started", func() (bool, string) {
		code, d := c.details(id)
		st, _ := d["status"].(string)
		if ended {
			return code == 200 && rayv1.IsJobTerminal(rayv1.JobStatus(st)), fmt.Sprint(code, d)
		}
		return code == 200 && st != string(rayv1.JobStatusPending), fmt.Sprint(code, d)
	})
}

func (c *headClient) logs(id string) string {
	c.t.Helper()
	code, body, _ := c.do("GET", "/api/jobs/"+id+"/logs", "", nil)
	var l struct {
		Logs *string `json:"logs"`
	}
	if err := json.Unmarshal([]byte(body), &l); code != 200 || err != nil || l.Logs == nil {
		c.t.Fatalf("logs of %s: %d %v %.300s", id, code, err, body)
	}
	return *l.Logs
}

func merge(ms ...map[string]any) map[string]any {
	out := map[string]any{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

func jsonEqual(got, want any) bool {
	a, _ := json.Marshal(got)
	b, _ := json.Marshal(want)
	return bytes.Equal(a, b)
}

func zipOf(t testing.TB, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, body := range files {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(w, body); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestRayHeadVersionOptions: an unknown version, or token authentication
// before 2.52, fails the test.
func TestRayHeadVersionOptions(t *testing.T) {
	for _, o := range []RayHeadOptions{{RayVersion: "2.9"}, {RayVersion: RayVersion246, AuthToken: "x"}, {RayVersion: RayVersion241, AuthToken: "x"}} {
		f := run(func(f *fakeT) { NewRayHead(f, o) })
		if !f.failed {
			t.Errorf("NewRayHead(%+v) did not fail the test", o)
		}
	}
	f := run(func(f *fakeT) { NewRayHead(f, RayHeadOptions{RayVersion: RayVersion252, AuthToken: "x"}) })
	if f.failed {
		t.Errorf("2.52 with a token: %s", f.msg)
	}
}

// TestRayHeadNodeJoined: a node that joins while a job runs downloads its
// working_dir once (by package); when that download fails, the driver
// fails with RuntimeEnvSetupError (exit code 1).
func TestRayHeadNodeJoined(t *testing.T) {
	pkg := zipOf(t, map[string]string{"main.sh": "echo started; sleep 30\n"})
	var broken atomic.Bool
	h := NewRayHead(t, RayHeadOptions{Fetch: func(_ context.Context, url string) (io.ReadCloser, error) {
		if broken.Load() {
			return nil, errors.New("403 Forbidden: the signature expired")
		}
		return io.NopCloser(bytes.NewReader(pkg)), nil
	}})
	c := &headClient{t: t, h: h}
	const uri = "https://store/pkg.zip?sig=1"
	c.submit(submitBody(map[string]any{"entrypoint": "sh main.sh", "submission_id": "a", "runtime_env": map[string]any{"working_dir": uri}}))
	c.submit(submitBody(map[string]any{"entrypoint": "sh main.sh", "submission_id": "b", "runtime_env": map[string]any{"working_dir": "https://store/pkg.zip?sig=2"}}))
	c.waitStatus("a", rayv1.JobStatusRunning)
	c.waitStatus("b", rayv1.JobStatusRunning)
	if n := h.Fetches(uri) + h.Fetches("https://store/pkg.zip?sig=2"); n != 1 {
		t.Errorf("the head downloaded the package %d times for two jobs of one package, want 1", n)
	}
	h.NodeJoined("10.254.0.2")
	if n := h.Fetches(uri) + h.Fetches("https://store/pkg.zip?sig=2"); n != 2 {
		t.Errorf("after a node joined: %d downloads, want 2", n)
	}
	h.NodeJoined("10.254.0.2") // it has the package: no download
	if n := h.Fetches(uri) + h.Fetches("https://store/pkg.zip?sig=2"); n != 2 {
		t.Errorf("after the same node joined again: %d downloads, want 2", n)
	}
	broken.Store(true)
	h.NodeJoined("10.254.0.3")
	for _, id := range []string{"a", "b"} {
		d := c.waitStatus(id, rayv1.JobStatusFailed)
		msg, _ := d["message"].(string)
		for _, want := range []string{"Job entrypoint command failed with exit code 1, last available logs (truncated to 20,000 chars):\n",
			"ray.exceptions.RuntimeEnvSetupError: Failed to set up runtime environment.\n[Node 10.254.0.3] Traceback (most recent call last):\n",
			"403 Forbidden: the signature expired"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: message does not contain %q:\n%s", id, want, msg)
			}
		}
		if d["driver_exit_code"] != 1.0 {
			t.Errorf("%s: driver_exit_code %v, want 1", id, d["driver_exit_code"])
		}
	}
	// A job that ended is not set up on a node that joins later.
	before := h.Fetches(uri)
	h.NodeJoined("10.254.0.4")
	if h.Fetches(uri) != before {
		t.Errorf("a node that joined after the job ended downloaded its package")
	}
}

// TestRayHeadLostDriver: a head restart (with its GCS kept) leaves the
// running job's record RUNNING with its old driver fields until a submit
// makes the new job manager, whose recovery fails it with LostDriver.
func TestRayHeadLostDriver(t *testing.T) {
	for _, v := range []string{RayVersion246, RayVersion252} {
		t.Run(v, func(t *testing.T) {
			h := NewRayHead(t, RayHeadOptions{RayVersion: v, NodeIP: "10.254.0.1"})
			c := &headClient{t: t, h: h}
			c.submit(`{"entrypoint": "sleep 30", "submission_id": "long"}`)
			old := c.waitStatus("long", rayv1.JobStatusRunning)
			h.goDown()
			if code, _, _ := c.do("GET", "/api/jobs/long", "", nil); code != http.StatusServiceUnavailable {
				t.Errorf("a head that is down answered %d", code)
			}
			h.goUp("10.254.0.9")
			d := c.waitStatus("long", rayv1.JobStatusRunning)
			for _, k := range []string{"driver_agent_http_address", "driver_node_id", "job_id"} {
				if d[k] != old[k] || d[k] == nil {
					t.Errorf("%s: %v, was %v", k, d[k], old[k])
				}
			}
			// The driver's agent is gone with its pod.
			if code, body, _ := c.do("GET", "/api/jobs/long/logs", "", nil); code != 500 || !strings.Contains(body, "10.254.0.1:52365") {
				t.Errorf("logs of the lost driver: %d %s", code, body)
			}
			c.submit(`{"entrypoint": "true", "submission_id": "next"}`)
			d = c.waitStatus("long", rayv1.JobStatusFailed)
			if d["message"] != LostDriver || d["driver_exit_code"] != nil {
				t.Errorf("the lost job: %v", d)
			}
			wantType := any(nil)
			if v == RayVersion252 {
				wantType = "JOB_SUPERVISOR_ACTOR_START_FAILURE"
			}
			if d["error_type"] != wantType {
				t.Errorf("error_type %v, want %v", d["error_type"], wantType)
			}
			if code, body, _ := c.do("POST", "/api/jobs/long/stop", "", nil); code != 200 || body != `{"stopped": false}` {
				t.Errorf("stop of the lost job: %d %s", code, body)
			}
			d = c.waitStatus("next", rayv1.JobStatusSucceeded)
			if d["driver_agent_http_address"] != "http://10.254.0.9:52365" {
				t.Errorf("the new job's driver agent: %v", d["driver_agent_http_address"])
			}
			if h.LostDrivers() != 1 {
				t.Errorf("LostDrivers() = %d", h.LostDrivers())
			}
		})
	}
}

// TestRayHeadStopGrace: a stop sends SIGTERM, and SIGKILL only after the
// grace (RAY_JOB_STOP_WAIT_TIME_S).
func TestRayHeadStopGrace(t *testing.T) {
	const grace = 300 * time.Millisecond
	h := NewRayHead(t, RayHeadOptions{StopGrace: grace})
	c := &headClient{t: t, h: h}
	c.submit(`{"entrypoint": "trap '' TERM; echo ready; sleep 30", "submission_id": "stubborn"}`)
	c.submit(`{"entrypoint": "trap 'echo bye; exit 0' TERM; echo ready; while :; do sleep 0.05; done", "submission_id": "polite"}`)
	for _, id := range []string{"stubborn", "polite"} {
		c.waitStatus(id, rayv1.JobStatusRunning)
		waitFor(t, id+" ready", func() (bool, string) { l := c.logs(id); return strings.Contains(l, "ready"), l })
	}
	began := time.Now()
	for _, id := range []string{"stubborn", "polite"} {
		if code, body, _ := c.do("POST", "/api/jobs/"+id+"/stop", "", nil); code != 200 || body != `{"stopped": true}` {
			t.Fatalf("stop %s: %d %s", id, code, body)
		}
	}
	d := c.waitStatus("polite", rayv1.JobStatusStopped)
	if d["message"] != "Job was intentionally stopped." || d["driver_exit_code"] != nil {
		t.Errorf("polite: %v", d)
	}
	if !strings.Contains(c.logs("polite"), "bye") {
		t.Errorf("the polite job never saw SIGTERM")
	}
	c.waitStatus("stubborn", rayv1.JobStatusStopped)
	if took := time.Since(began); took < grace {
		t.Errorf("a job that ignores SIGTERM stopped after %v, before the grace of %v", took, grace)
	}
	if code, body, _ := c.do("POST", "/api/jobs/stubborn/stop", "", nil); code != 200 || body != `{"stopped": false}` {
		t.Errorf("second stop: %d %s", code, body)
	}
}

// TestRayHeadBigLog: a 100 MiB driver log comes back whole, streamed.
func TestRayHeadBigLog(t *testing.T) {
	const size = 100 << 20
	h := NewRayHead(t, RayHeadOptions{})
	c := &headClient{t: t, h: h}
	c.submit(fmt.Sprintf(`{"entrypoint": "head -c %d /dev/zero | tr '\\000' a", "submission_id": "big"}`, size))
	c.waitStatus("big", rayv1.JobStatusSucceeded)
	h.mu.Lock()
	path := h.jobs["big"].logPath
	h.mu.Unlock()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(data[:4096]), "\n")
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heapBefore := ms.HeapAlloc
	data = nil
	resp, err := http.Get(h.URL + "/api/jobs/big/logs")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	head := make([]byte, 10+len(pyJSONEscape(first+"\n")))
	if _, err := io.ReadFull(resp.Body, head); err != nil {
		t.Fatal(err)
	}
	if want := `{"logs": "` + pyJSONEscape(first+"\n"); string(head) != want {
		t.Errorf("logs begin %q, want %q", head, want)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if n != size+2 {
		t.Errorf("after the first line: %d bytes, want %d", n, size+2)
	}
	runtime.ReadMemStats(&ms)
	if ms.HeapAlloc > heapBefore+size/2 {
		t.Errorf("the heap grew by %d MiB serving the log", (ms.HeapAlloc-heapBefore)>>20)
	}
}

// TestRayHeadInvalidUTF8: a driver log that is not UTF-8 is a 500 on
// /logs (UnicodeDecodeError), raw bytes from the state API at each version.
func TestRayHeadInvalidUTF8(t *testing.T) {
	for _, v := range []string{RayVersion241, RayVersion246, RayVersion252} {
		t.Run(v, func(t *testing.T) {
			h := NewRayHead(t, RayHeadOptions{RayVersion: v})
			c := &headClient{t: t, h: h}
			c.submit(`{"entrypoint": "printf 'ok\\n\\377\\n'", "submission_id": "bin"}`)
			c.waitStatus("bin", rayv1.JobStatusSucceeded)
			h.mu.Lock()
			path := h.jobs["bin"].logPath
			h.mu.Unlock()
			data, _ := os.ReadFile(path)
			pos := bytes.IndexByte(data, 0xff)
			code, body, typ := c.do("GET", "/api/jobs/bin/logs", "", nil)
			want := fmt.Sprintf("UnicodeDecodeError: 'utf-8' codec can't decode byte 0xff in position %d: invalid start byte\n", pos)
			if code != 500 || !strings.HasPrefix(typ, "text/plain") || !strings.Contains(body, "RuntimeError: Request failed with status code 500: Traceback") ||
				!strings.Contains(body, want) {
				t.Errorf("logs: %d %s\n%s\nwant it to contain %q", code, typ, body, want)
			}
			code, body, _ = c.do("GET", "/api/v0/logs/file?submission_id=bin&lines=-1", "", nil)
			wantBody := string(data)
			if v == RayVersion241 {
				wantBody = "1" + wantBody
			}
			if code != 200 || body != wantBody {
				t.Errorf("state logs: %d %q, want %q", code, body, wantBody)
			}
		})
	}
}
