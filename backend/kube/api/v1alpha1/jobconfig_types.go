package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// OnDemand is the on-demand run mode of a job config, as job.OnDemand.
type OnDemand struct {
	// +kubebuilder:validation:MinLength=1
	ResourcePackage string `json:"resourcePackage"`
	// +kubebuilder:validation:MinLength=1
	ResourceGroup string `json:"resourceGroup"`
	// Priority is 1–9; absent means the default, 5.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=9
	// +optional
	Priority *int32 `json:"priority,omitempty"`
	// Environment is the run's cluster's image and node groups, as
	// cluster.Environment (not inline here: job.OnDemand names it).
	// +optional
	Environment Environment `json:"environment,omitzero"`
}

// JobConfigBody is a job configuration, as job.Config: exactly one of
// OnDemand, Cluster and Group says where it runs. The package, mounts and
// runtime environment are raw: package job and package storage check them.
// +kubebuilder:validation:XValidation:rule="(has(self.onDemand) ? 1 : 0) + (has(self.cluster) ? 1 : 0) + (has(self.group) ? 1 : 0) <= 1",message="at most one of onDemand, cluster and group"
type JobConfigBody struct {
	// Name is the display name (J1).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=100
	Name string `json:"name"`
	// +optional
	OnDemand *OnDemand `json:"onDemand,omitempty"`
	// Cluster is the existing cluster's id.
	// +optional
	Cluster string `json:"cluster,omitempty"`
	// Group is the cluster group's id.
	// +optional
	Group string `json:"group,omitempty"`
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// Package is where the job's code is, as storage.Package.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	Package runtime.RawExtension `json:"package,omitzero"`
	// +optional
	Entrypoint string `json:"entrypoint,omitempty"`
	// Mounts are the storage mounts, as []storage.Mount.
	// Each item is kept raw.
	// +listType=atomic
	// +optional
	Mounts []runtime.RawExtension `json:"mounts,omitempty"`
	// RuntimeEnv is the Ray runtime environment, as job.RuntimeEnv.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	RuntimeEnv runtime.RawExtension `json:"runtimeEnv,omitzero"`
	// +optional
	Advanced map[string]string `json:"advanced,omitempty"`
	// Schedule starts a run at each tick of a cron expression (L1).
	// +optional
	Schedule *Schedule `json:"schedule,omitempty"`
	// ActiveDeadlineSeconds stops and fails a run not ended so long after
	// its submission (L2); 0 none.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2592000
	// +optional
	ActiveDeadlineSeconds int32 `json:"activeDeadlineSeconds,omitempty"`
	// BackoffLimit is how many times a failed run is retried (L3).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10
	// +optional
	BackoffLimit int32 `json:"backoffLimit,omitempty"`
}

// Schedule is a job config's schedule, as job.Schedule (package job
// checks the expression and the zone).
type Schedule struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Cron string `json:"cron"`
	// +kubebuilder:validation:MaxLength=64
	// +optional
	TimeZone string `json:"timeZone,omitempty"`
	// +kubebuilder:validation:Enum=Allow;Forbid;Replace
	// +optional
	ConcurrencyPolicy string `json:"concurrencyPolicy,omitempty"`
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=604800
	// +optional
	StartingDeadlineSeconds *int32 `json:"startingDeadlineSeconds,omitempty"`
}

// ScheduleStatus is where a job config's schedule stands, as
// job.ScheduleStatus.
type ScheduleStatus struct {
	// +optional
	Suspended bool `json:"suspended,omitempty"`
	// LastTick is the last tick handled.
	// +kubebuilder:validation:Format=date-time
	// +optional
	LastTick string `json:"lastTick,omitempty"`
	// LastRun is the run the last started tick made.
	// +optional
	LastRun string `json:"lastRun,omitempty"`
	// NextTick is when the schedule fires next.
	// +kubebuilder:validation:Format=date-time
	// +optional
	NextTick string `json:"nextTick,omitempty"`
	// Missed counts the ticks skipped.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Missed int32 `json:"missed,omitempty"`
}

// JobConfigSpec is a saved job configuration, as job.Record: its config
// and the revision that edits bump. The revision is in the spec because it
// changes in the same write as the config.
type JobConfigSpec struct {
	Config JobConfigBody `json:"config"`
	// +kubebuilder:validation:Minimum=0
	// +optional
	Revision int32 `json:"revision,omitempty"`
	// Bookkeeping is the creator and creation time.
	Bookkeeping `json:",inline"`
}

// JobConfigStatus is what the platform records of a job config.
type JobConfigStatus struct {
	// Record is the last change and the operation log.
	Record `json:",inline"`
	// Deleting marks a delete in progress (J17).
	// +optional
	Deleting *Deletion `json:"deleting,omitempty"`
	// ScheduleStatus is where the schedule stands (L1).
	// +optional
	ScheduleStatus *ScheduleStatus `json:"scheduleStatus,omitempty"`
}

// JobConfig is a saved job configuration; each of its runs is a Run.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=jc,categories=dlc
// +kubebuilder:printcolumn:name="Display",type=string,JSONPath=`.spec.config.name`
// +kubebuilder:printcolumn:name="Revision",type=integer,JSONPath=`.spec.revision`
// +kubebuilder:printcolumn:name="Schedule",type=string,JSONPath=`.spec.config.schedule.cron`
// +kubebuilder:printcolumn:name="Suspended",type=boolean,JSONPath=`.status.scheduleStatus.suspended`,priority=1
// +kubebuilder:printcolumn:name="Next-Tick",type=date,JSONPath=`.status.scheduleStatus.nextTick`,description="When the schedule fires next (L1)"
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.config.cluster`,priority=1
// +kubebuilder:printcolumn:name="Group",type=string,JSONPath=`.spec.config.group`,priority=1
// +kubebuilder:printcolumn:name="Resource-Group",type=string,JSONPath=`.spec.config.onDemand.resourceGroup`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type JobConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   JobConfigSpec   `json:"spec"`
	Status JobConfigStatus `json:"status,omitempty"`
}

// JobConfigList is a list of JobConfig.
//
// +kubebuilder:object:root=true
type JobConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []JobConfig `json:"items"`
}

func init() { SchemeBuilder.Register(&JobConfig{}, &JobConfigList{}) }
