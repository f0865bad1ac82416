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
}

// JobConfig is a saved job configuration; each of its runs is a Run.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=jc,categories=dlc
// +kubebuilder:printcolumn:name="Display",type=string,JSONPath=`.spec.config.name`
// +kubebuilder:printcolumn:name="Revision",type=integer,JSONPath=`.spec.revision`
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
