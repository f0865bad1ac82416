package kube_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	utiltypes "github.com/ray-project/kuberay/ray-operator/controllers/ray/utils/types"

	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/job"
)

// recorder is a server a hostile head redirects to: it records what
// reaches it.
type recorder struct {
	srv      *httptest.Server
	mu       sync.Mutex
	requests []string // method, path, Authorization and body of each
}

func newRecorder(t *testing.T, listen func(http.Handler) *httptest.Server) *recorder {
	t.Helper()
	r := &recorder{}
	r.srv = listen(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
		r.mu.Lock()
		r.requests = append(r.requests, fmt.Sprintf("%s %s Authorization=%q body=%q", req.Method, req.URL.Path,
			req.Header.Get("Authorization"), body))
		r.mu.Unlock()
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, `{"job_id": "stolen", "status": "SUCCEEDED", "logs": "stolen"}`)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *recorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.requests...)
}

// bearer adds a credential to every request, as the transport of
// rest.HTTPClientFor does with a ServiceAccount's token.
type bearer struct{ next http.RoundTripper }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer sa-token-secret")
	return b.next.RoundTrip(r)
}

// jobsOps are the Jobs API calls, each run against c.
var jobsOps = []struct {
	name string
	do   func(ctx context.Context, c *kube.JobsClient) error
}{
	{"submit", func(ctx context.Context, c *kube.JobsClient) error {
		return c.Submit(ctx, &utiltypes.RayJobRequest{Entrypoint: "python main.py", SubmissionId: "run-1",
			RuntimeEnv: utiltypes.RuntimeEnvType{"working_dir": "https://cos.example/pkg.zip?sign=presigned", "env_vars": map[string]any{"TOKEN": "s3cr3t"}}})
	}},
	{"status", func(ctx context.Context, c *kube.JobsClient) error { _, err := c.Status(ctx, "run-1"); return err }},
	{"logs", func(ctx context.Context, c *kube.JobsClient) error { _, err := c.Logs(ctx, "run-1"); return err }},
	{"stop", func(ctx context.Context, c *kube.JobsClient) error { return c.Stop(ctx, "run-1") }},
}

// A head that answers a call with a redirect to another host gets a clear
// error back, and the other host gets nothing: no request, no credential,
// no submission.
func TestJobsClientFollowsNoRedirect(t *testing.T) {
	thief := newRecorder(t, httptest.NewServer)
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		head := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, thief.srv.URL+"/steal"+r.URL.Path, code)
		}))
		c := &kube.JobsClient{Base: head.URL, HTTP: &http.Client{Transport: bearer{http.DefaultTransport}}}
		for _, op := range jobsOps {
			err := op.do(t.Context(), c)
			if err == nil || !strings.Contains(err.Error(), "redirect") || !strings.Contains(err.Error(), thief.srv.URL) {
				t.Errorf("%d on %s: %v, want an error naming the redirect", code, op.name, err)
			}
		}
		head.Close()
	}
	if got := thief.got(); len(got) != 0 {
		t.Fatalf("the redirect target received %d requests: %q", len(got), got)
	}
}

// hangingHead accepts calls and never answers them, until the test ends.
func hangingHead(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var calls atomic.Int64
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		select {
		case <-done:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(done); srv.Close() })
	return srv, &calls
}

// A head that accepts a call and never answers costs the caller one call
// deadline, through a client with no timeout of its own (as the service
// proxy's, made by rest.HTTPClientFor): the call fails with ErrUnavailable.
func TestJobsClientHeadNeverAnswers(t *testing.T) {
	head, _ := hangingHead(t)
	const timeout = 200 * time.Millisecond
	c := &kube.JobsClient{Base: head.URL, HTTP: &http.Client{}, Timeout: timeout, LogTimeout: timeout}
	for _, op := range jobsOps {
		start := time.Now()
		err := op.do(t.Context(), c)
		took := time.Since(start)
		if !errors.Is(err, errs.ErrUnavailable) || !strings.Contains(err.Error(), "did not answer within") {
			t.Errorf("%s: %v, want ErrUnavailable saying the head did not answer", op.name, err)
		}
		if took < timeout || took > timeout+10*time.Second {
			t.Errorf("%s took %v, want its deadline of %v", op.name, took, timeout)
		}
	}
	// The caller's own cancellation is the caller's, not the head's.
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := (&kube.JobsClient{Base: head.URL}).Status(ctx, "run-1"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("with the caller's deadline: %v", err)
	}
}

