package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	utiltypes "github.com/ray-project/kuberay/ray-operator/controllers/ray/utils/types"

	"github.com/aidlc/dlc"
	"github.com/aidlc/dlc/backend/kube"
	"github.com/aidlc/dlc/job"
)

// The fault test: one cluster's head hangs (accepts every call and never
// answers), with more runs on it than the client has reconcile workers
// (9 runs, 8 workers) and a client to the heads with no timeout of its own,
// as the service proxy's. Another cluster is created, started and runs a
// job to success within the bounds the healthy scenarios use.
func TestHungHeadHoldsNoOtherCluster(t *testing.T) {
	w := getWorld(t)
	s := newScene(t, kube.Options{Dashboard: func(_ context.Context, rc *rayv1.RayCluster) (string, *http.Client, error) {
		return w.loop.Head(rc).URL, &http.Client{}, nil // no timeout, as rest.HTTPClientFor's
	}})
	sick := s.cluster("挂起集群", true)
	rcs := s.rayClusters(sick.ID)
	if len(rcs) != 1 {
		t.Fatalf("%d RayClusters of %s", len(rcs), sick.ID)
	}
	resume := w.loop.Head(&rcs[0]).Hang()
	defer resume()
	const hung = 9
	var ids []string
	for i := range hung {
		ids = append(ids, s.run(dlc.NewJob(fmt.Sprintf("hung-%d", i)).OnCluster(sick.ID).
			COSPackage("cos://jobs-1250000000/slow.zip").Entrypoint("python slow.py")).ID)
	}
	waitFor(t, "the runs on the hung head placed", func() (bool, string) {
		placed := 0
		for _, id := range ids {
			if r, err := s.c.Runs().Get(s.ctx, id); err == nil && r.State != job.Queued && r.State != job.Waiting {
				placed++
			}
		}
		return placed >= 8, fmt.Sprint(placed, " placed")
	})

	began := time.Now()
	healthy := s.cluster("健康集群", true)
	up := time.Since(began)
	r := s.ended(s.c, s.run(dlc.NewJob("healthy").OnCluster(healthy.ID).
		COSPackage("cos://jobs-1250000000/main.zip").Entrypoint("python main.py")).ID)
	if r.State != job.Succeeded {
		t.Fatalf("the run on the healthy cluster: %s: %s", r.State, r.Message)
	}
	t.Logf("timing: beside a hung head, a cluster was created and started in %v, and ran a job by %v",
		up.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
	states := map[string]int{}
	for _, id := range ids {
		if r, err := s.c.Runs().Get(s.ctx, id); err == nil {
			states[string(r.State)+": "+clipTo(r.Message, 120)]++
		}
	}
	t.Logf("the runs on the hung head meanwhile: %v", states)
}

func clipTo(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// scriptedHead is a hostile Ray head: what it answers of a job depends on
// the job's entrypoint.
type scriptedHead struct {
	srv     *httptest.Server
	mu      sync.Mutex
	entries map[string]string // submission id → entrypoint
	stops   map[string]int
}

func newScriptedHead(t *testing.T, status func(entry string) utiltypes.RayJobInfo, logs func(entry string, w io.Writer)) *scriptedHead {
	t.Helper()
	h := &scriptedHead{entries: map[string]string{}, stops: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/jobs/{$}", func(w http.ResponseWriter, r *http.Request) {
		var req utiltypes.RayJobRequest
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		h.mu.Lock()
		h.entries[req.SubmissionId] = req.Entrypoint
		h.mu.Unlock()
		_ = json.NewEncoder(w).Encode(utiltypes.RayJobResponse{JobId: req.SubmissionId})
	})
	entry := func(w http.ResponseWriter, r *http.Request) (string, bool) {
		h.mu.Lock()
		defer h.mu.Unlock()
		e, ok := h.entries[r.PathValue("id")]
		if !ok {
			http.Error(w, "Job does not exist", http.StatusNotFound)
		}
		return e, ok
	}
	mux.HandleFunc("GET /api/jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		if e, ok := entry(w, r); ok {
			info := status(e)
			info.JobId, info.SubmissionId = r.PathValue("id"), r.PathValue("id")
			_ = json.NewEncoder(w).Encode(info)
		}
	})
	mux.HandleFunc("GET /api/jobs/{id}/logs", func(w http.ResponseWriter, r *http.Request) {
		if e, ok := entry(w, r); ok {
			logs(e, w)
		}
	})
	mux.HandleFunc("POST /api/jobs/{id}/stop", func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.stops[r.PathValue("id")]++
		h.mu.Unlock()
		_ = json.NewEncoder(w).Encode(utiltypes.RayJobStopResponse{Stopped: true})
	})
	h.srv = httptest.NewServer(mux)
	t.Cleanup(h.srv.Close)
	return h
}

