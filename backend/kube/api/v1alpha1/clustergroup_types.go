package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// GroupPolicy is a cluster group's scheduling policy, as group.Policy.
// +kubebuilder:validation:Enum=random;least-loaded;ordered-failover;most-free-quota
type GroupPolicy string

// ClusterGroupSpec is a cluster group as the user names it, as group.Group.
// Membership is kept on the clusters (ComputeClusterSpec.Groups).
type ClusterGroupSpec struct {
	// Name is the display name (G5).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	Name string `json:"name"`
	// Policy is the scheduling policy (G3); absent means random.
	// +optional
	Policy GroupPolicy `json:"policy,omitempty"`
	// Order is, for the ordered-failover policy, the member cluster ids in
	// the order they take runs, the primary first (group.Scheduling.Order);
	// empty for the other policies.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	Order []string `json:"order,omitempty"`
	// Bookkeeping is the creator and creation time.
	Bookkeeping `json:",inline"`
}

// ClusterGroupStatus is what the platform records of a cluster group.
type ClusterGroupStatus struct {
	// Record is the last change and the operation log.
	Record `json:",inline"`
	// Deleting marks a delete in progress, with the target its members
	// move into (G6).
	// +optional
	Deleting *Deletion `json:"deleting,omitempty"`
}

// ClusterGroup is a cluster group: a named set of compute clusters that
// runs are scheduled onto.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=cg,categories=dlc
// +kubebuilder:printcolumn:name="Display",type=string,JSONPath=`.spec.name`
// +kubebuilder:printcolumn:name="Policy",type=string,JSONPath=`.spec.policy`,description="The scheduling policy (G3): random, least-loaded, ordered-failover or most-free-quota"
// +kubebuilder:printcolumn:name="Order",type=string,JSONPath=`.spec.order`,priority=1,description="The ordered-failover policy's members, the primary first"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ClusterGroupSpec   `json:"spec"`
	Status ClusterGroupStatus `json:"status,omitempty"`
}

// ClusterGroupList is a list of ClusterGroup.
//
// +kubebuilder:object:root=true
type ClusterGroupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterGroup `json:"items"`
}

func init() { SchemeBuilder.Register(&ClusterGroup{}, &ClusterGroupList{}) }
