package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// RunState is a run's state, as job.RunState.
// +kubebuilder:validation:Enum=queued;waiting;provisioning;running;succeeded;failed;stopped
type RunState string

// WaitReason says why a run waits, as job.WaitReason.
// +kubebuilder:validation:Enum="cluster not running";"no member running";"all members abnormal";"insufficient unused quota"
type WaitReason string

// RunSpec is what a run is of and what is fixed at its submission, as the
// matching fields of job.Run.
type RunSpec struct {
	// JobID is the id of the run's JobConfig.
	// +kubebuilder:validation:MinLength=1
	JobID string `json:"jobID"`
	// Revision is the config revision it runs.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Revision int32 `json:"revision,omitempty"`
	// Config is that revision's config.
	Config JobConfigBody `json:"config"`
	// Priority is the queueing weight of an on-demand run, 1–9.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=9
	// +optional
	Priority *int32 `json:"priority,omitempty"`
	// Seq orders runs submitted at the same instant.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Seq int64 `json:"seq,omitempty"`
	// Demand is what admitting an on-demand run reserves.
	// +optional
	Demand *Resources `json:"demand,omitempty"`
	// +optional
	Creator string `json:"creator,omitempty"`
	// SubmittedAt is when it was submitted, RFC 3339 with nanoseconds.
	// +kubebuilder:validation:Format=date-time
	SubmittedAt string `json:"submittedAt"`
	// Attempt numbers a retry (L3): 2 for the first; absent for a first
	// attempt.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=11
	// +optional
	Attempt int32 `json:"attempt,omitempty"`
	// PreviousAttempt is the run this one retries.
	// +optional
	PreviousAttempt string `json:"previousAttempt,omitempty"`
	// Tick is the schedule tick that started the run (L1).
	// +kubebuilder:validation:Format=date-time
	// +optional
	Tick string `json:"tick,omitempty"`
}

// RunStatus is what the platform records of a run.
type RunStatus struct {
	// State is the run's state; empty means queued.
	// +optional
	State RunState `json:"state,omitempty"`
	// +optional
	WaitReason WaitReason `json:"waitReason,omitempty"`
	// Message is why it failed or stopped, or detail on waiting.
	// +optional
	Message string `json:"message,omitempty"`
	// ClusterID is the cluster it runs on.
	// +optional
	ClusterID string `json:"clusterID,omitempty"`
	// Placement says, for a run of a cluster group, which member it went
	// to and why, as the group's policy decided (job.Run.Placement).
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Placement string `json:"placement,omitempty"`
	// +kubebuilder:validation:Format=date-time
	// +optional
	StartedAt string `json:"startedAt,omitempty"`
	// +kubebuilder:validation:Format=date-time
	// +optional
	FinishedAt string `json:"finishedAt,omitempty"`
	// Logs is where its logs are.
	// +optional
	Logs string `json:"logs,omitempty"`
	// RayDone records that Ray holds nothing more of the ended run.
	// +optional
	RayDone bool `json:"rayDone,omitempty"`
	// RaySubmitted records that Ray accepted the run's job: from then on,
	// Ray having no record of it fails the run; it is never submitted again.
	// +optional
	RaySubmitted bool `json:"raySubmitted,omitempty"`
	// RayAcceptedAt is when a client recorded that Ray accepted the job
	// (job.Run.RayAcceptedAt).
	// +kubebuilder:validation:Format=date-time
	// +optional
	RayAcceptedAt string `json:"rayAcceptedAt,omitempty"`
	// RayUnreachableSince is when a client first failed to reach Ray about
	// the run's job, while that lasts (job.Run.RayUnreachableSince).
	// +kubebuilder:validation:Format=date-time
	// +optional
	RayUnreachableSince string `json:"rayUnreachableSince,omitempty"`
	// NextAttempt is the run that retries this one (L3).
	// +optional
	NextAttempt string `json:"nextAttempt,omitempty"`
	// Final marks a failure that is not retried (L3).
	// +optional
	Final bool `json:"final,omitempty"`
	// LogTail is the end of the run's logs, kept when it ended.
	// +kubebuilder:validation:MaxItems=200
	// +optional
	LogTail []string `json:"logTail,omitempty"`
	// LogsKept says the run's log tail was kept when it ended.
	// +optional
	LogsKept bool `json:"logsKept,omitempty"`
	// LogsDropped is how many lines before the tail were not kept.
	// +kubebuilder:validation:Minimum=0
	// +optional
	LogsDropped int32 `json:"logsDropped,omitempty"`
	// LogsArchived says how much of the run's whole log was written to
	// Logs in COS when it ended.
	// +optional
	LogsArchived *LogArchive `json:"logsArchived,omitempty"`
	// Record is the last change and the event log.
	Record `json:",inline"`
	// Summary is what kubectl get shows that no other field has; the store
	// derives it on every write, and nothing reads it.
	// +optional
	Summary RunSummary `json:"summary,omitzero"`
}

// RunSummary is a run's figures in human units, for kubectl get.
type RunSummary struct {
	// Duration is how long a finished run ran, from startedAt to
	// finishedAt, as kubectl writes an age ("45s", "3m12s", "2d5h"); empty
	// while it runs (the Started column is its age then) and when it never
	// started.
	// +kubebuilder:validation:MaxLength=32
	// +optional
	Duration string `json:"duration,omitempty"`
}

// Run is one run of a job config.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=jr,categories=dlc
// +kubebuilder:printcolumn:name="Job",type=string,JSONPath=`.spec.config.name`,description="The job config's name (J1), as the run's revision has it"
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Wait",type=string,JSONPath=`.status.waitReason`
// +kubebuilder:printcolumn:name="Started",type=date,JSONPath=`.status.startedAt`
// +kubebuilder:printcolumn:name="Duration",type=string,JSONPath=`.status.summary.duration`,description="How long a finished run ran"
// +kubebuilder:printcolumn:name="Attempt",type=integer,JSONPath=`.spec.attempt`,description="A retry's attempt number (L3); empty for a first attempt"
// +kubebuilder:printcolumn:name="Job-ID",type=string,JSONPath=`.spec.jobID`,priority=1
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.status.clusterID`,priority=1
// +kubebuilder:printcolumn:name="Placement",type=string,JSONPath=`.status.placement`,priority=1,description="Why a cluster group's policy chose the member"
// +kubebuilder:printcolumn:name="Priority",type=integer,JSONPath=`.spec.priority`,priority=1
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.message`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Run struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   RunSpec   `json:"spec"`
	Status RunStatus `json:"status,omitempty"`
}

// RunList is a list of Run.
//
// +kubebuilder:object:root=true
type RunList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Run `json:"items"`
}

func init() { SchemeBuilder.Register(&Run{}, &RunList{}) }

// LogArchive is what was written of a run's whole log to COS
// (job.LogArchive).
type LogArchive struct {
	// Lines is how many lines were written, the last ones of the log.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Lines int64 `json:"lines,omitempty"`
	// Dropped is how many earlier lines were not, over the bound.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Dropped int64 `json:"dropped,omitempty"`
	// SHA256 is the hex SHA-256 of the text written.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	SHA256 string `json:"sha256,omitempty"`
}
