package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// ClusterState is a compute cluster's lifecycle state, as cluster.State.
// +kubebuilder:validation:Enum=creating;created;starting;running;hibernating;hibernated;deleting;abnormal
type ClusterState string

// Environment is a compute environment, as cluster.Environment: the image
// and the node groups. The node groups are kept raw: cluster.Validate checks
// them (node specs from the catalog, instance ranges, labels), and their Ray
// logical resources are floats.
type Environment struct {
	// Image is a built-in image name or a registry address.
	// +optional
	Image string `json:"image,omitempty"`
	// HeadGroup is the head node group, as cluster.HeadGroup.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	HeadGroup runtime.RawExtension `json:"headGroup,omitzero"`
	// WorkerGroups are the worker node groups, as []cluster.WorkerGroup.
	// Each item is kept raw.
	// +listType=atomic
	// +optional
	WorkerGroups []runtime.RawExtension `json:"workerGroups,omitempty"`
}

// SecretKeyRef names a key of a Secret in the namespace, as
// cluster.SecretKeyRef.
type SecretKeyRef struct {
	// Secret is the Secret's name.
	// +kubebuilder:validation:MinLength=1
	Secret string `json:"secret"`
	// Key is the key in the Secret.
	// +kubebuilder:validation:MinLength=1
	Key string `json:"key"`
}

// ComputeClusterSpec is what the user asks of a compute cluster, as
// cluster.Spec, and what is fixed at its creation.
type ComputeClusterSpec struct {
	// Name is the display name (C1); it may be in any script.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	Name string `json:"name"`
	// Groups are the ids of the cluster groups it joins.
	// +listType=set
	// +optional
	Groups []string `json:"groups,omitempty"`
	// Priority is 1–9; absent means the default, 5.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=9
	// +optional
	Priority *int32 `json:"priority,omitempty"`
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// +kubebuilder:validation:MinLength=1
	ResourcePackage string `json:"resourcePackage"`
	// +kubebuilder:validation:MinLength=1
	ResourceGroup string `json:"resourceGroup"`
	// Environment is the image and node groups, inline as in cluster.Spec.
	Environment `json:",inline"`
	// Mounts are the storage mounts, as []storage.Mount, which checks them.
	// Each item is kept raw.
	// +listType=atomic
	// +optional
	Mounts []runtime.RawExtension `json:"mounts,omitempty"`
	// Advanced are Ray start parameters that override the defaults.
	// +optional
	Advanced map[string]string `json:"advanced,omitempty"`
	// IdleTimeoutSeconds hibernates the cluster once no run has been
	// active on it for that long (L4); 0 never.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2592000
	// +optional
	IdleTimeoutSeconds int32 `json:"idleTimeoutSeconds,omitempty"`
	// RayToken names the key of a Secret that holds the cluster's Ray
	// token (Ray's token authentication), as cluster.Spec.RayToken.
	// +optional
	RayToken *SecretKeyRef `json:"rayToken,omitempty"`
	// Temporary marks an on-demand cluster, owned by the run OwnerRun.
	// +optional
	Temporary bool `json:"temporary,omitempty"`
	// +optional
	OwnerRun string `json:"ownerRun,omitempty"`
	// Bookkeeping is the creator and creation time.
	Bookkeeping `json:",inline"`
}

// LiveEnvironment is what the Ray cluster runs with since its last start,
// as cluster.Live.
type LiveEnvironment struct {
	ResourceGroup string `json:"resourceGroup"`
	Environment   `json:",inline"`
}

