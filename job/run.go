package job

import (
	"context"
	"time"
)

// Record is a saved job configuration (J12): its config, the revision
// that edits bump (J15), and its bookkeeping.
type Record struct {
	ID        string    `json:"id"`
	Config    Config    `json:"config"`
	Revision  int       `json:"revision"` // the config's version; runs keep the one they started from
	Version   int64     `json:"version"`  // the store's version; a stale write is a conflict
	Creator   string    `json:"creator"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// DeepCopy returns a copy of r that shares nothing with it.
func (r *Record) DeepCopy() *Record {
	out := *r
	out.Config = *r.Config.DeepCopy()
	return &out
}

// ListEntry is one row of the job list (J13).
type ListEntry struct {
	ID        string            `json:"id"`
	Name      string            `json:"name"`
	Mode      Mode              `json:"mode"`
	Resource  string            `json:"resource"` // the resource group, cluster id or group id
	Package   string            `json:"package"`
	Running   int               `json:"running"` // runs not yet finished
	Priority  int               `json:"priority"`
	Tags      map[string]string `json:"tags,omitempty"`
	Creator   string            `json:"creator"`
	CreatedAt time.Time         `json:"createdAt"`
}

// RunState is a run's state (J14).
type RunState string

// The run states. Queued, Waiting, Provisioning and Running are live;
// Succeeded, Failed and Stopped are terminal.
const (
	Queued       RunState = "queued"
	Waiting      RunState = "waiting"
	Provisioning RunState = "provisioning"
	Running      RunState = "running"
	Succeeded    RunState = "succeeded"
	Failed       RunState = "failed"
	Stopped      RunState = "stopped"
)

// Terminal reports whether the run has ended.
func (s RunState) Terminal() bool { return s == Succeeded || s == Failed || s == Stopped }

// WaitReason says why a run waits (J18).
type WaitReason string

// The waiting reasons.
const (
	// ClusterNotRunning: the run's existing cluster is not running.
	ClusterNotRunning WaitReason = "cluster not running"
	// NoMemberRunning: no member of the run's cluster group is running.
	NoMemberRunning WaitReason = "no member running"
	// AllMembersAbnormal: every member of the run's cluster group is abnormal.
	AllMembersAbnormal WaitReason = "all members abnormal"
	// InsufficientQuota: the resource group lacks allocatable quota for the
	// run's on-demand cluster.
	InsufficientQuota WaitReason = "insufficient unused quota"
)

// Run is one run (task instance) of a job config (J14). It keeps a
// snapshot of the config revision it started from.
type Run struct {
	ID          string     `json:"id"`
	JobID       string     `json:"jobID"`
	Revision    int        `json:"revision"` // the config revision it runs
	Config      Config     `json:"config"`   // that revision's config
	State       RunState   `json:"state"`
	WaitReason  WaitReason `json:"waitReason,omitempty"`
	Message     string     `json:"message,omitempty"` // why it failed or stopped, or detail on waiting
	ClusterID   string     `json:"clusterID,omitempty"`
	Creator     string     `json:"creator"`
	SubmittedAt time.Time  `json:"submittedAt"`
	StartedAt   time.Time  `json:"startedAt,omitzero"`
	FinishedAt  time.Time  `json:"finishedAt,omitzero"`
	Logs        string     `json:"logs,omitempty"` // where its logs are
	Version     int64      `json:"version"`
}

// DeepCopy returns a copy of r that shares nothing with it.
func (r *Run) DeepCopy() *Run {
	out := *r
	out.Config = *r.Config.DeepCopy()
	return &out
}

// Duration returns how long the run ran, so far or in all.
func (r *Run) Duration(now time.Time) time.Duration {
	switch {
	case r.StartedAt.IsZero():
		return 0
	case r.FinishedAt.IsZero():
		return now.Sub(r.StartedAt)
	}
	return r.FinishedAt.Sub(r.StartedAt)
}

// Observation is what a backend reports of a run's Ray job.
type Observation struct {
	State   RunState // Running, Succeeded or Failed
	Message string
}

// Submitter saves a job config and starts a run of it; *dlc.Client is one.
type Submitter interface {
	SaveJob(ctx context.Context, cfg *Config) (*Record, error)
	Run(ctx context.Context, jobID string) (*Run, error)
}

// Submit saves cfg and starts a run of it in one call. When the save
// fails nothing is run; when the run cannot start, the saved record is
// returned with the error so the caller can retry the run.
func Submit(ctx context.Context, s Submitter, cfg *Config) (*Record, *Run, error) {
	rec, err := s.SaveJob(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	run, err := s.Run(ctx, rec.ID)
	if err != nil {
		return rec, nil, err
	}
	return rec, run, nil
}
