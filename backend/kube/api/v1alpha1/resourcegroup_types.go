package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// ResourceGroupSpec is a resource group's registration, as quota.Group.
type ResourceGroupSpec struct {
	// Package is the resource package it belongs to.
	// +kubebuilder:validation:MinLength=1
	Package string `json:"package"`
	// Capacity is what its clusters and on-demand runs may reserve in all.
	Capacity Resources `json:"capacity"`
}

// Hold is one holder's reservation, as quota.Hold.
type Hold struct {
	Resources Resources `json:"resources"`
	// Since is when it was last set, RFC 3339 with nanoseconds.
	// +kubebuilder:validation:Format=date-time
	Since string `json:"since"`
	// Generation is the holder's generation it was made for, which fences it.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Generation int64 `json:"generation,omitempty"`
}

// ResourceGroupStatus is every reservation on a resource group, as
// quota.Account.Holders. It is changed only by compare-and-swap on the
// object's resourceVersion (an update of the status subresource with the
// version read): the object is the one serialisation point of reservations
// across replicas.
type ResourceGroupStatus struct {
	// Holders maps a holder (a cluster or run id) to its reservation.
	// +optional
	Holders map[string]Hold `json:"holders,omitempty"`
	// Reserved is the sum of the holders' resources, written with them in
	// the same update, for kubectl get; Holders is the truth.
	// +optional
	Reserved Resources `json:"reserved,omitzero"`
}

// ResourceGroup is a resource group as the platform stores it: its
// capacity and every reservation on it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=rg,categories=dlc
// +kubebuilder:printcolumn:name="Package",type=string,JSONPath=`.spec.package`
// +kubebuilder:printcolumn:name="CPU-m",type=integer,JSONPath=`.spec.capacity.milliCPU`
// +kubebuilder:printcolumn:name="CPU-m-Reserved",type=integer,JSONPath=`.status.reserved.milliCPU`
// +kubebuilder:printcolumn:name="GPU",type=integer,JSONPath=`.spec.capacity.gpu`
// +kubebuilder:printcolumn:name="GPU-Reserved",type=integer,JSONPath=`.status.reserved.gpu`
// +kubebuilder:printcolumn:name="Memory",type=integer,JSONPath=`.spec.capacity.memory`,priority=1
// +kubebuilder:printcolumn:name="Memory-Reserved",type=integer,JSONPath=`.status.reserved.memory`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ResourceGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ResourceGroupSpec   `json:"spec"`
	Status ResourceGroupStatus `json:"status,omitempty"`
}

// ResourceGroupList is a list of ResourceGroup.
//
// +kubebuilder:object:root=true
type ResourceGroupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ResourceGroup `json:"items"`
}

func init() { SchemeBuilder.Register(&ResourceGroup{}, &ResourceGroupList{}) }
