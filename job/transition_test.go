package job_test

import (
	"errors"
	"testing"

	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/job"
)

func TestRunTransition(t *testing.T) {
	for _, tc := range []struct {
		from    job.RunState
		t       job.RunTrigger
		to      job.RunState
		ok      bool
		refused bool
	}{
		{"", job.Queue, job.Queued, true, false},
		{"", job.Place, "", false, false},
		{"", job.Stop, "", false, true}, // a stored run whose state was edited away
		{job.Queued, job.Queue, job.Queued, false, false},
		{job.Queued, job.Wait, job.Waiting, true, false},
		{job.Waiting, job.Place, job.Provisioning, true, false},
		{job.Provisioning, job.ObservedRunning, job.Running, true, false},
		{job.Running, job.ObservedSucceeded, job.Succeeded, true, false},
		{job.Provisioning, job.ObservedFailed, job.Failed, true, false},
		{job.Queued, job.Fail, job.Failed, true, false},
		{job.Running, job.Stop, job.Stopped, true, false},
		{job.Succeeded, job.Stop, job.Succeeded, false, true},
		{job.Succeeded, job.ObservedFailed, job.Succeeded, false, false},
	} {
		to, ok, err := job.Transition("r", tc.from, tc.t)
		if to != tc.to || ok != tc.ok || (err != nil) != tc.refused || (err != nil && !errors.Is(err, errs.ErrState)) {
			t.Errorf("%q on %s = %q %v %v, want %q %v refused=%v", tc.from, tc.t, to, ok, err, tc.to, tc.ok, tc.refused)
		}
	}
}

func TestRunObservationTrigger(t *testing.T) {
	for state, want := range map[job.RunState]job.RunTrigger{
		job.Provisioning: "",
		job.Running:      job.ObservedRunning,
		job.Succeeded:    job.ObservedSucceeded,
		job.Failed:       job.ObservedFailed,
		job.Stopped:      job.Fail, // stopped on Ray's side, not by the platform
		"UNKNOWN":        "",
	} {
		if got := (job.Observation{State: state}).Trigger(); got != want {
			t.Errorf("%q: %q, want %q", state, got, want)
		}
	}
}
