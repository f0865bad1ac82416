package kube

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aidlc/dlc/job"
)

// An on-demand run's state comes from its RayJob's status, which KubeRay
// copies from the head: it is bounded the same way as the Jobs API's.
func TestRayJobObservationBounded(t *testing.T) {
	long := strings.Repeat("traceback line\n", 2<<20/15) + "ZeroDivisionError: division by zero"
	far := metav1.NewTime(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))
	before := metav1.NewTime(time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC))
	start := metav1.NewTime(time.Date(2026, 12, 4, 5, 0, 0, 0, time.UTC))
	cases := []struct {
		name   string
		status rayv1.RayJobStatus
		state  job.RunState
		msg    string // a part of the message, which ends it when long
	}{
		{"not submitted yet", rayv1.RayJobStatus{}, job.Provisioning, ""},
		{"failed before its job ran, a long reason", rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusFailed, Message: long},
			job.Failed, "ZeroDivisionError: division by zero"},
		{"failed with a long message", rayv1.RayJobStatus{JobStatus: rayv1.JobStatusFailed, Message: long}, job.Failed, "ZeroDivisionError: division by zero"},
		{"a status outside Ray's enum", rayv1.RayJobStatus{JobStatus: "EXPLODED"}, job.Failed, `"EXPLODED"`},
		{"times past 9999 and before the epoch", rayv1.RayJobStatus{JobStatus: rayv1.JobStatusSucceeded,
			RayJobStatusInfo: rayv1.RayJobStatusInfo{StartTime: &before, EndTime: &far}}, job.Succeeded, ""},
		{"a real start", rayv1.RayJobStatus{JobStatus: rayv1.JobStatusRunning, RayJobStatusInfo: rayv1.RayJobStatusInfo{StartTime: &start}},
			job.Running, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := rayJobObservation(&rayv1.RayJob{Status: tc.status})
			if o.State != tc.state || len(o.Message) > job.MaxMessage || !strings.Contains(o.Message, tc.msg) {
				t.Errorf("%s with %d bytes of message %.80q", o.State, len(o.Message), o.Message)
			}
			if len(tc.msg) > 0 && len(o.Message) == job.MaxMessage && !strings.HasSuffix(o.Message, tc.msg) {
				t.Errorf("a clipped message does not keep its end")
			}
			if _, err := json.Marshal(job.Run{StartedAt: o.StartedAt, FinishedAt: o.EndedAt}); err != nil {
				t.Errorf("the run does not marshal: %v", err)
			}
			// KubeRay copies Ray's start_time, which is Ray's acceptance of
			// the job (job_manager.py, submit_job), not its driver's start:
			// no StartedAt.
			if tc.name == "a real start" && !o.StartedAt.IsZero() {
				t.Errorf("started %v, want no start from Ray's start_time", o.StartedAt)
			}
		})
	}
	// The reason a cluster takes from its RayJob is bounded too.
	rj := &rayv1.RayJob{Status: rayv1.RayJobStatus{JobDeploymentStatus: rayv1.JobDeploymentStatusFailed, Message: long}}
	if why := rayJobReason(rj); len(why) > job.MaxMessage || !strings.HasSuffix(why, "division by zero") {
		t.Errorf("rayJobReason: %d bytes", len(why))
	}
}
