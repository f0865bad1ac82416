package kubetest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	utiltypes "github.com/ray-project/kuberay/ray-operator/controllers/ray/utils/types"
)

// A head that goes down answers 503 and loses its running drivers; back
// up, it still has every job's record, the lost ones still RUNNING until a
// call makes the new job manager, whose recovery fails them with
// LostDriver.
func TestRayHeadDownAndUp(t *testing.T) {
	h := NewRayHead(t, RayHeadOptions{})
	hc := &http.Client{Timeout: 10 * time.Second}
	submit := func(id, entrypoint string) {
		t.Helper()
		body, _ := json.Marshal(utiltypes.RayJobRequest{Entrypoint: entrypoint, SubmissionId: id})
		resp, err := hc.Post(h.URL+"/api/jobs/", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("submit %s: %s", id, resp.Status)
		}
	}
	status := func(id string) (int, utiltypes.RayJobInfo) {
		t.Helper()
		resp, err := hc.Get(h.URL + "/api/jobs/" + id)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var info utiltypes.RayJobInfo
		if resp.StatusCode == http.StatusOK {
			if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
				t.Fatal(err)
			}
		}
		return resp.StatusCode, info
	}
	wait := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("still waiting for %s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	submit("done", "true")
	submit("long", "sleep 60")
	wait("done to succeed and long to run", func() bool {
		_, d := status("done")
		_, l := status("long")
		return d.JobStatus == rayv1.JobStatusSucceeded && l.JobStatus == rayv1.JobStatusRunning
	})

	h.goDown()
	if code, _ := status("long"); code != http.StatusServiceUnavailable || !h.Down() {
		t.Fatalf("a head that is down answered %d (Down() = %v), want 503", code, h.Down())
	}
	h.mu.Lock()
	long := h.jobs["long"]
	h.mu.Unlock()
	<-long.done // the lost driver's process has ended

	h.goUp("")
	if code, l := status("long"); code != http.StatusOK || l.JobStatus != rayv1.JobStatusRunning {
		t.Errorf("the lost job, back up, before any job manager call: %d %s %q", code, l.JobStatus, l.Message)
	}
	resp, err := hc.Post(h.URL+"/api/jobs/long/stop", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	var stop utiltypes.RayJobStopResponse
	if err := json.NewDecoder(resp.Body).Decode(&stop); err != nil || stop.Stopped {
		t.Errorf("stop of the lost job: %+v, %v; want stopped false", stop, err)
	}
	resp.Body.Close()
	if code, l := status("long"); code != http.StatusOK || l.JobStatus != rayv1.JobStatusFailed || l.Message != LostDriver {
		t.Errorf("the lost job, after the stop: %d %s %q", code, l.JobStatus, l.Message)
	}
	if code, d := status("done"); code != http.StatusOK || d.JobStatus != rayv1.JobStatusSucceeded {
		t.Errorf("the finished job, back up: %d %s", code, d.JobStatus)
	}
	if n := h.LostDrivers(); n != 1 {
		t.Errorf("LostDrivers() = %d, want 1", n)
	}
}
