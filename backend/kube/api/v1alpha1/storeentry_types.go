package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// StoreEntry is one document of the store's own bookkeeping, which no
// user writes: a name's claim (store kind "name"), the membership of a
// client sharing the work ("replica"), or a resource group's settled
// reservation of one holder ("hold"), the store kind in the label
// store.dlc.aidlc.io/kind. They were ConfigMaps, which the usual edit role
// writes: someone who may edit a namespace could remove a running
// cluster's hold and let another start in its quota, or forge members.
// A kind of its own is written by whom RBAC grants it (the Role
// dlc-backend, and nothing aggregated to edit or admin), and the
// admission policy dlc-store refuses every other writer in the enforced
// namespaces, cluster administrators included.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=dlcentry
// +kubebuilder:printcolumn:name="Kind",type=string,JSONPath=`.metadata.labels.store\.dlc\.aidlc\.io/kind`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type StoreEntry struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Data is the document, as JSON.
	// +kubebuilder:validation:MaxLength=1048576
	Data string `json:"data"`
}

// StoreEntryList is a list of StoreEntry.
//
// +kubebuilder:object:root=true
type StoreEntryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []StoreEntry `json:"items"`
}

func init() { SchemeBuilder.Register(&StoreEntry{}, &StoreEntryList{}) }