// ComputeClusterStatus is what the platform records of a compute cluster.
type ComputeClusterStatus struct {
	// State is the lifecycle state; empty means creating.
	// +optional
	State ClusterState `json:"state,omitempty"`
	// Reason is why it is abnormal, or what a step is waiting on.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Generation counts changes of what Ray should run (start, hibernate,
	// resize, delete), as cluster.Cluster.Generation; it is not
	// metadata.generation, which counts spec writes.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Generation int64 `json:"generation,omitempty"`
	// Replicas is the current number of workers per worker group.
	// +optional
	Replicas map[string]int32 `json:"replicas,omitempty"`
	// Draining is, per worker group whose ceiling was lowered while Ray
	// may still run more, the workers it may run above Replicas
	// (cluster.Cluster.Draining): the reservation covers them until Ray
	// has applied the lower ceiling.
	// +optional
	Draining map[string]int32 `json:"draining,omitempty"`
	// Growth is the cluster's request to grow that waits in its resource
	// group's queue (cluster.Cluster.Growth).
	// +optional
	Growth *ClusterGrowth `json:"growth,omitempty"`
	// Granted is the cluster's last growth granted that Ray's autoscaler
	// does not run yet (cluster.Cluster.Granted).
	// +optional
	Granted *ClusterGrowth `json:"granted,omitempty"`
	// Yielded lists the autoscaling worker groups whose headroom was given
	// back to the resource group's queue (cluster.Cluster.Yielded).
	// +listType=set
	// +optional
	Yielded []string `json:"yielded,omitempty"`
	// PendingRestart lists edited settings that take effect at the next start.
	// +listType=atomic
	// +optional
	PendingRestart []string `json:"pendingRestart,omitempty"`
	// Live is set while the cluster holds quota.
	// +optional
	Live *LiveEnvironment `json:"live,omitempty"`
	// QuotaGroup is the resource group its reservation was made in.
	// +optional
	QuotaGroup string `json:"quotaGroup,omitempty"`
	// RunningSince is when it last became running.
	// +kubebuilder:validation:Format=date-time
	// +optional
	RunningSince string `json:"runningSince,omitempty"`
	// Stopping marks the cluster while a hibernate or delete looks for its
	// active runs (cluster.Cluster.Stopping).
	// +kubebuilder:validation:Format=date-time
	// +optional
	Stopping string `json:"stopping,omitempty"`
	// StoppingBy is the replica whose operation made the Stopping mark
	// (cluster.Cluster.StoppingBy).
	// +optional
	StoppingBy string `json:"stoppingBy,omitempty"`
	// Record is the last change and the operation log.
	Record `json:",inline"`
}

// ClusterGrowth is a cluster's request for more workers in one worker
// group, waiting in its resource group's queue (cluster.Growth).
type ClusterGrowth struct {
	// Group is the worker group that asks for more workers.
	Group string `json:"group"`
	// Want is the workers it asks for in all.
	// +kubebuilder:validation:Minimum=0
	Want int32 `json:"want"`
	// Since is when it joined the queue (for a grant, when it was granted).
	// +kubebuilder:validation:Format=date-time
	Since string `json:"since"`
}

// LabelOnDemand is a label of every ComputeCluster the store writes:
// "true" on an on-demand cluster (spec.temporary: made for one run and
// released when it ends), "false" on a standing one, so that kubectl get
// computeclusters -l dlc.aidlc.io/on-demand=false lists the standing ones.
const LabelOnDemand = "dlc.aidlc.io/on-demand"

// ComputeCluster is a compute cluster as the platform keeps it; it owns the
// RayCluster that runs it (of the same name, whose columns show its desired
// and available workers).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=cc,categories=dlc
// +kubebuilder:printcolumn:name="Display",type=string,JSONPath=`.spec.name`,description="The display name (C1); NAME is the cluster's id"
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.reason`
// +kubebuilder:printcolumn:name="On-Demand-Run",type=string,JSONPath=`.spec.ownerRun`,description="The run an on-demand cluster was made for; empty on a standing cluster"
// +kubebuilder:printcolumn:name="Resource-Group",type=string,JSONPath=`.spec.resourceGroup`,priority=1
// +kubebuilder:printcolumn:name="Generation",type=integer,JSONPath=`.status.generation`,priority=1
// +kubebuilder:printcolumn:name="Idle-Timeout",type=integer,JSONPath=`.spec.idleTimeoutSeconds`,priority=1,description="Seconds without an active run after which it hibernates (L4)"
// +kubebuilder:printcolumn:name="Running-Since",type=date,JSONPath=`.status.runningSince`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ComputeCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ComputeClusterSpec   `json:"spec"`
	Status ComputeClusterStatus `json:"status,omitempty"`
}

// ComputeClusterList is a list of ComputeCluster.
//
// +kubebuilder:object:root=true
type ComputeClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ComputeCluster `json:"items"`
}

func init() { SchemeBuilder.Register(&ComputeCluster{}, &ComputeClusterList{}) }