// busy reports whether err is the guard's "head busy".
func busy(err error) bool {
	var b interface{ Busy() bool }
	return errors.As(err, &b) && b.Busy()
}

// A guarded head takes one call at a time: another fails at once as busy
// (Logs, a user's call, waits its turn). A timeout opens the head's
// breaker: calls fail at once, without reaching the head, until the
// backoff has passed. Another head is not held up meanwhile.
func TestHeadGuard(t *testing.T) {
	hung, hungCalls := hangingHead(t)
	var slowCalls atomic.Int64
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		slowCalls.Add(1)
		time.Sleep(100 * time.Millisecond)
		if strings.HasSuffix(r.URL.Path, "/logs") {
			_, _ = io.WriteString(w, `{"logs": "line\n"}`)
			return
		}
		_, _ = io.WriteString(w, `{"job_id": "run-1", "status": "RUNNING"}`)
	}))
	defer slow.Close()
	guard := &kube.HeadGuard{Backoff: time.Second}
	const timeout = 500 * time.Millisecond
	hungC := &kube.JobsClient{Base: hung.URL, Timeout: timeout, Guard: guard}
	slowC := &kube.JobsClient{Base: slow.URL, Timeout: 5 * time.Second, Guard: guard}
	ctx := t.Context()

	first := make(chan error, 1)
	go func() { _, err := hungC.Status(ctx, "run-1"); first <- err }()
	waitUntil(t, "the first call at the hung head", func() bool { return hungCalls.Load() == 1 })
	if _, err := hungC.Status(ctx, "run-2"); !busy(err) || !errors.Is(err, errs.ErrUnavailable) {
		t.Errorf("a second call while one is in flight: %v, want busy", err)
	}
	// Another head answers meanwhile.
	if info, err := slowC.Status(ctx, "run-1"); err != nil || info.JobStatus != rayv1.JobStatusRunning {
		t.Errorf("another head, while the first hangs: %v, %v", info, err)
	}
	if err := <-first; !errors.Is(err, errs.ErrUnavailable) || busy(err) {
		t.Fatalf("the hung call: %v", err)
	}
	// The breaker is open: calls fail without reaching the head.
	for range 5 {
		if _, err := hungC.Status(ctx, "run-1"); !errors.Is(err, errs.ErrUnavailable) || !strings.Contains(err.Error(), "called again in") {
			t.Errorf("while the breaker is open: %v", err)
		}
	}
	if n := hungCalls.Load(); n != 1 {
		t.Errorf("the hung head got %d calls while its breaker was open, want 1", n)
	}
	// After the backoff, the head is called again.
	waitUntil(t, "the breaker to let a call through", func() bool {
		_, err := hungC.Status(ctx, "run-1")
		return hungCalls.Load() == 2 && err != nil
	})

	// Logs waits for a call in flight instead of failing as busy.
	status := make(chan error, 1)
	go func() { _, err := slowC.Status(ctx, "run-1"); status <- err }()
	waitUntil(t, "the status call in flight", func() bool { return slowCalls.Load() == 2 })
	if logs, err := slowC.Logs(ctx, "run-1"); err != nil || logs != "line\n" {
		t.Errorf("logs while a status call is in flight: %q, %v", logs, err)
	}
	if err := <-status; err != nil {
		t.Error(err)
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 30s, still waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// everyByte is a string of every byte value (invalid UTF-8 included),
// HTML characters encoding/json escapes, and runes of 2, 3 and 4 bytes.
func everyByte() string {
	var b []byte
	for i := range 256 {
		b = append(b, byte(i))
	}
	return string(b) + "<&>\u2028\u2029 é 中 😀 \\ \" \n"
}

// logsHead serves body as the answer to every logs call, writing it in
// chunks.
func logsHead(t *testing.T, body func(w io.Writer)) *kube.JobsClient {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { body(w) }))
	t.Cleanup(srv.Close)
	return &kube.JobsClient{Base: srv.URL, Timeout: time.Minute}
}

