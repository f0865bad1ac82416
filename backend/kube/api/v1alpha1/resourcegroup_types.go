package v1alpha1

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ResourceGroupSpec is a resource group's registration, as quota.Group.
type ResourceGroupSpec struct {
	// Package is the resource package it belongs to.
	// +kubebuilder:validation:MinLength=1
	Package string `json:"package"`
	// Capacity is what its clusters and on-demand runs may reserve in all.
	Capacity Resources `json:"capacity"`
}

// Hold is one holder's reservation, as quota.Hold.Encode writes it: its
// milli-CPUs, bytes of memory, GPUs, the holder's generation it was made
// for (which fences it), the resource group's count of changes when it was
// set, and when that was (RFC 3339, UTC), separated by commas:
// "8000,17179869184,0,3,42,2026-12-05T06:00:00.5Z". One string, not an
// object: a resource group keeps hundreds of them in the object every
// reservation is a compare-and-swap of, and the API server's work on a
// write grows with the fields it validates and tracks.
//
// +kubebuilder:validation:MaxLength=160
// +kubebuilder:validation:Pattern=`^[0-9]{1,19},[0-9]{1,19},[0-9]{1,19},[0-9]{1,19},[0-9]{1,19},[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?Z$`
type Hold string

// UnmarshalJSON reads a hold as a string, or as the object earlier
// versions stored (kept as its JSON text, which quota.DecodeHold reads),
// so that an informer can decode a ResourceGroup written before.
func (h *Hold) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '{' {
		*h = Hold(b)
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*h = Hold(s)
	return nil
}

// ResourceGroupStatus is what a resource group has reserved, as
// quota.Account: the sum of every reservation, and the reservations
// changed since they were last settled (the settled ones are each kept in
// a StoreEntry of their own, labelled with the store kind "hold"). It is
// changed only by compare-and-swap on the object's resourceVersion (an
// update of the status subresource with the version read): the object is
// the one serialisation point of reservations across replicas.
type ResourceGroupStatus struct {
	// Reserved is the sum of every reservation, pending and settled.
	// +optional
	Reserved Resources `json:"reserved,omitzero"`
	// Pending maps a holder (a cluster id) to its reservation, changed
	// since it was last settled.
	// +kubebuilder:validation:MaxProperties=2000
	// +optional
	Pending map[string]Hold `json:"pending,omitempty"`
	// Seq counts the changes of reservations.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Seq int64 `json:"seq,omitempty"`
	// Settled is the resourceVersion of the newest reservation StoreEntry
	// settled.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Settled string `json:"settled,omitempty"`
	// Summary is Reserved beside the capacity in human units, for kubectl
	// get; the store derives it on every write, and nothing reads it.
	// +optional
	Summary ResourceGroupSummary `json:"summary,omitzero"`
}

// ResourceGroupSummary is what a resource group has reserved of its
// capacity, each as "reserved/capacity" in human units: CPU in cores, to
// the milli-core ("12/64", "0.25/8"), memory in binary units rounded to
// one decimal ("48Gi/256Gi", "1.5Gi/8Gi"), GPUs ("2/8"); and how many
// reservations are changed and not yet settled. spec.capacity and
// status.reserved have the exact figures.
type ResourceGroupSummary struct {
	// +kubebuilder:validation:MaxLength=64
	// +optional
	CPU string `json:"cpu,omitempty"`
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Memory string `json:"memory,omitempty"`
	// +kubebuilder:validation:MaxLength=64
	// +optional
	GPU string `json:"gpu,omitempty"`
	// Pending is how many reservations are changed and not yet settled.
	// +kubebuilder:validation:Minimum=0
	Pending int32 `json:"pending"`
}

// ResourceGroup is a resource group as the platform stores it: its
// capacity and what is reserved of it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=rg,categories=dlc
// +kubebuilder:printcolumn:name="Package",type=string,JSONPath=`.spec.package`
// +kubebuilder:printcolumn:name="Cores",type=string,JSONPath=`.status.summary.cpu`,description="CPU cores reserved/capacity"
// +kubebuilder:printcolumn:name="Memory",type=string,JSONPath=`.status.summary.memory`,description="Memory reserved/capacity"
// +kubebuilder:printcolumn:name="GPUs",type=string,JSONPath=`.status.summary.gpu`,description="GPUs reserved/capacity"
// +kubebuilder:printcolumn:name="Pending",type=integer,JSONPath=`.status.summary.pending`,priority=1,description="Reservations changed and not yet settled"
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