func (h *scriptedHead) stopped(id string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stops[id]
}

// What a hostile head answers of a job is bounded before the real store
// sees it: a FAILED status with a 2 MiB message ends the run failed with
// the message's end (not with the store's "too large"), an end_time past
// year 9999 ends it with a time JSON holds, a status outside Ray's enum
// fails it naming the status (and stops the job), and logs over 16 MiB
// come back as their tail.
func TestHostileHeadAnswers(t *testing.T) {
	traceback := strings.Repeat("  File \"/tmp/ray/session/train.py\", line 42, in <module>\n", 2<<20/56) + "ValueError: the real error"
	started := uint64(time.Now().Add(-time.Minute).UnixMilli())
	year10000 := uint64(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli())
	const logLine = "a line of the job's output, long enough to add up quickly ............................................"
	head := newScriptedHead(t, func(entry string) utiltypes.RayJobInfo {
		switch entry {
		case "huge-message":
			return utiltypes.RayJobInfo{JobStatus: rayv1.JobStatusFailed, Message: traceback, StartTime: started, EndTime: started + 1000}
		case "far-future":
			return utiltypes.RayJobInfo{JobStatus: rayv1.JobStatusSucceeded, StartTime: started, EndTime: year10000}
		case "bogus":
			return utiltypes.RayJobInfo{JobStatus: "EXPLODED", StartTime: started}
		}
		return utiltypes.RayJobInfo{JobStatus: rayv1.JobStatusSucceeded, StartTime: started, EndTime: started + 1000}
	}, func(entry string, w io.Writer) {
		_, _ = io.WriteString(w, `{"logs": "`)
		for range (20 << 20) / (len(logLine) + 2) {
			_, _ = io.WriteString(w, logLine+`\n`)
		}
		_, _ = io.WriteString(w, `the last line\n"}`)
	})
	s := newScene(t, kube.Options{Dashboard: func(context.Context, *rayv1.RayCluster) (string, *http.Client, error) {
		return head.srv.URL, &http.Client{}, nil
	},
		// What is bounded here is what the answers hold, not how long they
		// take: 20 MiB of logs under -race on a loaded machine took longer
		// than the default 10 s.
		HeadTimeout: time.Minute})
	cl := s.cluster("敌意集群", true)
	cases := []struct {
		entry string
		check func(t *testing.T, r *job.Run)
	}{
		{"huge-message", func(t *testing.T, r *job.Run) {
			if r.State != job.Failed || len(r.Message) > job.MaxMessage || !strings.HasSuffix(r.Message, "ValueError: the real error") {
				t.Errorf("huge-message: %s with %d bytes of message ending %q", r.State, len(r.Message), r.Message[max(0, len(r.Message)-60):])
			}
		}},
		{"far-future", func(t *testing.T, r *job.Run) {
			if r.State != job.Succeeded || r.FinishedAt.Year() > 9999 || r.FinishedAt.Before(r.StartedAt) {
				t.Errorf("far-future: %s: %s, started %v, finished %v", r.State, r.Message, r.StartedAt, r.FinishedAt)
			}
		}},
		{"bogus", func(t *testing.T, r *job.Run) {
			if r.State != job.Failed || !strings.Contains(r.Message, `"EXPLODED"`) || head.stopped(r.ID) == 0 {
				t.Errorf("bogus: %s: %q; stopped %d times", r.State, r.Message, head.stopped(r.ID))
			}
		}},
		{"big-logs", func(t *testing.T, r *job.Run) {
			if r.State != job.Succeeded {
				t.Errorf("big-logs: %s: %s", r.State, r.Message)
			}
			lines, err := s.c.Runs().Logs(s.ctx, r.ID)
			if err != nil || len(lines) < 2 || !strings.HasPrefix(lines[0], "[dlc: logs cut: the first ") || lines[len(lines)-1] != "the last line" {
				t.Errorf("logs: %d lines, %v", len(lines), err)
				return
			}
			t.Logf("logs: %d lines, the first %q", len(lines), lines[0])
		}},
	}
	// The runs go at once; each is then checked (the scene's helpers wait
	// on the test itself, so no subtests).
	runs := make([]string, len(cases))
	for i, tc := range cases {
		runs[i] = s.run(dlc.NewJob(tc.entry).OnCluster(cl.ID).COSPackage("cos://jobs-1250000000/main.zip").Entrypoint(tc.entry)).ID
	}
	for i, tc := range cases {
		r := s.ended(s.c, runs[i])
		t.Logf("%s: %s: %s", tc.entry, r.State, clipTo(r.Message, 200))
		tc.check(t, r)
	}
}