// Logs of any size come back as their tail, with a line saying what was
// cut: a head's answer over the old 16 MiB read limit is not cut in the
// middle of its JSON, and one over the read bound is read only that far.
// Escapes decode as encoding/json decodes them.
func TestJobsClientLogsTail(t *testing.T) {
	line := func(i int) string { return fmt.Sprintf("line %08d of the job's output, \"quoted\" \\ and é\n", i) }
	lines := func(n int) string {
		var b strings.Builder
		for i := range n {
			b.WriteString(line(i))
		}
		return b.String()
	}
	answer := func(logs string) func(io.Writer) {
		return func(w io.Writer) {
			b, _ := json.Marshal(map[string]string{"logs": logs})
			_, _ = w.Write(b)
		}
	}
	big := lines(20 << 20 / len(line(0))) // 20 MiB of text, more escaped
	cases := []struct {
		name   string
		answer func(io.Writer)
		want   func(t *testing.T, got string)
	}{
		{"short", answer("a\nb\n"), func(t *testing.T, got string) {
			if got != "a\nb\n" {
				t.Errorf("%q", got)
			}
		}},
		{"escapes as encoding/json", func(w io.Writer) {
			_, _ = io.WriteString(w, `{"job_id": "x", "extra": {"a": [1, "}", {"b": null}]}, "logs": "t\u00e9st \ud83d\ude00 \ud800 x\/y\t\"q\"\\ \u4e2d"}`)
		}, func(t *testing.T, got string) {
			var want struct{ Logs string }
			_ = json.Unmarshal([]byte(`{"logs": "t\u00e9st \ud83d\ude00 \ud800 x\/y\t\"q\"\\ \u4e2d"}`), &want)
			if got != want.Logs {
				t.Errorf("%q, want %q", got, want.Logs)
			}
		}},
		{"every byte and rune class as encoding/json", answer(everyByte()), func(t *testing.T, got string) {
			b, _ := json.Marshal(map[string]string{"logs": everyByte()})
			var want struct{ Logs string }
			_ = json.Unmarshal(b, &want)
			if got != want.Logs {
				t.Errorf("%q, want %q", got, want.Logs)
			}
		}},
		{"20 MiB: the tail", answer(big), func(t *testing.T, got string) {
			if !strings.HasPrefix(got, "[dlc: logs cut: the first ") || !strings.HasSuffix(got, line(20<<20/len(line(0))-1)) {
				t.Errorf("starts %q, ends %q", got[:80], got[len(got)-80:])
			}
			if len(got) > kube.MaxLogBytes+200 || !strings.HasSuffix(big, got[strings.Index(got, "\n")+1:]) {
				t.Errorf("%d bytes, not the tail of the logs", len(got))
			}
		}},
		{"over the read bound (64 MiB here): what was read, saying so", func(w io.Writer) {
			_, _ = io.WriteString(w, `{"logs": "`)
			chunk := strings.Repeat(`0123456789abcdef\n`, 1<<12)
			for range (70 << 20) / len(chunk) {
				if _, err := io.WriteString(w, chunk); err != nil {
					return
				}
			}
			_, _ = io.WriteString(w, `"}`)
		}, func(t *testing.T, got string) {
			if !strings.HasPrefix(got, "[dlc: logs cut: the first ") || !strings.HasSuffix(got, "the logs after that were not read]\n") {
				t.Errorf("starts %q, ends %q", got[:80], got[len(got)-80:])
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if strings.HasPrefix(tc.name, "over the read bound") {
				defer kube.SetMaxLogRead(64 << 20)()
			}
			got, err := logsHead(t, tc.answer).Logs(t.Context(), "run-1")
			if err != nil {
				t.Fatal(err)
			}
			tc.want(t, got)
		})
	}
	for _, bad := range []string{`not json`, `{"logs": 3}`, `{"logs": "cut`, `["logs"]`} {
		_, err := logsHead(t, func(w io.Writer) { _, _ = io.WriteString(w, bad) }).Logs(t.Context(), "run-1")
		if err == nil || errors.Is(err, errs.ErrUnavailable) {
			t.Errorf("%s: %v, want an error saying what the head answered", bad, err)
		}
	}
}

// What a head says of a job is bounded before it is stored: a long
// message keeps its end, times JSON cannot hold (or before the epoch) are
// dropped, and a status outside Ray's enum fails the run, naming it.
func TestObservationOfAHostileHead(t *testing.T) {
	traceback := strings.Repeat("  File \"train.py\", line 1, in <module>\n", 2<<20/40) + "ValueError: the real error\n"
	year10000 := uint64(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli())
	started := uint64(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixMilli())
	cases := []struct {
		name  string
		info  utiltypes.RayJobInfo
		state job.RunState
		check func(t *testing.T, o job.Observation)
	}{
		{"a 2 MiB message keeps its end", utiltypes.RayJobInfo{JobStatus: rayv1.JobStatusFailed, Message: traceback},
			job.Failed, func(t *testing.T, o job.Observation) {
				if len(o.Message) > job.MaxMessage || !strings.HasSuffix(o.Message, "ValueError: the real error\n") ||
					!strings.Contains(o.Message, "bytes cut") {
					t.Errorf("%d bytes: %q…", len(o.Message), o.Message[:60])
				}
			}},
		{"end_time past year 9999", utiltypes.RayJobInfo{JobStatus: rayv1.JobStatusSucceeded, StartTime: started, EndTime: year10000},
			job.Succeeded, func(t *testing.T, o job.Observation) {
				if !o.EndedAt.IsZero() || !o.StartedAt.IsZero() { // start_time is Ray's acceptance: never a start
					t.Errorf("%+v", o)
				}
			}},
		{"times past what a time holds", utiltypes.RayJobInfo{JobStatus: rayv1.JobStatusSucceeded, StartTime: math.MaxUint64, EndTime: math.MaxInt64},
			job.Succeeded, func(t *testing.T, o job.Observation) {
				if !o.EndedAt.IsZero() || !o.StartedAt.IsZero() {
					t.Errorf("%+v", o)
				}
			}},
		{"a status outside Ray's enum", utiltypes.RayJobInfo{JobStatus: "EXPLODED", Message: "fine"},
			job.Failed, func(t *testing.T, o job.Observation) {
				if !strings.Contains(o.Message, `"EXPLODED"`) {
					t.Errorf("%q", o.Message)
				}
			}},
		{"no status", utiltypes.RayJobInfo{}, job.Failed, nil},
		{"PENDING", utiltypes.RayJobInfo{JobStatus: rayv1.JobStatusPending}, job.Provisioning, nil},
		{"RUNNING", utiltypes.RayJobInfo{JobStatus: rayv1.JobStatusRunning, StartTime: started}, job.Running, nil},
		{"STOPPED", utiltypes.RayJobInfo{JobStatus: rayv1.JobStatusStopped}, job.Stopped, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := kube.Observation(&tc.info)
			if o.State != tc.state {
				t.Errorf("state %s, want %s", o.State, tc.state)
			}
			if tc.check != nil {
				tc.check(t, o)
			}
			// What the run stores of it marshals.
			r := job.Run{ID: "run-1", State: o.State, Message: o.Message, StartedAt: o.StartedAt, FinishedAt: o.EndedAt}
			if _, err := json.Marshal(&r); err != nil {
				t.Errorf("the run does not marshal: %v", err)
			}
		})
	}
}
